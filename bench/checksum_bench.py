"""What checksums cost a restore from a RAM disk (issue 25: at most 5%).

A state of `--bytes` (1 GiB by default) in 16 float32 arrays of random
values is saved uncompressed twice on the RAM disk (`--dir`, default
/dev/shm), both as OCDBT + zarr3 with one chunk per array:

- by cairn (`compression="none"`): every chunk ends in its CRC-32C (the
  zarr3 `crc32c` codec), which every read verifies;
- by Orbax (`use_compression=False`): no checksum at all.

Both are restored by cairn into fresh numpy arrays (the copy path; the
median of `--repeat` interleaved runs), and by Orbax for reference. The RAM
disk's own bandwidth is measured in the same run: one file of the same size
read into a fresh buffer (os.readv), and a memcpy of the state.

Then the mapped path: cairn.emergency saves the state to a local tier on the
RAM disk (uncompressed, values page-aligned) and restores it by mapping each
whole-array chunk (no copy); each chunk's CRC-32C is checked before it is
handed out, which is one read pass over bytes a mapping alone never touches.
Printed beside it: one read pass over the restored arrays (numpy), the
floor of any check of the bytes.

    python bench/checksum_bench.py [--bytes 1073741824] [--dir /dev/shm]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, interleaved_medians, results  # noqa: E402


def state_of(total_bytes: int, arrays: int = 16):
    rows = max(1, total_bytes // arrays // (4 * 4096))
    rng = np.random.default_rng(25)
    return {f"layer_{i:02d}": rng.integers(0, 1 << 32, size=(rows, 4096), dtype=np.uint32).view(np.float32)
            for i in range(arrays)}


def ram_disk_read(directory: str, nbytes: int, repeat: int) -> float:
    """GB/s of reading one file of `nbytes` from the RAM disk into fresh memory."""
    path = os.path.join(directory, "bandwidth.bin")
    block = np.random.default_rng(1).integers(0, 255, size=64 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        for _ in range(max(1, nbytes // len(block))):
            f.write(block)
    size = os.path.getsize(path)
    times = []
    for _ in range(repeat):
        buf = np.empty(size, np.uint8)
        fd = os.open(path, os.O_RDONLY)
        t0 = time.perf_counter()
        os.readv(fd, [memoryview(buf)])
        times.append(time.perf_counter() - t0)
        os.close(fd)
    os.unlink(path)
    return size / statistics.median(times) / GB


def memcpy_gbs(state, repeat: int) -> float:
    nbytes = sum(a.nbytes for a in state.values())
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for a in state.values():
            np.copy(a)
        times.append(time.perf_counter() - t0)
    return nbytes / statistics.median(times) / GB


def mapped_restore(state, top: str, repeat: int):
    """(median restore seconds, median read-pass seconds, bytes mapped) of
    the emergency manager's mapped restore of `state` from `top`."""
    import cairn

    local, persistent = os.path.join(top, "local"), os.path.join(top, "persistent")
    mngr = cairn.emergency.CheckpointManager(local, persistent, local_save_interval_steps=1, local_max_to_keep=1,
                                             persistent_save_interval_steps=1000)
    try:
        assert mngr.save(1, state)
        mngr.wait_until_finished()
        restores, passes = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            restored = mngr.restore()
            restores.append(time.perf_counter() - t0)
            for k, v in state.items():
                assert restored[k].tobytes() == v.tobytes(), k
            t0 = time.perf_counter()
            for v in restored.values():
                np.bitwise_xor.reduce(v.view(np.uint64).ravel())
            passes.append(time.perf_counter() - t0)
            mapped = mngr.last_restore["bytes_mapped"]
            del restored
        return statistics.median(restores), statistics.median(passes), mapped
    finally:
        mngr.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--dir", default="/dev/shm", help="a RAM disk")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    import cairn
    import orbax.checkpoint as ocp

    state = state_of(args.bytes)
    nbytes = sum(a.nbytes for a in state.values())
    top = tempfile.mkdtemp(prefix="cairn-checksum-bench-", dir=args.dir)
    try:
        crc_item = os.path.join(top, "crc", "state")
        plain_item = os.path.join(top, "plain", "state")
        cairn.save(crc_item, state, compression="none")
        handler = ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True, use_compression=False)
        ocp.Checkpointer(handler).save(plain_item, args=ocp.args.PyTreeSave(state))

        def check(restored):
            for k, v in state.items():
                assert np.asarray(restored[k]).tobytes() == v.tobytes(), k

        check(cairn.restore(crc_item))
        check(cairn.restore(plain_item))
        orbax_restore = lambda: ocp.Checkpointer(handler).restore(plain_item)  # noqa: E731
        jobs = {
            "cairn, crc32c": (lambda: cairn.restore(crc_item), None),
            "cairn, no checksum": (lambda: cairn.restore(plain_item), None),
            "orbax, no checksum": (orbax_restore, None),
        }
        medians = interleaved_medians(jobs, args.repeat)
        disk = ram_disk_read(top, nbytes, args.repeat)
        copy = memcpy_gbs(state, args.repeat)
        mapped = mapped_restore(state, top, args.repeat)
    finally:
        shutil.rmtree(top, ignore_errors=True)

    print(f"state: {nbytes / GB:.2f} GB in {len(state)} arrays; RAM disk {args.dir}; "
          f"load average {os.getloadavg()[0]:.2f}; median of {args.repeat}")
    print(f"RAM disk read into fresh memory: {disk:.2f} GB/s; memcpy: {copy:.2f} GB/s")
    print(f"{'restore (copy path)':<24} {'seconds':>8} {'GB/s':>7} {'/ RAM disk':>10}")
    for name, s in medians.items():
        print(f"{name:<24} {s:8.3f} {nbytes / s / GB:7.2f} {nbytes / s / GB / disk:10.2f}")
    cost = medians["cairn, crc32c"] / medians["cairn, no checksum"] - 1
    print(f"checksum cost: {cost * 100:+.1f}% of cairn's restore without checksums")
    restore_s, read_pass_s, bytes_mapped = mapped
    print(f"mapped restore (cairn.emergency local tier, {bytes_mapped / GB:.2f} GB mapped): {restore_s:.3f} s "
          f"with each chunk's CRC-32C checked; one numpy read pass over the same bytes: {read_pass_s:.3f} s")


if __name__ == "__main__":
    with results("checksum_bench"):
        main()
