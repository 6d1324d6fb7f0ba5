"""Checkpoints cairn saved are restored by orbax-checkpoint bit-exactly, in
all four storage variants, with and without a target sharding, from one
process and from several (driven by threads standing in for processes)."""

import orbax_helpers as h  # sets XLA_FLAGS first

import json
import threading

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

import cairn


@pytest.fixture(scope="module")
def mesh():
    return h.mesh()


def orbax_restore(path, abstract=None):
    ckptr = ocp.PyTreeCheckpointer()
    if abstract is None:
        return ckptr.restore(path)
    restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
    return ckptr.restore(path, args=ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args))


@pytest.mark.parametrize("use_ocdbt,use_zarr3", h.VARIANTS, ids=h.VARIANT_IDS)
def test_orbax_restores_cairn_saved_tree(tmp_path, mesh, use_ocdbt, use_zarr3):
    tree = h.rich_tree(mesh)
    path = cairn.save(tmp_path / "ckpt", tree, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3)
    meta = json.loads((tmp_path / "ckpt" / "_METADATA").read_text())
    assert meta["use_ocdbt"] is use_ocdbt and meta["use_zarr3"] is use_zarr3
    assert (tmp_path / "ckpt" / "commit_success.txt").exists()
    assert not (tmp_path / "ckpt.orbax-checkpoint-tmp").exists()
    # Without a target: Orbax uses _sharding for jax arrays, _strings.json, ...
    h.assert_bit_equal(tree, orbax_restore(path))
    # cairn reads back its own checkpoint too.
    h.assert_bit_equal(tree, cairn.restore(path))


@pytest.mark.parametrize("use_ocdbt,use_zarr3", h.VARIANTS, ids=h.VARIANT_IDS)
def test_orbax_restores_with_target_sharding(tmp_path, mesh, use_ocdbt, use_zarr3):
    full = h.numpy_tree()
    tree = {"a": h.sharded(full["a"], mesh, h.P("model", None)), "b": full["b"]}
    path = cairn.save(tmp_path / "ckpt", tree, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3)
    shard_as = h.NamedSharding(mesh, h.P(None, "model"))
    abstract = {"a": jax.ShapeDtypeStruct((6, 4), np.float32, sharding=shard_as),
                "b": {"c.d": jax.ShapeDtypeStruct((10,), np.int32, sharding=h.NamedSharding(mesh, h.P("model"))),
                      "bf": jax.ShapeDtypeStruct((3, 5), jax.numpy.bfloat16, sharding=h.NamedSharding(mesh, h.P()))}}
    restored = orbax_restore(path, abstract)
    assert restored["a"].sharding == shard_as
    assert isinstance(restored["b"]["bf"], jax.Array)
    h.assert_bit_equal(tree, restored)


def test_numpy_tree_with_odd_leaves(tmp_path):
    tree = h.numpy_tree()
    path = cairn.save(tmp_path / "np", tree)
    h.assert_bit_equal(tree, orbax_restore(path))
    h.assert_bit_equal(tree, cairn.restore(path))


@pytest.mark.parametrize("processes,use_ocdbt,use_zarr3", [(3, True, True), (2, True, False), (3, False, False)])
def test_several_processes_write_one_checkpoint(tmp_path, processes, use_ocdbt, use_zarr3):
    tree = {"w": np.arange(6 * 5, dtype=np.float32).reshape(6, 5),
            "v": {"u": np.arange(12, dtype=np.int32)}, "s": "shared", "k": 4}
    barrier = threading.Barrier(processes)
    errors = []

    def run(i):
        try:
            cairn.save(tmp_path / "mp", tree, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3,
                       process_index=i, process_count=processes, barrier=lambda name: barrier.wait())
        except BaseException as e:  # reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(processes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    item = tmp_path / "mp"
    for i in range(processes):
        assert (item / "array_metadatas" / f"process_{i}").exists()
        if use_ocdbt:
            assert (item / f"ocdbt.process_{i}" / "manifest.ocdbt").exists()
    h.assert_bit_equal(tree, orbax_restore(item))
    h.assert_bit_equal(tree, cairn.restore(item))


def test_step_layout_restored_by_checkpoint_manager_without_args(tmp_path, mesh):
    tree = {"x": h.sharded(np.arange(16, dtype=np.float32).reshape(8, 2), mesh, h.P("data", None)),
            "y": np.arange(4, dtype=np.int64)}
    for step in (10, 20):
        cairn.save(tmp_path / "run", tree, step=step, step_prefix="ckpt", step_format_fixed_length=5)
    assert (tmp_path / "run" / "ckpt_00020" / "default" / "_METADATA").exists()
    meta = json.loads((tmp_path / "run" / "ckpt_00020" / "_CHECKPOINT_METADATA").read_text())
    assert meta["item_handlers"] == {"default": cairn.orbax.PYTREE_HANDLER}
    options = ocp.CheckpointManagerOptions(step_prefix="ckpt", step_format_fixed_length=5)
    with ocp.CheckpointManager(tmp_path / "run", options=options) as mngr:
        assert list(mngr.all_steps()) == [10, 20]
        assert mngr.latest_step() == 20
        restored = mngr.restore(20)
    h.assert_bit_equal(tree, restored["default"] if "default" in restored else restored)
    with pytest.raises(FileExistsError, match=f"checkpoint directory {tmp_path / 'run' / 'ckpt_00020'} already exists"):
        cairn.save(tmp_path / "run", tree, step=20, step_prefix="ckpt", step_format_fixed_length=5)


def test_thousand_leaves_and_chunk_split(tmp_path):
    tree = h.wide_tree(1000)
    tree["big"] = np.arange(4096, dtype=np.float32).reshape(64, 64)
    path = cairn.save(tmp_path / "wide", tree, chunk_byte_size=4096)
    zarr = json.loads(cairn.kvstore.open(f"file://{path}/|ocdbt:").get("big/zarr.json"))
    chunk = zarr["chunk_grid"]["configuration"]["chunk_shape"]
    assert np.prod(chunk) * 4 <= 4096 and 64 % chunk[0] == 0 and 64 % chunk[1] == 0
    h.assert_bit_equal(tree, orbax_restore(path))


def test_name_collisions_are_reported(tmp_path):
    tree = {"a.b": np.zeros(2, np.float32), "a": {"b": np.ones(2, np.float32)}}
    with pytest.raises(ValueError, match="collision"):
        cairn.save(tmp_path / "c", tree)
    assert not (tmp_path / "c").exists()


def test_custom_metadata_is_written(tmp_path):
    path = cairn.save(tmp_path / "m", {"x": np.ones(2)}, custom_metadata={"run": "r1", "n": [1, 2]})
    meta = json.loads((tmp_path / "m" / "_METADATA").read_text())
    assert meta["custom_metadata"] == {"run": "r1", "n": [1, 2]}
    assert ocp.PyTreeCheckpointHandler().metadata(h.epath(path)).custom_metadata == {"run": "r1", "n": [1, 2]}
