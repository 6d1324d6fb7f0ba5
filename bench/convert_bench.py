"""Offline conversion benchmark: `cairn convert --to axlearn` against the naive way.

Writes an Orbax checkpoint (OCDBT + Zarr v3, ~110 arrays of mixed sizes as in
a transformer, normal(0, 0.02) float32/bfloat16 values as trained weights,
`--gib` GiB in total) with cairn's own save path: a safetensors file
streamed from generated values, converted with `cairn convert --to orbax`
(chunks of at most 32 MiB). Then in the same run, each in a subprocess with
the page cache dropped first:

  (a) cairn:  `cairn convert SRC DST --to axlearn`
  (b) naive:  a Python script that restores the whole tree with orbax-checkpoint
              onto the CPU (numpy arrays), then writes every array with
              TensorStore as AXLearn does (zarr v2 driver, zstd level 1, one
              chunk = the whole array, all writes in flight) and the `index`
              file last
  (c) cairn under `mpirun -n 2`
  (d) with --extra: cairn with `--threads 2`, and the AXLearn result
      converted back to Orbax
  (e) cairn's peak RSS on checkpoints of --rss-sizes GiB (default 1, 2, 4)
      and --gib, each its own source, same budget: it should stay flat.

Each cairn run also reports the bytes it read per stored byte of its input
(its --json bytes_read over the source's size on disk): 1.00x when every
stored chunk is read once, whatever --budget is.

Every run reports its CPU time: a conversion whose CPU is busy on every
core is bound by zstd (decode + encode), not by the device. Beside the
device's bound the run measures the CPU's: the same zstd work (decode the
source's level-3 chunks, encode them at level 1) on a 1 GiB sample of the
source's own values, without I/O (cpu_ceiling), on one thread timed by its
CPU time and scaled to every core, as if they were unshared. The
table gives each tool's throughput against both bounds; the lower applies.
On a shared machine every wall-clock figure moves with the load, so it
also gives each tool's bytes per CPU second times the cores (what it would
do alone on the machine) against the lower of the device bound and the
unshared CPU bound. The
load average is printed: the machine may be shared.

Each runs under a small wrapper that reports wall time and the peak RSS of its
process tree (getrusage(RUSAGE_CHILDREN).ru_maxrss: the largest single
process, so for mpirun the largest rank). The device's sequential O_DIRECT
read/write bandwidth (fio, 4 MiB blocks) is measured in the same run.

    python3 bench/convert_bench.py [--gib 8 | --size 8GiB] [--dir /path/on/device]
        [--budget 512MiB] [--no-naive] [--extra] [--rss-sizes 1,2,4] [--keep]

Before it starts, the run checks that --dir has the disk space it needs
(about twice the checkpoint plus 1.5 GiB: 17.3 GiB for --gib 8) and prints
the memory available. The naive way needs about 1.6x the checkpoint in RAM
(measured: 1.63 GiB for 0.95 GiB, 3.05 GiB for 1.98 GiB; about 11.6 GiB
expected for --gib 8): for the 8 GiB row, run on a quiet machine. When it is
killed for lack of memory, the run says so in one line and goes on without
its row. The CPU-bound measurement runs in a child process, so this process
holds nothing large while the tools run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, drop_caches, print_table, results  # noqa: E402

GIB = 1 << 30
N_LAYERS = 12

# Runs argv[1:] as a child, then prints {"seconds", "maxrss_kib", "cpu_seconds",
# "rc"} as JSON on the last line of stderr (cpu: user + system of the tree).
WRAPPER = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.call(sys.argv[1:])
dt = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": dt, "maxrss_kib": u.ru_maxrss, "cpu_seconds": u.ru_utime + u.ru_stime,
                  "rc": rc}), file=sys.stderr)
"""

