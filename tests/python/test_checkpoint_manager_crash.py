"""Crash consistency of cairn.CheckpointManager: a child process saving step
3 (max_to_keep=2, so the save ends by deleting step 1) kills itself with
SIGKILL at each named point of the save and of the retention (a callback
it passes as the manager's `at_point` observer, checkpoint_manager.h, kills
it). Afterwards:

* cairn's and Orbax's managers list the same steps: the new step only if the
  crash came after its commit, step 1 only if the crash came before its
  rename; no partly deleted step is ever listed;
* every listed step restores bit-exactly (cairn and Orbax);
* a new manager resumes: its next save succeeds and retention goes on,
  removing what the crash left behind.
A control child that is not killed commits step 3 and removes step 1.
"""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import orbax.checkpoint as ocp
import pytest

import cairn

CHILD = textwrap.dedent("""
    import os
    import signal
    import sys
    import numpy as np
    import cairn

    root, step, crash_at, enable_async = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
    rng = np.random.default_rng(step)
    tree = {"w": rng.standard_normal((64, 32)).astype(np.float32),
            "b": {"c": np.arange(7, dtype=np.int64) * step}}

    def at_point(point):
        # Dies here as a killed process would.
        if point == crash_at:
            os.kill(os.getpid(), signal.SIGKILL)

    mngr = cairn.CheckpointManager(root, max_to_keep=2, enable_async=enable_async, at_point=at_point)
    assert mngr.save(step, tree)
    mngr.wait_until_finished()
    mngr.close()
    print("finished", step)
""")


def step_tree(step):
    rng = np.random.default_rng(step)
    return {"w": rng.standard_normal((64, 32)).astype(np.float32),
            "b": {"c": np.arange(7, dtype=np.int64) * step}}


def run_child(root, step, crash_at="", enable_async=True):
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    return subprocess.run([sys.executable, "-c", CHILD, str(root), str(step), crash_at,
                           "1" if enable_async else "0"],
                          capture_output=True, text=True, timeout=120, env=env)


def assert_bit_equal(expected, actual):
    assert sorted(expected) == sorted(actual)
    for k, v in expected.items():
        if isinstance(v, dict):
            assert_bit_equal(v, actual[k])
        else:
            a = np.asarray(actual[k])
            assert a.dtype == v.dtype and a.shape == v.shape and a.tobytes() == v.tobytes(), k


def orbax_steps_and_restore(root):
    with ocp.CheckpointManager(root) as o:
        steps = list(o.all_steps())
        for step in steps:
            restored = o.restore(step)
            assert_bit_equal(step_tree(step), restored["default"] if "default" in restored else restored)
    return steps


# point -> (steps listed after the crash). Step 3 is committed from
# step_committed on; step 1 is gone once renamed (delete_renamed).
POINTS = {
    "save_started": [1, 2],
    "data_written": [1, 2],
    "before_item_commit": [1, 2],
    "before_step_commit": [1, 2],
    "step_committed": [1, 2, 3],
    "before_delete_rename": [1, 2, 3],
    "delete_renamed": [2, 3],
}


@pytest.fixture(scope="module")
def committed_root(tmp_path_factory):
    """Steps 1 and 2, committed by a child that was not killed."""
    root = tmp_path_factory.mktemp("crash_base") / "run"
    for step in (1, 2):
        done = run_child(root, step)
        assert done.returncode == 0, done.stderr
        assert f"finished {step}" in done.stdout
    return root


def copy_tree(src, dst):
    import shutil
    shutil.copytree(src, dst)
    return dst


# Every point with async saves (the commit and retention run on the
# manager's background thread); two with sync saves (on the caller's).
CASES = [(p, True) for p in POINTS] + [("before_step_commit", False), ("delete_renamed", False)]


@pytest.mark.parametrize("point,enable_async", CASES,
                         ids=[f"{p}-{'async' if a else 'sync'}" for p, a in CASES])
def test_sigkill_at_point_keeps_committed_steps_whole(tmp_path, committed_root, point, enable_async):
    root = copy_tree(committed_root, tmp_path / "run")
    crashed = run_child(root, 3, point, enable_async)
    assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)
    assert "finished" not in crashed.stdout
    expected = POINTS[point]
    # cairn lists only whole steps, all restorable bit-exactly.
    assert cairn.orbax.all_steps(root) == expected
    mngr = cairn.CheckpointManager(root, max_to_keep=2)
    assert mngr.all_steps() == expected
    assert mngr.latest_step() == expected[-1]
    for step in expected:
        assert_bit_equal(step_tree(step), mngr.restore(step))
    # So does Orbax.
    assert orbax_steps_and_restore(root) == expected
    # Resume: the next save succeeds and retention goes on.
    assert mngr.save(4, step_tree(4))
    mngr.wait_until_finished()
    assert mngr.all_steps() == expected[-1:] + [4]
    mngr.close()
    names = sorted(os.listdir(root))
    assert not [n for n in names if ".cairn-deleting-" in n], names
    assert [n for n in names if n.isdigit()] == [str(s) for s in expected[-1:] + [4]]
    assert orbax_steps_and_restore(root) == expected[-1:] + [4]


def test_child_without_crash_commits_and_prunes(tmp_path, committed_root):
    """Control: the same child, not killed, commits step 3 and removes 1."""
    root = copy_tree(committed_root, tmp_path / "run")
    done = run_child(root, 3)
    assert done.returncode == 0, done.stderr
    assert cairn.orbax.all_steps(root) == [2, 3]
    assert sorted(os.listdir(root)) == ["2", "3"]
    assert orbax_steps_and_restore(root) == [2, 3]


@pytest.mark.parametrize("enable_async", [True, False], ids=["async", "sync"])
def test_at_point_observes_every_point_in_order_and_an_error_in_it_stops_nothing(tmp_path, monkeypatch,
                                                                                 enable_async):
    """`at_point` is an observer: called with each point of the save and of
    the retention, in order, from whichever thread reaches it (the GIL taken
    for the call); an exception it raises is reported as unraisable, naming
    the callback, and the save goes on."""
    import threading
    seen = []
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append((u.exc_type, str(u.exc_value),
                                                                          str(u.err_msg or u.object))))

    def observe(point):
        seen.append((point, threading.current_thread() is threading.main_thread()))
        if point == "data_written":
            raise RuntimeError("an observer that fails")

    root = tmp_path / "run"
    mngr = cairn.CheckpointManager(root, max_to_keep=1, enable_async=enable_async, at_point=observe)
    for step in (1, 2):
        assert mngr.save(step, step_tree(step))
    mngr.wait_until_finished()
    mngr.close()
    points = [p for p, _ in seen]
    save = ["save_started", "data_written", "before_item_commit", "before_step_commit", "step_committed"]
    assert points == save + save + ["before_delete_rename", "delete_renamed"], points
    if enable_async:
        # The commit and the retention ran on the manager's own thread.
        assert not any(main for p, main in seen if p in ("step_committed", "delete_renamed")), seen
    assert cairn.orbax.all_steps(root) == [2]
    assert_bit_equal(step_tree(2), cairn.restore(str(root / "2" / "default")))
    assert [(t, v) for t, v, _ in reported] == [(RuntimeError, "an observer that fails")] * 2, reported
    assert all("at_point callback" in where for _, _, where in reported), reported

