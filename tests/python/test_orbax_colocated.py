"""Pathways colocated Python: ``cairn.orbax.PyTreeCheckpointHandler(colocated=True)``
against orbax-checkpoint 0.12.8's colocated path (``ColocatedPythonDispatcher``
type handlers, through a local type handler registry, so Orbax's global one
stays as it is). On CPU, jax runs a colocated function in the calling
process after pickling and unpickling it, so the worker code path is real.

Both ways, bit for bit: what cairn saves colocated, Orbax restores
colocated and plainly; what Orbax saves colocated, cairn restores colocated
and plainly. The layout is Orbax's colocated one: the jax.Arrays' chunks in
``ocdbt.process_0/`` (the host), the numpy arrays' and scalars' in
``ocdbt.process_pwcontroller/`` (the controller)."""

from __future__ import annotations

import os

import pytest

from orbax_helpers import mesh
from train_state_helpers import abstract_of, assert_same_tree, train_state_tree

import jax  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402
from orbax.checkpoint._src.serialization import pathways_handler_registry as phr  # noqa: E402
from orbax.checkpoint._src.serialization import type_handler_registry as thr  # noqa: E402
from orbax.checkpoint._src.serialization import type_handlers as th  # noqa: E402

import cairn  # noqa: E402
import cairn.kvstore  # noqa: E402
import cairn.orbax  # noqa: E402
from cairn import _colocated, _tree  # noqa: E402


def orbax_colocated_registry():
    """Orbax's colocated type handlers, as ``ocp.pathways.register_type_handlers(
    checkpointing_impl=COLOCATED_PYTHON)`` installs them globally."""
    scalar = phr.get_pathways_scalar_handler()
    return thr.create_type_handler_registry(
        (int, scalar), (float, scalar), (bytes, scalar), (np.number, scalar),
        (np.ndarray, phr.get_pathways_numpy_handler()),
        (jax.Array, phr.get_pathways_array_handler(checkpointing_impl=phr.CheckpointingImpl.COLOCATED_PYTHON)),
        (str, th.StringHandler()), (type(th.PLACEHOLDER), th.PlaceholderHandler()))


def item(seed=0, steps=2):
    """A TrainState (jax.Arrays; its step a Python int) beside a numpy
    array and a float scalar: what the hosts and the controller each save."""
    return {"state": train_state_tree(seed=seed, steps=steps),
            "mask": np.arange(24, dtype=np.int16).reshape(4, 6), "lr": 0.25}


def orbax_restore_args(tree):
    abstract = abstract_of(tree)
    return ocp.args.PyTreeRestore(item=abstract, restore_args=ocp.checkpoint_utils.construct_restore_args(abstract))


def params_by_owner(tree):
    """(params of jax.Array leaves, params of the controller's leaves)."""
    jax_params, controller = set(), set()
    for path, value in _tree.flatten(tree)[0]:
        param = ".".join(n for n, _ in path)
        if not _tree.is_empty_node(value):
            (jax_params if isinstance(value, jax.Array) else controller).add(param)
    return jax_params, controller


def stored_params(directory, process):
    keys = cairn.kvstore.open(f"file://{directory}/ocdbt.process_{process}/|ocdbt:").keys()
    return {k.rsplit("/", 1)[0] for k in keys}


def assert_colocated_layout(directory, tree):
    jax_params, controller = params_by_owner(tree)
    assert len(jax_params) > 5 and {"mask", "lr", "state.step"} <= controller
    assert sorted(p for p in os.listdir(directory) if p.startswith("ocdbt.")) == [
        "ocdbt.process_0", "ocdbt.process_pwcontroller"]
    assert stored_params(directory, 0) == jax_params
    assert stored_params(directory, "pwcontroller") == controller
    assert os.listdir(os.path.join(directory, "array_metadatas")) == ["process_0"]
    # The root database holds every key of both.
    root = {k.rsplit("/", 1)[0] for k in cairn.kvstore.open(f"file://{directory}/|ocdbt:").keys()}
    assert root == jax_params | controller


