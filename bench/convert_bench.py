"""Offline conversion benchmark: `cairn convert --to axlearn` against the naive way.

Writes an Orbax checkpoint (OCDBT + Zarr v3, orbax-checkpoint, ~110 numpy
arrays of mixed sizes, random float32/bfloat16 data, `--gib` GiB in total),
then in the same run, each in a subprocess with the page cache dropped first:

  (a) cairn:  `cairn convert SRC DST --to axlearn`
  (b) naive:  a Python script that restores the whole tree with orbax-checkpoint
              onto the CPU (numpy arrays), then writes every array with
              TensorStore as AXLearn does (zarr v2 driver, zstd level 1, one
              chunk = the whole array, all writes in flight) and the `index`
              file last
  (c) cairn under `mpirun -n 2`, if `cairn convert` supports it
  (d) cairn with `--threads 2` (one worker per core) against the default
      (twice the cores), and the AXLearn result converted back to Orbax

Every run reports its CPU time: a conversion whose CPU is busy on every
core is bound by zstd (decode + encode), not by the device.

Each runs under a small wrapper that reports wall time and the peak RSS of its
process tree (getrusage(RUSAGE_CHILDREN).ru_maxrss: the largest single
process, so for mpirun the largest rank). The device's sequential O_DIRECT
read/write bandwidth (fio, 4 MiB blocks) is measured in the same run. With
`--gib` above 1, cairn also converts a 1 GiB checkpoint so its peak RSS at both
sizes can be compared (the converter streams: memory should stay flat).

    python3 bench/convert_bench.py [--gib 8] [--dir /path/on/device] [--budget 512MiB]
        [--no-naive] [--keep]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, drop_caches, print_table  # noqa: E402

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

# Writes the Orbax source checkpoint: argv = dir, step, gib.
MAKE_SOURCE = r"""
import sys
import ml_dtypes, numpy as np, orbax.checkpoint as ocp
sys.path.insert(0, sys.argv[4])
from convert_bench import layout
root, step, gib = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = np.random.default_rng(0)
tree = {}
for path, shape, dtype in layout(gib):
    node = tree
    *parents, leaf = path.split("/")
    for p in parents:
        node = node.setdefault(p, {})
    if dtype == "int32":
        node[leaf] = np.asarray(rng.integers(0, 1000), dtype=np.int32).reshape(shape)
    else:
        a = rng.random(shape, dtype=np.float32) * 2 - 1
        node[leaf] = a if dtype == "float32" else a.astype(ml_dtypes.bfloat16)
        del a
ckptr = ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True))
ckptr.save(f"{root}/{step}/default", tree)
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


def total_bytes(gib):
    size = {"float32": 4, "bfloat16": 2, "int32": 4}
    return sum(math.prod(shape) * size[dt] for _, shape, dt in layout(gib))


def cairn_exe():
    exe = os.path.join(sysconfig.get_path("scripts"), "cairn")
    return exe if os.access(exe, os.X_OK) else shutil.which("cairn")


def measured(cmd, cache_paths):
    """Wall seconds and peak RSS (MiB) of `cmd` in a fresh process tree, cold cache."""
    drop_caches(cache_paths)
    r = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    stats = json.loads(r.stderr.strip().splitlines()[-1])
    if stats["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({stats['rc']}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    measured.cpu_seconds = stats["cpu_seconds"]
    return stats["seconds"], stats["maxrss_kib"] / 1024, r.stdout


def make_source(root, gib, step):
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, "-c", MAKE_SOURCE, root, str(step), str(gib), here], check=True)


