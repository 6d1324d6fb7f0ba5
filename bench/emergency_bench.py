"""cairn.emergency on a jax.distributed job: 4 processes x 2 CPU devices, a
mesh of 2 data-parallel replicas x 4, a state of `--bytes` (2 GiB by
default) in 16 float32 arrays sharded by rows over the data axis and
replicated over the replica axis (each process holds 2 of the 4 row blocks
of every array: half the state).

Local directories (one per process, standing for each host's RAM disk) are
in `--local-dir` (default /dev/shm); the persistent tier is in `--dir` (the
disk). One run measures, per process (the table shows the slowest one):

- memcpy: copying the process's shards once, into numpy arrays and into
  fresh 4 KiB pages (the floor for a save that copies; the stall ratios use
  the faster);
- local save without peers: the stall of `save` and the background time
  to the durable local step;
- local save with a peer copy over ZeroMQ: the same, and the replication
  throughput (bytes of the step / the extra background time); the saves
  without and with a peer copy alternate, `--repeats` times each, and the
  table gives medians;
- recovery after losing one host (its local directory deleted): restore of
  the newest local step, the lost host fetching from its peer;
- the fetch floor: the lost host's bytes sent over one plain TCP connection
  (from memory) straight into a fresh file on its RAM disk, after the same
  pause; no fetch over this loopback can be faster; the sealed fetch floor,
  the same with each 16 MiB sealed with AES-256-GCM and opened into the
  file (what a transport that must encrypt pays at the least); and the replication
  floor: every process's bytes to its peer that way, all at once;
- restore of everything from the persistent tier (all local directories gone);
  the page cache is dropped before each restore (when run as root), so the
  persistent tier is read from the device while the local tier, on the RAM
  disk, stays in memory as it would on a real host; the slowest process's
  restore log (with the time of each fetch and read) is printed under the
  table;
- Orbax's emergency CheckpointManager on the same job (replica 1 saves the
  local tier, replica 0 the persistent one): save stall, time to finish, and
  restore of the newest local step (both intact).

The device's sequential bandwidth (fio or O_DIRECT, common.device_bandwidth)
is measured in the same run for `--dir`, and the load average is printed
(machines are shared).

    python bench/emergency_bench.py --dir /path/on/disk [--bytes 2147483648]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, print_table, results  # noqa: E402

NPROC = 4
NARRAYS = 16

WORKER = r'''
import json, os, resource, shutil, sys, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
os.environ["JAX_PLATFORMS"] = "cpu"
address, pid, local_root, persistent_root, nbytes, narrays, out_path, repeats, settle_s, skip_orbax, xports, compression = sys.argv[1:13]
xports = [int(x) for x in xports.split(",")]  # where each process listens for the transfer floors
pid, nbytes, narrays, repeats, settle_s, skip_orbax = int(pid), int(nbytes), int(narrays), int(repeats), float(settle_s), skip_orbax == "1"
import numpy as np
import jax
jax.distributed.initialize(coordinator_address=address, num_processes=4, process_id=pid)
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import cairn

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("replica", "data"))
sharding = NamedSharding(mesh, P("data", None))
cols = 1024
rows = max(8, (nbytes // narrays // 4 // cols) // 8 * 8)

def state(seed):
    def make(i):
        def cb(idx):
            start = idx[0].start or 0
            block = np.random.default_rng([seed, i, start]).standard_normal((rows // 4, cols), dtype=np.float32)
            return block
        return jax.make_array_from_callback((rows, cols), sharding, cb)
    return {f"layer_{i:02d}": make(i) for i in range(narrays)}

def abstract():
    return {f"layer_{i:02d}": jax.ShapeDtypeStruct((rows, cols), np.float32, sharding=sharding) for i in range(narrays)}

def barrier(name):
    multihost_utils.sync_global_devices(name)

caches_dropped = []  # per restore, whether process 0 could drop the page cache

def drop_caches(name):
    # The persistent tier is read from the device, not from the page cache
    # its save left behind (the local tier, on a RAM disk, stays in memory).
    # Without the right to (not root, a read-only /proc/sys) the restore's
    # device reads below still say how much came from the device.
    if pid == 0:
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            caches_dropped.append(True)
        except OSError:
            caches_dropped.append(False)
    barrier(name)

def device_read_bytes():
    """Bytes this process has had read from storage (not the page cache):
    /proc/self/io `read_bytes`, all its threads."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0

