"""cairn.CheckpointManager against orbax-checkpoint 0.12.8's CheckpointManager:

* steps cairn's manager saved (numpy trees and jax arrays sharded over 8
  simulated CPU devices) are listed and restored bit-exactly by Orbax's
  manager, in the same layout Orbax writes for one default item;
* steps Orbax's manager saved are listed, restored bit-exactly, continued
  (numbering and retention) by cairn's, and Orbax resumes after cairn;
* for the same sequence of saves both managers decide the same should_save
  and keep the same steps (max_to_keep, keep_period, save_interval_steps);
* async saves snapshot the tree and wait_until_finished commits them;
* errors (existing step, missing step, closed manager) with control cases.
"""

import orbax_helpers as h  # sets XLA_FLAGS first

import json
import os

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

import cairn


@pytest.fixture(scope="module")
def mesh():
    return h.mesh()


def step_tree(step):
    """A small numpy tree whose values depend on `step`."""
    rng = np.random.default_rng(step)
    return {"w": rng.standard_normal((4, 6)).astype(np.float32),
            "b": {"c": np.arange(5, dtype=np.int32) + step, "s": np.full((1,), step, np.float32)}}


def orbax_manager(directory, **options):
    return ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(**options))


def orbax_restore(mngr, step, abstract=None, standard=False):
    """Orbax's restore: without args (the handler from _CHECKPOINT_METADATA),
    or with StandardRestore (as a manager that also saves must: it keeps the
    handler of its first call)."""
    if standard:
        return mngr.restore(step, args=ocp.args.StandardRestore(abstract))
    if abstract is None:
        restored = mngr.restore(step)
        return restored["default"] if "default" in restored else restored
    return mngr.restore(step, args=ocp.args.StandardRestore(abstract))


def step_dirs(root):
    return sorted(int(n) for n in os.listdir(root) if n.isdigit())


def test_orbax_restores_cairn_manager_numpy_steps(tmp_path):
    root = tmp_path / "run"
    with cairn.CheckpointManager(root, max_to_keep=2) as mngr:
        for step in range(4):
            assert mngr.save(step, step_tree(step))
        mngr.wait_until_finished()
        assert mngr.all_steps() == [2, 3]
    # Orbax's layout for one default item.
    assert step_dirs(root) == [2, 3]
    meta = json.loads((root / "3" / "_CHECKPOINT_METADATA").read_text())
    assert meta["item_handlers"] == {"default": cairn.orbax.PYTREE_HANDLER}
    assert (root / "3" / "commit_success.txt").exists()
    assert (root / "3" / "default" / "_METADATA").exists()
    with orbax_manager(root) as o:
        assert list(o.all_steps()) == [2, 3]
        for step in (2, 3):
            h.assert_bit_equal(step_tree(step), orbax_restore(o, step))


def test_orbax_restores_cairn_manager_jax_steps_with_sharding(tmp_path, mesh):
    root = tmp_path / "run"
    tree = h.rich_tree(mesh)
    with cairn.CheckpointManager(root) as mngr:
        assert mngr.save(5, tree)
        mngr.wait_until_finished()
        # cairn restores onto another sharding, too.
        shard_as = h.NamedSharding(mesh, h.P(None, "model"))
        target = {"params": {"dense": {"kernel": jax.ShapeDtypeStruct((8, 6), np.float32, sharding=shard_as)}}}
        back = mngr.restore(5, target=target, partial_restore=True)
        assert back["params"]["dense"]["kernel"].sharding == shard_as
        h.assert_bit_equal(tree["params"]["dense"]["kernel"], back["params"]["dense"]["kernel"])
    with orbax_manager(root) as o:
        assert o.latest_step() == 5
        h.assert_bit_equal(tree, orbax_restore(o, 5))
    # Orbax's StandardRestore with target shardings.
    root2 = tmp_path / "run2"
    full = np.arange(32, dtype=np.float32).reshape(8, 4)
    with cairn.CheckpointManager(root2) as mngr:
        assert mngr.save(1, {"a": h.sharded(full, mesh, h.P("data", None))})
    shard_as = h.NamedSharding(mesh, h.P(None, "model"))
    with orbax_manager(root2) as o:
        restored = orbax_restore(o, 1, {"a": jax.ShapeDtypeStruct((8, 4), np.float32, sharding=shard_as)})
    assert restored["a"].sharding == shard_as
    h.assert_bit_equal({"a": full}, restored)