def mpi_supported(exe):
    help_text = subprocess.run([exe, "convert", "--help"], capture_output=True, text=True).stdout
    return any(w in help_text.lower() for w in ("mpi", "--coordinator", "--distributed", "--num-processes"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=8.0, help="checkpoint size in GiB (default 8)")
    ap.add_argument("--dir", default=os.environ.get("CAIRN_BENCH_DIR", "/work"),
                    help="a directory on the device under test")
    ap.add_argument("--step", type=int, default=100)
    ap.add_argument("--keep", action="store_true", help="keep the files")
    ap.add_argument("--budget", default="512MiB", help="cairn's --memory-budget (default 512MiB)")
    ap.add_argument("--no-naive", action="store_true",
                    help="skip the naive way (it holds the whole checkpoint in memory)")
    args = ap.parse_args()
    exe = cairn_exe()
    if not exe:
        raise SystemExit("the `cairn` command is not installed (pip install . installs it)")

    work = tempfile.mkdtemp(prefix="convert-bench-", dir=args.dir)
    try:
        nbytes = total_bytes(args.gib)
        src = os.path.join(work, "orbax")
        print(f"writing the Orbax source: {len(layout(args.gib))} arrays, {nbytes / GIB:.2f} GiB "
              f"(OCDBT + zarr3) in {work}", flush=True)
        make_source(src, args.gib, args.step)
        wbw, rbw, tool = device_bandwidth(work)
        # A conversion reads N bytes and writes ~N bytes (random data barely
        # compresses): the device's bound is N/read_bw + N/write_bw.
        bound = 1 / (1 / rbw + 1 / wbw)
        print(f"device: write {wbw:.2f} GB/s, read {rbw:.2f} GB/s ({tool}); "
              f"read+write bound {bound:.2f} GB/s", flush=True)

        runs = {}
        out = os.path.join(work, "out")
        budget = ["--memory-budget", args.budget]
        jobs = [("cairn convert", [exe, "convert", src, out, "--to", "axlearn", "--json", *budget]),
                ("cairn convert --threads 2",
                 [exe, "convert", src, out, "--to", "axlearn", "--json", "--threads", "2", *budget])]
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
        for name, cmd in jobs:
            shutil.rmtree(out, ignore_errors=True)
            seconds, rss, stdout = measured(cmd, [src])
            index = os.path.join(out, f"step_{args.step:08d}", "index")
            if not os.path.exists(index):
                raise SystemExit(f"{name} left no {index}")
            runs[name] = (seconds, rss)
            cpu[name] = measured.cpu_seconds
            print(f"  {name}: {seconds:.2f} s, peak RSS {rss:.0f} MiB, CPU {cpu[name]:.1f} s "
                  f"({cpu[name] / seconds / os.cpu_count():.0%} of {os.cpu_count()} cores)", flush=True)
        # The way back: the AXLearn step to Orbax (OCDBT + zarr3).
        back = os.path.join(work, "back")
        seconds, rss, _ = measured([exe, "convert", out, back, "--to", "orbax", "--json", *budget], [out])
        runs["cairn convert AXLearn -> Orbax"] = (seconds, rss)
        cpu["cairn convert AXLearn -> Orbax"] = measured.cpu_seconds
        print(f"  AXLearn -> Orbax: {seconds:.2f} s, peak RSS {rss:.0f} MiB, CPU "
              f"{measured.cpu_seconds:.1f} s", flush=True)
        shutil.rmtree(back, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        if not mpi:
            print("  cairn convert under mpirun -n 2: not supported yet (`cairn convert --help` "
                  "has no multi-process option)")

        naive = runs.get("naive (orbax restore + tensorstore)", (float("nan"),))[0]
        rows = []
        for name, (seconds, rss) in runs.items():
            gbs = nbytes / seconds / GB
            rows.append([name, f"{seconds:.2f}", f"{gbs:.2f}", f"{rss:.0f}", f"{naive / seconds:.2f}x",
                         f"{gbs / bound:.0%}", f"{cpu[name] / seconds / os.cpu_count():.0%}"])
        print(f"\n{nbytes / GIB:.2f} GiB, {len(layout(args.gib))} arrays, Orbax OCDBT+zarr3 -> AXLearn "
              f"(zarr2+zstd1); device read {rbw:.2f} / write {wbw:.2f} GB/s; budget {args.budget}; "
              f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print_table(["tool", "seconds", "GB/s", "peak RSS MiB", "speed vs naive", "of device r+w bound",
                     "CPU busy"], rows)

        cairn_rss = runs["cairn convert"][1]
        if args.gib != 1:
            small = os.path.join(work, "orbax-1gib")
            make_source(small, 1, args.step)
            shutil.rmtree(out, ignore_errors=True)
            _, rss1, _ = measured([exe, "convert", small, out, "--to", "axlearn", *budget], [small])
            print(f"\ncairn peak RSS: 1 GiB -> {rss1:.0f} MiB, {args.gib:g} GiB -> {cairn_rss:.0f} MiB "
                  f"(ratio {cairn_rss / rss1:.2f} for {nbytes / total_bytes(1):.1f}x the data)")
        else:
            print(f"\ncairn peak RSS at 1 GiB: {cairn_rss:.0f} MiB (run with --gib 8 to compare)")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