out = {"state_bytes": rows * cols * 4 * narrays}
tree = state(1)
jax.block_until_ready(tree)
held = sum(s.data.nbytes for a in tree.values() for s in a.addressable_shards)
out["held_bytes"] = held
t = time.perf_counter()
copies = [np.array(s.data, copy=True) for a in tree.values() for s in a.addressable_shards]
out["memcpy_numpy_s"] = time.perf_counter() - t
del copies
# The same copy into fresh 4 KiB pages: numpy asks for huge pages from 4 MiB
# on, which this kind of VM faults in far slower (docs/EMERGENCY.md,
# "Recovery time"); the stall is compared with the faster of the two.
import mmap
t = time.perf_counter()
copies = []
for a in tree.values():
    for s in a.addressable_shards:
        src = np.asarray(s.data)
        dst = np.frombuffer(mmap.mmap(-1, max(1, src.nbytes), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS), dtype=np.uint8)[:src.nbytes].view(src.dtype)
        np.copyto(dst.reshape(src.shape), src)
        copies.append(dst)
out["memcpy_small_pages_s"] = time.perf_counter() - t
out["memcpy_s"] = min(out["memcpy_numpy_s"], out["memcpy_small_pages_s"])
del copies

def local(name):
    d = os.path.join(local_root, f"{name}_host_{pid}")
    os.makedirs(d, exist_ok=True)
    return d

def run_saves(name, peer_copies, rnd):
    m = cairn.emergency.CheckpointManager(local(name), os.path.join(persistent_root, name), num_replicas=2,
                                          peer_copies=peer_copies, local_save_interval_steps=1, local_max_to_keep=1,
                                          persistent_save_interval_steps=2, zmq_host="127.0.0.1", timeout_s=600,
                                          compression=compression)
    barrier(f"{name}_{rnd}_start")
    t0 = time.perf_counter()
    m.save(1, tree)
    stall = time.perf_counter() - t0
    m.wait_until_finished()
    total = time.perf_counter() - t0
    return m, stall, total

# Step 1 saved without and with a peer copy, alternately, `repeats` times
# (one sample of each was noise on a shared machine); the last run with a
# peer copy goes on to steps 2 and 3.
for key in ("nopeer_stall_s", "nopeer_total_s", "peer_stall_s", "peer_total_s"):
    out[key] = []
for rnd in range(repeats):
    for name, copies in (("nopeer", 0), ("peer", 1)):
        m, stall, total = run_saves(name, copies, rnd)
        out[name + "_stall_s"].append(stall)
        out[name + "_total_s"].append(total)
        if name == "peer" and rnd == repeats - 1:
            break
        m.close()
        barrier(f"{name}_{rnd}_closed")
        shutil.rmtree(local(name))  # the RAM disk holds the machine's memory
        if pid == 0:
            shutil.rmtree(os.path.join(persistent_root, name), ignore_errors=True)
        barrier(f"{name}_{rnd}_removed")
step_dir = os.path.join(local("peer"), "1")
out["step_bytes"] = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(step_dir) for f in fs)
for step in (2, 3):
    m.save(step, state(step))
    m.wait_until_finished()
m.close()
barrier("saved")

# Host 1 is lost: its local directory is gone.
if pid == 1:
    shutil.rmtree(local("peer"))
barrier("lost")
want = state(3)
persistent_steps = sorted(int(n) for n in os.listdir(os.path.join(persistent_root, "peer")) if n.isdigit())
import gc

def timed_restore(tag, step=None):
    """A fresh manager on the "peer" run restores `step` (None: the newest
    usable one) onto step 3's target: (seconds, restored tree, the manager's
    restore report with the time of each phase added). Before it, memory
    freed by the previous restore is given `settle` seconds to go back to the
    host (so neither restore reuses pages the other faulted in) and the page
    cache is dropped."""
    gc.collect()
    time.sleep(settle_s)
    m = cairn.emergency.CheckpointManager(local("peer"), os.path.join(persistent_root, "peer"), num_replicas=2,
                                          local_save_interval_steps=1, persistent_save_interval_steps=2,
                                          zmq_host="127.0.0.1", timeout_s=600)
    phases = {}
    native = m._native
    class Timed:
        def __getattr__(self, name):
            f = getattr(native, name)
            if name not in ("prepare_restore", "restore"):
                return f
            def timed(*a, **k):
                t = time.perf_counter()
                try:
                    return f(*a, **k)
                finally:
                    phases[name] = phases.get(name, 0.0) + time.perf_counter() - t
            return timed
    m._native = Timed()
    drop_caches(tag + "_start")
    read0 = device_read_bytes()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    r = m.restore(step, target=abstract())
    jax.block_until_ready(r)
    seconds = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = dict(m.last_restore)
    # CPU time of all this process's threads, the kernel's work on its
    # behalf (page faults, I/O submission) included.
    report["cpu_s"] = (usage.ru_utime - usage0.ru_utime) + (usage.ru_stime - usage0.ru_stime)
    report["device_read_bytes"] = device_read_bytes() - read0
    report["phases"] = {"prepare": phases.get("prepare_restore", 0.0), "read": phases.get("restore", 0.0)}
    report["phases"]["allocate+place"] = seconds - sum(report["phases"].values())
    m._native = native
    m.close()
    return seconds, r, report

