"""Orbax's checkpoint args read by cairn: ``ocp.args.PyTreeSave`` /
``StandardSave`` (the tree and its ``SaveArgs``), ``PyTreeRestore`` /
``StandardRestore`` (the target and its ``ArrayRestoreArgs``) and
``Composite``. Duck-typed: nothing here imports orbax-checkpoint, so that
``cairn.save(args=...)`` and the managers read the args of any caller."""

from __future__ import annotations

import sys
from typing import Optional

import numpy as np

from cairn import _tree

__all__ = ["apply_save_args", "chunk_byte_size", "target_of_restore_args", "composite_items",
           "is_composite", "single_item"]


def _jax():
    return sys.modules.get("jax")


def is_composite(args) -> bool:
    """True for ``ocp.args.Composite`` (a mapping of item names to args)."""
    return any(c.__name__ in ("Composite", "CompositeArgs") for c in type(args).__mro__) and hasattr(args, "keys")


def composite_items(args) -> dict:
    """{item name: args} of a ``Composite`` (in its order)."""
    return {k: args[k] for k in args.keys()}


def single_item(args, what: str = "cairn"):
    """The args of the one item of a ``Composite`` (``Composite(state=
    PyTreeSave(...))``), or `args` itself when it is not a Composite."""
    if not is_composite(args):
        return args
    items = composite_items(args)
    if len(items) != 1:
        raise ValueError(f"{what}: a Composite of one item is expected, got items {sorted(items)}")
    return next(iter(items.values()))


def apply_save_args(item, save_args):
    """`item` with the per-leaf ``SaveArgs(dtype=...)`` casts applied;
    NotImplementedError for ``aggregate``."""
    if save_args is None:
        return item
    leaves, rebuild = _tree.flatten(item)
    by_names = {tuple(n for n, _ in p): a for p, a in _tree.flatten(save_args)[0]}
    out = []
    for path, value in leaves:
        a = by_names.get(tuple(n for n, _ in path))
        if a is not None and getattr(a, "aggregate", False):
            raise NotImplementedError(f"cairn.orbax: SaveArgs(aggregate=True) at {_tree.path_string(path)}")
        dtype = getattr(a, "dtype", None) if a is not None else None
        if dtype is not None and hasattr(value, "astype") and np.dtype(dtype) != np.dtype(value.dtype):
            value = value.astype(dtype)
        out.append(value)
    return rebuild(out)


def chunk_byte_size(save_args) -> Optional[int]:
    """The smallest ``SaveArgs.chunk_byte_size`` asked for (cairn applies
    one bound to every array of a save)."""
    if save_args is None:
        return None
    sizes = [getattr(a, "chunk_byte_size", None) for _, a in _tree.flatten(save_args)[0]]
    sizes = [s for s in sizes if s]
    return min(sizes) if sizes else None


def target_of_restore_args(args, partial_restore=False):
    """(target, partial_restore) from Orbax restore args: ``PyTreeRestore``
    (`item`, `restore_args`, `partial_restore`; `transforms={}` restores the
    keys `item` names, as in Orbax) or ``StandardRestore`` (`item`)."""
    item = getattr(args, "item", None)
    restore_args = getattr(args, "restore_args", None)
    partial_restore = partial_restore or bool(getattr(args, "partial_restore", False))
    transforms = getattr(args, "transforms", None)
    if transforms is not None:
        if transforms:
            raise NotImplementedError("cairn.restore: Orbax `transforms` other than {} are not supported")
        partial_restore = True
    if getattr(args, "legacy_transform_fn", None) is not None:
        raise NotImplementedError("cairn.restore: Orbax `legacy_transform_fn` is not supported")
    if restore_args is not None:
        item = _with_restore_args(item, restore_args)
    return item, partial_restore


def _with_restore_args(item, restore_args):
    """The target `item` with Orbax ``ArrayRestoreArgs`` (sharding, global
    shape, dtype) applied to its leaves; `restore_args` alone when there is
    no item (its tree then gives the structure)."""
    jax = _jax()
    if jax is None:
        return item
    leaves, rebuild = _tree.flatten(restore_args if item is None else item)
    if item is None:
        return rebuild([_target_of_restore_arg(None, ra, jax) for _, ra in leaves])
    ra_leaves, _ = _tree.flatten(restore_args)
    by_names = {tuple(n for n, _ in p): ra for p, ra in ra_leaves}
    out = []
    for path, leaf in leaves:
        ra = by_names.get(tuple(n for n, _ in path))
        out.append(_target_of_restore_arg(leaf, ra, jax))
    return rebuild(out)


def _target_of_restore_arg(leaf, ra, jax):
    if ra is None or _tree.is_empty_node(ra):
        return leaf
    sharding = getattr(ra, "sharding", None)
    shape = getattr(ra, "global_shape", None)
    dtype = getattr(ra, "dtype", None)
    if sharding is None:
        if dtype is not None and leaf is not None and hasattr(leaf, "shape"):
            return jax.ShapeDtypeStruct(leaf.shape, dtype, sharding=getattr(leaf, "sharding", None))
        return leaf
    if shape is None and leaf is not None:
        shape = getattr(leaf, "shape", None)
    if dtype is None and leaf is not None:
        dtype = getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        return leaf
    return jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=sharding)
