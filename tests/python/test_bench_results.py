"""Benchmarks write their latest table to bench/results/<bench>.md
themselves (bench/common.py `results`): dated, with the command and the
machine's cores, naming no machine path, and only for a run that finished."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import common  # noqa: E402


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["x_bench.py", "--dir", "/some/machine/disk", "--repeat", "3"])
    monkeypatch.delenv("CAIRN_BENCH_RESULTS", raising=False)
    return tmp_path


def test_a_finished_run_writes_its_table_dated_and_without_paths(results_dir, capsys):
    with common.results("x_bench"):
        print("device: 1.50 GB/s write, file:///some/machine/disk/ckpt")
        common.print_table(["case", "cairn", "orbax", "ratio"], [["save", "2.0 s", "6.0 s", "3.00x"]])
    text = (results_dir / "x_bench.md").read_text()
    assert text.startswith("# `x_bench`: latest run"), text
    assert re.search(r"- Date: \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", text), text
    assert "- Command: `python3 bench/x_bench.py --dir <path> --repeat 3`" in text, text
    assert "save | 2.0 s | 6.0 s | 3.00x" in text and "1.50 GB/s" in text, text
    assert "/some/machine" not in text and "file://<path>" in text, text
    assert "3.00x" in capsys.readouterr().out  # still printed as it runs


def test_a_run_that_fails_leaves_the_last_results(results_dir):
    (results_dir / "x_bench.md").write_text("the last good run\n")
    with pytest.raises(RuntimeError, match="device gone"):
        with common.results("x_bench"):
            print("half a table")
            raise RuntimeError("device gone")
    assert (results_dir / "x_bench.md").read_text() == "the last good run\n"


def test_a_trial_run_can_leave_the_results_alone(results_dir, monkeypatch):
    monkeypatch.setenv("CAIRN_BENCH_RESULTS", "0")
    with common.results("x_bench"):
        print("trial")
    assert not (results_dir / "x_bench.md").exists()


@pytest.mark.parametrize("bench", sorted(p.name for p in BENCH.glob("*_bench.py")), ids=str)
def test_every_benchmark_writes_its_own_results_file(bench):
    source = (BENCH / bench).read_text()
    assert f'with results("{bench[:-3]}"):' in source, f"bench/{bench} does not write bench/results/{bench[:-3]}.md"
