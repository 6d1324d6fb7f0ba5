"""cairn.dist: the coordinators from Python.

* the callback coordinator over a fake jax.distributed client, with threads
  as processes (collectives release the GIL; the callbacks retake it);
* a real jax.distributed job of 3 processes on localhost (CPU) exchanging
  values through cairn.dist.from_jax() / detect();
* a real mpirun job of 4 ranks through cairn.dist.mpi() / detect().
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import cairn.dist
from cairn import _core
from conftest import wait_processes
import ports


class FakeJaxClient:
    """The part of jax's DistributedRuntimeClient that cairn uses, in memory,
    shared by threads: keys set once, blocking gets and barriers that raise
    on timeout (jax raises with DEADLINE_EXCEEDED)."""

    def __init__(self, num_processes: int):
        self.n = num_processes
        self.store: dict[str, bytes] = {}
        self.arrivals: dict[str, int] = {}
        self.barrier_ids: list[str] = []
        self.cv = threading.Condition()

    def key_value_set_bytes(self, key: str, value: bytes, allow_overwrite: bool = False) -> None:
        assert isinstance(value, bytes)
        with self.cv:
            if key in self.store and not allow_overwrite:
                raise RuntimeError(f"ALREADY_EXISTS: {key}")
            self.store[key] = value
            self.cv.notify_all()

    def blocking_key_value_get_bytes(self, key: str, timeout_in_ms: int) -> bytes:
        with self.cv:
            if not self.cv.wait_for(lambda: key in self.store, timeout_in_ms / 1000):
                raise TimeoutError(f"DEADLINE_EXCEEDED: key {key}")
            return self.store[key]

    def wait_at_barrier(self, barrier_id: str, timeout_in_ms: int) -> None:
        with self.cv:
            self.barrier_ids.append(barrier_id)
            self.arrivals[barrier_id] = self.arrivals.get(barrier_id, 0) + 1
            self.cv.notify_all()
            if not self.cv.wait_for(lambda: self.arrivals[barrier_id] >= self.n,
                                    timeout_in_ms / 1000):
                raise TimeoutError(f"DEADLINE_EXCEEDED: barrier {barrier_id}")


def run_threads(n: int, body, client=None, only=None):
    """Runs body(coordinator) in one thread per process; returns the results
    (or the exception each raised), by process index."""
    client = client or FakeJaxClient(n)
    coordinators = [cairn.dist.from_jax(client, key_prefix="t", process_index=i, process_count=n)
                    for i in range(n)]
    results: list = [None] * n

    def run(i):
        try:
            results[i] = body(coordinators[i])
        except Exception as e:  # noqa: BLE001 - reported to the test
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in (only or range(n))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a collective hung"
    return results


def test_single_process_coordinator():
    c = cairn.dist.single()
    assert (c.process_index, c.process_count, c.is_primary) == (0, 1, True)
    c.barrier("b", timeout_s=0)
    assert c.all_gather("g", b"\x00abc") == [b"\x00abc"]
    assert c.broadcast("x", 0, b"v") == b"v"
    with pytest.raises(ValueError, match="broadcast `x`: root 1 is not a process of a one-process job"):
        c.broadcast("x", 1, b"v")
    c.agree("ok")
    # One process: the failure as it is, without a "process 0 of 1:" prefix (issue 29).
    with pytest.raises(RuntimeError, match="^disk on fire$"):
        c.agree("bad", "disk on fire")


def test_callback_coordinator_collectives_over_fake_jax_client():
    client = FakeJaxClient(4)

    def body(c):
        i = c.process_index
        gathered = c.all_gather("sizes", bytes([i]) * (i * 100))
        roots = [c.broadcast("plan", root, f"from {i}".encode()) for root in range(4)]
        c.barrier("done", timeout_s=30)
        again = c.all_gather("sizes", b"second")  # a reused name gets fresh keys
        return gathered, roots, again

    results = run_threads(4, body, client)
    for r in results:
        assert not isinstance(r, Exception), r
        gathered, roots, again = r
        assert gathered == [bytes([i]) * (i * 100) for i in range(4)]
        assert roots == [f"from {root}".encode() for root in range(4)]
        assert again == [b"second"] * 4
    # Keys are prefixed by the coordinator's prefix and the collective's name.
    assert "t/sizes/0/3" in client.store and "t/sizes/1/0" in client.store
    assert client.store["t/plan/2/root"] == b"from 2"
    assert set(client.barrier_ids) == {"t/done/0"}


def test_agree_raises_the_first_failure_everywhere():
    def body(c):
        error = {1: "bad crc in w/c/0", 3: "disk full"}.get(c.process_index)
        c.agree("commit", error, timeout_s=30)
        return "ok"

    results = run_threads(4, body)
    for r in results:
        assert isinstance(r, RuntimeError), r
        assert str(r) == "process 1 of 4: bad crc in w/c/0"
    # Control: nobody fails, nobody raises.
    assert run_threads(4, lambda c: c.agree("commit", None, timeout_s=30) or "ok") == ["ok"] * 4


def test_missing_process_times_out_promptly_and_is_named():
    def body(c):
        t0 = time.monotonic()
        try:
            c.all_gather("late", b"v", timeout_s=0.3)
        except OSError as e:
            return e, time.monotonic() - t0
        return None, time.monotonic() - t0

    results = run_threads(4, body, only=[0, 1, 2])  # process 3 never comes
    for i in range(3):
        error, seconds = results[i]
        assert isinstance(error, OSError)
        assert "all-gather `late`: no message from process 3 (key `t/late/0/3`)" in str(error)
        assert "TimeoutError: DEADLINE_EXCEEDED" in str(error)
        assert 0.25 <= seconds < 3.0
    # Control: with process 3 present the same call succeeds.
    assert all(r[0] is None for r in run_threads(4, body))


def test_callback_errors_become_exceptions_not_crashes():
    def kv_set(key, value):
        pass

    def kv_get(key, timeout_ms):
        raise ValueError("store is gone")

    c = cairn.dist.callback(0, 2, kv_set, kv_get)
    with pytest.raises(OSError, match=r"kv_get\(`cairn/g/0/1`\) raised ValueError: store is gone"):
        c.all_gather("g", b"x", timeout_s=5)
    bad_type = cairn.dist.callback(0, 2, kv_set, lambda k, t: 42)
    with pytest.raises(ValueError, match="returned neither bytes nor str"):
        bad_type.all_gather("g", b"x", timeout_s=5)
    with pytest.raises(ValueError, match="process_index 2"):
        cairn.dist.callback(2, 2, kv_set, kv_get)
    # Control: a store that answers works (barrier without a barrier callback
    # is an all-gather of empty values).
    store = {"cairn/b/0/1": b""}
    ok = cairn.dist.callback(0, 2, store.__setitem__, lambda k, t: store[k])
    ok.barrier("b", timeout_s=5)
    assert store["cairn/b/0/0"] == b""


def test_detect_without_a_job_is_single(monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(name, raising=False)
    c = cairn.dist.detect()
    assert (c.process_index, c.process_count) == (0, 1)


# Every process: gathers its index, broadcasts from the last process, runs a
# barrier and an agreement where process 1 fails, and writes what it saw.
_WORKER_COMMON = """
import json, sys
import cairn.dist

