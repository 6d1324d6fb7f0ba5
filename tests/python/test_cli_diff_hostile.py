"""`cairn diff` on checkpoints whose metadata declares a huge, almost empty
array: a 600-byte zarr.json (or AXLearn index and .zarray) declaring shape
[2^62] in chunks of 4, one chunk stored. diff compares the chunks stored on
either side and the fill values once, so it answers in well under a second;
it used to read the declared 2^60 chunks one by one (hours). Built as
test_cli_verify_hostile.py builds its hostile checkpoints."""

import json
import shutil
import subprocess
import time

import numpy as np
import pytest

import cairn
from test_cli import cairn_cli

HUGE = 2**62


def diff(a, b):
    """(exit status, parsed JSON report or None, stdout + stderr, seconds)."""
    start = time.monotonic()
    proc = subprocess.run([cairn_cli(), "diff", "--json", str(a), str(b)],
                          capture_output=True, text=True, timeout=30)
    seconds = time.monotonic() - start
    report = None
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
    return proc.returncode, report, proc.stdout + proc.stderr, seconds


def arrays(report):
    return {a["path"]: a for a in report["arrays"]}


def orbax_hostile(path, w, fill_value=None):
    """A cairn-written Orbax item (dirs + zarr3) whose `w` is declared
    [2^62] in chunks of 4; its one stored chunk holds `w`."""
    cairn.save(str(path), {"w": np.asarray(w, np.float32), "b": np.ones(3, np.int32)},
               use_ocdbt=False, use_zarr3=True)
    zarr_json = path / "w" / "zarr.json"
    md = json.loads(zarr_json.read_text())
    md["shape"] = [HUGE]
    md["chunk_grid"]["configuration"]["chunk_shape"] = [4]
    md["codecs"][0]["configuration"]["chunk_shape"] = [4]  # the shard's one inner chunk
    if fill_value is not None:
        md["fill_value"] = fill_value
    zarr_json.write_text(json.dumps(md))
    assert zarr_json.stat().st_size < 700
    return path


def axlearn_hostile(tmp_path, name, w):
    """An AXLearn step (index + gda/ zarr v2) whose tensor `w` is declared
    [2^62] in chunks of 8; its one stored chunk holds `w`."""
    src = tmp_path / (name + "_src")
    cairn.save(str(src), {"w": np.asarray(w, np.float32)}, use_ocdbt=False)
    axl = tmp_path / name
    cairn.convert(str(src), str(axl), to="axlearn")
    (step,) = axl.glob("step_*")
    index = json.loads((step / "index").read_text())
    for entry in index:
        if entry[0] == "w":
            entry[1]["shape"] = f"({HUGE},)"
    (step / "index").write_text(json.dumps(index))
    zarray = step / "gda" / "w" / ".zarray"
    md = json.loads(zarray.read_text())
    md["shape"] = [HUGE]
    zarray.write_text(json.dumps(md))
    return axl


def test_control_diff_of_normal_checkpoints(tmp_path):
    """The same checkpoints before the metadata is edited: identical, and
    one value apart."""
    cairn.save(str(tmp_path / "a"), {"w": np.arange(4, dtype=np.float32)}, use_ocdbt=False,
               use_zarr3=True)
    cairn.save(str(tmp_path / "b"), {"w": np.array([0, 1.5, 2, 3], np.float32)},
               use_ocdbt=False, use_zarr3=True)
    rc, report, out, _ = diff(tmp_path / "a", tmp_path / "a")
    assert rc == 0 and report["identical"], out
    rc, report, out, _ = diff(tmp_path / "a", tmp_path / "b")
    assert rc == 1, out
    assert arrays(report)["w"]["num_different"] == 1, out


def test_huge_declared_shape_against_itself_is_identical(tmp_path):
    a = orbax_hostile(tmp_path / "a", np.arange(4))
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    for other in (a, copy):
        rc, report, out, seconds = diff(a, other)
        assert seconds < 10, "diff walked the declared chunk grid"
        assert rc == 0, out
        assert report["identical"], out
        w = arrays(report)["w"]
        assert w["same"] and w["values_compared"] and w["shape_a"] == [HUGE], out


def test_huge_declared_shape_with_one_stored_chunk_changed_differs(tmp_path):
    a = orbax_hostile(tmp_path / "a", np.arange(4))
    b = orbax_hostile(tmp_path / "b", [0, 1.5, 2, 3])
    rc, report, out, seconds = diff(a, b)
    assert seconds < 10, "diff walked the declared chunk grid"
    assert rc == 1, out
    assert not report["identical"]
    by_path = arrays(report)
    assert by_path["b"]["same"], out
    w = by_path["w"]
    assert not w["same"] and w["num_different"] == 1, out
    assert w["max_abs"] == pytest.approx(0.5) and w["max_rel"] == pytest.approx(0.5 / 1.5)
    # The text report names the array.
    proc = subprocess.run([cairn_cli(), "diff", str(a), str(b)], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "w: 1 values differ, max abs 0.5," in proc.stdout, proc.stdout


def test_huge_declared_shape_with_other_fill_value_differs_where_nothing_is_stored(tmp_path):
    """Fill values 0 and 7: every element stored on neither side (all but
    the 4 of the stored chunk) differs, and the array is named."""
    a = orbax_hostile(tmp_path / "a", np.arange(4))
    b = orbax_hostile(tmp_path / "b", np.arange(4), fill_value=7.0)
    rc, report, out, seconds = diff(a, b)
    assert seconds < 10, "diff walked the declared chunk grid"
    assert rc == 1, out
    w = arrays(report)["w"]
    assert not w["same"] and w["num_different"] == HUGE - 4, out
    assert w["max_abs"] == 7 and w["max_rel"] == 1, out
    assert arrays(report)["b"]["same"], out


def test_huge_declared_shape_in_axlearn_steps(tmp_path):
    a = axlearn_hostile(tmp_path, "a", np.arange(8))
    b = axlearn_hostile(tmp_path, "b", [0, 1, 2, 3, 4, 5, 6, 9])
    rc, report, out, seconds = diff(a, a)
    assert seconds < 10, "diff walked the declared chunk grid"
    assert rc == 0 and report["identical"], out
    assert arrays(report)["w"]["shape_a"] == [HUGE], out
    rc, report, out, seconds = diff(a, b)
    assert seconds < 10, "diff walked the declared chunk grid"
    assert rc == 1, out
    w = arrays(report)["w"]
    assert w["num_different"] == 1 and w["max_abs"] == 2, out
    # Against the Orbax one, by name across formats, with chunks of 4
    # against chunks of 8: elements 4..7 are A's fill value 0 against B's
    # stored 4, 5, 6, 7; the rest is fill value against fill value.
    o = orbax_hostile(tmp_path / "o", np.arange(4))
    rc, report, out, seconds = diff(o, a)
    assert seconds < 10, "diff walked the declared chunk grid"
    assert rc == 1, out
    assert report["only_in_a"] == ["b"], out
    w = arrays(report)["w"]
    assert w["num_different"] == 4 and w["max_abs"] == 7 and w["max_rel"] == 1, out
