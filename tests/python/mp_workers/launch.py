"""Starts worker processes (worker.py) for a real jax.distributed run on
localhost and turns failures into readable assertion messages."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

import ports

from mp_workers import mp_tree

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "worker.py"


def _tail(path: pathlib.Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no output)"
    return "\n".join(text[-lines:])


def run(workdir, num_processes: int, jobs: list, *, python: str = sys.executable,
        timeout: float = 240.0, orbax_version: str | None = None, worker: pathlib.Path = WORKER,
        extra_config: dict | None = None) -> None:
    """Runs `num_processes` workers (each with 8 / num_processes CPU devices)
    executing `jobs`; raises AssertionError with every process's exit code
    and stderr tail if any fails or the run exceeds `timeout` seconds.
    `worker`: the worker script (worker.py by default); `extra_config`: more
    keys for every process's config."""
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    assert mp_tree.TOTAL_DEVICES % num_processes == 0
    local = mp_tree.TOTAL_DEVICES // num_processes
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={local}"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    coordinator = f"127.0.0.1:{ports.unused_port()}"
    procs, logs = [], []
    tag = f"run{time.monotonic_ns()}"
    for i in range(num_processes):
        config = {"num_processes": num_processes, "process_id": i, "coordinator": coordinator,
                  "jobs": jobs, "orbax_version": orbax_version, **(extra_config or {})}
        cfg = workdir / f"{tag}.process_{i}.json"
        cfg.write_text(json.dumps(config))
        out = workdir / f"{tag}.process_{i}.log"
        with open(out, "wb") as f:
            procs.append(subprocess.Popen([python, str(worker), str(cfg)], env=env, cwd=str(HERE.parent),
                                          stdout=f, stderr=subprocess.STDOUT))
        logs.append(out)
    deadline = time.monotonic() + timeout
    first_failure = None
    failure_deadline = None
    timed_out = False
    while any(p.poll() is None for p in procs):
        now = time.monotonic()
        for i, p in enumerate(procs):
            if p.returncode not in (None, 0) and first_failure is None:
                first_failure = i
                failure_deadline = now + 15  # the others block at a barrier: give them a moment
        if now > deadline or (failure_deadline is not None and now > failure_deadline):
            timed_out = now > deadline
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for p in procs:
                p.wait()
            break
        time.sleep(0.2)
    codes = [p.returncode for p in procs]
    if all(c == 0 for c in codes):
        return
    report = [f"{num_processes}-process run failed (python {python}); exit codes {codes}"
              + (f"; killed after the {timeout:.0f} s timeout" if timed_out else "")
              + (f"; process {first_failure} failed first" if first_failure is not None else "")]
    order = ([first_failure] if first_failure is not None else []) + [
        i for i in range(num_processes) if i != first_failure]
    for i in order:
        report.append(f"---- process {i} (exit {codes[i]}), last lines of {logs[i]}:\n{_tail(logs[i])}")
    raise AssertionError("\n".join(report))


def load_restored(out_prefix, num_processes: int):
    """The shards and leaf info every process dumped after an Orbax restore:
    ({leaf name: [(index, array)]}, [per-process info])."""
    shards, infos = {}, []
    for i in range(num_processes):
        base = f"{out_prefix}.process_{i}"
        infos.append(json.loads(pathlib.Path(base + ".json").read_text()))
        info = infos[-1]
        with np.load(base + ".npz") as z:
            for key in z.files:
                name, _, idx = key.rpartition("@")
                arr = z[key]
                if arr.dtype.kind == "V":  # npz keeps ml_dtypes (bfloat16, ...) as raw bytes
                    arr = arr.view(mp_tree.np_dtype(info[name]["dtype"]))
                shards.setdefault(name, []).append((idx, arr))
    return shards, infos