# Writes the tree of layout(gib) as one safetensors file, array by array,
# 64 MiB at a time from generated values (normal, std 0.02, as trained
# weights: zstd barely compresses them): argv = file, gib, bench dir.
MAKE_SAFETENSORS = r"""
import json, struct, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from convert_bench import generated_values, layout
path, gib = sys.argv[1], float(sys.argv[2])
names = {"float32": "F32", "bfloat16": "BF16", "int32": "I32"}
size = {"float32": 4, "bfloat16": 2, "int32": 4}
header, offset = {}, 0
for name, shape, dtype in layout(gib):
    n = int(np.prod(shape, dtype=np.int64)) * size[dtype]
    header[name.replace("/", ".")] = {"dtype": names[dtype], "shape": list(shape),
                                      "data_offsets": [offset, offset + n]}
    offset += n
blob = json.dumps(header).encode()
blob += b" " * (-len(blob) % 8)
rng = np.random.default_rng(0)
step = 16 << 20  # elements per piece
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(blob)) + blob)
    for name, shape, dtype in layout(gib):
        for piece in generated_values(shape, dtype, rng, step):
            f.write(piece.tobytes())
"""

# The naive way: argv = orbax item dir, destination base dir, step.
NAIVE = r"""
import json, os, sys
import numpy as np, orbax.checkpoint as ocp, tensorstore as ts
import jax
item, base, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
ckptr = ocp.PyTreeCheckpointer()
meta = ckptr.metadata(item)
meta = getattr(meta, "item_metadata", meta)
meta = getattr(meta, "tree", meta)
restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), meta)
tree = ckptr.restore(item, restore_args=restore_args)
step_dir = os.path.join(base, f"step_{step:08d}")
os.makedirs(step_dir, exist_ok=True)
leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
def key_str(k):
    return str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))))
index, futures = [["step", step]], []
for keypath, value in leaves:
    path = "/".join(key_str(k) for k in keypath)
    value = np.asarray(value)
    spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.join(step_dir, "gda", path)},
            "metadata": {"compressor": {"id": "zstd", "level": 1}, "shape": list(value.shape),
                         "chunks": [max(1, d) for d in value.shape]},
            "dtype": value.dtype.name, "create": True, "delete_existing": True}
    t = ts.open(spec).result()
    futures.append(t.write(value))
    index.append([path, {"dtype": value.dtype.name, "shape": str(tuple(value.shape))}])
for f in futures:
    f.result()
index[1:] = sorted(index[1:])
with open(os.path.join(step_dir, "index"), "w") as f:
    json.dump(index, f)
"""


def parse_gib(text):
    """A checkpoint size: GiB as a number (`8`, `0.5`), or with a unit
    (`8GiB`, `512MiB`, `8GB`)."""
    t = str(text).strip()
    units = {"gib": 1.0, "mib": 1 / 1024, "gb": 1e9 / GIB, "mb": 1e6 / GIB, "g": 1.0, "m": 1 / 1024}
    for unit in sorted(units, key=len, reverse=True):
        if t.lower().endswith(unit):
            return float(t[: -len(unit)]) * units[unit]
    return float(t)


