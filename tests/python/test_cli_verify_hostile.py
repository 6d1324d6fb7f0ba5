"""`cairn verify` on hostile checkpoints: a symlink pointing outside the
checkpoint, a FIFO where a chunk or metadata file should be, a `_METADATA`
nested thousands of levels deep, directories nested past the walk limit.
Each case must be reported with a non-zero exit status, within a timeout,
without a crash (the CLI runs in a subprocess, so a hang or a signal fails
only its own test). Every case has the same checkpoint unmodified as its
control, which must verify clean."""

import json
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

import cairn
from test_cli import cairn_cli

TIMEOUT = 60


def verify(path, *extra):
    """(exit status, parsed JSON report or None, stdout + stderr)."""
    proc = subprocess.run([cairn_cli(), "verify", "--json", *extra, str(path)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    report = None
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
    return proc.returncode, report, proc.stdout + proc.stderr


def kinds(report):
    return {p["kind"] for p in report["problems"]}


@pytest.fixture(params=[True, False], ids=["ocdbt", "dirs"])
def checkpoint(request, tmp_path):
    """A CheckpointManager-style root with step 1 (item `default`) written by
    cairn, and a directory outside it holding a secret."""
    root = tmp_path / "root"
    tree = {"w": np.arange(24, dtype=np.float32).reshape(4, 6), "b": np.ones(3, np.int32)}
    cairn.save(str(root), tree, step=1, use_ocdbt=request.param, use_zarr3=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("do not read me")
    return root, outside, request.param


def test_control_clean_checkpoint_verifies(checkpoint):
    root, _, _ = checkpoint
    rc, report, out = verify(root)
    assert rc == 0, out
    assert report["ok"] and report["problems"] == [], out
    assert report["arrays"] == 2


def test_symlink_to_outside_directory_is_reported(checkpoint):
    root, outside, _ = checkpoint
    link = root / "1" / "default" / "escape"
    os.symlink(outside, link)
    rc, report, out = verify(root)
    assert rc == 1, out
    assert "not_a_regular_file" in kinds(report), out
    hits = [p for p in report["problems"] if p["kind"] == "not_a_regular_file"]
    assert [p["file"] for p in hits] == [os.path.join(os.path.realpath(link.parent), "escape")], out
    assert "symbolic link" in hits[0]["message"]
    assert "secret" not in out
    # Control: the link removed, the same checkpoint is clean again.
    link.unlink()
    assert verify(root)[0] == 0


def test_symlinked_item_directory_is_reported_not_followed(checkpoint, tmp_path):
    root, _, _ = checkpoint
    item = root / "1" / "default"
    moved = tmp_path / "moved_item"
    shutil.move(str(item), moved)
    os.symlink(moved, item)
    rc, report, out = verify(root)
    assert rc == 1, out
    files = [p["file"] for p in report["problems"] if p["kind"] == "not_a_regular_file"]
    assert files == [os.path.join(os.path.realpath(item.parent), "default")], out


def test_fifo_at_a_chunk_or_metadata_key_does_not_hang(checkpoint):
    root, _, ocdbt = checkpoint
    item = root / "1" / "default"
    if ocdbt:
        target = item / "manifest.ocdbt"
    else:
        target = next(p for p in sorted((item / "w").rglob("*")) if p.is_file() and p.name != "zarr.json")
    target.unlink()
    os.mkfifo(target)
    rc, report, out = verify(root)
    assert rc == 1, out
    assert {"not_a_regular_file", "not_verified"} <= kinds(report), out
    assert any(p["file"] == os.path.realpath(target) for p in report["problems"]), out


def test_fifo_as_step_metadata_does_not_hang(checkpoint):
    root, _, _ = checkpoint
    md = root / "1" / "_CHECKPOINT_METADATA"
    md.unlink()
    os.mkfifo(md)
    rc, report, out = verify(root)
    assert rc == 1, out
    assert [p["file"] for p in report["problems"] if p["kind"] == "not_a_regular_file"] == \
        [os.path.join(os.path.realpath(md.parent), md.name)], out


def test_deeply_nested_metadata_is_reported_without_crashing(checkpoint):
    root, _, _ = checkpoint
    md_path = root / "1" / "default" / "_METADATA"
    md = json.loads(md_path.read_text())
    depth = 20000
    deep_key = "(" + ", ".join(["'a'"] * depth) + ",)"
    md["tree_metadata"][deep_key] = {
        "key_metadata": [{"key": "a", "key_type": 2}] * depth,
        "value_metadata": {"value_type": "np.ndarray", "skip_deserialize": False}}
    md["custom_metadata"] = "NESTED"  # nested lists too (too deep for Python's json)
    md_path.write_text(json.dumps(md).replace('"NESTED"', "[" * depth + "]" * depth))
    rc, report, out = verify(root)
    assert rc == 1, out[-2000:]  # not a negative status: no signal
    # Rejected as metadata (a depth limit) or as an array that cannot exist.
    assert kinds(report) & {"bad_metadata", "bad_array"}, out[-2000:]
    assert not report["ok"]


def test_directories_nested_past_the_walk_limit_are_reported(checkpoint):
    root, _, _ = checkpoint
    d = root / "1" / "default" / "junk"
    for _ in range(70):
        d = d / "d"
    d.mkdir(parents=True)
    rc, report, out = verify(root)
    assert rc == 1, out
    assert "too_deep" in kinds(report), out


def test_a_huge_declared_shape_is_verified_by_the_chunks_stored(tmp_path):
    """A 600-byte zarr.json declaring shape [2^62] with chunks of 4: verify
    checks the one stored chunk and counts the 2^60 - 1 missing ones as a
    range instead of looking each up (which took minutes)."""
    ck = tmp_path / "ck"
    cairn.save(str(ck), {"w": np.arange(4, dtype=np.float32)}, use_ocdbt=False, use_zarr3=True)
    rc, report, out = verify(ck)  # control: the array as written
    assert rc == 0 and report["ok"] and report["chunks"] == 1, out
    zarr_json = ck / "w" / "zarr.json"
    md = json.loads(zarr_json.read_text())
    md["shape"] = [2**62]
    md["chunk_grid"]["configuration"]["chunk_shape"] = [4]
    md["codecs"][0]["configuration"]["chunk_shape"] = [4]  # the shard's one inner chunk
    zarr_json.write_text(json.dumps(md))
    assert zarr_json.stat().st_size < 700
    start = time.monotonic()
    proc = subprocess.run([cairn_cli(), "verify", "--json", str(ck)], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 10, "verify walked the declared chunk grid"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["chunks"] == 1  # the stored one, read and intact
    problems = report["problems"]
    assert [(p["kind"], p["key"]) for p in problems[:20]] == [("missing_chunk", f"w/c/{i}") for i in range(1, 21)]
    assert len(problems) == 21 and problems[20]["kind"] == "more" and problems[20]["array"] == "w", problems[20]
    cells = 2**60
    assert problems[20]["message"] == (
        f"{cells - 1 - 20} more damaged or missing chunks in this array; "
        f"{cells - 1} of {cells} chunks are missing (row-major ranges: c/1..c/{cells - 1})"), problems[20]


def test_a_huge_declared_shape_in_an_axlearn_step_is_verified_by_the_chunks_stored(tmp_path):
    """The same for AXLearn's layout (index + gda/ zarr v2): the tensor's one
    stored chunk is checked, the 2^59 - 1 missing ones counted as a range."""
    cairn.save(str(tmp_path / "src"), {"w": np.arange(8, dtype=np.float32)}, use_ocdbt=False)
    axl = tmp_path / "axl"
    cairn.convert(str(tmp_path / "src"), str(axl), to="axlearn")
    (step,) = axl.glob("step_*")
    rc, report, out = verify(axl)  # control: as converted
    assert rc == 0 and report["ok"], out
    index = json.loads((step / "index").read_text())
    for entry in index:
        if entry[0] == "w":
            entry[1]["shape"] = f"({2**62},)"
    (step / "index").write_text(json.dumps(index))
    zarray = step / "gda" / "w" / ".zarray"
    md = json.loads(zarray.read_text())
    md["shape"] = [2**62]
    zarray.write_text(json.dumps(md))
    start = time.monotonic()
    proc = subprocess.run([cairn_cli(), "verify", "--json", str(axl)], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 10, "verify walked the declared chunk grid"
    assert proc.returncode == 1, proc.stdout + proc.stderr
    problems = json.loads(proc.stdout.splitlines()[-1])["problems"]
    cells = 2**62 // 8
    assert [(p["kind"], p["key"]) for p in problems[:20]] == [
        ("missing_chunk", f"{step.name}/gda/w/{i}") for i in range(1, 21)]
    assert len(problems) == 21 and problems[20]["kind"] == "more", problems[20]
    assert problems[20]["message"] == (
        f"{cells - 1} of {cells} chunks are missing (row-major ranges: 1..{cells - 1})"), problems[20]
