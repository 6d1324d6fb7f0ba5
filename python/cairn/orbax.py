"""Orbax checkpoints: ``cairn.save(..., format="orbax")`` and ``cairn.restore``.

Writes and reads the on-disk layout of orbax-checkpoint's PyTree items in
all four storage variants (``use_ocdbt`` x ``use_zarr3``), so that Orbax
restores what cairn saved and cairn restores what Orbax saved.

The tree is flattened here (dicts, lists/tuples, arrays, scalars, strings,
None and empty containers) and handed to the native layer in one call,
which writes every array, the metadata files and commits. Restoring reads
``_METADATA``, rebuilds the tree from its ``key_metadata`` and fills every
array in one native call.

Several processes (or a test harness standing in for them) save one
checkpoint together by calling ``save`` with the same directory and their
own ``process_index``; ``barrier`` is a callable every process calls at the
same points (e.g. ``jax.experimental.multihost_utils.sync_global_devices``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Optional

import numpy as np

from cairn import _core
from cairn import _dtypes

__all__ = ["save", "restore", "all_steps", "latest_step", "PYTREE_HANDLER"]

PYTREE_HANDLER = "orbax.checkpoint._src.handlers.pytree_checkpoint_handler.PyTreeCheckpointHandler"
_SEQUENCE, _DICT = 1, 2


def _jax():
    """jax if the caller has imported it (cairn never imports it itself)."""
    return sys.modules.get("jax")


def _is_jax_array(x) -> bool:
    jax = _jax()
    return jax is not None and isinstance(x, jax.Array)


def _raw(values: np.ndarray) -> np.ndarray:
    return _dtypes.raw_view(np.require(_dtypes.native(np.asarray(values)), requirements="C"))


def _sharding_json(sharding) -> Optional[str]:
    """The `_sharding` entry Orbax writes for a NamedSharding or a
    SingleDeviceSharding (None for other shardings)."""
    jax = _jax()
    if isinstance(sharding, jax.sharding.NamedSharding):
        mesh = sharding.mesh
        spec = []
        for p in sharding.spec:
            spec.append(list(p) if isinstance(p, tuple) else p)
        devices = np.vectorize(lambda d: {"id": int(d.id)}, otypes=[object])(mesh.devices).tolist()
        axis_types = [str(t) for t in getattr(mesh, "axis_types", ())] or ["AxisType.Auto"] * len(mesh.axis_names)
        return json.dumps({
            "sharding_type": "NamedSharding",
            "shape": list(mesh.devices.shape),
            "axis_names": list(mesh.axis_names),
            "axis_types": axis_types,
            "partition_spec": spec,
            "device_mesh": {"mesh": devices},
        })
    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        (device,) = sharding.device_set
        return json.dumps({"sharding_type": "SingleDeviceSharding",
                           "device_str": f"{device.platform}:{device.id}"})
    return None


def _box_of(index, shape):
    origin, extent = [], []
    for sl, n in zip(index, shape):
        start, stop, _ = sl.indices(n)
        origin.append(start)
        extent.append(stop - start)
    return origin, extent


def _split_for_processes(values: np.ndarray, process_index: int, process_count: int):
    """(write_shape, shards) when `process_count` processes share a numpy
    array: split along the first axis divisible by the count; otherwise
    process 0 writes it whole (as Orbax does for numpy leaves)."""
    shape = values.shape
    for axis, n in enumerate(shape):
        if process_count > 1 and n % process_count == 0 and n > 0:
            part = n // process_count
            write_shape = list(shape)
            write_shape[axis] = part
            sl = [slice(None)] * len(shape)
            sl[axis] = slice(process_index * part, (process_index + 1) * part)
            origin = [0] * len(shape)
            origin[axis] = process_index * part
            return write_shape, [(origin, _raw(values[tuple(sl)]))]
    return list(shape), ([([0] * len(shape), _raw(values))] if process_index == 0 else [])


def _leaf(path, value, process_index, process_count):
    """The native leaf tuple for `value` at `path` (see layout_bindings.cc)."""
    jax = _jax()
    if value is None:
        return (path, "None", "", [], None, [], None, None, None)
    if isinstance(value, dict) and not value:
        return (path, "Dict", "", [], None, [], None, None, None)
    if isinstance(value, list) and not value:
        return (path, "List", "", [], None, [], None, None, None)
    if isinstance(value, tuple) and not value:
        return (path, "Tuple", "", [], None, [], None, None, None)
    if isinstance(value, str):
        return (path, "string", "", [], None, [], None, None, value)
    if _is_jax_array(value):
        key_impl = None
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            key_impl = str(jax.random.key_impl(value))
            value = jax.random.key_data(value)
        # The write shape from the global sharding (the shard at the origin,
        # the largest one when uneven), not from this process's shards: a
        # process may hold no replica-0 shard of an array, and every process
        # must report the same write shape.
        first = next(iter(value.sharding.devices_indices_map(tuple(value.shape)).values()))
        write_shape = _box_of(first, value.shape)[1]
        shards = []
        for shard in value.addressable_shards:
            if shard.replica_id != 0:
                continue
            origin, _ = _box_of(shard.index, value.shape)
            if process_count == 1 or shard.device.process_index == process_index:
                shards.append((origin, _raw(np.asarray(shard.data))))
        return (path, "jax.Array", np.dtype(value.dtype).name, list(value.shape),
                write_shape, shards, key_impl,
                _sharding_json(value.sharding), None)
    if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, np.ndarray):
        if isinstance(value, bool):
            arr = np.asarray(value, dtype=np.bool_)
        elif isinstance(value, int):
            arr = np.asarray(value, dtype=np.int64)
        elif isinstance(value, float):
            arr = np.asarray(value, dtype=np.float64)
        else:
            arr = np.asarray(value)
        shards = [([], _raw(arr))] if process_index == 0 else []
        return (path, "scalar", arr.dtype.name, [], [], shards, None, None, None)
    if isinstance(value, np.ndarray):
        write_shape, shards = _split_for_processes(value, process_index, process_count)
        return (path, "np.ndarray", value.dtype.name, list(value.shape), write_shape, shards,
                None, None, None)
    raise TypeError(f"cairn.save: unsupported leaf type {type(value).__name__} at key path "
                    f"{tuple(k for k, _ in path)}")


def _flatten(tree, process_index: int, process_count: int):
    """Leaf tuples in jax's flattening order (dict keys sorted)."""
    out = []

    def visit(node, path):
        if isinstance(node, dict) and node:
            for k in sorted(node, key=lambda k: (str(type(k)), k)):
                visit(node[k], path + [(str(k), _DICT)])
        elif isinstance(node, (list, tuple)) and node:
            for i, v in enumerate(node):
                visit(v, path + [(str(i), _SEQUENCE)])
        else:
            out.append(_leaf(path, node, process_index, process_count))

    visit(tree, [])
    return out


