"""cairn against orbax-checkpoint on the same jax training state, as a job holds it.

A state of `--bytes` (2 GiB by default) in `--arrays` float32 arrays (320 by
default; random values, as trained weights: they barely compress), sharded by
rows over 8 CPU devices: one process with 8 devices, and 4 processes with 2
devices each (jax.distributed on localhost). For each layout and each
compression (cairn's default chain and compression="auto"; orbax always its
default), every operation runs in fresh processes, alternating who goes first:

- save: the stall (until the async save returns: cairn.save_async,
  orbax's AsyncCheckpointer.save) against a plain copy of the process's
  shards made just before, and the time to the durable commit (wait, then
  os.sync, for both);
- restore onto the same sharding and onto another one (columns over the 8
  devices), page cache dropped first;
- peak RSS of a process (ru_maxrss; it includes the state itself).

The device's sequential bandwidth is measured in the same run with fio
(O_DIRECT) on a file of the state's size; and, after each round's restores, the
bandwidth of reading cairn's checkpoint files themselves with O_DIRECT (8 blocks
of 8 MiB in flight, page cache dropped): "files GB/s", the device's speed for
exactly the bytes the restores read, where they lie (on a VM whose disk is a
host file, a freshly written fio file and an older checkpoint read at different
speeds). Prints medians, ratios, and the load
average next to them (the machines are shared).

    python bench/orbax_engine_bench.py --dir /path/on/the/disk [--repeat 3]
        [--bytes 2147483648] [--arrays 320] [--compression default,auto] [--processes 1,4]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, drop_caches, files_read_bandwidth, print_table, results  # noqa: E402

DEVICES = 8

# One process of a job: builds the state (or the restore target), runs one
# operation, prints its timings as JSON.
WORKER = r'''
import json, os, resource, sys, time
op, who, path, nbytes, narrays, compression, nproc, pid, address = sys.argv[1:10]
nbytes, narrays, nproc, pid = int(nbytes), int(narrays), int(nproc), int(pid)
import numpy as np
import jax
if nproc > 1:
    jax.distributed.initialize(coordinator_address=address, num_processes=nproc, process_id=pid)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("d",))
rows_sharding = NamedSharding(mesh, P("d", None))
cols_sharding = NamedSharding(mesh, P(None, "d"))

def shapes():
    rng = np.random.default_rng(0)
    w = rng.uniform(0.2, 1.8, size=narrays)
    w /= w.sum()
    out = []
    for x in w:
        elems = max(8 * 1024, int(nbytes * x) // 4)
        cols = 1024 if elems >= 1024 * 64 else 128
        rows = max(8, (elems // cols) // 8 * 8)
        out.append((rows, cols))
    return out

def block(i, index, shape):
    r0 = index[0].start or 0
    r1 = index[0].stop if index[0].stop is not None else shape[0]
    rng = np.random.default_rng([i, r0])
    return rng.standard_normal((r1 - r0, shape[1]), dtype=np.float32)

def state():
    return {f"layer_{i:03d}": jax.make_array_from_callback(s, rows_sharding, lambda idx, i=i, s=s: block(i, idx, s))
            for i, s in enumerate(shapes())}

def target(sharding):
    return {f"layer_{i:03d}": jax.ShapeDtypeStruct(s, np.float32, sharding=sharding)
            for i, s in enumerate(shapes())}

def barrier(name):
    if nproc > 1:
        from jax.experimental import multihost_utils
        multihost_utils.sync_global_devices(name)

out = {}
if op == "save":
    tree = state()
    jax.block_until_ready(tree)
    # The stall target's yardstick: a plain copy of this process's shards.
    t0 = time.perf_counter()
    copies = [np.array(sh.data, copy=True) for v in tree.values() for sh in v.addressable_shards]
    out["memcpy"] = time.perf_counter() - t0
    del copies
    barrier("start")
    t0 = time.perf_counter()
    if who == "cairn":
        import cairn
        pending = cairn.save_async(path, tree, compression=compression)
        out["stall"] = time.perf_counter() - t0
        pending.wait_until_finished()
    else:
        import orbax.checkpoint as ocp
        ckptr = ocp.AsyncCheckpointer(ocp.PyTreeCheckpointHandler())
        ckptr.save(path, args=ocp.args.PyTreeSave(tree))
        out["stall"] = time.perf_counter() - t0
        ckptr.wait_until_finished()
        ckptr.close()
    os.sync()
    out["durable"] = time.perf_counter() - t0
else:
    sharding = rows_sharding if op == "restore_same" else cols_sharding
    tgt = target(sharding)
    barrier("start")
    t0 = time.perf_counter()
    if who == "cairn":
        import cairn
        got = cairn.restore(path, tgt)
    else:
        import orbax.checkpoint as ocp
        ckptr = ocp.PyTreeCheckpointer()
        got = ckptr.restore(path, args=ocp.args.PyTreeRestore(
            item=tgt, restore_args=ocp.checkpoint_utils.construct_restore_args(tgt)))
    jax.block_until_ready(got)
    out["seconds"] = time.perf_counter() - t0
    # Check this process's first and last array against the values saved.
    s = shapes()
    for name, i in (("layer_000", 0), (f"layer_{len(s) - 1:03d}", len(s) - 1)):
        for shard in got[name].addressable_shards:
            rows = shard.index[0]
            step = s[i][0] // len(jax.devices())  # the saved row shards
            full = np.concatenate([block(i, (slice(r, r + step),), s[i])
                                   for r in range(0, s[i][0], step)])
            want = full[rows, shard.index[1]]
            assert np.array_equal(np.asarray(shard.data), want), (who, op, name)
out["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print("RESULT " + json.dumps(out), flush=True)
if nproc > 1:
    jax.distributed.shutdown()
'''


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(worker, op, who, path, args, compression, nproc):
    """Runs one operation in `nproc` fresh processes; returns the slowest
    process's timings and the largest peak RSS."""
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES // nproc}",
               JAX_PLATFORMS="cpu")
    address = f"127.0.0.1:{free_port()}"
    procs = [subprocess.Popen([sys.executable, worker, op, who, path, str(args.bytes), str(args.arrays),
                               compression, str(nproc), str(i), address],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(nproc)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"{who} {op} ({nproc} processes) failed:\n{err[-3000:]}")
        results.append(json.loads(out.split("RESULT ", 1)[1]))
    return {k: max(r[k] for r in results) for k in results[0]}


def load():
    return open("/proc/loadavg").read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory on the device to measure (default: a temp dir)")
    ap.add_argument("--bytes", type=int, default=2 << 30)
    ap.add_argument("--arrays", type=int, default=320)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compression", default="default,auto")
    ap.add_argument("--processes", default="1,4")
    args = ap.parse_args()

    base = tempfile.mkdtemp(prefix="cairn-orbax-bench-", dir=args.dir)
    worker = os.path.join(base, "worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    loads = [load()]
    rows = []
    try:
        write_bw, read_bw, tool = device_bandwidth(base, size_bytes=args.bytes, repeat=args.repeat)
        for nproc in [int(x) for x in args.processes.split(",")]:
            for compression in args.compression.split(","):
                times = {w: {k: [] for k in ("stall", "durable", "restore_same", "restore_other", "maxrss",
                                             "memcpy", "files_read")}
                         for w in ("cairn", "orbax")}
                for r in range(args.repeat):
                    order = ["cairn", "orbax"] if r % 2 == 0 else ["orbax", "cairn"]
                    for who in order:
                        path = os.path.join(base, f"{who}-{nproc}-{compression}-{r}")
                        s = run_job(worker, "save", who, path, args, compression, nproc)
                        times[who]["stall"].append(s["stall"])
                        times[who]["durable"].append(s["durable"])
                        times[who]["memcpy"].append(s["memcpy"])
                        rss = s["maxrss"]
                        for op in ("restore_same", "restore_other"):
                            drop_caches([path])
                            t = run_job(worker, op, who, path, args, compression, nproc)
                            times[who][op].append(t["seconds"])
                            rss = max(rss, t["maxrss"])
                        times[who]["maxrss"].append(rss)
                        drop_caches([path])
                        times[who]["files_read"].append(files_read_bandwidth(path))
                        shutil.rmtree(path, ignore_errors=True)
                    loads.append(load())
                med = {w: {k: statistics.median(v) for k, v in t.items()} for w, t in times.items()}
                label = f"{nproc}p x {DEVICES // nproc}dev, cairn {compression}"
                files = med["cairn"]["files_read"]
                for op, dev in (("stall", None), ("durable", write_bw), ("restore_same", read_bw),
                                ("restore_other", read_bw)):
                    c, o = med["cairn"][op], med["orbax"][op]
                    cb = args.bytes / c / GB
                    restore = op.startswith("restore")
                    rows.append([label, op, f"{c:.2f}", f"{o:.2f}", f"{cb:.2f}", f"{args.bytes / o / GB:.2f}",
                                 f"{o / c:.2f}x", f"{dev:.2f}" if dev else "-",
                                 f"{cb / dev:.0%}" if dev else "-",
                                 f"{files:.2f}" if restore else "-", f"{cb / files:.0%}" if restore else "-"])
                memcpy = statistics.median(times["cairn"]["memcpy"] + times["orbax"]["memcpy"])
                rows.append([label, "stall / memcpy", f"{med['cairn']['stall'] / memcpy:.2f}x",
                             f"{med['orbax']['stall'] / memcpy:.2f}x", "", "", "", "", f"memcpy {memcpy:.2f} s", "", ""])
                rows.append([label, "peak RSS MiB", f"{med['cairn']['maxrss'] / 2**20:.0f}",
                             f"{med['orbax']['maxrss'] / 2**20:.0f}", "", "", "", "", "", "", ""])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"state: {args.bytes / 2**30:.2f} GiB in {args.arrays} float32 arrays sharded by rows over "
          f"{DEVICES} CPU devices; median of {args.repeat}, alternating who goes first; orbax with its "
          f"default chain; device: {tool} on {args.bytes / 2**30:.2f} GiB; load average {' '.join(loads)}")
    print_table(["layout", "op", "cairn s", "orbax s", "cairn GB/s", "orbax GB/s", "cairn/orbax",
                 "device GB/s", "cairn/device", "files GB/s", "cairn/files"], rows)


if __name__ == "__main__":
    with results("orbax_engine_bench"):
        main()
