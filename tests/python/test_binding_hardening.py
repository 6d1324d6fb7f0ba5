"""The Python bindings: blocking file I/O runs with the GIL released, so other
Python threads keep running; sizes from Python are overflow-checked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import cairn
from cairn import _core


def increments_during(call, repeats: int = 30) -> int:
    """How often a second Python thread ran while `call()` was inside C++.

    With a huge switch interval, the interpreter never forces the main thread
    to hand over the GIL; the other thread (which gives the GIL back after
    every increment) can only run while the main thread releases it itself.
    """
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # releases the GIL

    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)  # let it start
        seen = 0
        for _ in range(repeats):
            before = count[0]
            call()
            seen += count[0] - before
        return seen
    finally:
        stop.set()
        sys.setswitchinterval(old)
        t.join()


def test_detector_sees_a_call_that_holds_the_gil():
    """Control: pure-Python work holds the GIL, and is seen to."""
    blob = {"k": list(range(20000))}
    assert increments_during(lambda: json.dumps(blob), repeats=10) == 0


def make_root(tmp_path, steps: int):
    """A checkpoint root with `steps` finalized (marked) step directories."""
    root = tmp_path / "root"
    for s in range(steps):
        (root / str(s)).mkdir(parents=True)
        (root / str(s) / "_CHECKPOINT_METADATA").write_text("{}")
    return root


def test_list_steps_and_commit_release_the_gil(tmp_path):
    root = make_root(tmp_path, 2000)
    assert len(_core._orbax_list_steps(os.fspath(root))) == 2000
    assert increments_during(lambda: _core._orbax_list_steps(os.fspath(root)), repeats=10) > 0
    n = [0]

    def commit():
        n[0] += 1
        final = os.fspath(tmp_path / f"c{n[0]}")
        tmp, save_id = _core._orbax_begin_commit(final)
        try:
            _core._orbax_write_checkpoint_metadata(tmp, "h", [], 0, "{}")
        except BaseException:
            _core._orbax_abandon_commit(final, save_id)
            raise
        _core._orbax_finish_commit(final, save_id)

    assert increments_during(commit, repeats=20) > 0
    assert (tmp_path / "c1" / "_CHECKPOINT_METADATA").is_file()


def test_read_into_size_overflow_is_value_error(tmp_path):
    """2^61 uint64 elements are 2^64 bytes: the byte count used to wrap to 0,
    so an empty buffer passed the size check (run in a child process)."""
    code = textwrap.dedent(f"""
        import numpy as np, cairn
        a = cairn.create("file://{tmp_path}/a/|zarr3:", shape=[2**61], dtype="uint64",
                         chunks=[1024])
        # Control: a small read of the huge array works.
        out = np.empty(4, np.uint64)
        a._core.read_into([0], [4], out.view(np.uint8))
        assert out.tolist() == [0, 0, 0, 0]
        try:
            a._core.read_into([0], [2**61], np.empty(0, np.uint8))
        except ValueError as e:
            print("VALUE_ERROR", e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("VALUE_ERROR"), r.stdout
    assert "more bytes than fit in memory" in r.stdout