# The two restores alternate (recovery first in even rounds, persistent
# first in odd ones), each after the same pause and a dropped page cache,
# so that neither is favoured by running second.
def timed_floor():
    """The floor of any restore on this VM: the process's shards copied into
    fresh 4 KiB pages (every restore, from any tier, writes its bytes into
    memory it has just allocated), after the same pause."""
    gc.collect()
    time.sleep(settle_s)
    barrier("floor_start")
    t = time.perf_counter()
    dsts = []
    for a in want.values():
        for s in a.addressable_shards:
            src = np.asarray(s.data)
            dst = np.frombuffer(mmap.mmap(-1, max(1, src.nbytes), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS),
                                dtype=np.uint8)[:src.nbytes].view(src.dtype)
            np.copyto(dst.reshape(src.shape), src)
            dsts.append(dst)
    return time.perf_counter() - t

PIECE = 16 << 20

def pieces():
    """(shard index, start, length) of the pieces of this process's shards,
    in order: every process holds shards of the same sizes."""
    out = []
    for i, n in enumerate(s.data.nbytes for a in want.values() for s in a.addressable_shards):
        out += [(i, start, min(PIECE, n - start)) for start in range(0, n, PIECE)]
    return out

def timed_transfer_floor(name, source_of, sealed=False):
    """The floor of moving a host's bytes on this machine, after the same
    pause: every process `d` in `source_of` receives the bytes it holds from
    process `source_of[d]` over one plain TCP connection (sent from memory:
    no files, framing or checks) straight into a fresh file on its RAM disk
    (`recv_into` a shared mapping of it), all at once. Any transfer over
    this loopback costs at least this. Returns this process's seconds.

    `sealed`: each 16 MiB piece is sealed with AES-256-GCM on the way out
    (into one reused buffer) and opened on the way in straight into the
    file, as a transport that must encrypt does at the least (the
    `cryptography` package, OpenSSL underneath): what encrypting each byte
    costs on this machine, whoever does it."""
    import socket, threading
    if sealed:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        aead = AESGCM(bytes(range(32)))
    gc.collect()
    time.sleep(settle_s)
    srv = None
    if pid in source_of:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", xports[pid]))
        srv.listen(1)
    barrier(name + "_start")
    t = time.perf_counter()
    def send(dest):
        with socket.create_connection(("127.0.0.1", xports[dest])) as c:
            if sealed:
                shards = [memoryview(np.ascontiguousarray(np.asarray(s.data))).cast("B")
                          for a in want.values() for s in a.addressable_shards]
                out = bytearray(PIECE + 16)
                for k, (i, start, n) in enumerate(pieces()):
                    aead.encrypt_into(k.to_bytes(12, "little"), shards[i][start:start + n], None,
                                      memoryview(out)[:n + 16])
                    c.sendall(memoryview(out)[:n + 16])
                return
            for a in want.values():
                for s in a.addressable_shards:
                    c.sendall(memoryview(np.ascontiguousarray(np.asarray(s.data))).cast("B"))
    senders = [threading.Thread(target=send, args=(d,)) for d, src in source_of.items() if src == pid]
    for th in senders:
        th.start()
    if srv is not None:
        conn, _ = srv.accept()
        path = os.path.join(local(name), "received")
        with open(path, "w+b") as f:
            f.truncate(held)
            mm = mmap.mmap(f.fileno(), held)
            view, got = memoryview(mm), 0
            if sealed:
                box = bytearray(PIECE + 16)
                for k, (_, _, n) in enumerate(pieces()):
                    part = memoryview(box)[:n + 16]
                    have = 0
                    while have < n + 16:
                        r = conn.recv_into(part[have:], n + 16 - have)
                        if r == 0:
                            raise RuntimeError(f"{name}: the sender stopped after {got + have} bytes")
                        have += r
                    aead.decrypt_into(k.to_bytes(12, "little"), part, None, view[got:got + n])
                    got += n
            while got < held:
                n = conn.recv_into(view[got:], min(held - got, 16 << 20))
                if n == 0:
                    raise RuntimeError(f"{name}: the sender stopped after {got} bytes")
                got += n
            view.release()
            mm.close()
        conn.close()
        srv.close()
        os.remove(path)
    for th in senders:
        th.join()
    seconds = time.perf_counter() - t
    barrier(name + "_done")
    return seconds

