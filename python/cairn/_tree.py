"""Trees as orbax-checkpoint 0.12.8 flattens them: the one place cairn
decides what a tree's leaves are and what they are called.

A tree is any jax pytree: dicts, lists, tuples, NamedTuples (optax's
``ScaleByAdamState``), dataclasses registered with jax or flax
(``flax.struct.dataclass``, ``flax.training.train_state.TrainState``, whose
static fields are not leaves) and custom nodes registered with key paths.
Its leaves are what jax's ``tree_flatten_with_path`` yields with Orbax's
``is_empty_or_leaf``: arrays, scalars and strings, and the empty nodes
(``None``, ``{}``, ``[]``, ``()``, ``optax.EmptyState()``), which Orbax
keeps as leaves so that the tree's shape survives a save.

Each leaf gets a key path of (name, key type) pairs, as Orbax's
``_METADATA`` records them: a dict key or an attribute name (NamedTuple
field, dataclass field) is a name of type DICT; a list or tuple position is
its index, of type SEQUENCE. The param name is the names joined by ".".

Without jax imported (plain dicts of numpy arrays) the same rules are
applied to dicts, lists, tuples and NamedTuples directly, so a tree saves
alike with or without jax.

Restoring into a target goes the other way: ``flatten`` gives the target's
leaves and ``rebuild`` puts restored values back into the target's own node
types (a ``TrainState`` comes back a ``TrainState``, ``EmptyState()`` stays
``EmptyState()``).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, List, Tuple

SEQUENCE, DICT = 1, 2

KeyPath = Tuple[Tuple[str, int], ...]

__all__ = ["SEQUENCE", "DICT", "flatten", "is_empty_node", "empty_value_type", "path_string"]


def _jax():
    """jax if the caller has imported it (cairn never imports it itself)."""
    return sys.modules.get("jax")


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children_one_level(x, jax):
    """(children, is_leaf) of `x` one level down, as jax sees it."""
    tu = jax.tree_util
    leaves, treedef = tu.tree_flatten(x, is_leaf=lambda y: y is not x)
    return leaves, tu.treedef_is_leaf(treedef) and len(leaves) == 1 and leaves[0] is x


def _is_empty_or_leaf(x, jax) -> bool:
    """Orbax's ``tree_utils.is_empty_or_leaf``: `x` is a leaf or a node
    without children."""
    children, is_leaf = _children_one_level(x, jax)
    return is_leaf or not children


def is_empty_node(x) -> bool:
    """True for a tree node without children (None, {}, [], (), an empty
    NamedTuple such as ``optax.EmptyState()``, an empty registered node)."""
    if x is None:
        return True
    if isinstance(x, (dict, list, tuple)):
        return not x
    jax = _jax()
    if jax is None:
        return False
    children, is_leaf = _children_one_level(x, jax)
    return not is_leaf and not children


def empty_value_type(x) -> str:
    """The ``value_type`` Orbax records for an empty node: "Dict", "List",
    "Tuple" or "None" (None, and every empty NamedTuple or registered node:
    Orbax 0.12.8 without ``support_rich_types`` records those as None)."""
    if isinstance(x, dict):
        return "Dict"
    if isinstance(x, list):
        return "List"
    if isinstance(x, tuple) and not _is_namedtuple(x):
        return "Tuple"
    return "None"


def _key_of(key, jax) -> Tuple[str, int]:
    tu = jax.tree_util
    if isinstance(key, tu.SequenceKey):
        return str(key.idx), SEQUENCE
    if isinstance(key, tu.DictKey):
        return str(key.key), DICT
    if isinstance(key, tu.GetAttrKey):
        return str(key.name), DICT
    if isinstance(key, tu.FlattenedIndexKey):
        return str(key.key), SEQUENCE
    raise TypeError(f"cairn: unsupported pytree key {key!r} ({type(key).__name__}): "
                    "register the node with jax.tree_util.register_pytree_with_keys")


def path_string(path: KeyPath) -> str:
    """A key path as users read it: ``('opt_state', '1', '0', 'count')``."""
    return repr(tuple(name for name, _ in path))


def flatten(tree: Any) -> Tuple[List[Tuple[KeyPath, Any]], Callable[[List[Any]], Any]]:
    """The leaves of `tree` with their key paths, in jax's flattening order
    (dict keys sorted), and a function that rebuilds a tree of `tree`'s node
    types from a list of new leaves in that order."""
    jax = _jax()
    if jax is not None:
        tu = jax.tree_util
        flat, treedef = tu.tree_flatten_with_path(tree, is_leaf=lambda x: _is_empty_or_leaf(x, jax))
        leaves = [(tuple(_key_of(k, jax) for k in kp), v) for kp, v in flat]
        return leaves, lambda values: tu.tree_unflatten(treedef, list(values))
    return _flatten_plain(tree)


def _sorted_keys(d: dict):
    try:
        return sorted(d)
    except TypeError:  # mixed key types: as jax, by (type name, key)
        return sorted(d, key=lambda k: (type(k).__name__, k))


def _flatten_plain(tree):
    """`flatten` for dicts, lists, tuples and NamedTuples without jax."""
    leaves: List[Tuple[KeyPath, Any]] = []

    def build_of(node, path):
        if isinstance(node, dict) and node:
            keys = _sorted_keys(node)
            subs = [build_of(node[k], path + ((str(k), DICT),)) for k in keys]
            cls = type(node)
            return lambda it: _make_dict(cls, keys, [s(it) for s in subs])
        if _is_namedtuple(node) and node:
            subs = [build_of(v, path + ((f, DICT),)) for f, v in zip(type(node)._fields, node)]
            cls = type(node)
            return lambda it: cls(*[s(it) for s in subs])
        if isinstance(node, (list, tuple)) and node:
            subs = [build_of(v, path + ((str(i), SEQUENCE),)) for i, v in enumerate(node)]
            cls = type(node)
            return lambda it: cls(s(it) for s in subs)
        leaves.append((path, node))
        return lambda it: next(it)

    build = build_of(tree, ())
    return leaves, lambda values: build(iter(list(values)))


def _make_dict(cls, keys, values):
    d = dict(zip(keys, values))
    return d if cls is dict else cls(d)
