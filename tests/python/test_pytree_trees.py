"""The trees users save, flattened exactly as orbax-checkpoint 0.12.8
flattens them, moved cairn->Orbax, Orbax->cairn and cairn->cairn keeping
their node types and every bit; wrong targets refused with the path.

The real peer: orbax-checkpoint's PyTreeCheckpointer (and its _METADATA
key paths) on 8 simulated CPU devices, with flax TrainStates and optax
chains (train_state_helpers.py)."""

from __future__ import annotations

import json

import pytest

from train_state_helpers import (Pair, Stats, abstract_of, assert_same_tree, assorted_tree,
                                 train_state_tree)

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from flax.training import train_state  # noqa: E402

import cairn  # noqa: E402
from cairn import _tree  # noqa: E402


def tree_metadata(path):
    md = json.loads((path / "_METADATA").read_text())["tree_metadata"]
    return {k: (v["key_metadata"], v["value_metadata"]["value_type"]) for k, v in md.items()}


@pytest.mark.parametrize("make", [train_state_tree, assorted_tree], ids=["train_state", "assorted"])
def test_metadata_key_paths_and_value_types_are_orbaxs(tmp_path, make):
    tree = make()
    ocp.PyTreeCheckpointer().save(tmp_path / "orbax", tree)
    cairn.save(tmp_path / "cairn", tree, use_zarr3=False)
    theirs, ours = tree_metadata(tmp_path / "orbax"), tree_metadata(tmp_path / "cairn")
    assert list(ours) == list(theirs)  # same key paths, same order
    assert ours == theirs  # same key names, key types and value types
    # The optax state is named by field, not position.
    if make is train_state_tree:
        assert "('opt_state', '1', '0', 'count')" in ours
        assert ours["('opt_state', '0')"][1] == "None"  # EmptyState() of clip_by_global_norm


def test_flattening_matches_orbaxs_own(tmp_path):
    from orbax.checkpoint._src.tree import utils as tree_utils

    for tree in (train_state_tree(), assorted_tree()):
        theirs = jax.tree_util.tree_flatten_with_path(tree, is_leaf=tree_utils.is_empty_or_leaf)[0]
        ours, rebuild = _tree.flatten(tree)
        assert [tree_utils.tuple_path_from_keypath(kp) for kp, _ in theirs] == \
            [tuple(n for n, _ in p) for p, _ in ours]
        assert all(a is b for (_, a), (_, b) in zip(theirs, ours))
        assert jax.tree_util.tree_structure(rebuild([v for _, v in ours])) == jax.tree_util.tree_structure(tree)


def test_train_state_cairn_to_cairn_keeps_types_and_bits(tmp_path):
    state = train_state_tree(steps=2)
    cairn.save(tmp_path / "ck", state)
    back = cairn.restore(tmp_path / "ck", target=abstract_of(state))
    assert isinstance(back, train_state.TrainState)
    assert back.apply_fn is state.apply_fn and back.tx is state.tx  # static fields from the target
    assert isinstance(back.opt_state[1][0], optax.ScaleByAdamState)
    assert back.opt_state[0] == optax.EmptyState()
    assert_same_tree(back, state)


@pytest.mark.parametrize("use_ocdbt,use_zarr3", [(True, True), (True, False), (False, False)])
def test_train_state_cairn_to_orbax(tmp_path, use_ocdbt, use_zarr3):
    state = train_state_tree(steps=2)
    cairn.save(tmp_path / "ck", state, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3)
    back = ocp.StandardCheckpointer().restore(tmp_path / "ck", abstract_of(state))
    assert isinstance(back, train_state.TrainState)
    assert_same_tree(back, state)
    plain = ocp.PyTreeCheckpointer().restore(tmp_path / "ck", item=abstract_of(state))
    assert_same_tree(plain, state)


@pytest.mark.parametrize("use_ocdbt,use_zarr3", [(True, True), (False, False)])
def test_train_state_orbax_to_cairn(tmp_path, use_ocdbt, use_zarr3):
    state = train_state_tree(steps=3)
    ocp.PyTreeCheckpointer(use_ocdbt=use_ocdbt, use_zarr3=use_zarr3).save(tmp_path / "ck", state)
    back = cairn.restore(tmp_path / "ck", target=abstract_of(state))
    assert isinstance(back, train_state.TrainState)
    assert all(leaf is not None for leaf in jax.tree_util.tree_leaves(back))
    assert_same_tree(back, state)
    # Without a target: Orbax's own shape of the tree (dicts and lists).
    plain = cairn.restore(tmp_path / "ck")
    assert set(plain) == {"step", "params", "opt_state"}
    assert plain["opt_state"][0] is None and set(plain["opt_state"][1][0]) == {"count", "mu", "nu"}


def test_assorted_tree_both_ways(tmp_path):
    tree = assorted_tree()
    cairn.save(tmp_path / "ck", tree)
    back = cairn.restore(tmp_path / "ck", target=tree)
    assert isinstance(back["stats"], Stats) and back["stats"].name == "stats"
    assert isinstance(back["pair"], Pair) and isinstance(back["tup"], tuple)
    assert back["empty"] == optax.EmptyState() and back["none"] is None
    assert_same_tree(back, tree)
    ocp.PyTreeCheckpointer().save(tmp_path / "orbax", tree)
    assert_same_tree(cairn.restore(tmp_path / "orbax", target=tree), tree)
    # Orbax reads cairn's checkpoint as it reads its own (it gives a numpy
    # scalar leaf back as a Python scalar either way).
    theirs = ocp.PyTreeCheckpointer().restore(tmp_path / "ck", item=tree)
    assert_same_tree(theirs, ocp.PyTreeCheckpointer().restore(tmp_path / "orbax", item=tree))
    assert isinstance(theirs["stats"], Stats) and theirs["empty"] == optax.EmptyState()