def exchange(c, kind):
    i, n = c.process_index, c.process_count
    out = {"kind": kind, "i": i, "n": n, "repr": repr(c)}
    out["gathered"] = [v.decode() for v in c.all_gather("cairn-test/gather", f"p{i}".encode() * (i + 1), timeout_s=60)]
    out["broadcast"] = c.broadcast("cairn-test/bcast", n - 1, f"root is {i}".encode(), timeout_s=60).decode()
    c.barrier("cairn-test/barrier", timeout_s=60)
    c.agree("cairn-test/all-ok", None, timeout_s=60)
    try:
        c.agree("cairn-test/one-fails", "disk full" if i == 1 else None, timeout_s=60)
        out["agree"] = "no error"
    except RuntimeError as e:
        out["agree"] = str(e)
    return out
"""

_JAX_WORKER = _WORKER_COMMON + """
import jax
address, n, i, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
jax.distributed.initialize(coordinator_address=address, num_processes=n, process_id=i)
c = cairn.dist.detect()
result = exchange(c, "jax")
result["second_prefix_ok"] = cairn.dist.from_jax().all_gather("cairn-test/gather", b"x", timeout_s=60) == [b"x"] * n
if i == 0:  # alone: the others never call this collective
    import time
    t0 = time.monotonic()
    try:
        c.all_gather("cairn-test/alone", b"x", timeout_s=0.5)
        result["alone"] = "no error"
    except OSError as e:
        result["alone"] = str(e)
    result["alone_s"] = time.monotonic() - t0
c.barrier("cairn-test/after-alone", timeout_s=60)
with open(out_path, "w") as f:
    json.dump(result, f)
jax.distributed.shutdown()
"""

_MPI_WORKER = _WORKER_COMMON + """
out_dir = sys.argv[1]
c = cairn.dist.detect()
result = exchange(c, "mpi")
with open(f"{out_dir}/rank{c.process_index}.json", "w") as f:
    json.dump(result, f)
"""


def _check_exchange(results, n):
    assert [r["i"] for r in results] == list(range(n))
    for r in results:
        assert r["n"] == n
        assert r["gathered"] == [f"p{i}" * (i + 1) for i in range(n)]
        assert r["broadcast"] == f"root is {n - 1}"
        assert r["agree"] == f"process 1 of {n}: disk full"


def _child_env():
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        env.pop(name, None)
    return env


def test_real_jax_distributed_processes(tmp_path):
    n = 3
    script = tmp_path / "jax_worker.py"
    script.write_text(_JAX_WORKER)
    address = f"localhost:{ports.unused_port()}"
    procs = []
    for i in range(n):
        log = open(tmp_path / f"p{i}.log", "wb")
        procs.append((subprocess.Popen(
            [sys.executable, str(script), address, str(n), str(i), str(tmp_path / f"p{i}.json")],
            env=_child_env(), stdout=log, stderr=subprocess.STDOUT), log))
    codes, logs = wait_processes(procs, [tmp_path / f"p{i}.log" for i in range(n)], timeout=180)
    assert codes == [0] * n, logs
    results = [json.loads((tmp_path / f"p{i}.json").read_text()) for i in range(n)]
    _check_exchange(results, n)
    assert all(r["second_prefix_ok"] for r in results)
    # A collective the others never join fails promptly, naming who is missing.
    assert "all-gather `cairn-test/alone`: no message from process 1" in results[0]["alone"]
    assert 0.4 < results[0]["alone_s"] < 10
    assert all(r["repr"] == f"<cairn Coordinator process {r['i']} of {n}>" for r in results)


def test_real_mpirun_ranks(tmp_path):
    assert _core.mpi_available, "cairn was built without MPI (install libopenmpi-dev)"
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun not found (install openmpi-bin)"
    n = 4
    script = tmp_path / "mpi_worker.py"
    script.write_text(_MPI_WORKER)
    proc = subprocess.run(
        [mpirun, "--oversubscribe", "--allow-run-as-root", "-n", str(n),
         sys.executable, str(script), str(tmp_path)],
        env=_child_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(n)]
    _check_exchange(results, n)