def test_cairn_manager_resumes_orbax_manager(tmp_path):
    root = tmp_path / "run"
    options = dict(max_to_keep=2, keep_period=3)
    with orbax_manager(root, **options) as o:
        for step in range(5):
            o.save(step, args=ocp.args.StandardSave(step_tree(step)))
        o.wait_until_finished()
        orbax_kept = list(o.all_steps())
    assert orbax_kept == [0, 3, 4]
    with cairn.CheckpointManager(root, **options) as mngr:
        assert mngr.all_steps() == orbax_kept
        assert mngr.latest_step() == 4
        for step in orbax_kept:
            h.assert_bit_equal(step_tree(step), mngr.restore(step), scalars_loose=True)
        assert not mngr.should_save(4) and mngr.should_save(5)
        for step in range(5, 8):
            assert mngr.save(step, step_tree(step))
        mngr.wait_until_finished()
        assert mngr.all_steps() == [0, 3, 6, 7]
    assert step_dirs(root) == [0, 3, 6, 7]
    # Orbax resumes after cairn.
    with orbax_manager(root, **options) as o:
        assert list(o.all_steps()) == [0, 3, 6, 7]
        h.assert_bit_equal(step_tree(7), orbax_restore(o, 7, standard=True))
        o.save(8, args=ocp.args.StandardSave(step_tree(8)))
        o.wait_until_finished()
        assert list(o.all_steps()) == [0, 3, 6, 7, 8]  # 6 is divisible by 3
    with cairn.CheckpointManager(root, **options) as mngr:
        assert mngr.all_steps() == [0, 3, 6, 7, 8]
        h.assert_bit_equal(step_tree(8), mngr.restore())


@pytest.mark.parametrize("options", [
    dict(max_to_keep=3, keep_period=4),
    dict(max_to_keep=1),
    dict(save_interval_steps=3, max_to_keep=2),
    dict(save_interval_steps=2, keep_period=3, max_to_keep=1),
], ids=["keep3-period4", "keep1", "interval3-keep2", "interval2-period3-keep1"])
def test_retention_and_should_save_match_orbax(tmp_path, options):
    steps = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12]
    decisions = {}
    for name in ("orbax", "cairn"):
        root = tmp_path / name
        saved = []
        if name == "orbax":
            mngr = orbax_manager(root, **options)
            save = lambda s: mngr.save(s, args=ocp.args.StandardSave(step_tree(s)))  # noqa: E731
        else:
            mngr = cairn.CheckpointManager(root, **options)
            save = lambda s: mngr.save(s, step_tree(s))  # noqa: E731
        with mngr:
            for s in steps:
                should = mngr.should_save(s)
                assert save(s) == should, (name, s)
                saved.append(should)
            mngr.wait_until_finished()
            decisions[name] = (saved, list(mngr.all_steps()), step_dirs(root))
    assert decisions["cairn"] == decisions["orbax"]
    # The cases exercise what they are named for: some steps pruned, and
    # with an interval some saves declined.
    saved, kept, _ = decisions["cairn"]
    assert len(kept) < sum(saved)
    assert all(saved) == ("save_interval_steps" not in options)


def test_async_save_snapshots_and_wait_commits(tmp_path):
    root = tmp_path / "run"
    values = np.arange(1 << 16, dtype=np.float32)
    expected = values.copy()
    mngr = cairn.CheckpointManager(root, enable_async=True)
    assert mngr.save(1, {"v": values})
    values[:] = -1  # the save already holds its own copy
    assert mngr.all_steps() == [1]  # listed while being saved, as Orbax does
    mngr.wait_until_finished()
    assert (root / "1" / "commit_success.txt").exists()
    assert not [n for n in os.listdir(root) if "tmp" in n]
    h.assert_bit_equal({"v": expected}, mngr.restore(1))
    # A restore of the step being saved waits for it.
    assert mngr.save(2, {"v": expected + 1})
    h.assert_bit_equal({"v": expected + 1}, mngr.restore(2))
    mngr.close()
    with orbax_manager(root) as o:
        h.assert_bit_equal({"v": expected + 1}, orbax_restore(o, 2))


def test_sync_save_and_step_name_format_interop(tmp_path):
    root = tmp_path / "run"
    fmt = dict(step_prefix="ckpt", step_format_fixed_length=5)
    with cairn.CheckpointManager(root, enable_async=False, max_to_keep=2, **fmt) as mngr:
        for step in (10, 20, 30):
            assert mngr.save(step, step_tree(step))
            assert (root / f"ckpt_{step:05d}" / "default" / "_METADATA").exists()
        assert mngr.all_steps() == [20, 30]
    assert sorted(os.listdir(root)) == ["ckpt_00020", "ckpt_00030"]
    with orbax_manager(root, **fmt) as o:
        assert list(o.all_steps()) == [20, 30]
        h.assert_bit_equal(step_tree(30), orbax_restore(o, 30))
    # Orbax's StandardSave args are accepted as Orbax's manager takes them.
    with cairn.CheckpointManager(root, **fmt) as mngr:
        assert mngr.save(40, args=ocp.args.StandardSave(step_tree(40)))
        h.assert_bit_equal(step_tree(40), mngr.restore(40, args=ocp.args.StandardRestore()))