def test_save_and_restore_take_orbax_args(tmp_path):
    state = train_state_tree()
    cairn.save(tmp_path / "ck", args=ocp.args.StandardSave(state))
    with pytest.raises(FileExistsError, match=f"checkpoint directory {tmp_path / 'ck'} already exists"):
        cairn.save(tmp_path / "ck", args=ocp.args.StandardSave(state))
    cairn.save(tmp_path / "ck", args=ocp.args.PyTreeSave(state, custom_metadata={"run": 7}), force=True)
    md = json.loads((tmp_path / "ck" / "_METADATA").read_text())
    assert md["custom_metadata"] == {"run": 7}
    back = cairn.restore(tmp_path / "ck", args=ocp.args.StandardRestore(abstract_of(state)))
    assert_same_tree(back, state)
    restore_args = ocp.checkpoint_utils.construct_restore_args(abstract_of(state))
    back = cairn.restore(tmp_path / "ck", args=ocp.args.PyTreeRestore(item=abstract_of(state),
                                                                       restore_args=restore_args))
    assert_same_tree(back, state)


def test_a_target_with_a_different_structure_is_refused_with_the_path(tmp_path):
    state = train_state_tree()
    cairn.save(tmp_path / "ck", state)
    # A list where the checkpoint holds a dict.
    with pytest.raises(ValueError, match=r"\('0',\).*does not hold"):
        cairn.restore(tmp_path / "ck", target=[1, 2, 3])
    # A target missing a leaf: the first leaf it lacks is named.
    smaller = dict(state.params)
    smaller["params"] = {k: v for k, v in smaller["params"].items() if k != "Dense_1"}
    partial = state.replace(params=smaller)
    with pytest.raises(ValueError, match=r"\('params', 'params', 'Dense_1', 'bias'\).*partial_restore=True"):
        cairn.restore(tmp_path / "ck", target=abstract_of(partial))
    # Asked for explicitly, the part comes back (and only the part is read).
    back = cairn.restore(tmp_path / "ck", target=abstract_of(partial), partial_restore=True)
    assert_same_tree(back, partial)
    # A leaf the checkpoint lacks.
    bigger = {"step": 0, "params": abstract_of(state.params), "opt_state": abstract_of(state.opt_state),
              "extra": np.zeros(3)}
    with pytest.raises(ValueError, match=r"\('extra',\).*does not hold"):
        cairn.restore(tmp_path / "ck", target=bigger)
    # An empty node where the checkpoint holds data.
    with pytest.raises(ValueError, match=r"\('step',\).*empty node"):
        cairn.restore(tmp_path / "ck", target=state.replace(step=None))


def test_orbax_written_checkpoint_into_a_wrong_target_never_gives_none(tmp_path):
    state = train_state_tree()
    ocp.PyTreeCheckpointer().save(tmp_path / "ck", state)
    with pytest.raises(ValueError, match="structure differs"):
        cairn.restore(tmp_path / "ck", target={"params": abstract_of(state.params)})
    back = cairn.restore(tmp_path / "ck", target={"params": abstract_of(state.params)}, partial_restore=True)
    assert all(leaf is not None for leaf in jax.tree_util.tree_leaves(back))
    assert_same_tree(back, {"params": state.params})


def test_plain_trees_save_alike_with_and_without_jax_rules(tmp_path):
    # A NamedTuple outside jax's view flattens by field name as with jax.
    from cairn._tree import _flatten_plain

    tree = {"b": Pair(np.arange(2), {"z": None}), "a": (1, [])}
    plain, rebuild = _flatten_plain(tree)
    with_jax, _ = _tree.flatten(tree)
    assert [p for p, _ in plain] == [p for p, _ in with_jax]
    again = rebuild([v for _, v in plain])
    assert isinstance(again["b"], Pair) and again["a"] == (1, [])


class KeyedNode:
    """A custom pytree node registered with key paths (named children)."""

    def __init__(self, a, b):
        self.a, self.b = a, b


class PlainNode:
    """A custom pytree node registered without key paths (jax numbers its
    children: FlattenedIndexKey)."""

    def __init__(self, x, y):
        self.x, self.y = x, y


jax.tree_util.register_pytree_with_keys(
    KeyedNode,
    lambda n: (((jax.tree_util.GetAttrKey("a"), n.a), (jax.tree_util.GetAttrKey("b"), n.b)), None),
    lambda _, children: KeyedNode(*children))
jax.tree_util.register_pytree_node(PlainNode, lambda n: ((n.x, n.y), None), lambda _, c: PlainNode(*c))


def test_custom_nodes_with_and_without_key_paths(tmp_path):
    tree = {"keyed": KeyedNode(np.arange(3, dtype=np.int32), {"z": np.ones(2, np.float32)}),
            "plain": PlainNode(np.float64(1.5) * np.ones(4), np.arange(2, dtype=np.uint8))}
    ocp.PyTreeCheckpointer().save(tmp_path / "orbax", tree)
    cairn.save(tmp_path / "cairn", tree, use_zarr3=False)
    assert tree_metadata(tmp_path / "cairn") == tree_metadata(tmp_path / "orbax")
    assert "('keyed', 'b', 'z')" in tree_metadata(tmp_path / "cairn")
    assert tree_metadata(tmp_path / "cairn")["('plain', '1')"][0][1] == {"key": "1", "key_type": 1}
    for path in (tmp_path / "cairn", tmp_path / "orbax"):
        back = cairn.restore(path, target=tree)
        assert isinstance(back["keyed"], KeyedNode) and isinstance(back["plain"], PlainNode)
        assert_same_tree(back, tree)