def test_cairn_saves_colocated_and_orbax_restores_colocated_and_plain(tmp_path):
    tree = item()
    directory = tmp_path / "ckpt"
    saves, restores = _colocated.host_saves, _colocated.host_restores
    with ocp.Checkpointer(cairn.orbax.PyTreeCheckpointHandler(colocated=True)) as ours:
        ours.save(directory, args=ocp.args.PyTreeSave(tree))
    assert _colocated.host_saves == saves + 1, "the host function did not run"
    assert_colocated_layout(directory, tree)

    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(type_handler_registry=orbax_colocated_registry())) as theirs:
        assert_same_tree(theirs.restore(directory, args=orbax_restore_args(tree)), tree)
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as plain:
        assert_same_tree(plain.restore(directory, args=orbax_restore_args(tree)), tree)
    # and cairn's own colocated restore, onto another sharding
    m = mesh()
    target = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(
        m, P("model") if s.ndim == 2 else P())) if isinstance(s, jax.ShapeDtypeStruct) else s, abstract_of(tree))
    with ocp.Checkpointer(cairn.orbax.PyTreeCheckpointHandler(colocated=True)) as ours:
        back = ours.restore(directory, args=ocp.args.PyTreeRestore(item=target))
    assert _colocated.host_restores == restores + 1
    got, want, wanted = jax.tree.leaves(back), jax.tree.leaves(tree), jax.tree.leaves(target)
    assert len(got) == len(want)
    for g, w, t in zip(got, want, wanted):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes() and np.asarray(g).dtype == np.asarray(w).dtype
        if isinstance(t, jax.ShapeDtypeStruct):
            assert g.sharding == t.sharding


def test_orbax_saves_colocated_and_cairn_restores_colocated_and_plain(tmp_path):
    tree = item(seed=3)
    directory = tmp_path / "ckpt"
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(type_handler_registry=orbax_colocated_registry())) as theirs:
        theirs.save(directory, args=ocp.args.PyTreeSave(tree))
    assert_colocated_layout(directory, tree)  # Orbax's own layout, as cairn writes it

    restores = _colocated.host_restores
    with ocp.Checkpointer(cairn.orbax.PyTreeCheckpointHandler(colocated=True)) as ours:
        back = ours.restore(directory, args=ocp.args.PyTreeRestore(item=abstract_of(tree)))
    assert _colocated.host_restores == restores + 1, "the host function did not run"
    assert_same_tree(back, tree)
    assert_same_tree(cairn.restore(directory, abstract_of(tree)), tree)


def test_orbax_checkpoint_manager_drives_the_colocated_handler(tmp_path):
    states = [item(seed=s, steps=s + 1) for s in (1, 2)]
    saves = _colocated.host_saves
    handler = cairn.orbax.PyTreeCheckpointHandler(colocated=True)
    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=True, max_to_keep=1)
    with ocp.CheckpointManager(tmp_path, item_names=("items",), item_handlers={"items": handler},
                               options=options) as mngr:
        for step, state in enumerate(states):
            assert mngr.save(step, args=ocp.args.Composite(items=ocp.args.PyTreeSave(state)))
        mngr.wait_until_finished()
        assert mngr.all_steps() == [1]
        back = mngr.restore(1, args=ocp.args.Composite(items=ocp.args.PyTreeRestore(item=abstract_of(states[1]))))
    assert _colocated.host_saves == saves + 2
    assert_same_tree(back["items"], states[1])
    assert_colocated_layout(tmp_path / "1" / "items", states[1])
    assert (tmp_path / "1" / "_CHECKPOINT_METADATA").exists()
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(type_handler_registry=orbax_colocated_registry())) as theirs:
        assert_same_tree(theirs.restore(tmp_path / "1" / "items", args=orbax_restore_args(states[1])), states[1])


def test_a_differing_target_and_auto_compression_are_refused(tmp_path):
    tree = item()
    directory = tmp_path / "ckpt"
    with ocp.Checkpointer(cairn.orbax.PyTreeCheckpointHandler(colocated=True)) as ours:
        ours.save(directory, args=ocp.args.PyTreeSave(tree))
        target = abstract_of(tree)
        del target["mask"]
        with pytest.raises(ValueError, match=r"holds an array \(np\.ndarray\) at \('mask',\), which the target does not have"):
            ours.restore(directory, args=ocp.args.PyTreeRestore(item=target))
        partial = ours.restore(directory, args=ocp.args.PyTreeRestore(item=target, partial_restore=True))
        assert_same_tree(partial, {k: v for k, v in tree.items() if k != "mask"})
    with ocp.Checkpointer(cairn.orbax.PyTreeCheckpointHandler(colocated=True, compression="auto")) as auto:
        with pytest.raises(ValueError, match=r"cairn\.orbax \(colocated\): compression 'auto' needs every host's samples"):
            auto.save(tmp_path / "auto", args=ocp.args.PyTreeSave(tree))


def test_standard_handler_in_colocated_mode(tmp_path):
    state = train_state_tree(steps=1)
    saves, restores = _colocated.host_saves, _colocated.host_restores
    ckptr = ocp.Checkpointer(cairn.orbax.StandardCheckpointHandler(colocated=True))
    ckptr.save(tmp_path / "s", args=ocp.args.StandardSave(state))
    assert _colocated.host_saves == saves + 1
    back = ckptr.restore(tmp_path / "s", args=ocp.args.StandardRestore(abstract_of(state)))
    assert _colocated.host_restores == restores + 1
    assert_same_tree(back, state)
    assert_same_tree(ocp.StandardCheckpointer().restore(tmp_path / "s", abstract_of(state)), state)