def test_deleting_leftovers_are_no_steps_for_either_manager(tmp_path):
    root = tmp_path / "run"
    with cairn.CheckpointManager(root) as mngr:
        mngr.save(1, step_tree(1))
        mngr.save(2, step_tree(2))
    # What a crash between the rename and the removal of step 1 leaves.
    os.rename(root / "1", root / "1.cairn-deleting-00ff.orbax-checkpoint-tmp")
    with orbax_manager(root) as o:
        assert list(o.all_steps()) == [2]
    assert cairn.orbax.all_steps(root) == [2]
    with cairn.CheckpointManager(root) as mngr:
        assert mngr.all_steps() == [2]
        mngr.wait_until_finished()  # the leftover is removed in the background
    assert sorted(os.listdir(root)) == ["2"]


def test_errors_name_the_step_with_controls(tmp_path):
    root = tmp_path / "run"
    mngr = cairn.CheckpointManager(root)
    assert mngr.save(3, step_tree(3))
    assert not mngr.save(3, step_tree(3))  # declined: not above the latest
    with pytest.raises(FileExistsError, match=r"saving step 3: .*/run/3 is already committed"):
        mngr.save(3, step_tree(3), force=True)
    assert mngr.save(2, step_tree(2), force=True)  # control: forced, new step
    mngr.wait_until_finished()
    assert mngr.all_steps() == [2, 3]
    with pytest.raises(FileNotFoundError, match=r"deleting step 7 under .*/run: it is not a committed step"):
        mngr.delete(7)
    mngr.delete(2)  # control
    assert mngr.all_steps() == [3] and step_dirs(root) == [3]
    with pytest.raises(FileNotFoundError, match="no committed step 2"):
        mngr.restore(2)
    with pytest.raises(ValueError, match="save_interval_steps"):
        cairn.CheckpointManager(tmp_path / "other", save_interval_steps=0)
    with pytest.raises(ValueError, match="keep_period"):
        cairn.CheckpointManager(tmp_path / "other", keep_period=0)
    mngr.close()
    with pytest.raises(RuntimeError, match=r"cairn\.CheckpointManager: saving step 4 under .*: the manager is closed"):
        mngr.save(4, step_tree(4))


MP_CHILD = """
import sys
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

address, pid, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
jax.distributed.initialize(address, num_processes=2, process_id=pid)
import cairn

mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))

def tree(step):
    full = np.arange(8 * 6, dtype=np.float32).reshape(8, 6) * (step + 1)
    return {"w": jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("data", "model")),
                                              lambda idx: full[idx]),
            "r": jax.make_array_from_callback((4,), NamedSharding(mesh, P()),
                                              lambda idx: np.arange(4, dtype=np.int32)[idx] + step)}

with cairn.CheckpointManager(root, max_to_keep=2, save_interval_steps=2) as mngr:
    for step in range(1, 7):
        mngr.save(step, tree(step))
    mngr.wait_until_finished()
    assert mngr.all_steps() == [4, 6], mngr.all_steps()
    back = mngr.restore(6, target={"w": jax.ShapeDtypeStruct((8, 6), np.float32,
                                                             sharding=NamedSharding(mesh, P(None, "model")))},
                         partial_restore=True)
    for shard in back["w"].addressable_shards:
        full = np.arange(8 * 6, dtype=np.float32).reshape(8, 6) * 7
        assert np.array_equal(np.asarray(shard.data), full[shard.index])
print("done", pid)
"""


def test_two_jax_processes_share_one_manager(tmp_path, mesh):
    import subprocess
    import sys

    import ports
    address = f"127.0.0.1:{ports.unused_port()}"
    root = tmp_path / "run"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, "-c", MP_CHILD, address, str(i), str(root)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    for i, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"done {i}" in out, (i, p.returncode, err[-3000:])
    assert step_dirs(root) == [4, 6]
    # Each process wrote its own shards.
    assert (root / "6" / "default" / "ocdbt.process_1").is_dir()
    full = np.arange(8 * 6, dtype=np.float32).reshape(8, 6) * 7
    with cairn.CheckpointManager(root) as mngr:
        h.assert_bit_equal({"w": full, "r": np.arange(4, dtype=np.int32) + 6}, mngr.restore(6))
    shard_as = h.NamedSharding(mesh, h.P("model", None))
    with orbax_manager(root) as o:
        restored = orbax_restore(o, 6, {"w": jax.ShapeDtypeStruct((8, 6), np.float32, sharding=shard_as),
                                        "r": jax.ShapeDtypeStruct((4,), np.int32, sharding=h.NamedSharding(mesh, h.P()))})
    h.assert_bit_equal({"w": full, "r": np.arange(4, dtype=np.int32) + 6}, restored)