out["floor_s"] = []
out["fetch_floor_s"] = []
out["replication_floor_s"] = []
out["recover_s"], out["persistent_s"], out["recover_phases"], out["persistent_phases"] = [], [], [], []
out["recover_exact"] = True
for rnd in range(repeats):
    for which in (("recover", "persistent") if rnd % 2 == 0 else ("persistent", "recover")):
        if which == "recover":
            s, r, rep = timed_restore(f"recover_{rnd}")
            out["recover_tier"], out["recover_step"] = rep["tier"], rep["step"]
            out["recover_bytes_from_peers"] = rep["bytes_from_peers"]
            out["recover_bytes_mapped"] = rep.get("bytes_mapped", 0)
            out["recover_log"] = rep["log"]
            out["recover_exact"] = out["recover_exact"] and all(
                np.array_equal(np.asarray(a.data), np.asarray(b.data))
                for k in want for a, b in zip(r[k].addressable_shards, want[k].addressable_shards))
        else:
            s, r, rep = timed_restore(f"persistent_{rnd}", persistent_steps[-1])
            out["persistent_tier"], out["persistent_step"] = rep["tier"], rep["step"]
            out["persistent_log"] = rep["log"]
            out.setdefault("persistent_device_read_bytes", []).append(rep["device_read_bytes"])
        out.setdefault(which + "_cpu_s", []).append(rep["cpu_s"])
        out[which + "_s"].append(s)
        out[which + "_phases"].append(rep["phases"])
        del r
        barrier(f"{which}_{rnd}_done")
    out["floor_s"].append(timed_floor())
    barrier(f"floor_{rnd}_done")
    # The lost host's fetch: process 1 from process 3, which holds its peer copy.
    out["fetch_floor_s"].append(timed_transfer_floor("fetch_floor", {1: 3}))
    out.setdefault("sealed_fetch_floor_s", []).append(timed_transfer_floor("sealed_fetch_floor", {1: 3}, sealed=True))
    # Replication: every process sends its bytes to its peer in the other
    # replica and receives its peer's, all at once.
    out["replication_floor_s"].append(timed_transfer_floor("replication_floor", {d: (d + 2) % 4 for d in range(4)}))
out["caches_dropped"] = all(caches_dropped) if pid == 0 else None
if pid == 0:  # what the persistent step holds on the device
    step_dir = os.path.join(persistent_root, "peer", str(persistent_steps[-1]))
    out["persistent_step_bytes"] = sum(os.path.getsize(os.path.join(d, f))
                                       for d, _, fs in os.walk(step_dir) for f in fs)
shutil.rmtree(local("peer"), ignore_errors=True)
barrier("restores_done")
if skip_orbax:
    with open(out_path, "w") as f:
        json.dump(out, f)
    jax.distributed.shutdown()
    sys.exit(0)

