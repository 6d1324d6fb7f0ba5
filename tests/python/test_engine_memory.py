"""Memory bounds of cairn's save and restore, measured in a child process.

The peak resident set (VmHWM of /proc/self/status, reset with clear_refs
right before the operation) must stay within what the operation may hold:

- save: the caller's buffers (resident before the save) + the memory budget
  + the encoders' working memory (one chunk's encoded bytes per pool thread,
  ByteBudget::Overdraw) + a fixed overhead;
- restore onto a sharded target (one column block of a row-chunked array,
  as one of 8 devices needs it): the target's buffer + what the reads hold
  in flight (one coalesced read of at most 8 MiB, or one chunk, per I/O
  thread: 8) + a fixed overhead. A restore that builds whole-array copies
  (256 MiB here) cannot pass.

The figures are deterministic: the state is fixed, CAIRN_THREADS pins the
pool, and every bound is an upper bound on what the code may allocate, not
a timing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

MiB = 1 << 20
ROWS, COLS = 8192, 8192             # one float32 array of 256 MiB
CHUNK = 8 * MiB                     # chunk_byte_size: 32 chunks of 8 MiB
POOL_THREADS = 4                    # CAIRN_THREADS in the child
IO_THREADS = 8                      # the kvstore read pools (file, OCDBT)
FIXED_OVERHEAD = 48 * MiB           # allocator slack, thread stacks, metadata, page tables
# A save also grows the pool threads' zstd contexts to the chunk size, keeps
# freed chunk buffers in glibc's per-thread arenas (its mmap threshold rises
# to the chunk size after the first free) and touches the OCDBT writer's
# tables: measured 68 to 109 MiB in all on this 256 MiB state, against
# budget + encoders = 49 MiB. The bound stays far below a whole-state copy.
SAVE_FIXED_OVERHEAD = 96 * MiB

CHILD_COMMON = textwrap.dedent(f"""
    import gc, json, os, sys
    import numpy as np
    import cairn

    def status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError(field + " missing from /proc/self/status")

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS

    def state():
        a = np.arange({ROWS} * {COLS}, dtype=np.uint32).reshape({ROWS}, {COLS})
        a *= np.uint32(2654435761)  # scrambled, so zstd has real work
        return a.view(np.float32)

    # Warm up: libraries, thread pools and their stacks count as baseline.
    d = sys.argv[1]
    cairn.save(os.path.join(d, "warm"), {{"w": np.ones((64, 64), np.float32)}})
    cairn.restore(os.path.join(d, "warm"))
""")

CHILD_SAVE = CHILD_COMMON + textwrap.dedent(f"""
    w = state()
    gc.collect()
    reset_peak()
    base = status("VmRSS")
    # The control copies the state whole first, as a save that snapshots
    # everything at once would.
    copy = w.copy() if sys.argv[3] == "copy" else None
    cairn.save(os.path.join(d, "ckpt"), {{"w": w}}, compression="default",
               memory_budget=int(sys.argv[2]), chunk_byte_size={CHUNK})
    print(json.dumps({{"base": base, "peak": status("VmHWM")}}))
""")

CHILD_RESTORE = CHILD_COMMON + textwrap.dedent(f"""
    from cairn import _core, _dtypes
    w = state()
    cairn.save(os.path.join(d, "ckpt"), {{"w": w}}, compression=sys.argv[2],
               chunk_byte_size={CHUNK})
    del w
    gc.collect()
    cols = {COLS} // 8
    out = np.empty(({ROWS}, cols), np.float32)
    out.fill(0)  # resident before the restore: the target's own memory
    reset_peak()
    base = status("VmRSS")
    _core._engine_restore(os.path.join(d, "ckpt"), "",
                          [("w", "float32", [([0, 3 * cols], _dtypes.raw_view(out))])])
    peak = status("VmHWM")
    same = bool(np.array_equal(out.view(np.uint32), state()[:, 3 * cols:4 * cols].view(np.uint32)))  # bits: the state holds NaNs
    print(json.dumps({{"base": base, "peak": peak, "same": same}}))
""")


def run_child(code, tmp_path, *args):
    env = dict(os.environ, CAIRN_THREADS=str(POOL_THREADS))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), *map(str, args)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_save_peak_is_buffers_plus_budget_plus_encoders(tmp_path):
    budget = 16 * MiB
    r = run_child(CHILD_SAVE, tmp_path, budget, "save")
    grew = r["peak"] - r["base"]
    encoders = POOL_THREADS * (CHUNK + CHUNK // 64 + 4096)
    bound = budget + encoders + SAVE_FIXED_OVERHEAD
    # A save that snapshots the whole state (256 MiB) at once cannot pass.
    assert bound < ROWS * COLS * 4
    assert grew <= bound, f"save grew the resident set by {grew / MiB:.0f} MiB, bound {bound / MiB:.0f} MiB"
    assert grew > 0


def test_save_control_a_whole_state_copy_fails_the_bound(tmp_path):
    # Control: the same measurement of the same save, with a whole copy of
    # the state made first (what a save that snapshots everything at once
    # holds), exceeds the bound above. (A save with a budget that fits the
    # state is no control: its writers free chunks while the snapshot is
    # still being taken, by how much depends on the machine's load.)
    r = run_child(CHILD_SAVE, tmp_path, 16 * MiB, "copy")
    grew = r["peak"] - r["base"]
    assert grew > 16 * MiB + POOL_THREADS * (CHUNK + CHUNK // 64 + 4096) + SAVE_FIXED_OVERHEAD


def test_restore_onto_a_sharded_target_holds_no_whole_array(tmp_path):
    r = run_child(CHILD_RESTORE, tmp_path, "none")
    assert r["same"], "restored block differs"
    grew = r["peak"] - r["base"]
    bound = IO_THREADS * CHUNK + FIXED_OVERHEAD
    assert bound < ROWS * COLS * 4  # a whole-array copy cannot pass
    assert grew <= bound, f"restore grew the resident set by {grew / MiB:.0f} MiB, bound {bound / MiB:.0f} MiB"


def test_restore_compressed_bound_counts_decoded_chunks(tmp_path):
    # zstd: each I/O thread holds a compressed chunk and its decoded bytes.
    r = run_child(CHILD_RESTORE, tmp_path, "default")
    assert r["same"], "restored block differs"
    grew = r["peak"] - r["base"]
    bound = IO_THREADS * 2 * CHUNK + FIXED_OVERHEAD
    assert bound < ROWS * COLS * 4
    assert grew <= bound, f"restore grew the resident set by {grew / MiB:.0f} MiB, bound {bound / MiB:.0f} MiB"