def save(directory, tree, *, format: str = "orbax", use_ocdbt: bool = True,
         use_zarr3: bool = True, step: Optional[int] = None, item_name: str = "default",
         step_prefix: Optional[str] = None, step_format_fixed_length: Optional[int] = None,
         custom_metadata: Any = None, chunk_byte_size: Optional[int] = None,
         ocdbt_target_data_file_size: Optional[int] = None, process_index: int = 0,
         process_count: int = 1, barrier: Optional[Callable[[str], None]] = None,
         save_id: Optional[str] = None) -> str:
    """Saves `tree` as an Orbax PyTree checkpoint; returns the final directory.

    Without `step`, `directory` becomes the item directory, as
    ``ocp.PyTreeCheckpointer().save(directory, tree)`` makes it. With
    `step`, `directory` is a checkpoint root and the tree goes to
    ``<directory>/<step name>/<item_name>/`` as ``CheckpointManager`` lays it
    out. The directory is written under a ``.orbax-checkpoint-tmp`` name,
    marked with ``commit_success.txt`` and renamed; FileExistsError if it
    exists. Chunks follow Orbax's rule: one chunk per write (shard) shape,
    split when larger than the target data file size (2 GiB) or
    `chunk_byte_size`. ValueError when two key paths map to the same Orbax
    param name (Orbax joins keys with '.' without escaping).

    Every save has a save id (`save_id`, or a random one): its temporary
    directory is ``<final>.orbax-checkpoint-tmp-<id>``, and a writer of
    another save never writes into it. With several processes, pass the
    same `save_id` to all of them; without one, the other processes find
    the primary's temporary directory after the first barrier.
    """
    if format != "orbax":
        raise ValueError(f"cairn.save: format {format!r} is not supported here (only 'orbax')")
    if process_count > 1 and barrier is None:
        raise ValueError("cairn.save: several processes need a `barrier` callable")
    sync = barrier or (lambda name: None)
    primary = process_index == 0
    root = os.path.abspath(os.fspath(directory))
    if step is not None:
        final_top = os.path.join(root, _core._orbax_step_name(step, step_prefix or "", step_format_fixed_length))
    else:
        final_top = root
    init_ns = _core._now_nanos()
    if primary:
        top_tmp, save_id = _core._orbax_begin_commit(final_top, save_id or "")
        item_tmp = (_core._orbax_begin_commit(os.path.join(top_tmp, item_name), save_id)[0]
                    if step is not None else top_tmp)
    sync("cairn_save_dirs_created")
    if not primary:
        if save_id:
            top_tmp = _core._orbax_pending_path(final_top, save_id)
        else:
            top_tmp, save_id = _core._orbax_find_pending(final_top)
        item_tmp = (_core._orbax_pending_path(os.path.join(top_tmp, item_name), save_id)
                    if step is not None else top_tmp)
    leaves = _flatten(tree, process_index, process_count)
    target = ocdbt_target_data_file_size if ocdbt_target_data_file_size is not None else 2 ** 31
    custom = json.dumps(custom_metadata)
    _core._orbax_write_shards(item_tmp, leaves, use_ocdbt, use_zarr3, process_index,
                              process_count, target, chunk_byte_size or 0, custom)
    sync("cairn_save_shards_written")
    if primary:
        _core._orbax_finalize_item(item_tmp, leaves, use_ocdbt, use_zarr3, process_count, custom)
        if step is not None:
            _core._orbax_finish_commit(os.path.join(top_tmp, item_name), save_id)
            _core._orbax_write_checkpoint_metadata(top_tmp, PYTREE_HANDLER, [item_name], init_ns, "{}")
        else:
            _core._orbax_write_checkpoint_metadata(top_tmp, PYTREE_HANDLER, [], init_ns, "{}")
        _core._orbax_finish_commit(final_top, save_id)
    sync("cairn_save_committed")
    return os.path.join(final_top, item_name) if step is not None else final_top


