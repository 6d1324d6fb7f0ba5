"""Temporary step directories carry their owner, and the next save, manager
or conversion in the same root removes those of dead owners, of any step,
never a live owner's (layout/orbax/step.h, step 6; docs/INTEGRITY.md).

* A save that loses a race (another save published its step while it wrote)
  and is then killed leaves `<step>.orbax-checkpoint-tmp-<id>`, which no later
  save of that step meets: the next CheckpointManager opened on the root
  removes it. Orbax lists and restores the root with it there and after.
* A live save's temporary directory survives another manager's open and save.
* A killed conversion's temporary directory is removed by the next conversion
  into the same directory (another step), and Orbax reads the result.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import orbax.checkpoint as ocp
from safetensors.numpy import save_file

import cairn
from conftest import same_bits
from convert_kill import convert_killed_after_arrays

# Saves `step` into `root`; at "data_written" it says so (file `ready`) and
# waits for `go`, then dies (mode "die", SIGKILL) or finishes ("finish").
SAVER = textwrap.dedent("""
    import os
    import signal
    import sys
    import time
    import numpy as np
    import cairn

    root, step, work, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    tree = {"w": np.arange(96, dtype=np.float32).reshape(12, 8) * step}

    def at_point(point):
        if point != "data_written":
            return
        open(os.path.join(work, "ready"), "w").close()
        while not os.path.exists(os.path.join(work, "go")):
            time.sleep(0.02)
        if mode == "die":
            os.kill(os.getpid(), signal.SIGKILL)

    mngr = cairn.CheckpointManager(root, enable_async=False, at_point=at_point)
    print("saved", mngr.save(step, tree))
    mngr.close()
""")


def tree_of(step):
    return {"w": np.arange(96, dtype=np.float32).reshape(12, 8) * step}


def start_saver(root, step, work, mode):
    work.mkdir()
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    child = subprocess.Popen([sys.executable, "-c", SAVER, str(root), str(step), str(work), mode],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 60
    while not (work / "ready").exists():
        assert child.poll() is None, child.communicate()
        assert time.time() < deadline, "the saver never reached data_written"
        time.sleep(0.02)
    return child


def temporaries(root):
    return sorted(n for n in os.listdir(root) if ".orbax-checkpoint-tmp" in n)


def orbax_steps(root, restore=()):
    with ocp.CheckpointManager(root) as o:
        steps = list(o.all_steps())
        for step in restore:
            got = o.restore(step)
            got = got["default"] if "default" in got else got
            assert same_bits(np.asarray(got["w"]), tree_of(step)["w"]), step
    return steps


def save(root, step):
    mngr = cairn.CheckpointManager(root, enable_async=False)
    assert mngr.save(step, tree_of(step))
    mngr.close()


def test_a_live_saves_temporary_survives_and_a_killed_losers_is_removed_by_the_next_manager(tmp_path):
    root = tmp_path / "run"
    save(root, 1)
    # A live save of step 5 is writing: another manager opens and saves step
    # 6; the live save's directory stays, and the live save then publishes.
    live = start_saver(root, 5, tmp_path / "live", "finish")
    assert [n.split(".")[0] for n in temporaries(root)] == ["5"]
    save(root, 6)
    assert [n.split(".")[0] for n in temporaries(root)] == ["5"], "a live save's directory was removed"
    (tmp_path / "live" / "go").touch()
    out, err = live.communicate(timeout=120)
    assert live.returncode == 0 and "saved True" in out, err
    assert cairn.orbax.all_steps(root) == [1, 5, 6]
    assert temporaries(root) == []
    # A race on step 7: the saver writes, this process saves 7 too and
    # publishes first; the loser is killed before it could remove its
    # directory, which nobody saving step 7 will meet again.
    loser = start_saver(root, 7, tmp_path / "loser", "die")
    save(root, 7)
    (tmp_path / "loser" / "go").touch()
    loser.communicate(timeout=120)
    assert loser.returncode == -signal.SIGKILL
    left = temporaries(root)
    assert [n.split(".")[0] for n in left] == ["7"], left
    assert (root / left[0] / ".cairn-save-owner.json").exists()
    # Orbax lists and restores around it.
    assert orbax_steps(root, restore=[7]) == [1, 5, 6, 7]
    # The next manager opened on the root removes it (in the background:
    # close waits for it).
    mngr = cairn.CheckpointManager(root)
    assert mngr.all_steps() == [1, 5, 6, 7]
    mngr.close()
    assert temporaries(root) == [], "the killed loser's temporary directory was left"
    assert orbax_steps(root, restore=[1, 5, 6, 7]) == [1, 5, 6, 7]


def test_a_killed_conversions_temporary_is_removed_by_the_next_conversion_into_the_directory(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {f"layers.{i:02d}.w": rng.standard_normal((128, 128), dtype=np.float32) for i in range(12)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    out = tmp_path / "out"
    killed = convert_killed_after_arrays(tmp_path / "model.safetensors", out, 8, to="orbax",
                                         memory_budget=256 << 10, threads=2)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    left = temporaries(out)
    assert [n.split(".")[0] for n in left] == ["0"], left
    assert (out / left[0] / ".cairn-save-owner.json").exists(), "the conversion's directory has no owner"
    assert orbax_steps(out) == []
    # Another conversion into the same directory, of step 7: the killed
    # one's directory goes; the result is whole and Orbax reads it.
    src = tmp_path / "src"
    save(src, 7)
    summary = cairn.convert(str(src), str(out), to="orbax")
    assert summary["arrays"] == 1
    assert temporaries(out) == [], "the killed conversion's temporary directory was left"
    assert orbax_steps(out, restore=[7]) == [7]
