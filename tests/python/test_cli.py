"""The `cairn` command installed with the package: --help, `cairn ls`."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import numpy as np

import cairn
from conftest import cairn_url, random_array


def cairn_cli():
    exe = os.path.join(sysconfig.get_path("scripts"), "cairn")
    if not os.access(exe, os.X_OK):
        exe = shutil.which("cairn")
    assert exe, "the `cairn` command is not installed (pip install . installs it)"
    return exe


def run(*args):
    return subprocess.run([cairn_cli(), *args], capture_output=True, text=True, timeout=60)


def run_cli(*args, env=None, timeout=300):
    """The `cairn` command with `args` (other tests' runner: an environment
    and a longer timeout for conversions)."""
    return subprocess.run([cairn_cli(), *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_help():
    r = run("--help")
    assert r.returncode == 0
    assert "ls" in r.stdout
    r = run("ls", "--help")
    assert r.returncode == 0 and "--json" in r.stdout
    r = run("no-such-command")
    assert r.returncode != 0


def test_python_dash_m_runs_the_command():
    r = subprocess.run([sys.executable, "-m", "cairn", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "ls" in r.stdout


def test_ls_keys(tmp_path):
    s = cairn.kvstore.open(f"file://{tmp_path}/")
    s.put_many({"b/x": b"12345", "a": b"", "c": b"xyz"})
    r = run("ls", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = [line.split() for line in r.stdout.splitlines()]
    assert lines == [["SIZE", "KEY"], ["0", "B", "a"], ["5", "B", "b/x"], ["3", "B", "c"]]
    r = run("ls", "--json", f"file://{tmp_path}/")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"key": "a", "bytes": 0}, {"key": "b/x", "bytes": 5},
                                    {"key": "c", "bytes": 3}]


def test_ls_ocdbt(tmp_path):
    s = cairn.kvstore.open(f"file://{tmp_path}/db/|ocdbt:")
    s.put_many({"k1": b"1", "k2": b"22"})
    r = run("ls", "--json", f"file://{tmp_path}/db/|ocdbt:")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"key": "k1", "bytes": 1}, {"key": "k2", "bytes": 2}]


def test_ls_array(tmp_path):
    a = cairn.create(cairn_url(tmp_path, "zarr3"), shape=[10, 6], dtype="bfloat16",
                     chunks=[4, 6])
    a.write(random_array("bfloat16", (10, 6), seed=41))
    stored = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
    for url in [cairn_url(tmp_path, "zarr3"), str(tmp_path)]:
        r = run("ls", "--json", url)
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)
        assert rows == [{"path": f"file://{tmp_path}/|zarr3:", "dtype": "bfloat16",
                         "shape": [10, 6], "chunks": [4, 6], "bytes": stored}]
        r = run("ls", url)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["PATH", "DTYPE", "SHAPE", "CHUNKS", "SIZE",
                                    f"file://{tmp_path}/|zarr3:", "bfloat16", "[10,6]",
                                    "[4,6]", str(stored), "B"]


def test_ls_errors(tmp_path):
    r = run("ls", f"file://{tmp_path}/nothing/|zarr3:")
    assert r.returncode != 0
    assert "nothing" in r.stderr and r.stdout == ""
    r = run("ls", "bogus://x/")
    assert r.returncode != 0 and "bogus://x/" in r.stderr
    (tmp_path / "arr").mkdir()
    (tmp_path / "arr" / "zarr.json").write_text("{not json")
    r = run("ls", str(tmp_path / "arr"))
    assert r.returncode != 0 and "zarr.json" in r.stderr
    np.testing.assert_equal(r.stdout, "")