# Orbax's emergency manager on the same job.
try:
    from absl import flags
    flags.FLAGS.mark_as_parsed()
    import orbax.checkpoint as ocp
    from orbax.checkpoint._src.multihost import multihost
    from orbax.checkpoint.experimental.emergency import checkpoint_manager as ecm
    multihost.initialize_runtime_to_distributed_ids()
    multihost.initialize_distributed_to_device_ids()
    options = ecm.CheckpointManagerOptions(
        local=ecm.LocalCheckpointOptions(save_interval_steps=1, max_to_keep=2),
        persistent=ecm.PersistentCheckpointOptions(save_interval_steps=2, max_to_keep=3), replica_axis_index=0)
    om = ecm.CheckpointManager(local("orbax"), os.path.join(persistent_root, "orbax"), global_mesh=mesh,
                               abstract_state=abstract(), options=options)
    barrier("orbax_start")
    t0 = time.perf_counter()
    om.save(1, args=ocp.args.Composite(state=ocp.args.PyTreeSave(tree)))
    out["orbax_stall_s"] = time.perf_counter() - t0
    om.wait_until_finished()
    out["orbax_total_s"] = time.perf_counter() - t0
    for step in (2, 3):
        om.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave(state(step))))
    om.wait_until_finished()
    drop_caches("orbax_saved")
    t0 = time.perf_counter()
    latest = om.latest_step()
    restored = om.restore(latest, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
        item=abstract(), restore_args=ocp.checkpoint_utils.construct_restore_args(abstract())))).state
    jax.block_until_ready(restored)
    out["orbax_restore_s"] = time.perf_counter() - t0
    out["orbax_restore_step"] = int(latest)
    om.close()
except Exception as e:  # reported in the table, not hidden
    out["orbax_error"] = f"{type(e).__name__}: {str(e)[:300]}"
with open(out_path, "w") as f:
    json.dump(out, f)
