"""Trees to the native layer's leaves (cairn's own helpers, shared by
cairn.save, the managers and the Orbax handlers): flattening a tree as Orbax
does and reading, off each jax.Array, the facts the native layer decides
from (its shards, every device's box, its sharding's mesh). The write
shapes and the `_sharding` text are decided natively."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

import numpy as np

from cairn import _core
from cairn import _dtypes
from cairn import _tree


def box_of(index, shape):
    """(origin, shape) of the box a tuple of slices (a jax index) selects."""
    origin, extent = [], []
    for sl, n in zip(index, shape):
        start, stop, _ = sl.indices(n)
        origin.append(start)
        extent.append(stop - start)
    return origin, extent


def absolute(directory) -> str:
    """A local path made absolute; a URL (s3://, gs://, file://, memory://)
    as it is: the native layer opens those itself."""
    d = os.fspath(directory)
    return d if "://" in d else os.path.abspath(d)


def jax_state():
    """jax.distributed's global state, or None if jax is not imported."""
    if "jax" not in sys.modules:
        return None
    from jax._src import distributed
    return distributed.global_state


def jax_runs(process_count: int) -> bool:
    """jax.distributed is up with `process_count` processes."""
    jax = jax_module()
    state = jax_state()
    return (jax is not None and state is not None and state.client is not None
            and jax.process_count() == process_count)


def jax_module():
    """jax if the caller has imported it (cairn never imports it itself)."""
    return sys.modules.get("jax")


def is_jax_array(x) -> bool:
    jax = jax_module()
    return jax is not None and isinstance(x, jax.Array)


def raw(values: np.ndarray) -> np.ndarray:
    return _dtypes.raw_view(_dtypes.native(np.asarray(values)))


def sharding_facts(sharding) -> Optional[dict]:
    """The facts of a NamedSharding or a SingleDeviceSharding the native
    layer writes to `_sharding` in Orbax's form (layout/orbax/sharding.h);
    None for other shardings."""
    jax = jax_module()
    if isinstance(sharding, jax.sharding.NamedSharding):
        mesh = sharding.mesh
        return {
            "type": "NamedSharding",
            "mesh_shape": list(mesh.devices.shape),
            "axis_names": [str(n) for n in mesh.axis_names],
            "axis_types": [str(t) for t in getattr(mesh, "axis_types", ())],
            "partition_spec": [list(p) if isinstance(p, tuple) else p for p in sharding.spec],
            "device_ids": [int(d.id) for d in mesh.devices.flat],
        }
    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        (device,) = sharding.device_set
        return {"type": "SingleDeviceSharding", "device_str": f"{device.platform}:{device.id}"}
    return None


def leaf(path, value, process_index, process_count, with_shards=True):
    """The native leaf tuple for `value` at `path` (see engine_bindings.cc):
    (path, value_type, dtype, shape, device boxes, process_count,
    [(origin, raw array, replica_id, immutable)], random_key_impl, sharding
    facts, string); the native layer picks the write shape from the boxes
    or the process count (engine/write_shape.h). A jax.Array's shards are immutable (jax never changes an
    array's buffer; the binding keeps them alive until the save is
    finished), so the engine reads them in the background instead of copying
    them before save_async returns, as Orbax does on the host; numpy arrays
    may change once save_async returns and are copied first. Without
    `with_shards` the leaf is only described (no shard is read), as the
    metadata a Pathways controller writes (cairn._colocated)."""
    jax = jax_module()
    if _tree.is_empty_node(value):
        return (path, _tree.empty_value_type(value), "", [], None, 1, [], None, None, None)
    if isinstance(value, str):
        return (path, "string", "", [], None, 1, [], None, None, value)
    if is_jax_array(value):
        key_impl = None
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            key_impl = str(jax.random.key_impl(value))
            value = jax.random.key_data(value)
        # Every device's box of the global sharding, not only this
        # process's shards: every process must pick the same write shape.
        boxes = [box_of(index, value.shape)
                 for index in value.sharding.devices_indices_map(tuple(value.shape)).values()]
        shards = []
        for shard in value.addressable_shards if with_shards else ():
            if process_count == 1 or shard.device.process_index == process_index:
                origin, _ = box_of(shard.index, value.shape)
                shards.append((origin, raw(np.asarray(shard.data)), int(shard.replica_id), True))
        return (path, "jax.Array", np.dtype(value.dtype).name, list(value.shape), boxes,
                process_count, shards, key_impl, sharding_facts(value.sharding), None)
    if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, np.ndarray):
        if isinstance(value, bool):
            arr = np.asarray(value, dtype=np.bool_)
        elif isinstance(value, int):
            arr = np.asarray(value, dtype=np.int64)
        elif isinstance(value, float):
            arr = np.asarray(value, dtype=np.float64)
        else:
            arr = np.asarray(value)
        return (path, "scalar", arr.dtype.name, [], None, process_count,
                [([], raw(arr), process_index, True)] if with_shards else [], None, None, None)
    if isinstance(value, np.ndarray):
        # Every process holds the whole array: replica `process_index` of
        # `process_count`.
        return (path, "np.ndarray", value.dtype.name, list(value.shape), None, process_count,
                [([0] * value.ndim, raw(value), process_index, False)] if with_shards else [],
                None, None, None)
    raise TypeError(f"cairn.save: unsupported leaf type {type(value).__name__} at key path "
                    f"{_tree.path_string(path)}: leaves are arrays, scalars, strings and empty "
                    "nodes; register other node types with jax.tree_util")


def flatten(tree, process_index: int, process_count: int):
    """Native leaf tuples of `tree`, flattened as Orbax flattens it
    (cairn._tree: NamedTuple fields and dataclass fields by name, empty
    nodes kept)."""
    if tree is None or _tree.is_empty_node(tree):
        raise ValueError("cairn.save: the tree is empty (Orbax refuses an empty item too)")
    leaves, _ = _tree.flatten(tree)
    return [leaf(list(path), value, process_index, process_count) for path, value in leaves]


def json_text(value: Any) -> str:
    """`value` as the JSON text the native layer takes (custom metadata)."""
    return json.dumps(value)


def byte_size(name: str, value: Any, default: int = 0) -> int:
    """A size keyword (`name`) in bytes: `default` for None, else an int or
    a string such as "1GiB" read by the native parser the CLI uses
    (ValueError naming `name` and the units)."""
    if value is None:
        return default
    return _core._byte_size(name, value)
