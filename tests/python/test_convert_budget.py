"""`cairn convert` reads each stored chunk once, and refuses a budget that
cannot hold one source chunk and one destination chunk, saying the least
budget in the form the CLI and Python take back.

The source is an AXLearn step as TensorStore's zarr driver writes it (zstd
level 1): one float32 array of 2 MiB in 8 chunks of 256 KiB.
"""
import json

import numpy as np
import pytest
import tensorstore as ts

import cairn
from test_cli import run_cli


def write_source(tmp_path):
    w = np.random.default_rng(28).standard_normal((512, 1024), dtype=np.float32)
    step = tmp_path / "axl" / "step_00000003"
    t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(step / "gda" / "w")},
                 "metadata": {"compressor": {"id": "zstd", "level": 1}, "shape": [512, 1024],
                              "chunks": [64, 1024], "dtype": "<f4"},
                 "create": True}).result()
    t.write(w).result()
    (step / "index").write_text(json.dumps([["step", 3], ["w", {"dtype": "float32",
                                                                "shape": "(512, 1024)"}]]))
    chunks = [p for p in (step / "gda" / "w").iterdir() if p.name != ".zarray"]
    assert len(chunks) == 8
    return w, sum(p.stat().st_size for p in chunks)


def read_dest(path):
    return ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}}
                   ).result().read().result()


def test_a_budget_below_one_source_and_one_destination_chunk_is_refused(tmp_path):
    write_source(tmp_path)
    r = run_cli("convert", str(tmp_path / "axl"), str(tmp_path / "out"), "--to", "axlearn",
                "--memory-budget", "511KiB")
    assert r.returncode != 0
    for part in ["array `w`", "[64, 1024]", "memory budget of 511KiB is too small",
                 "--memory-budget 512KiB", "memory_budget=524288"]:
        assert part in r.stderr, r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("index"))
    with pytest.raises(ValueError, match=r"array `w`.*--memory-budget 512KiB, memory_budget=524288"):
        cairn.convert(tmp_path / "axl", tmp_path / "out_py", to="axlearn", memory_budget=511 << 10)


@pytest.mark.parametrize("budget", ["512KiB", "1MiB", "64MiB"])
def test_each_stored_chunk_is_read_once_at_the_least_budget_and_up(tmp_path, budget):
    w, stored = write_source(tmp_path)
    r = run_cli("convert", str(tmp_path / "axl"), str(tmp_path / "out"), "--to", "axlearn",
                "--memory-budget", budget, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    # The least budget once cut each chunk in four and read it four times.
    assert summary["bytes_read"] == stored, f"read {summary['bytes_read'] / stored:.2f}x the input"
    got = read_dest(tmp_path / "out" / "step_00000003" / "gda" / "w")
    assert got.dtype == w.dtype and got.tobytes() == w.tobytes()
