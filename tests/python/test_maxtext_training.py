"""MaxText 0.2.5's own training loop (maxtext.trainers.pre_train.train) on
CPU, with its checkpoints going through cairn after the one-line change of
docs/MAXTEXT.md, against the same loop with Orbax (maxtext_train_job.py,
in the MaxText venv of maxtext_venv.py with this checkout's cairn built for
Python 3.12 into it).

A tiny decoder, synthetic data, async checkpoints every 2 steps, 6 steps,
then the run again with 8 steps, which resumes through MaxText's own
``load_state_if_possible``:

* cairn's engine does every save and the restore (counted in the job);
* what cairn handed MaxText on resume is, bit for bit, the step on disk as
  orbax-checkpoint reads it;
* the losses of every step, before and after the resume, equal those of
  the same run with Orbax (the training is deterministic: a resume that
  lost or changed a bit of the state would change them);
* a run killed (SIGKILL) as a save starts resumes from its latest
  committed step with exactly the state on disk, and continues with the
  losses Orbax computes resuming the same killed run;
* MaxText's emergency path (enable_emergency_checkpoint) with cairn's
  emergency manager trains, saves and resumes the same way.

The train-step time around save steps is printed for both engines (the
benchmark is bench/maxtext_bench.py)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess

import numpy as np
import pytest

import orbax_helpers  # noqa: F401  (8 CPU devices before jax starts)
from conftest import XLA_COLLECTIVE_TIMEOUTS
from maxtext_venv import maxtext_python, maxtext_python_with_cairn  # noqa: F401  (session fixtures)

import orbax.checkpoint as ocp  # noqa: E402  (after jax's flags are set by conftest's helpers)

HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "maxtext_train_job.py"
STEP_LINE = re.compile(r"completed step: (\d+), seconds: ([\d.]+).*?\bloss: ([\d.]+)")


def job_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS", "JAX_PLATFORMS")}
    env["XLA_FLAGS"] = XLA_COLLECTIVE_TIMEOUTS  # the job adds its device count
    env["PYTHONUNBUFFERED"] = "1"
    return env


def train(python, engine, out, steps, report):
    r = subprocess.run([python, str(JOB), engine, str(out), str(steps), str(report)], capture_output=True,
                       text=True, timeout=900, env=job_env())
    log = r.stdout + r.stderr
    assert r.returncode == 0, f"MaxText {engine} run exited {r.returncode}:\n{log[-6000:]}"
    return log


def losses(log):
    """{step: (seconds, loss)} of the steps a run completed."""
    return {int(m.group(1)): (float(m.group(2)), m.group(3)) for m in STEP_LINE.finditer(log)}


def assert_restored_is_on_disk(report, item):
    """What cairn handed MaxText on resume (dumped by the job) is, bit for
    bit, the item on disk as orbax-checkpoint reads it."""
    import jax
    restored = pathlib.Path(report) / "restored"
    manifest = json.loads((restored / "manifest.json").read_text())
    theirs = ocp.PyTreeCheckpointer().restore(item)
    flat = {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_flatten_with_path(theirs)[0]}
    assert sorted(manifest) == sorted(k for k, v in flat.items() if v is not None)
    for key, entry in manifest.items():
        got = np.load(restored / entry["file"])
        want = flat[key]
        if jax.dtypes.issubdtype(getattr(want, "dtype", np.float32), jax.dtypes.prng_key):
            want = jax.random.key_data(want)
        want = np.asarray(want)
        if want.dtype.name == "bfloat16":
            want = want.view(np.uint16)
        assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes(), key


def calls(report):
    return json.loads((pathlib.Path(report) / "calls.json").read_text())


def committed_steps(out):
    root = pathlib.Path(out) / "tiny" / "checkpoints"
    return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit() and (p / "commit_success.txt").exists())


@pytest.fixture(scope="module")
def orbax_run(maxtext_python, tmp_path_factory):
    out = tmp_path_factory.mktemp("orbax")
    first = train(maxtext_python, "orbax", out / "run", 6, out / "r1")
    second = train(maxtext_python, "orbax", out / "run", 8, out / "r2")
    return out / "run", {**losses(first), **losses(second)}


@pytest.fixture(scope="module")
def cairn_run(maxtext_python_with_cairn, tmp_path_factory):
    out = tmp_path_factory.mktemp("cairn")
    first = train(maxtext_python_with_cairn, "cairn", out / "run", 6, out / "r1")
    steps_after_first = committed_steps(out / "run")
    second = train(maxtext_python_with_cairn, "cairn", out / "run", 8, out / "r2")
    return out, first, second, steps_after_first


def test_maxtext_saves_every_checkpoint_through_cairn(cairn_run):
    out, first, _, steps_after_first = cairn_run
    assert steps_after_first == [0, 2, 4, 5]  # every 2 steps, and the last
    assert calls(out / "r1") == {"save": 4, "restore": 0}
    item = out / "run" / "tiny" / "checkpoints" / "4" / "items"
    assert (item / "_METADATA").exists() and (item / "manifest.ocdbt").exists()
    md = json.loads((item.parent / "_CHECKPOINT_METADATA").read_text())
    assert "items" in md["item_handlers"]


def test_maxtext_resumes_through_cairn_with_exactly_the_saved_state(cairn_run):
    out, _, second, _ = cairn_run
    assert "restoring from this run's directory step 5" in second
    assert calls(out / "r2") == {"save": 2, "restore": 1}
    assert committed_steps(out / "run") == [0, 2, 4, 5, 6, 7]
    assert_restored_is_on_disk(out / "r2", out / "run" / "tiny" / "checkpoints" / "5" / "items")


def test_cairn_and_orbax_runs_have_the_same_losses_before_and_after_the_resume(cairn_run, orbax_run):
    _, first, second, _ = cairn_run
    ours = {**losses(first), **losses(second)}
    _, theirs = orbax_run
    assert sorted(ours) == list(range(8)) and sorted(theirs) == list(range(8))
    assert {s: l for s, (_, l) in ours.items()} == {s: l for s, (_, l) in theirs.items()}
    print("\ntrain-step seconds (MaxText 0.2.5 on CPU; saves after steps 0, 2, 4 and 5, 6 and 7)")
    print("step   orbax   cairn")
    for s in range(8):
        print(f"{s:>4} {theirs[s][0]:>7.3f} {ours[s][0]:>7.3f}")


def test_orbax_restores_the_run_cairn_saved(cairn_run):
    out = cairn_run[0]
    mngr = ocp.CheckpointManager(out / "run" / "tiny" / "checkpoints", item_names=("items",))
    assert mngr.latest_step() == 7
    back = mngr.restore(7, args=ocp.args.Composite(items=ocp.args.PyTreeRestore()))
    assert "params" in back["items"] and "opt_state" in back["items"]


def test_a_killed_run_resumes_from_its_latest_committed_step(maxtext_python_with_cairn, tmp_path):
    # Saves come at steps 0, 2, 4, 6 (and the last, 7); the process is
    # killed as its 4th save (step 6) starts, after step 4 was committed.
    run = tmp_path / "run"
    cmd = [maxtext_python_with_cairn, str(JOB), "cairn", str(run), "8", str(tmp_path / "r1")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                       env={**job_env(), "CAIRN_TEST_KILL_AT_SAVE": "4"})
    assert r.returncode == -signal.SIGKILL, r.stderr[-3000:]
    assert "completed step: 4" in r.stdout + r.stderr
    assert committed_steps(run) == [0, 2, 4]
    shutil.copytree(run, tmp_path / "run_orbax")
    log = train(maxtext_python_with_cairn, "cairn", run, 8, tmp_path / "r2")
    assert "restoring from this run's directory step 4" in log
    assert_restored_is_on_disk(tmp_path / "r2", run / "tiny" / "checkpoints" / "4" / "items")
    assert committed_steps(run) == [0, 2, 4, 6, 7]
    # Orbax resuming the same killed run computes the same losses.
    theirs = train(maxtext_python_with_cairn, "orbax", tmp_path / "run_orbax", 8, tmp_path / "r3")
    assert "restoring from this run's directory step 4" in theirs
    ours = {s: l for s, (_, l) in losses(log).items()}
    assert sorted(ours) == [5, 6, 7] and ours == {s: l for s, (_, l) in losses(theirs).items()}


def test_maxtext_emergency_path_with_cairns_emergency_manager(maxtext_python_with_cairn, orbax_run, tmp_path):
    first = train(maxtext_python_with_cairn, "cairn-emergency", tmp_path / "run", 6, tmp_path / "r1")
    # The local tier holds the last step (Orbax's default keeps one), the persistent tier every save.
    assert sorted(p.name for p in (tmp_path / "run" / "local").iterdir() if p.name.isdigit()) == ["5"]
    assert committed_steps(tmp_path / "run") == [0, 2, 4, 5]
    second = train(maxtext_python_with_cairn, "cairn-emergency", tmp_path / "run", 8, tmp_path / "r2")
    assert calls(tmp_path / "r1")["save"] == 4 and calls(tmp_path / "r2")["restore"] == 1
    assert "restoring from this run's directory step 5" in second
    ours = {**losses(first), **losses(second)}
    _, reference = orbax_run
    assert {s: l for s, (_, l) in ours.items()} == {s: l for s, (_, l) in reference.items()}
