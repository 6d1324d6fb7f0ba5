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

import gc
import hashlib
import json
import os
import shutil
import sys
import threading
import time
from typing import Any, Callable, Optional

import numpy as np

from cairn import _core
from cairn import _dtypes
from cairn import _memory

__all__ = ["save", "save_async", "PendingSave", "restore", "all_steps", "latest_step", "PYTREE_HANDLER"]

PYTREE_HANDLER = "orbax.checkpoint._src.handlers.pytree_checkpoint_handler.PyTreeCheckpointHandler"
_SEQUENCE, _DICT = 1, 2


def _jax():
    """jax if the caller has imported it (cairn never imports it itself)."""
    return sys.modules.get("jax")


def _is_jax_array(x) -> bool:
    jax = _jax()
    return jax is not None and isinstance(x, jax.Array)


def _raw(values: np.ndarray) -> np.ndarray:
    return _dtypes.raw_view(_dtypes.native(np.asarray(values)))


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


_aligned_empty = _memory.aligned_empty


def _box_of(index, shape):
    origin, extent = [], []
    for sl, n in zip(index, shape):
        start, stop, _ = sl.indices(n)
        origin.append(start)
        extent.append(stop - start)
    return origin, extent


def _numpy_write_shape(shape, process_count: int):
    """The write shape of a numpy leaf saved by `process_count` processes:
    split along the first axis divisible by the count (each process's replica
    then writes one slice, replica-parallel), else the whole shape."""
    for axis, n in enumerate(shape):
        if process_count > 1 and n % process_count == 0 and n > 0:
            write_shape = list(shape)
            write_shape[axis] = n // process_count
            return write_shape
    return list(shape)


def _num_replicas(value) -> int:
    """How many devices hold each distinct shard of a jax.Array."""
    counts = {}
    for index in value.sharding.devices_indices_map(tuple(value.shape)).values():
        key = tuple(_box_of(index, value.shape)[0])
        counts[key] = counts.get(key, 0) + 1
    return next(iter(counts.values())) if counts else 1


def _leaf(path, value, process_index, process_count):
    """The native leaf tuple for `value` at `path` (see engine_bindings.cc):
    (path, value_type, dtype, shape, write_shape, num_replicas,
    [(origin, raw array, replica_id, immutable)], random_key_impl, sharding,
    string). A jax.Array's shards are immutable (jax never changes an
    array's buffer; the binding keeps them alive until the save is
    finished), so the engine reads them in the background instead of copying
    them before save_async returns, as Orbax does on the host; numpy arrays
    may change once save_async returns and are copied first."""
    jax = _jax()
    empty = {type(None): "None", dict: "Dict", list: "List", tuple: "Tuple"}
    if value is None or (isinstance(value, (dict, list, tuple)) and not value):
        return (path, empty[type(value)], "", [], None, 1, [], None, None, None)
    if isinstance(value, str):
        return (path, "string", "", [], None, 1, [], None, None, value)
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
            if process_count == 1 or shard.device.process_index == process_index:
                origin, _ = _box_of(shard.index, value.shape)
                shards.append((origin, _raw(np.asarray(shard.data)), int(shard.replica_id), True))
        return (path, "jax.Array", np.dtype(value.dtype).name, list(value.shape), write_shape,
                _num_replicas(value), shards, key_impl, _sharding_json(value.sharding), None)
    if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, np.ndarray):
        if isinstance(value, bool):
            arr = np.asarray(value, dtype=np.bool_)
        elif isinstance(value, int):
            arr = np.asarray(value, dtype=np.int64)
        elif isinstance(value, float):
            arr = np.asarray(value, dtype=np.float64)
        else:
            arr = np.asarray(value)
        return (path, "scalar", arr.dtype.name, [], [], process_count,
                [([], _raw(arr), process_index, True)], None, None, None)
    if isinstance(value, np.ndarray):
        # Every process holds the whole array: replica `process_index` of
        # `process_count`.
        return (path, "np.ndarray", value.dtype.name, list(value.shape),
                _numpy_write_shape(value.shape, process_count), process_count,
                [([0] * value.ndim, _raw(value), process_index, False)], None, None, None)
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


