"""The campaign's emergency path: save, replication, retention and restore of
cairn's emergency manager, faulted at any file operation.

The job is tests/crash/emergency_job.cc: 4 processes (threads) in 2 data-
parallel replicas, each with a local directory `local_<p>` below the root, a
copy of each local step on one peer, a persistent tier `persistent/` (every
5 steps, an Orbax checkpoint), 2 local steps kept. It runs as one OS process
under the shim, so a fault kills (or cuts the power of) the whole job, as a
preemption or a power cut of every host would; the check then also loses one
host's local directory.

Oracle:
  loss          the restarted job restores a step no older than the newest
                the job reported finished (every process's save, replication
                and retention returned), bit-exactly; so does a job that has
                also lost one host's local directory (from the peers' copies);
  half_written  the restore never fails or returns wrong bytes because of
                something listed half-written; every step Orbax lists in the
                persistent tier restores bit-exactly (a sample of faults);
  next_save     the job saves two more steps and restores the newest;
  leftover      no `*.orbax-checkpoint-tmp*` directory remains after that.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import numpy as np

from campaign import Finding, register_workload
from crash_shim import REPO

BASE_LAST = 2      # steps 1..2 are in the template
RUN = (3, 6)       # the faulted run saves 3..6 (5 is persistent)
RESUME = (7, 8)
PROCESSES = 4


def job_path() -> str:
    env = os.environ.get("CAIRN_EMERGENCY_CAMPAIGN_JOB")
    path = pathlib.Path(env) if env else REPO / "build" / "release" / "tests" / "crash" / "cairn_emergency_campaign_job"
    if not path.is_file():
        raise FileNotFoundError(f"the emergency campaign job is not built: {path} (cmake --build build/release "
                                "--target cairn_emergency_campaign_job, or set CAIRN_EMERGENCY_CAMPAIGN_JOB)")
    return str(path)


def _job(*args, env=None, timeout=90) -> subprocess.CompletedProcess:
    return subprocess.run([job_path(), *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


def _plain_env() -> dict:
    """The harness's environment without the shim (checks are not faulted)."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("CRASHFS_")}


def _committed(path: pathlib.Path) -> list:
    if not path.exists():
        return []
    return [int(x) for x in path.read_text().split()]


def prepare(template: pathlib.Path) -> None:
    r = _job("save", template, 1, BASE_LAST, template.parent / f"{template.name}.committed", env=_plain_env())
    if r.returncode != 0:
        raise RuntimeError(f"emergency template: {r.stderr[-2000:]}")


def run(ctx) -> None:
    # In the worker: the shim's environment is inherited, so the job's file
    # operations are numbered on from the worker's (one counter file).
    r = _job("save", ctx.root, RUN[0], RUN[1], ctx.side / "emergency.committed")
    (ctx.side / "emergency.run.out").write_text(f"exit {r.returncode}\n{r.stdout}{r.stderr}")
    for step in _committed(ctx.side / "emergency.committed"):
        ctx.commit(step=step)


def _restore(root: pathlib.Path, must: int, who: str) -> list:
    r = _job("restore", root, env=_plain_env())
    try:
        got = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [Finding("loss", f"{who}: the restore printed no result (exit {r.returncode}): {r.stderr[-1500:]}")]
    if r.returncode != 0 or got["errors"]:
        return [Finding("loss", f"{who}: the restore failed (exit {r.returncode}): {got['errors']} {r.stderr[-800:]}")]
    if not got["bit_exact"]:
        return [Finding("loss", f"{who}: step {got['step']} restored with wrong bytes")]
    if got["step"] < must:
        return [Finding("loss", f"{who}: restored step {got['step']} ({got['tier']}) but step {must} was finished")]
    return []


def _orbax_persistent(root: pathlib.Path) -> list:
    """Every step Orbax lists in the persistent tier restores bit-exactly."""
    import orbax.checkpoint as ocp
    out = []
    persistent = root / "persistent"
    if not persistent.exists():
        return out
    with ocp.CheckpointManager(str(persistent)) as m:
        steps = sorted(m.all_steps())
    for s in steps:
        want = json.loads(_job("expect", s, env=_plain_env()).stdout)
        try:
            got = ocp.PyTreeCheckpointer().restore(str(persistent / str(s) / "default"))
            w, b = np.asarray(got["params"]["w"]), np.asarray(got["params"]["b"])
            ok = (w.dtype == np.float32 and w.shape == (8, 6) and w.tobytes().hex() == want["w"]
                  and b.shape == (6,) and b.tobytes().hex() == want["b"])
            why = "" if ok else "wrong bytes"
        except Exception as e:  # noqa: BLE001 - a listed step that does not restore
            why = f"{type(e).__name__}: {e}"
        if why:
            out.append(Finding("half_written", f"Orbax lists persistent step {s}, which does not restore: {why}"))
    return out


def check(ctx) -> list:
    must = max([BASE_LAST] + [r["step"] for r in ctx.committed()])
    # A host lost as well: its shards come from the peers' copies. The
    # restore writes (fetches, staging), so each check gets its own copy.
    lost = ctx.rng.randrange(PROCESSES)
    out = []
    for who, drop in (("the restarted job", None), (f"the restarted job without host {lost}", lost)):
        copy = ctx.side / f"restore-{drop}"
        shutil.copytree(ctx.root, copy, symlinks=True)
        if drop is not None:
            shutil.rmtree(copy / f"local_{drop}", ignore_errors=True)
        out += _restore(copy, must, who)
        shutil.rmtree(copy, ignore_errors=True)
    if ctx.orbax_sample:
        out += _orbax_persistent(ctx.root)
    return out


def resume(ctx) -> None:
    r = _job("save", ctx.root, RESUME[0], RESUME[1], ctx.side / "emergency.resumed")
    if r.returncode != 0:
        raise RuntimeError(f"the next save failed (exit {r.returncode}): {r.stderr[-2000:]}")
    ctx.commit("resume", step=RESUME[1])


def check_resumed(ctx) -> list:
    return [Finding("next_save", f.detail) for f in _restore(ctx.root, RESUME[1], "after the next save")]


def leftovers(ctx) -> list:
    r = _job("leftovers", ctx.root, env=_plain_env())
    return [Finding("leftover", f"{line} after the next save") for line in r.stdout.splitlines() if line]


register_workload("emergency", run, check, prepare_fn=prepare, resume_fn=resume, check_resumed_fn=check_resumed,
                  leftovers_fn=leftovers, timeout_s=120.0)
