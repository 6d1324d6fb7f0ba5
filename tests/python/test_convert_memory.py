"""`cairn convert` of a 4 GiB array within a 512 MiB budget: peak RSS, measured.

The source is one float32 array of 4 GiB in 64 MiB chunks, written as an
AXLearn step by cairn's zarr writer one chunk at a time (every row a
256-byte cycle: zstd keeps the disk use near 40 MiB, creation takes
seconds; convert_memory_helpers.py). Each conversion runs as a grandchild of
this process and its peak resident set is read from os.wait4's rusage:

  AXLearn -> Orbax (OCDBT + Zarr v3)   (this is also how the Orbax source is made)
  Orbax   -> AXLearn
  Orbax   -> safetensors

Each must stay within the budget plus a fixed overhead: the converter
charges every slab in flight its own bytes and the chunk buffers its reader
and writer hold for it, and keeps the block cache of freed buffers within
a quarter of the budget (src/cairn/engine/convert/convert_memory.h). The
fixed overhead is what does not grow with the checkpoint or its chunks:

  the process and its libraries                     ~16 MiB (a 16 KiB conversion peaks at 15)
  zstd contexts, up to 8 MiB for each of 4 workers   32 MiB
  the OCDBT node cache's cap                         64 MiB
  allocator slack, thread stacks                     16 MiB
                                                    -------
                                                    128 MiB

With 64 MiB chunks the old accounting (slab bytes only, codec buffers and
the block cache on top) peaked at 940 MiB here; a whole-array copy would
take 4 GiB. The bound is an upper bound on what the code may allocate, not
a timing, so it holds on a busy machine. The outputs are compared bit for
bit with the generator on sample rows read by TensorStore (zarr, zarr3 over
OCDBT) and the `safetensors` package.

The 16 GiB checkpoint of the issue (16 arrays of 1 GiB, the same generator)
is converted here too, AXLearn -> Orbax, within the same bound: both
formats compress the generated rows ~100x, so it takes seconds of zstd and
a few hundred MiB of disk. bench/convert_memory_bench.py runs both sizes
through every direction.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading

import numpy as np
import pytest
import tensorstore as ts
from safetensors import safe_open

from convert_memory_helpers import COLS, GiB, MiB, expected, sample_rows, write_axlearn_source
from test_cli import cairn_cli

BUDGET = 512 * MiB
FIXED_OVERHEAD = 128 * MiB
CHUNK_ROWS = 2048        # 64 MiB chunks
SIZE = 4 * GiB
STEP = 7
THREADS = 4              # the default on a 2-core machine, pinned for the bound above


# A small interpreter forks the child and reports its rusage. The child must
# not be forked from this (large) pytest process: Linux carries a process's
# peak RSS across exec, so a child forked from a 700 MiB pytest would report
# at least 700 MiB whatever it then does.
_MEASURE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"status": status, "maxrss_kib": usage.ru_maxrss}, f)
"""


def run_measured(argv, timeout=900):
    """Runs `argv` as a grandchild (see _MEASURE); returns (returncode,
    stdout, stderr, peak RSS bytes), the peak from its own rusage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix=".json") as report:
        p = subprocess.Popen([sys.executable, "-S", "-c", _MEASURE, report.name, *map(str, argv)],
                             stdout=out, stderr=err, start_new_session=True)
        timer = threading.Timer(timeout, lambda: os.killpg(p.pid, 9))
        timer.start()
        try:
            p.wait()
        finally:
            timer.cancel()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
        assert p.returncode == 0, f"the measuring process failed ({p.returncode}):\n{stderr[-3000:]}"
        r = json.load(open(report.name))
        return (os.waitstatus_to_exitcode(r["status"]), stdout, stderr,
                r["maxrss_kib"] * 1024)  # KiB on Linux


def convert(src, dst, to):
    """`cairn convert` with the test's budget; returns (summary, peak RSS)."""
    rc, out, err, peak = run_measured([
        cairn_cli(), "convert", str(src), str(dst), "--to", to, "--json",
        "--memory-budget", f"{BUDGET >> 20}MiB", "--threads", str(THREADS)])
    assert rc == 0, err[-3000:]
    return json.loads(out), peak


def assert_within_budget(peak, what, size=SIZE, holds_a_chunk=True):
    bound = BUDGET + FIXED_OVERHEAD
    assert peak <= bound, (f"{what}: peak RSS {peak / MiB:.0f} MiB for {size / GiB:.0f} GiB, "
                           f"bound {bound / MiB:.0f} MiB ({BUDGET / MiB:.0f} budget + "
                           f"{FIXED_OVERHEAD / MiB:.0f} fixed)")
    # Not vacuous: the conversion did hold a chunk (64 MiB) in memory. (Not
    # two: a chunk decoded straight into place and encoded from there needs
    # one, plus its encoded bytes.) Chunks passed along as stored are never
    # decoded: only their stored bytes are held.
    if holds_a_chunk:
        assert peak > CHUNK_ROWS * COLS * 4, f"{what}: peak RSS {peak / MiB:.0f} MiB"


def assert_sample_rows(read_rows, what, size=SIZE, k=0):
    rows = size // (COLS * 4)
    for r in sample_rows(rows):
        got = np.asarray(read_rows(r, r + 1)).view(np.uint32)
        assert np.array_equal(got, expected(k, r, r + 1)), f"{what}: row {r} differs"
    # A box across a chunk edge, not starting at column 0.
    r0 = CHUNK_ROWS - 3
    got = np.asarray(read_rows(r0, r0 + 6, 100, 300)).view(np.uint32)
    assert np.array_equal(got, expected(k, r0, r0 + 6, 100, 300)), f"{what}: box across a chunk edge"