class _FileKeyValue:
    """kv_set / kv_get over files in a directory every process sees, for
    coordinating processes that share only a barrier callable and the
    checkpoint's file system (``save(..., barrier=)``)."""

    def __init__(self, directory: str):
        self.dir = directory

    def _path(self, key: str) -> str:
        return os.path.join(self.dir, hashlib.sha1(key.encode()).hexdigest())

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        tmp = f"{path}.tmp{os.getpid()}.{threading.get_ident()}"
        with open(tmp, "wb") as f:
            f.write(value)
        os.replace(tmp, path)

    def get(self, key: str, timeout_ms: int) -> bytes:
        path = self._path(key)
        deadline = time.monotonic() + timeout_ms / 1000.0
        delay = 0.0005
        while True:
            try:
                with open(path, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"cairn: no value for `{key}` within {timeout_ms} ms")
                time.sleep(delay)
                delay = min(delay * 2, 0.02)


def _absolute(directory) -> str:
    """A local path made absolute; a URL (s3://, gs://, file://, memory://)
    as it is: the native layer opens those itself."""
    d = os.fspath(directory)
    return d if "://" in d else os.path.abspath(d)


def _coordinator_for(final_top: str, process_index: int, process_count: int, barrier, coordinator):
    """(coordinator, cleanup) for one save: the caller's; jax.distributed's
    when jax runs the processes; else, for processes that share only a
    `barrier` callable, one over files beside the checkpoint; else the one
    cairn.dist.detect() finds (a single process outside jax and MPI)."""
    from cairn import dist

    if coordinator is not None:
        return coordinator, lambda: None
    if process_count > 1:
        jax = _jax()
        if (jax is not None and jax.process_count() == process_count
                and dist._jax_state() is not None and dist._jax_state().client is not None):
            return dist.from_jax(), lambda: None
        if barrier is None:
            raise ValueError("cairn.save: several processes need a `barrier` callable or a `coordinator`")
        if "://" in final_top:
            raise ValueError(f"cairn.save: {final_top}: processes that share only a `barrier` "
                             "coordinate through local files; pass a `coordinator` for a URL")
        shared = os.path.join(os.path.dirname(final_top),
                              f".cairn-coordination.{os.path.basename(final_top)}")
        if process_index == 0:
            shutil.rmtree(shared, ignore_errors=True)
            os.makedirs(shared, exist_ok=True)
        barrier("cairn_save_coordination")
        kv = _FileKeyValue(shared)
        c = dist.callback(process_index, process_count, kv.set, kv.get)

        def cleanup():
            barrier("cairn_save_done")
            if process_index == 0:
                shutil.rmtree(shared, ignore_errors=True)

        return c, cleanup
    return dist.detect(), lambda: None


class PendingSave:
    """A save in progress (``cairn.save_async``): the tree's arrays are
    already copied, the caller may change them. ``wait_until_finished()``
    returns once the checkpoint is committed and raises any error of any
    process."""

    def __init__(self, pending, cleanup, path: str, coordinator):
        self._pending = pending
        self._coordinator = coordinator  # used by the background work
        self._cleanup = cleanup
        self.path = path
        self._finished = False

    def done(self) -> bool:
        return self._pending.done()

    def wait_until_finished(self) -> str:
        if not self._finished:
            try:
                self._pending.wait()
            finally:
                self._finished = True
                self._cleanup()
        return self.path