def all_steps(root) -> list:
    """Finalized steps under a checkpoint root, ascending."""
    return [s for s, _ in _core._orbax_list_steps(os.fspath(root))]


def latest_step(root) -> Optional[int]:
    steps = all_steps(root)
    return steps[-1] if steps else None


def _restore_leaf(value, impls, jax):
    kind, param, value_type = value
    arr = impls["arrays"][param]
    impl = impls["keys"].get(param)
    if impl is not None and jax is not None:
        return jax.random.wrap_key_data(arr, impl=impl)
    if value_type == "scalar":
        return arr.item() if arr.shape == () else arr
    return arr


def _apply_target(restored, target, jax, where=()):
    """Places restored arrays as `target` asks: a jax.Array or ShapeDtypeStruct
    with a sharding gives a jax.Array with that sharding (and dtype)."""
    if target is None:
        return restored
    if isinstance(target, dict) and isinstance(restored, dict):
        missing = set(target) - set(restored)
        if missing:
            raise KeyError(f"cairn.restore: target keys {sorted(map(str, missing))} at {where} "
                           "are not in the checkpoint")
        return {k: _apply_target(restored[k], target[k], jax, where + (k,)) for k in target}
    if isinstance(target, (list, tuple)) and isinstance(restored, list):
        if len(target) != len(restored):
            raise ValueError(f"cairn.restore: target list at {where} has {len(target)} elements, "
                             f"the checkpoint {len(restored)}")
        out = [_apply_target(r, t, jax, where + (i,)) for i, (r, t) in enumerate(zip(restored, target))]
        return type(target)(out) if isinstance(target, tuple) else out
    sharding = getattr(target, "sharding", None)
    if jax is not None and sharding is not None and isinstance(sharding, jax.sharding.Sharding):
        if isinstance(restored, jax.Array) and jax.dtypes.issubdtype(restored.dtype, jax.dtypes.prng_key):
            data = np.asarray(jax.random.key_data(restored))
            placed = jax.make_array_from_callback(data.shape, sharding, lambda idx: data[idx])
            return jax.random.wrap_key_data(placed, impl=jax.random.key_impl(restored))
        values = np.asarray(restored)
        dtype = getattr(target, "dtype", None)
        if dtype is not None and np.dtype(dtype) != values.dtype:
            values = values.astype(dtype)
        if tuple(values.shape) != tuple(target.shape):
            raise ValueError(f"cairn.restore: {where} has shape {values.shape} in the checkpoint, "
                             f"target asks for {tuple(target.shape)}")
        return jax.make_array_from_callback(values.shape, sharding, lambda idx: values[idx])
    dtype = getattr(target, "dtype", None)
    if isinstance(restored, np.ndarray) and dtype is not None and np.dtype(dtype) != restored.dtype:
        return restored.astype(dtype)
    return restored