def layout(gib: float):
    """(path, shape, dtype) of a transformer-like tree of about `gib` GiB:
    per layer 4 float32 d x d attention matrices, 2 bfloat16 d x 4d MLP
    matrices, 2 float32 norms and a float32 bias; a bfloat16 8d x d
    embedding; an int32 step counter. About 400 d^2 bytes in all."""
    d = max(64, int(math.sqrt(gib * GIB / 400)) // 64 * 64)
    out = [("params/embed", (8 * d, d), "bfloat16"), ("opt/count", (), "int32")]
    for i in range(N_LAYERS):
        p = f"params/layers/{i}"
        out += [(f"{p}/attn/{m}", (d, d), "float32") for m in ("q", "k", "v", "o")]
        out += [(f"{p}/mlp/up", (d, 4 * d), "bfloat16"), (f"{p}/mlp/down", (4 * d, d), "bfloat16"),
                (f"{p}/norm1", (d,), "float32"), (f"{p}/norm2", (d,), "float32"),
                (f"{p}/mlp/bias", (4 * d,), "float32")]
    return out


def generated_values(shape, dtype, rng, step):
    """The values of one array of the layout, in pieces of at most `step`
    elements: normal(0, 0.02) floats (as trained weights; bfloat16 rounded
    from float32) and int32 1000s, drawn from `rng` in order."""
    import ml_dtypes
    import numpy as np
    left = int(np.prod(shape, dtype=np.int64))
    while left:
        k = min(left, step)
        if dtype == "int32":
            piece = np.full(k, 1000, np.int32)
        else:
            piece = rng.standard_normal(k, dtype=np.float32) * np.float32(0.02)
            if dtype == "bfloat16":
                piece = piece.astype(ml_dtypes.bfloat16)
        yield piece
        left -= k


def total_bytes(gib):
    size = {"float32": 4, "bfloat16": 2, "int32": 4}
    return sum(math.prod(shape) * size[dt] for _, shape, dt in layout(gib))


def cpu_ceiling(gib, sample_bytes=1 << 30, chunk_bytes=32 << 20):
    """The CPU bound of the conversion: GB/s of the zstd work alone on the same
    values, on every core, with no I/O. The first arrays of layout(gib) (up
    to `sample_bytes`) are generated exactly as MAKE_SAFETENSORS generates
    them (same generator, same order: the source's own values), cut into
    pieces of `chunk_bytes` and compressed with zstd level 3 as the source
    stores them; then, timed, every piece is decompressed and compressed
    again at level 1 (AXLearn's chunks) by libzstd through ctypes on one
    thread, into buffers touched beforehand;
    its CPU time, times the cores, gives what every core would do unshared
    (zstd scales with cores: one context per thread, nothing shared).
    Returns (GB/s of that thread in wall time now, GB/s on all cores
    unshared, sampled bytes)."""
    import ctypes
    import ctypes.util
    import threading
    import numpy as np
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_compress.restype = lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int]
    lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]

    def compress(src, level):
        out = np.empty(lib.ZSTD_compressBound(src.nbytes), np.uint8)
        n = lib.ZSTD_compress(out.ctypes.data, out.nbytes, src.ctypes.data, src.nbytes, level)
        if lib.ZSTD_isError(n):
            raise RuntimeError("zstd compression failed")
        return out, n

    rng = np.random.default_rng(0)
    step = 16 << 20
    pieces, total = [], 0
    for _, shape, dtype in layout(gib):
        raw = np.concatenate([v.view(np.uint8) for v in generated_values(shape, dtype, rng, step)])
        for start in range(0, raw.nbytes, chunk_bytes):
            piece = raw[start:start + chunk_bytes]
            frame, n = compress(piece, 3)
            pieces.append((frame[:n].copy(), piece.nbytes))
        total += raw.nbytes
        if total >= sample_bytes:
            break
    # One thread, timed by its own CPU time, scaled to the cores: several
    # Python threads driving libzstd at once measured 5-10x less per CPU
    # second here (unexplained), and wall time moves with the load.
    threads = 1
    # Output buffers touched beforehand: page faults are not zstd's work.
    work = [(frame, np.full(size, 1, np.uint8), np.full(lib.ZSTD_compressBound(size), 1, np.uint8))
            for frame, size in pieces]
    thread_cpu = []
    lock = threading.Lock()
    nxt = [0]

    def worker():
        start = time.thread_time()
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(work):
                with lock:
                    thread_cpu.append(time.thread_time() - start)
                return
            frame, decoded, encoded = work[i]
            n = lib.ZSTD_decompress(decoded.ctypes.data, decoded.nbytes, frame.ctypes.data, frame.nbytes)
            if lib.ZSTD_isError(n) or n != decoded.nbytes:
                raise RuntimeError("zstd decompression failed")
            lib.ZSTD_compress(encoded.ctypes.data, encoded.nbytes, decoded.ctypes.data, decoded.nbytes, 1)

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - t0
    cpu = sum(thread_cpu)  # the workers' own CPU time
    # Wall: what the cores gave us now; CPU time: what they would give
    # unshared (independent of the load).
    return total / seconds / GB, total / cpu * os.cpu_count() / GB, total


