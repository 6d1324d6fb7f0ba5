"""Checkpoints orbax-checkpoint saved (PyTreeCheckpointer, StandardCheckpointer,
CheckpointManager; 8 simulated CPU devices, arrays sharded several ways) are
restored by cairn bit-exactly, in all four storage variants."""

import orbax_helpers as h  # sets XLA_FLAGS first

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

import cairn


@pytest.fixture(scope="module")
def mesh():
    return h.mesh()


@pytest.mark.parametrize("use_ocdbt,use_zarr3", h.VARIANTS, ids=h.VARIANT_IDS)
def test_pytree_checkpointer_saved_tree_restores_bit_exact(tmp_path, mesh, use_ocdbt, use_zarr3):
    tree = h.rich_tree(mesh)
    path = tmp_path / "ckpt"
    ocp.PyTreeCheckpointer(use_ocdbt=use_ocdbt, use_zarr3=use_zarr3).save(path, tree)
    restored = cairn.restore(path)
    h.assert_bit_equal(tree, restored)
    # The storage really is the variant asked for.
    assert (path / "manifest.ocdbt").exists() == use_ocdbt
    if not use_ocdbt:
        key = "zarr.json" if use_zarr3 else ".zarray"
        assert (path / "params.dense.kernel" / key).exists()


def test_restore_with_target_sharding_gives_jax_arrays(tmp_path, mesh):
    tree = h.rich_tree(mesh)
    path = tmp_path / "ckpt"
    ocp.PyTreeCheckpointer().save(path, tree)
    target = {"params": {"dense": {"kernel": jax.ShapeDtypeStruct(
        (8, 6), np.float32, sharding=h.NamedSharding(mesh, h.P(None, "model")))}}}
    restored = cairn.restore(path, target=target, partial_restore=True)
    kernel = restored["params"]["dense"]["kernel"]
    assert isinstance(kernel, jax.Array)
    assert kernel.sharding.spec == h.P(None, "model")
    h.assert_bit_equal(tree["params"]["dense"]["kernel"], kernel)


@pytest.mark.parametrize("use_zarr3", [True, False], ids=["zarr3", "zarr2"])
def test_checkpoint_manager_steps_and_latest(tmp_path, mesh, use_zarr3):
    root = tmp_path / "run"
    options = ocp.CheckpointManagerOptions(step_prefix="step", step_format_fixed_length=4)
    kw = {"item_handlers": ocp.PyTreeCheckpointHandler(use_zarr3=use_zarr3)}
    trees = {}
    with ocp.CheckpointManager(root, options=options, **kw) as mngr:
        for step in (1, 4):
            trees[step] = {"w": h.sharded(np.full((8, 2), step, np.float32), mesh, h.P("data", None)),
                           "b": np.arange(3, dtype=np.int64) * step}
            mngr.save(step, args=ocp.args.PyTreeSave(trees[step]))
        mngr.wait_until_finished()
    # A leftover temporary step and an uncommitted one are ignored.
    (root / "step_0009.orbax-checkpoint-tmp" / "default").mkdir(parents=True)
    assert cairn.orbax.all_steps(root) == [1, 4]
    zarr_key = "zarr.json" if use_zarr3 else ".zarray"
    assert zarr_key.encode() in b"".join(
        k.encode() for k in cairn.kvstore.open(f"file://{root}/step_0004/default/|ocdbt:").keys())
    h.assert_bit_equal(trees[4], cairn.restore(root))
    h.assert_bit_equal(trees[1], cairn.restore(root, step=1))
    h.assert_bit_equal(trees[1], cairn.restore(root / "step_0001"))
    h.assert_bit_equal(trees[1], cairn.restore(root / "step_0001" / "default"))


def test_standard_checkpointer_saved_tree(tmp_path, mesh):
    tree = {"x": h.sharded(np.arange(64, dtype=np.float32).reshape(8, 8), mesh, h.P("data", "model")),
            "y": {"z": np.ones((3,), np.int8)}}
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(tmp_path / "s", tree)
    ckptr.wait_until_finished()
    h.assert_bit_equal(tree, cairn.restore(tmp_path / "s"))


def test_thousand_leaf_tree_saved_by_orbax(tmp_path):
    tree = h.wide_tree(1000)
    ocp.PyTreeCheckpointer().save(tmp_path / "wide", tree)
    restored = cairn.restore(tmp_path / "wide")
    h.assert_bit_equal(tree, restored)


def test_missing_and_unfinished_checkpoints_are_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing is not a directory"):
        cairn.restore(tmp_path / "nothing")
    (tmp_path / "7.orbax-checkpoint-tmp").mkdir()
    with pytest.raises(FileNotFoundError, match=r"neither an Orbax item, a step directory, nor a root with finalized"):
        cairn.restore(tmp_path)