def restore(directory, target=None, *, item_name: Optional[str] = None,
            step: Optional[int] = None):
    """Restores an Orbax PyTree checkpoint as nested dicts/lists of numpy
    arrays, Python scalars, strings and None.

    `directory` is an item directory, a step directory or a checkpoint root
    (then `step`, or the latest finalized step). Arrays come back as numpy
    arrays; typed PRNG keys as jax keys when jax is imported. Where `target`
    holds a ``jax.Array`` or ``jax.ShapeDtypeStruct`` with a sharding, that
    leaf comes back as a ``jax.Array`` placed with it.
    """
    path = os.fspath(directory)
    if step is not None:
        steps = dict(_core._orbax_list_steps(path))
        if step not in steps:
            raise FileNotFoundError(f"cairn.restore: no finalized step {step} under {path} "
                                    f"(found {sorted(steps)})")
        path = steps[step]
    item = _core._orbax_open_item(path, item_name or "")
    tree = item.tree()
    leaves = []

    def collect(node):
        if isinstance(node, dict):
            for v in node.values():
                collect(v)
        elif isinstance(node, list):
            for v in node:
                collect(v)
        elif node[0] == "array":
            leaves.append(node[1])

    collect(tree)
    info = item.array_info(leaves)
    arrays = {}
    raws = []
    for param in leaves:
        dtype_name, shape, _ = info[param]
        arr = np.empty(shape, dtype=_dtypes.to_numpy(dtype_name))
        arrays[param] = arr
        raws.append(_dtypes.raw_view(arr))
    item.read_arrays(leaves, raws)
    jax = _jax()
    ctx = {"arrays": arrays, "keys": item.random_key_impls}

    def build(node):
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, list):
            return [build(v) for v in node]
        kind = node[0]
        if kind == "array":
            return _restore_leaf(node, ctx, jax)
        if kind == "string":
            return node[1]
        if kind == "none":
            return None
        raise ValueError(f"cairn.restore: {item.dir}: value type {node[1]!r} is not supported")

    return _apply_target(build(tree), target, jax)