def save_async(directory, tree, *, format: str = "orbax", use_ocdbt: bool = True,
               use_zarr3: bool = True, step: Optional[int] = None, item_name: str = "default",
               step_prefix: Optional[str] = None, step_format_fixed_length: Optional[int] = None,
               custom_metadata: Any = None, chunk_byte_size: Optional[int] = None,
               ocdbt_target_data_file_size: Optional[int] = None, process_index: int = 0,
               process_count: int = 1, barrier: Optional[Callable[[str], None]] = None,
               coordinator=None, replica_parallel: bool = True, compression: str = "default",
               memory_budget: Optional[int] = None, timeout_s: float = 600.0) -> PendingSave:
    """Starts saving `tree` (see `save`) and returns once its numpy arrays
    are copied into memory cairn owns (within `memory_budget` bytes), so the
    caller may change them; jax.Arrays, which never change, are not copied
    first but read in the background (cairn holds them until the save is
    finished). Encoding and writing go on in the background. Returns a
    PendingSave."""
    if format != "orbax":
        raise ValueError(f"cairn.save: format {format!r} is not supported here (only 'orbax')")
    root = _absolute(directory)
    if step is not None:
        final_top = os.path.join(root, _core._orbax_step_name(step, step_prefix or "", step_format_fixed_length))
    else:
        final_top = root
    target = ocdbt_target_data_file_size if ocdbt_target_data_file_size is not None else 2 ** 31
    c, cleanup = _coordinator_for(final_top, process_index, process_count, barrier, coordinator)
    try:
        leaves = _flatten(tree, c.process_index, c.process_count)
        pending = _core._engine_save(
            final_top, item_name if step is not None else "", leaves, c, use_ocdbt=use_ocdbt,
            use_zarr3=use_zarr3, replica_parallel=replica_parallel, compression=compression,
            memory_budget=memory_budget or 0, target_data_file_size=target,
            chunk_byte_size=chunk_byte_size or 0, custom_metadata=json.dumps(custom_metadata),
            timeout_s=timeout_s)
    except BaseException:
        cleanup()
        raise
    path = os.path.join(final_top, item_name) if step is not None else final_top
    return PendingSave(pending, cleanup, path, c)