@pytest.fixture(scope="module")
def orbax_source(tmp_path_factory):
    """The AXLearn step written by cairn, and the Orbax checkpoint converted from it."""
    root = tmp_path_factory.mktemp("convert-memory")
    write_axlearn_source(root / "axl", STEP, [SIZE], chunk_rows=CHUNK_ROWS)
    summary, peak = convert(root / "axl", root / "orbax", "orbax")
    item = root / "orbax" / f"step_{STEP:08d}" / "state"
    return root, item, summary, peak


def test_axlearn_to_orbax_stays_within_the_budget(orbax_source):
    root, item, summary, peak = orbax_source
    assert summary["bytes_written"] == SIZE and summary["source_format"] == "axlearn"
    assert_within_budget(peak, "AXLearn -> Orbax")
    arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": f"file://{item}/",
                                                  "path": "a0/"}}).result()
    assert arr.shape == (SIZE // (COLS * 4), COLS)
    assert_sample_rows(lambda r0, r1, c0=0, c1=COLS: arr[r0:r1, c0:c1].read().result(),
                       "Orbax (read by TensorStore)")


def test_orbax_to_axlearn_stays_within_the_budget(orbax_source, tmp_path):
    root, item, _, _ = orbax_source
    summary, peak = convert(item, tmp_path / "axl", "axlearn")
    assert summary["bytes_written"] == SIZE and summary["source_format"] == "orbax"
    # Orbax's zstd chunks are valid AXLearn chunks: they pass as stored,
    # read once (the source's ~40 MiB on disk), never decoded.
    assert summary["bytes_read"] < SIZE // 50, summary
    assert_within_budget(peak, "Orbax -> AXLearn", holds_a_chunk=False)
    arr = ts.open({"driver": "zarr", "kvstore": {
        "driver": "file", "path": str(tmp_path / "axl" / f"step_{STEP:08d}" / "gda" / "a0")}}).result()
    assert_sample_rows(lambda r0, r1, c0=0, c1=COLS: arr[r0:r1, c0:c1].read().result(),
                       "AXLearn (read by TensorStore)")


def test_orbax_to_safetensors_stays_within_the_budget(orbax_source, tmp_path):
    root, item, _, _ = orbax_source
    summary, peak = convert(item, tmp_path / "st", "safetensors")
    assert summary["bytes_written"] == SIZE
    assert_within_budget(peak, "Orbax -> safetensors")
    path = tmp_path / "st" / "model.safetensors"
    assert path.stat().st_size > SIZE
    with safe_open(str(path), "numpy") as f:
        sl = f.get_slice("a0")
        assert sl.get_shape() == [SIZE // (COLS * 4), COLS]
        assert_sample_rows(lambda r0, r1, c0=0, c1=COLS: sl[r0:r1, c0:c1],
                           "safetensors (read by the safetensors package)")
    os.unlink(path)  # 4 GiB: give the disk back now


def disk_bytes(root):
    """Bytes the files under `root` take on disk (allocated blocks)."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(root) for f in files)


def test_a_16_gib_checkpoint_stays_within_the_budget(tmp_path):
    # The second case: 16 arrays of 1 GiB (32 MiB chunks, so that
    # three are in flight within the budget), written by cairn chunk by
    # chunk, converted to Orbax (OCDBT + Zarr v3, zstd) with the same
    # budget; both sides compress ~100x, so the disk holds a few hundred
    # MiB, not 32 GiB.
    sizes = [GiB] * 16
    write_axlearn_source(tmp_path / "axl", STEP, sizes, chunk_rows=CHUNK_ROWS // 2)
    assert disk_bytes(tmp_path / "axl") < GiB
    summary, peak = convert(tmp_path / "axl", tmp_path / "orbax", "orbax")
    assert summary["bytes_written"] == 16 * GiB and summary["arrays"] == 16
    assert_within_budget(peak, "16 GiB AXLearn -> Orbax", size=16 * GiB)
    item = tmp_path / "orbax" / f"step_{STEP:08d}" / "state"
    assert disk_bytes(tmp_path / "orbax") < GiB
    # Sample rows of the first, a middle and the last array, read by
    # TensorStore: every array holds its own values (k), chunk for chunk.
    for k in (0, 9, 15):
        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": f"file://{item}/",
                                                      "path": f"a{k}/"}}).result()
        assert arr.shape == (GiB // (COLS * 4), COLS)
        assert_sample_rows(lambda r0, r1, c0=0, c1=COLS: arr[r0:r1, c0:c1].read().result(),
                           f"array a{k} of 16 (read by TensorStore)", size=GiB, k=k)


def test_the_measurement_sees_memory_a_child_holds():
    # Control for the bound: a child that touches 768 MiB (more than the
    # bound) is measured at that or more, so a converter that held more than
    # the bound could not pass.
    rc, out, err, peak = run_measured([
        sys.executable, "-c", "import numpy as np; a = np.ones(768 << 20, np.uint8); print(int(a.sum()))"],
        timeout=120)
    assert rc == 0 and out.strip() == str(768 << 20), err
    assert peak >= 768 * MiB > BUDGET + FIXED_OVERHEAD