def meminfo_mib():
    """(MemTotal, MemAvailable) in MiB, from /proc/meminfo (None where absent)."""
    got = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":", 1)
                got[key] = int(value.split()[0]) // 1024
    except OSError:
        return None, None
    return got.get("MemTotal"), got.get("MemAvailable")


# The naive way's peak RSS per byte of checkpoint, with some room: this
# script's NAIVE on this layout peaked at 1,667 MiB for 0.95 GiB and at
# 3,123 MiB for 1.98 GiB (about 0.3 GiB + 1.39x the checkpoint; so about
# 11.6 GiB for the 7.91 GiB of --gib 8). It holds the whole restored tree,
# and TensorStore's copies and encoded chunks of the writes in flight.
NAIVE_PEAK_PER_BYTE = 1.6


def disk_needed(nbytes):
    """Bytes of free space the run needs in --dir at its peak: while the
    source is made, the generated safetensors file and the Orbax source
    (random values barely compress: ~0.93 of the bytes) side by side; then
    the source and one tool's output (~the bytes again); plus 1 GiB for the
    device measurement and some slack."""
    return int(2.0 * nbytes + 1.5 * GIB)


def cpu_ceiling_in_child(gib):
    """cpu_ceiling(gib) in a child process: it holds about three times its
    1 GiB sample (values, frames, touched output buffers), which a child
    gives back to the system when it exits; in this process the allocator
    could keep it resident while the naive way, which needs the memory,
    runs."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import convert_bench as cb; "
            "print(json.dumps(cb.cpu_ceiling(float(sys.argv[2]))))")
    out = subprocess.run([sys.executable, "-c", code, here, str(gib)], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return tuple(json.loads(out.strip().splitlines()[-1]))


def cairn_exe():
    exe = os.path.join(sysconfig.get_path("scripts"), "cairn")
    return exe if os.access(exe, os.X_OK) else shutil.which("cairn")


def measured(cmd, cache_paths):
    """Wall seconds and peak RSS (MiB) of `cmd` in a fresh process tree, cold cache."""
    drop_caches(cache_paths)
    r = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    stats = json.loads(r.stderr.strip().splitlines()[-1])
    measured.cpu_seconds = stats["cpu_seconds"]
    measured.maxrss_mib = stats["maxrss_kib"] / 1024
    measured.rc = stats["rc"]
    if stats["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({stats['rc']}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return stats["seconds"], stats["maxrss_kib"] / 1024, r.stdout


def stored_bytes(root):
    """The bytes of every file under `root` (the source as stored)."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def read_per_input(stdout, stored):
    """Bytes read per stored byte of the input, from cairn's --json summary
    (bytes_read: the stored bytes its reader read, over all processes);
    None for a tool that prints none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)["bytes_read"] / stored
            except (ValueError, KeyError, ZeroDivisionError):
                return None
    return None


def make_source(exe, root, gib, step):
    """The Orbax source (OCDBT + Zarr v3) at root/<step>/default, written by
    cairn's own save path: a safetensors file streamed from generated values,
    converted with `cairn convert --to orbax` (chunks of at most 32 MiB, as
    Orbax writes the shards of a model split over a few devices), then the
    safetensors file is deleted. Returns the seconds taken."""
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(root, exist_ok=True)
    st = os.path.join(root, "source.safetensors")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", MAKE_SAFETENSORS, st, str(gib), here], check=True)
    subprocess.run([exe, "convert", st, root, "--to", "orbax", "--step", str(step),
                    "--memory-budget", "256MiB"], check=True, stdout=subprocess.DEVNULL)
    os.unlink(st)
    return time.perf_counter() - t0


def mpi_supported(exe):
    # `cairn convert` splits the work over the ranks of mpirun (cli/commands/convert.cc).
    return shutil.which("mpirun") is not None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", "--size", type=parse_gib, default=8.0,
                    help="checkpoint size: GiB, or with a unit (8GiB, 512MiB; default 8)")
    ap.add_argument("--dir", default=os.environ.get("CAIRN_BENCH_DIR", "/work"),
                    help="a directory on the device under test")
    ap.add_argument("--step", type=int, default=100)
    ap.add_argument("--keep", action="store_true", help="keep the files")
    ap.add_argument("--budget", default="512MiB", help="cairn's --memory-budget (default 512MiB)")
    ap.add_argument("--no-naive", action="store_true",
                    help="skip the naive way (it holds the whole checkpoint in memory)")
    ap.add_argument("--extra", action="store_true",
                    help="also `--threads 2` and the AXLearn result converted back to Orbax")
    ap.add_argument("--rss-sizes", default="1,2,4",
                    help="GiB sizes (besides --gib) whose cairn peak RSS is measured (default 1,2,4)")
    args = ap.parse_args()
    exe = cairn_exe()
    if not exe:
        raise SystemExit("the `cairn` command is not installed (pip install . installs it)")

    nbytes = total_bytes(args.gib)
    free = shutil.disk_usage(args.dir).free
    if free < disk_needed(nbytes):
        raise SystemExit(f"{args.dir} has {free / GIB:.1f} GiB free; a {nbytes / GIB:.2f} GiB run needs "
                         f"about {disk_needed(nbytes) / GIB:.1f} GiB (source, output, device test)")
    work = tempfile.mkdtemp(prefix="convert-bench-", dir=args.dir)
    try:
        src = os.path.join(work, "orbax")
        print(f"load average {os.getloadavg()} on {os.cpu_count()} cores at the start", flush=True)
        total_mib, avail_mib = meminfo_mib()
        if total_mib:
            print(f"memory: {total_mib / 1024:.1f} GiB, {avail_mib / 1024:.1f} GiB available; "
                  f"{free / GIB:.0f} GiB free in {args.dir}", flush=True)
        print(f"writing the Orbax source: {len(layout(args.gib))} arrays, {nbytes / GIB:.2f} GiB "
              f"(OCDBT + zarr3) in {work}", flush=True)
        made = make_source(exe, src, args.gib, args.step)
        print(f"  source written in {made:.1f} s (generated safetensors, then cairn convert --to orbax)",
              flush=True)
        wbw, rbw, tool = device_bandwidth(work)
        # A conversion reads N bytes and writes ~N bytes (random data barely
        # compresses): the device's bound is N/read_bw + N/write_bw.
        bound = 1 / (1 / rbw + 1 / wbw)
        print(f"device: write {wbw:.2f} GB/s, read {rbw:.2f} GB/s ({tool}); "
              f"read+write bound {bound:.2f} GB/s", flush=True)
        # The CPU's bound: the same zstd work (level-3 decode, level-1
        # encode) on the same values on every core, without I/O. Which of
        # the two bounds is lower is the one that applies.
        cpu_bound, cpu_unshared, sampled = cpu_ceiling_in_child(args.gib)
        print(f"CPU: zstd-3 decode + zstd-1 encode of {sampled / GIB:.2f} GiB of the source's values "
              f"on one thread, no I/O: {cpu_bound:.2f} GB/s now (load {os.getloadavg()[0]:.1f}); "
              f"{cpu_unshared:.2f} GB/s on {os.cpu_count()} unshared cores (its CPU time / cores)",
              flush=True)
        # On a shared machine the wall-clock ceiling moves with the load;
        # the unshared one (from CPU time) does not. It decides the bound.
        applies = "device" if bound <= cpu_unshared else "CPU"

        runs = {}
        out = os.path.join(work, "out")
        budget = ["--memory-budget", args.budget]
        jobs = [("cairn convert", [exe, "convert", src, out, "--to", "axlearn", "--json", *budget])]
        if args.extra:
            jobs.append(("cairn convert --threads 2",
                         [exe, "convert", src, out, "--to", "axlearn", "--json", "--threads", "2",
                          *budget]))
        if not args.no_naive:
            jobs.append(("naive (orbax restore + tensorstore)",
                         [sys.executable, "-c", NAIVE, os.path.join(src, str(args.step), "default"),
                          out, str(args.step)]))
        mpi = mpi_supported(exe)
        if mpi:
            jobs.append(("cairn convert, mpirun -n 2",
                         ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", exe, "convert",
                          src, out, "--to", "axlearn", "--json", *budget]))
        cpu = {}
        read = {}  # cairn's bytes read per stored byte of its input (its --json summary)
        written = {}  # the bytes of the output as stored
        stored = stored_bytes(src)
        naive_failed = None
        for name, cmd in jobs:
            shutil.rmtree(out, ignore_errors=True)
            if name.startswith("naive"):
                # The page cache is dropped by measured(); what is left
                # available is what the naive way may take.
                drop_caches([src])
                _, avail_mib = meminfo_mib()
                need = NAIVE_PEAK_PER_BYTE * nbytes / (1 << 20)
                if avail_mib is not None:
                    print(f"  {name}: needs about {need / 1024:.1f} GiB ({NAIVE_PEAK_PER_BYTE}x the "
                          f"checkpoint); {avail_mib / 1024:.1f} GiB available now"
                          + ("" if avail_mib > need else " -- it will likely be killed"), flush=True)
            try:
                seconds, rss, stdout = measured(cmd, [src])
            except SystemExit as e:
                if not name.startswith("naive"):
                    raise
                # The naive way holds the whole tree: on a machine without
                # the memory it is killed; the rest still runs.
                rc = measured.rc
                if rc in (-9, 137):
                    naive_failed = (f"killed by SIGKILL (out of memory: most likely the kernel's OOM killer) at "
                                    f"{measured.maxrss_mib / 1024:.1f} GiB peak RSS, after "
                                    f"{measured.cpu_seconds:.0f} CPU seconds")
                else:
                    naive_failed = f"failed (exit {rc}): {str(e).splitlines()[-1][:200]}"
                print(f"  {name}: {naive_failed}", flush=True)
                continue
            index = os.path.join(out, f"step_{args.step:08d}", "index")
            if not os.path.exists(index):
                raise SystemExit(f"{name} left no {index}")
            runs[name] = (seconds, rss)
            cpu[name] = measured.cpu_seconds
            read[name] = read_per_input(stdout, stored)
            written[name] = stored_bytes(out)
            print(f"  {name}: {seconds:.2f} s, peak RSS {rss:.0f} MiB, CPU {cpu[name]:.1f} s "
                  f"({cpu[name] / seconds / os.cpu_count():.0%} of {os.cpu_count()} cores)"
                  + (f", read {read[name]:.2f}x its stored input" if read[name] else ""), flush=True)
        if args.extra:
            # The way back: the AXLearn step to Orbax (OCDBT + zarr3).
            back = os.path.join(work, "back")
            seconds, rss, _ = measured([exe, "convert", out, back, "--to", "orbax", "--json", *budget],
                                       [out])
            runs["cairn convert AXLearn -> Orbax"] = (seconds, rss)
            cpu["cairn convert AXLearn -> Orbax"] = measured.cpu_seconds
            print(f"  AXLearn -> Orbax: {seconds:.2f} s, peak RSS {rss:.0f} MiB, CPU "
                  f"{measured.cpu_seconds:.1f} s", flush=True)
            shutil.rmtree(back, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        if not mpi:
            print("  cairn convert under mpirun -n 2: skipped (no mpirun)")

        naive = runs.get("naive (orbax restore + tensorstore)", (float("nan"),))[0]
        if naive_failed:
            print(f"\nnaive (orbax restore + tensorstore): no row -- {naive_failed}; the speed-up "
                  f"column is n/a")
        rows = []
        for name, (seconds, rss) in runs.items():
            gbs = nbytes / seconds / GB
            # What the tool's CPU time would give on every core unshared:
            # comparable across loads, and with the unshared CPU bound.
            unshared = nbytes / cpu[name] * os.cpu_count() / GB
            rows.append([name, f"{seconds:.2f}", f"{gbs:.2f}", f"{rss:.0f}", f"{naive / seconds:.2f}x" if naive == naive else "n/a",
                         f"{gbs / bound:.0%}", f"{gbs / cpu_unshared:.0%}",
                         f"{cpu[name] / seconds / os.cpu_count():.0%}", f"{unshared:.2f}",
                         f"{min(unshared, bound) / min(cpu_unshared, bound):.0%}",
                         f"{read[name]:.2f}x" if read.get(name) else "n/a",
                         # The bytes on the device: the stored input read
                         # once and the stored output written, at the
                         # device's own rates, over the wall time (the GB/s
                         # columns count the arrays' bytes, which zstd
                         # shrinks on disk).
                         f"{(stored / rbw + written[name] / wbw) / GB / seconds:.0%}"])
        print(f"\n{nbytes / GIB:.2f} GiB, {len(layout(args.gib))} arrays, Orbax OCDBT+zarr3 -> AXLearn "
              f"(zarr2+zstd1), {stored / GIB:.2f} GiB stored; device read {rbw:.2f} / write {wbw:.2f} GB/s, r+w bound "
              f"{bound:.2f} GB/s; CPU bound {cpu_unshared:.2f} GB/s unshared (one zstd thread: "
              f"{cpu_bound:.2f} GB/s now) "
              f"(the {applies} bound applies); "
              f"budget {args.budget}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print_table(["tool", "seconds", "GB/s", "peak RSS MiB", "speed vs naive", "of device r+w bound",
                     "of CPU bound", "CPU busy", "GB/s per CPU time x cores",
                     "of the bound that applies, unshared", "bytes read per input byte",
                     "stored bytes: device time / wall"], rows)

        # Peak RSS as the checkpoint grows: each size is its own source
        # (layout(gib): larger arrays for larger checkpoints), same budget.
        cairn_rss = runs["cairn convert"][1]
        shutil.rmtree(src, ignore_errors=True)
        sizes = sorted({parse_gib(x) for x in args.rss_sizes.split(",") if x} - {args.gib})
        rss_rows = []
        for gib in sizes:
            small = os.path.join(work, f"orbax-{gib:g}gib")
            make_source(exe, small, gib, args.step)
            shutil.rmtree(out, ignore_errors=True)
            seconds, rss, _ = measured([exe, "convert", small, out, "--to", "axlearn", *budget], [small])
            rss_rows.append([f"{gib:g}", f"{total_bytes(gib) / GIB:.2f}", f"{rss:.0f}", f"{seconds:.1f}"])
            shutil.rmtree(small, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
        rss_rows.append([f"{args.gib:g}", f"{nbytes / GIB:.2f}", f"{cairn_rss:.0f}",
                         f"{runs['cairn convert'][0]:.1f}"])
        rss_rows.sort(key=lambda r: float(r[0]))
        print(f"\ncairn convert --to axlearn, budget {args.budget}: peak RSS by checkpoint size "
              f"(load {os.getloadavg()[0]:.1f})")
        print_table(["GiB (nominal)", "GiB", "peak RSS MiB", "seconds"], rss_rows)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    with results("convert_bench"):
        main()