def save(directory, tree, **kwargs) -> str:
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

    Several processes save together with a `coordinator` (cairn.dist), or
    with their `process_index`, `process_count` and a `barrier` callable;
    in a multi-process jax job the coordinator is found from jax.
    `compression`: "default" (Orbax's zstd), "none", or "auto" (zstd only
    where a sample shrinks by 10% or more). Keyword arguments as
    `save_async`, which this calls and waits for.
    """
    return save_async(directory, tree, **kwargs).wait_until_finished()


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
        if (isinstance(restored, jax.Array) and restored.sharding == sharding
                and not jax.dtypes.issubdtype(restored.dtype, jax.dtypes.prng_key)):
            return restored  # placed by restore() from the boxes the sharding wants
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


def _targets_by_param(tree, target, out):
    """Fills `out` with param -> target leaf, walking the restored structure
    (from `_METADATA`) and the target together."""
    if target is None:
        return
    if isinstance(tree, dict) and isinstance(target, dict):
        for k, t in target.items():
            if k in tree:
                _targets_by_param(tree[k], t, out)
    elif isinstance(tree, list) and isinstance(target, (list, tuple)):
        for node, t in zip(tree, target):
            _targets_by_param(node, t, out)
    elif isinstance(tree, tuple) and tree and tree[0] == "array":
        out[tree[1]] = target


def _host_shards(placed, targets=None):
    """The host buffers of every placed shard and their devices, in order
    (converted to the target's dtype where it asks for another)."""
    host, where = [], []
    for param, (sharding, shape, devices, buffers) in placed.items():
        if targets is not None:
            t = targets[param]
            buffers = {k: (b.astype(t.dtype) if _asks_other_dtype(t, b) else b) for k, b in buffers.items()}
        host.extend(buffers[key] for _, key in devices)
        where.extend(device for device, _ in devices)
    return host, where


def _asks_other_dtype(target, buffer):
    dtype = getattr(target, "dtype", None)
    return dtype is not None and np.dtype(dtype) != buffer.dtype


def _read_while_placing(read, placed, jax):
    """Runs `read` (the engine's restore into the placed buffers, or the
    emergency manager's) on a thread (both release the GIL) while this one
    hands the destination buffers to their devices: on
    CPU devices jax adopts a 64-byte aligned buffer without copying it, so
    its jax.Arrays can be made before the bytes arrive, and jax's per-shard
    cost (~50 us a shard, a fifth of a cold 1 GiB restore of 2560 shards)
    overlaps the reads instead of following them. The arrays are handed out
    only after the engine finished; where jax copied a buffer instead of
    adopting it (another platform, an unaligned buffer), the shards are put
    again once the bytes are there."""
    host, where = _host_shards(placed)
    failure = []

    def run():
        try:
            read()
        except BaseException as e:  # re-raised on the caller's thread
            failure.append(e)

    reader = threading.Thread(target=run, name="cairn-restore-read")
    reader.start()
    try:
        singles = jax.device_put(host, where)
        adopted = all(_adopts(s, h) for s, h in zip(singles, host))
    finally:
        reader.join()
    if failure:
        raise failure[0]
    if not adopted:
        del singles
        singles = jax.device_put(host, where)
    return singles


def _adopts(single, host):
    """Whether the single-device jax.Array `single` is `host`'s memory."""
    try:
        return single.unsafe_buffer_pointer() == host.ctypes.data
    except Exception:  # a platform without host pointers: treat as a copy
        return False


def _sharded_target(target, jax):
    sharding = getattr(target, "sharding", None)
    if jax is not None and sharding is not None and isinstance(sharding, jax.sharding.Sharding):
        return sharding
    return None


def restore(directory, target=None, *, item_name: Optional[str] = None,
            step: Optional[int] = None, _read_boxes=None, _maps: bool = False):
    """Restores an Orbax PyTree checkpoint as nested dicts/lists of numpy
    arrays, Python scalars, strings and None.

    `directory` is an item directory, a step directory or a checkpoint root
    (then `step`, or the latest finalized step). Arrays come back as numpy
    arrays; typed PRNG keys as jax keys when jax is imported. Where `target`
    holds a ``jax.Array`` or ``jax.ShapeDtypeStruct`` with a sharding, that
    leaf comes back as a ``jax.Array`` placed with it, and only the boxes
    this process's devices hold are read. With a target, only the arrays it
    names are read. In a multi-process jax job, when the target's shardings
    span processes, every process must call restore (as with any collective
    jax operation): the processes of one host then decode each compressed
    chunk they share once (docs/ENGINE.md, "Processes of one host decode a
    shared chunk once"; CAIRN_RESTORE_HOST_SHARE=0 turns that off). (`_read_boxes(requests)`, for cairn.emergency: reads the
    boxes instead of the engine reading them from `directory`'s item; with
    `_maps` it returns [(request index, box index, uint8 array)] for boxes it
    handed out as mappings instead of filling them, which replace those
    boxes' buffers: _swap_in_mappings.)
    """
    # The bookkeeping below allocates a few objects per shard: with thousands
    # of shards the cyclic GC would run dozens of times (each run also calls
    # jax's GC hook), for nothing, as none of them form cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _restore(directory, target, item_name, step, _read_boxes, _maps)
    finally:
        if gc_was_enabled:
            gc.enable()


def _swap_in_mappings(mapped, slots, arrays, placed):
    """Puts each mapping (a uint8 array over a stored chunk's pages) in place
    of the buffer of the box it stands for: `slots[(request, box)]` is
    (param, box key) for a sharded leaf, (param, None) for a whole numpy
    array. The buffer it replaces was never touched, so it cost no pages."""
    for ri, bi, pages in mapped:
        param, key = slots[(ri, bi)]
        if key is None:
            old = arrays[param]
            arrays[param] = pages.view(old.dtype).reshape(old.shape)
        else:
            buffers = placed[param][3]
            old = buffers[key]
            buffers[key] = pages.view(old.dtype).reshape(old.shape)


# What this process's latest restore did with its chunks (chunks_read,
# chunks_decoded_for_host, chunks_from_host, chunks_fallen_back), for tests
# and benchmarks.
last_restore_stats = None


def _restore_coordinator():
    """jax.distributed's coordinator when jax runs several processes, else
    None (also with CAIRN_RESTORE_HOST_SHARE=0 in the environment: every
    process then decodes every chunk it needs itself)."""
    from cairn import dist

    if os.environ.get("CAIRN_RESTORE_HOST_SHARE") == "0":
        return None
    state = dist._jax_state()
    if state is None or state.client is None:
        return None
    return dist.from_jax()


def _restore(directory, target, item_name, step, _read_boxes, _maps=False):
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
    jax = _jax()
    targets = {}
    if target is not None:
        _targets_by_param(tree, target, targets)
        leaves = [p for p in leaves if p in targets]
    info = item.array_info(leaves)
    impls = item.random_key_impls
    arrays = {}      # param -> numpy array (whole)
    placed = {}      # param -> (sharding, shape, [(device, box key)], {box key: buffer})
    slots = {}       # (request index, box index) -> (param, box key or None)
    requests = []
    # Per request, the boxes the other processes restore: the engine reads
    # through the page cache when they share chunks with this process's.
    others = []
    me = jax.process_index() if jax is not None and jax.process_count() > 1 else None
    spans_processes = False  # some target array has devices of other processes
    for param in leaves:
        dtype_name, shape, _ = info[param]
        np_dtype = _dtypes.to_numpy(dtype_name)
        t = targets.get(param)
        sharding = _sharded_target(t, jax) if param not in impls else None
        if sharding is not None and tuple(getattr(t, "shape", shape)) != tuple(shape):
            raise ValueError(f"cairn.restore: {param} has shape {tuple(shape)} in the checkpoint, "
                             f"target asks for {tuple(t.shape)}")
        if sharding is not None:
            buffers, devices, boxes = {}, [], []
            for device, index in sharding.addressable_devices_indices_map(tuple(shape)).items():
                origin, extent = _box_of(index, shape)
                key = (tuple(origin), tuple(extent))
                if key not in buffers:
                    buffers[key] = _aligned_empty(extent, np_dtype)
                    slots[(len(requests), len(boxes))] = (param, key)
                    boxes.append((origin, _dtypes.raw_view(buffers[key])))
                devices.append((device, key))
            placed[param] = (sharding, tuple(shape), devices, buffers)
            theirs = set()
            if me is not None:
                for device, index in sharding.devices_indices_map(tuple(shape)).items():
                    if device.process_index != me:
                        origin, extent = _box_of(index, shape)
                        theirs.add((tuple(origin), tuple(extent)))
            others.append(sorted(theirs))
            spans_processes = spans_processes or bool(theirs)
        else:
            arr = np.empty(shape, dtype=np_dtype)
            arrays[param] = arr
            slots[(len(requests), 0)] = (param, None)
            boxes = [([0] * len(shape), _dtypes.raw_view(arr))]
            # Every process reads the whole array.
            others.append([] if me is None else [((0,) * len(shape), tuple(shape))])
        requests.append((param, dtype_name, boxes))
    converts = any(_asks_other_dtype(targets[param], b)
                   for param, (_, _, _, buffers) in placed.items() for b in buffers.values())
    if _read_boxes is not None:
        read = lambda: _read_boxes(requests)  # noqa: E731
    else:
        # Every process restores a target that spans processes: those of one
        # host then decode the chunks they share once (engine/restore_host_share.h).
        coordinator = _restore_coordinator() if spans_processes else None

        def read():
            global last_restore_stats
            last_restore_stats = _core._engine_restore(item.dir, "", requests, others, coordinator,
                                                       item=item)
    if placed and not converts and not _maps:
        singles = iter(_read_while_placing(read, placed, jax))
    else:
        # Mappings replace buffers, so jax gets the buffers after the read.
        mapped = read()
        if _maps and mapped:
            _swap_in_mappings(mapped, slots, arrays, placed)
        host, where = _host_shards(placed, targets)
        singles = iter(jax.device_put(host, where) if host else [])
    for param, (sharding, shape, devices, _) in placed.items():
        mine = [next(singles) for _ in devices]
        arrays[param] = jax.make_array_from_single_device_arrays(shape, sharding, mine)
    ctx = {"arrays": arrays, "keys": impls}

    def build(node):
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, list):
            return [build(v) for v in node]
        kind = node[0]
        if kind == "array":
            if node[1] not in arrays:
                return None  # not asked for by the target
            return _restore_leaf(node, ctx, jax)
        if kind == "string":
            return node[1]
        if kind == "none":
            return None
        raise ValueError(f"cairn.restore: {item.dir}: value type {node[1]!r} is not supported")

    return _apply_target(build(tree), target, jax)