jax.distributed.shutdown()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="disk directory for the persistent tier")
    ap.add_argument("--local-dir", default="/dev/shm", help="RAM disk for the local directories")
    ap.add_argument("--bytes", type=int, default=2 << 30,
                    help="state size; the local tier of 4 processes (own step + a peer copy each) sits in "
                         "--local-dir, so a RAM disk needs about 4x this plus the processes' memory")
    ap.add_argument("--repeats", type=int, default=3,
                    help="rounds of the two restores (alternating which goes first); the table shows medians")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait before each timed restore, so freed memory goes back to the host")
    ap.add_argument("--no-orbax", action="store_true", help="skip Orbax's emergency manager")
    ap.add_argument("--compression", default="default", choices=["default", "none", "auto"],
                    help="the persistent tier's compression (the local tier is uncompressed)")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cairn-emergency-bench-", dir=args.dir)
    local = tempfile.mkdtemp(prefix="cairn-emergency-bench-local-", dir=args.local_dir)
    try:
        bw_write, bw_read, tool = device_bandwidth(work, size_bytes=min(args.bytes, 1 << 30), repeat=1)
        script = os.path.join(work, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        env = {k: v for k, v in os.environ.items() if k not in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "XLA_FLAGS")}
        address = f"127.0.0.1:{free_port()}"
        floor_ports = ",".join(str(free_port()) for _ in range(NPROC))  # for the transfer floors
        load_before = os.getloadavg()[0]
        procs = []
        for i in range(NPROC):
            log = open(os.path.join(work, f"log_{i}.txt"), "wb")
            procs.append((subprocess.Popen([sys.executable, script, address, str(i), local, work, str(args.bytes),
                                            str(NARRAYS), os.path.join(work, f"out_{i}.json"), str(args.repeats),
                                            str(args.settle), "1" if args.no_orbax else "0", floor_ports,
                                            args.compression],
                                           env=env, stdout=log, stderr=subprocess.STDOUT), log))
        deadline = time.monotonic() + args.timeout
        for p, log in procs:
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q, _ in procs:
                    q.kill()
            log.close()
        results = []
        for i in range(NPROC):
            path = os.path.join(work, f"out_{i}.json")
            if not os.path.exists(path):
                tail = open(os.path.join(work, f"log_{i}.txt"), errors="replace").read()[-3000:]
                sys.exit(f"process {i} failed:\n{tail}")
            results.append(json.load(open(path)))
        load_after = os.getloadavg()[0]

        def median(vals):
            vals = sorted(vals)
            n = len(vals)
            return (vals[n // 2] + vals[(n - 1) // 2]) / 2

        def job(which):
            """Per round, the job's time: its slowest process's."""
            return [max(r[which + "_s"][k] for r in results) for k in range(len(results[0][which + "_s"]))]

        def phases(which):
            """Median over rounds of each phase of that round's slowest process."""
            per = []
            for k in range(len(results[0][which + "_s"])):
                slowest = max(results, key=lambda r: r[which + "_s"][k])
                per.append(slowest[which + "_phases"][k])
            return ", ".join(f"{name} {median([p[name] for p in per]):.2f} s" for name in per[0])

        def worst(key):
            vals = [r[key] for r in results if key in r]
            return max(vals) if vals else float("nan")

        held = results[0]["held_bytes"]
        step_bytes = worst("step_bytes")
        # Per round, the job's time to durable with a peer copy minus without.
        replication_rounds = [p - n for p, n in zip(job("peer_total"), job("nopeer_total"))]
        replication_s = max(1e-9, median(replication_rounds))
        replication_floor_s = median(job("replication_floor"))
        rows = [
            ["state", f"{results[0]['state_bytes'] / GB:.2f} GB", f"{held / GB:.2f} GB held per process"],
            ["memcpy of a process's shards (numpy)", f"{worst('memcpy_numpy_s'):.2f} s",
             f"{held / worst('memcpy_numpy_s') / GB:.2f} GB/s (fresh huge pages)"],
            ["memcpy of a process's shards (4 KiB pages)", f"{worst('memcpy_small_pages_s'):.2f} s",
             f"{held / worst('memcpy_small_pages_s') / GB:.2f} GB/s; the stall ratios use the faster"],
            ["local save, no peer: stall (median)", f"{median(job('nopeer_stall')):.2f} s",
             f"{median(job('nopeer_stall')) / worst('memcpy_s'):.2f}x memcpy"],
            ["local save, no peer: to durable (median)", f"{median(job('nopeer_total')):.2f} s",
             f"rounds {' '.join(f'{x:.2f}' for x in job('nopeer_total'))}"],
            ["local save + peer copy: stall (median)", f"{median(job('peer_stall')):.2f} s",
             f"{median(job('peer_stall')) / worst('memcpy_s'):.2f}x memcpy"],
            ["local save + peer copy: to durable (median)", f"{median(job('peer_total')):.2f} s",
             f"rounds {' '.join(f'{x:.2f}' for x in job('peer_total'))}"],
            ["replication (ZeroMQ, localhost; median)", f"{replication_s:.2f} s",
             f"{step_bytes / replication_s / GB:.2f} GB/s for {step_bytes / GB:.2f} GB per process "
             f"(to durable with a peer copy minus without, per round: "
             f"{' '.join(f'{x:.2f}' for x in replication_rounds)}); "
             f"{replication_s / replication_floor_s:.2f}x the replication floor"],
            ["replication floor: every process's bytes to its peer over plain TCP into fresh RAM-disk pages, all at once (median)",
             f"{median(job('replication_floor')):.2f} s",
             f"{held / median(job('replication_floor')) / GB:.2f} GB/s per process; "
             f"rounds {' '.join(f'{x:.2f}' for x in job('replication_floor'))}"],
        ["recover after losing 1 host (median)", f"{median(job('recover')):.2f} s",
             f"{results[0]['recover_tier']} step {results[0]['recover_step']}, "
             f"bit-exact={all(r['recover_exact'] for r in results)}, "
             f"{max(r['recover_bytes_from_peers'] for r in results) / GB:.2f} GB from peers, "
             f"{min(r.get('recover_bytes_mapped', 0) for r in results) / GB:.2f}-"
             f"{max(r.get('recover_bytes_mapped', 0) for r in results) / GB:.2f} GB mapped per process; "
             f"rounds {' '.join(f'{x:.2f}' for x in job('recover'))}; phases of the slowest: {phases('recover')}"],
            ["restore all from persistent (median)", f"{median(job('persistent')):.2f} s",
             f"{results[0]['persistent_tier']} step {results[0]['persistent_step']}; "
             f"rounds {' '.join(f'{x:.2f}' for x in job('persistent'))}; phases of the slowest: {phases('persistent')}"],
            ["persistent / recovery", f"{median(job('persistent')) / median(job('recover')):.2f}x",
             "per round: " + " ".join(f"{p / r:.2f}x" for r, p in zip(job('recover'), job('persistent')))],
            ["floor: shards copied into fresh 4 KiB pages (median)", f"{median(job('floor')):.2f} s",
             f"every restore writes its bytes into fresh memory; persistent / floor "
             f"{median(job('persistent')) / median(job('floor')):.2f}x (the best ratio a recovery that copies could reach)"],
            ["fetch floor: the lost host's bytes over plain TCP into fresh RAM-disk pages (median)",
             f"{median(job('fetch_floor')):.2f} s",
             f"{held / median(job('fetch_floor')) / GB:.2f} GB/s; rounds {' '.join(f'{x:.2f}' for x in job('fetch_floor'))}; "
             f"persistent / fetch floor {median(job('persistent')) / median(job('fetch_floor')):.2f}x "
             f"(the best ratio a recovery that fetches a host's shards could reach); "
             f"recovery / fetch floor {median(job('recover')) / median(job('fetch_floor')):.2f}x"],
            ["sealed fetch floor: the same, each 16 MiB sealed (AES-256-GCM) and opened into the file (median)",
             f"{median(job('sealed_fetch_floor')):.2f} s",
             f"{held / median(job('sealed_fetch_floor')) / GB:.2f} GB/s; rounds "
             f"{' '.join(f'{x:.2f}' for x in job('sealed_fetch_floor'))}; sealed / plain fetch floor "
             f"{median(job('sealed_fetch_floor')) / median(job('fetch_floor')):.2f}x; recovery / sealed fetch floor "
             f"{median(job('recover')) / median(job('sealed_fetch_floor')):.2f}x (peer transfers are sealed: "
             f"docs/PEER_TRANSPORT.md)"],
        ]
        errors = [r["orbax_error"] for r in results if "orbax_error" in r]
        if errors:
            rows.append(["Orbax emergency manager", "failed", errors[0]])
        elif args.no_orbax:
            rows.append(["Orbax emergency manager", "skipped", "--no-orbax"])
        else:
            rows += [
                ["Orbax emergency: save stall", f"{worst('orbax_stall_s'):.2f} s", ""],
                ["Orbax emergency: to finished", f"{worst('orbax_total_s'):.2f} s", ""],
                ["Orbax emergency: restore (intact)", f"{worst('orbax_restore_s'):.2f} s",
                 f"step {results[0].get('orbax_restore_step')}"],
            ]
        rows.append(["device (persistent dir)", f"write {bw_write:.2f} GB/s", f"read {bw_read:.2f} GB/s ({tool})"])
        # The persistent restore against the device: the step's stored bytes
        # over its time, and what the processes had read from storage (not
        # the page cache) meanwhile, summed, per round.
        step_bytes = results[0]["persistent_step_bytes"]
        device_bytes = [sum(r["persistent_device_read_bytes"][i] for r in results)
                        for i in range(len(job("persistent")))]
        rates = [step_bytes / t / GB for t in job("persistent")]
        rows.append(["persistent restore against the device (median)", f"{median(rates):.2f} GB/s",
                     f"the step's {step_bytes / GB:.2f} GB stored over the restore's time: "
                     f"{median(rates) / bw_read:.0%} of the device's read; read from storage "
                     f"(/proc/<pid>/io, all processes): {' '.join(f'{b / GB:.2f}' for b in device_bytes)} GB "
                     f"per round; page cache dropped before each: {results[0]['caches_dropped']}; "
                     f"persistent tier compression: {args.compression}"])
        # Whether the restores are bound by the CPU: every process's CPU time
        # (its threads and the kernel's work for it) over the cores' time.
        for which, label in (("persistent", "persistent restore"), ("recover", "recovery")):
            busy = [sum(r[which + "_cpu_s"][k] for r in results) / (os.cpu_count() * t)
                    for k, t in enumerate(job(which))]
            rows.append([f"CPU busy during the {label} (median)", f"{median(busy):.0%}",
                         f"all processes' CPU time over {os.cpu_count()} cores x the restore's time; rounds "
                         + " ".join(f"{b:.0%}" for b in busy)])
        rows.append(["load average", f"{load_before:.1f} -> {load_after:.1f}", f"{os.cpu_count()} cores"])
        print_table(["measure", "value", "note"], rows)
        slowest = max(range(NPROC), key=lambda i: results[i]["recover_s"][-1])
        print(f"\nrecovery log of process {slowest} (the slowest in the last round):")
        for line in results[slowest]["recover_log"]:
            print("  " + line)
        if slowest != 1:
            # The lost host: its fetch and its read of the fetched step.
            print("recovery log of process 1 (the lost host) in the last round:")
            for line in results[1]["recover_log"]:
                print("  " + line)
        lost = results[1]["recover_phases"]
        print("phases of the lost host (process 1), median over rounds: " +
              ", ".join(f"{name} {median([p[name] for p in lost]):.2f} s" for name in lost[0]))
        print(f"persistent restore log of process {slowest}:")
        for line in results[slowest]["persistent_log"]:
            print("  " + line)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(local, ignore_errors=True)


if __name__ == "__main__":
    with results("emergency_bench"):
        main()
