"""Restoring Orbax PyTree checkpoints: ``cairn.restore`` (re-exported by
``cairn.orbax``).

The checkpoint's tree comes from its ``_METADATA``; with a target, the
target's leaves (flattened as ``cairn._tree`` flattens every tree) are
matched to the checkpoint's by key path, and the restored values are put
back into the target's own node types. A target whose structure differs
from the checkpoint's is a ValueError naming the first differing key path;
restoring part of a checkpoint is asked for with ``partial_restore=True``.
Every array is read in one native call (the engine), straight into the
buffers the target's shardings place on this process's devices.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from typing import Any, Callable, Optional, Union

import numpy as np

from cairn import _core
from cairn import _dtypes
from cairn import _leaves
from cairn import _memory
from cairn import _orbax_args
from cairn import _tree

_aligned_empty = _memory.aligned_empty


def _jax():
    """jax if the caller has imported it (cairn never imports it itself)."""
    return sys.modules.get("jax")


def _restore_leaf(value, impls, jax):
    kind, param, value_type = value
    arr = impls["arrays"][param]
    impl = impls["keys"].get(param)
    if impl is not None and jax is not None:
        return jax.random.wrap_key_data(arr, impl=impl)
    if value_type == "scalar":
        return arr.item() if arr.shape == () else arr
    return arr


def _place_leaf(restored, target, jax, where):
    """`restored` (one leaf) as the target leaf asks: a jax.Array or
    ShapeDtypeStruct with a sharding gives a jax.Array with that sharding
    (and dtype); a dtype alone converts; a Python scalar target gives a
    Python scalar."""
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
            raise ValueError(f"cairn.restore: {_tree.path_string(where)} has shape {values.shape} in the "
                             f"checkpoint, the target asks for {tuple(target.shape)}")
        return jax.make_array_from_callback(values.shape, sharding, lambda idx: values[idx])
    if isinstance(target, (bool, int, float, np.generic)) and not isinstance(restored, str):
        value = np.asarray(restored)
        if value.shape == ():
            if isinstance(target, np.generic):
                return value.astype(target.dtype)[()]
            return type(target)(value.item())
    dtype = getattr(target, "dtype", None)
    if isinstance(restored, np.ndarray) and dtype is not None and np.dtype(dtype) != restored.dtype:
        return restored.astype(dtype)
    return restored


def saved_leaves(tree):
    """The checkpoint's leaves as (names, node), in `_METADATA`'s order: a
    node is ("array", param, value_type), ("string", value), ("none",) or
    ("empty", {} or []) for an empty container."""
    out = []
    stack = [((), tree)]
    while stack:
        names, node = stack.pop()
        if isinstance(node, dict) and node:
            stack.extend(((names + (k,), v) for k, v in reversed(list(node.items()))))
        elif isinstance(node, list) and node:
            stack.extend(((names + (str(i),), v) for i, v in reversed(list(enumerate(node)))))
        elif isinstance(node, (dict, list)):
            out.append((names, ("empty", node)))
        else:
            out.append((names, node))
    return out


def _is_data(node) -> bool:
    return node[0] in ("array", "string")


def _describe(node) -> str:
    if node[0] == "array":
        return f"an array ({node[2]})"
    if node[0] == "string":
        return "a string"
    if node[0] == "empty":
        return "an empty " + ("dict" if isinstance(node[1], dict) else "list")
    if node[0] == "none":
        return "None"
    return f"a value of type {node[1]!r}"


def match_target(saved, target_leaves, partial_restore, where):
    """Pairs every target leaf with the checkpoint's node at its key path.
    ValueError naming the first key path where the two differ: a leaf the
    checkpoint lacks, data where the other has an empty node, or (unless
    `partial_restore`) a checkpoint leaf the target lacks."""
    by_names = dict(saved)
    prefixes = set()
    for names, _ in saved:
        for i in range(1, len(names)):
            prefixes.add(names[:i])
    matched = []
    for path, leaf in target_leaves:
        names = tuple(n for n, _ in path)
        node = by_names.get(names)
        shown = _tree.path_string(path)
        if node is None:
            if names in prefixes:
                raise ValueError(f"cairn.restore: {where}: the target has a leaf at {shown} where the "
                                 "checkpoint holds a subtree (the target's structure differs from "
                                 "the checkpoint's)")
            if partial_restore and _tree.is_empty_node(leaf):
                matched.append((("none",), leaf))
                continue
            raise ValueError(f"cairn.restore: {where}: the target asks for {shown}, which the "
                             "checkpoint does not hold (the target's structure differs from the "
                             "checkpoint's)")
        if _tree.is_empty_node(leaf) and _is_data(node):
            raise ValueError(f"cairn.restore: {where}: the checkpoint holds {_describe(node)} at {shown}, "
                             f"the target an empty node ({leaf!r}); give the target a leaf there, or "
                             "leave the key out with partial_restore=True")
        if not _tree.is_empty_node(leaf) and not _is_data(node):
            raise ValueError(f"cairn.restore: {where}: the checkpoint holds {_describe(node)} at {shown}, "
                             f"the target asks for {type(leaf).__name__}")
        matched.append((node, leaf))
    if not partial_restore:
        wanted = {tuple(n for n, _ in path) for path, _ in target_leaves}
        for names, node in saved:
            if names not in wanted:
                raise ValueError(f"cairn.restore: {where}: the checkpoint holds {_describe(node)} at "
                                 f"{names!r}, which the target does not have (the target's structure "
                                 "differs from the checkpoint's); to restore part of a checkpoint, "
                                 "pass partial_restore=True")
    return matched


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


def _as_jax_arrays(saved, arrays, impls, jax) -> None:
    """Without a target, with jax imported: the arrays saved as jax.Arrays
    become jax.Arrays on jax's default device, as Orbax restores them;
    those saved as numpy arrays stay numpy, as in Orbax."""
    params = [node[1] for _, node in saved
              if node[0] == "array" and node[2] == "jax.Array" and node[1] not in impls]
    if params:
        arrays.update(zip(params, jax.device_put([arrays[p] for p in params])))


def _sharded_target(target, jax):
    sharding = getattr(target, "sharding", None)
    if jax is not None and sharding is not None and isinstance(sharding, jax.sharding.Sharding):
        return sharding
    return None


def restore(directory: Union[str, "os.PathLike[str]"], target: Any = None, *,
            item_name: Optional[str] = None, step: Optional[int] = None,
            partial_restore: bool = False, args: Any = None,
            progress: Optional[Callable[[int, int], None]] = None) -> Any:
    """Restores an Orbax PyTree checkpoint.

    `directory` is an item directory, a step directory or a checkpoint root
    (then `step`, or the latest finalized step).

    Without a target the tree comes back as Orbax builds it from the
    checkpoint's metadata: nested dicts and lists of arrays, Python scalars,
    strings and None. When jax is imported (cairn never imports it), arrays
    saved as jax.Arrays come back as jax.Arrays on jax's default device and
    typed PRNG keys as jax keys, as Orbax restores them; arrays saved as
    numpy arrays, and every array when jax is not imported, come back as
    numpy arrays.

    With a `target` (any jax pytree: a flax ``TrainState``, optax states,
    dicts, NamedTuples; or ``args=ocp.args.PyTreeRestore(item=...)`` /
    ``StandardRestore(item=...)``) the result has the target's structure and
    node types. Its leaves say how each array comes back: a ``jax.Array`` or
    ``jax.ShapeDtypeStruct`` with a sharding gives a ``jax.Array`` placed
    with it (only the boxes this process's devices hold are read), a dtype
    converts, a Python scalar gives a Python scalar. A target whose structure
    differs from the checkpoint's is a ValueError naming the first differing
    key path; to restore part of a checkpoint, pass ``partial_restore=True``
    (then only the arrays the target names are read).

    In a multi-process jax job, when the target's shardings span processes,
    every process must call restore (as with any collective jax operation):
    the processes of one host then decode each compressed chunk they share
    once (docs/ENGINE.md; CAIRN_RESTORE_HOST_SHARE=0 turns that off).

    `progress`: called as ``progress(bytes_done, bytes_total)`` with the
    bytes of the arrays this process reads, about every 1% and once at the
    end (bytes_done == bytes_total), from cairn's threads.
    """
    if args is not None:
        if target is not None:
            raise ValueError("cairn.restore: pass either `target` or `args`, not both")
        target, partial_restore = _orbax_args.target_of_restore_args(args, partial_restore)
    return restore_item(directory, target, item_name=item_name, step=step,
                        partial_restore=partial_restore, progress=progress)


def restore_item(directory, target=None, *, item_name=None, step=None, partial_restore=False,
                 read_boxes=None, maps=False, progress=None, jax_arrays=True):
    """``restore`` for cairn's own callers: `read_boxes(requests)` (for
    cairn.emergency) reads the boxes instead of the engine reading them from
    the item; with `maps` it returns [(request index, box index, uint8
    array)] for boxes it handed out as mappings instead of filling them,
    which replace those boxes' buffers (_swap_in_mappings). Without a
    target, `jax_arrays=False` keeps every array numpy (the emergency
    manager's, whose local chunks are mapped, not copied)."""
    # The bookkeeping below allocates a few objects per shard: with thousands
    # of shards the cyclic GC would run dozens of times (each run also calls
    # jax's GC hook), for nothing, as none of them form cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _restore(directory, target, item_name, step, partial_restore, read_boxes, maps, progress,
                        jax_arrays)
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
    state = _leaves.jax_state()
    if state is None or state.client is None:
        return None
    return dist.from_jax()


def _restore(directory, target, item_name, step, partial_restore, read_boxes, maps=False, progress=None,
             jax_arrays=True):
    path = os.fspath(directory)
    if step is not None:
        steps = dict(_core._orbax_list_steps(path))
        if step not in steps:
            raise FileNotFoundError(f"cairn.restore: no finalized step {step} under {path} "
                                    f"(found {sorted(steps)})")
        path = steps[step]
    item = _core._orbax_open_item(path, item_name or "")
    tree = item.tree()
    saved = saved_leaves(tree)
    jax = _jax()
    targets = {}     # param -> target leaf
    matched = None   # [(node, target leaf)] in the target's flattening order
    if target is not None:
        target_leaves, rebuild = _tree.flatten(target)
        matched = match_target(saved, target_leaves, partial_restore, item.dir)
        for node, leaf in matched:
            if node[0] == "array":
                targets[node[1]] = leaf
        leaves = list(targets)
    else:
        leaves = [node[1] for _, node in saved if node[0] == "array"]
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
                origin, extent = _leaves.box_of(index, shape)
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
                        origin, extent = _leaves.box_of(index, shape)
                        theirs.add((tuple(origin), tuple(extent)))
            others.append(sorted(theirs))
            spans_processes = spans_processes or bool(theirs)
        else:
            # Aligned: a targetless restore with jax hands it to jax, which
            # adopts an aligned buffer on CPU without copying it.
            arr = (_aligned_empty(shape, np_dtype) if jax is not None and jax_arrays
                   else np.empty(shape, dtype=np_dtype))
            arrays[param] = arr
            slots[(len(requests), 0)] = (param, None)
            boxes = [([0] * len(shape), _dtypes.raw_view(arr))]
            # Every process reads the whole array.
            others.append([] if me is None else [((0,) * len(shape), tuple(shape))])
        requests.append((param, dtype_name, boxes))
    converts = any(_asks_other_dtype(targets[param], b)
                   for param, (_, _, _, buffers) in placed.items() for b in buffers.values())
    if read_boxes is not None:
        read = lambda: read_boxes(requests)  # noqa: E731
    else:
        # Every process restores a target that spans processes: those of one
        # host then decode the chunks they share once (engine/restore_host_share.h).
        coordinator = _restore_coordinator() if spans_processes else None

        def read():
            global last_restore_stats
            last_restore_stats = _core._engine_restore(item.dir, "", requests, others, coordinator,
                                                       item=item, progress=progress)
    if placed and not converts and not maps:
        singles = iter(_read_while_placing(read, placed, jax))
    else:
        # Mappings replace buffers, so jax gets the buffers after the read.
        mapped = read()
        if maps and mapped:
            _swap_in_mappings(mapped, slots, arrays, placed)
        host, where = _host_shards(placed, targets)
        singles = iter(jax.device_put(host, where) if host else [])
    for param, (sharding, shape, devices, _) in placed.items():
        mine = [next(singles) for _ in devices]
        arrays[param] = jax.make_array_from_single_device_arrays(shape, sharding, mine)
    if matched is None and jax is not None and jax_arrays:
        _as_jax_arrays(saved, arrays, impls, jax)
    ctx = {"arrays": arrays, "keys": impls}

    def value_of(node):
        kind = node[0]
        if kind == "array":
            return _restore_leaf(node, ctx, jax)
        if kind == "string":
            return node[1]
        if kind == "none":
            return None
        if kind == "empty":
            return type(node[1])()
        raise ValueError(f"cairn.restore: {item.dir}: value type {node[1]!r} is not supported")

    if matched is not None:
        values = []
        for (node, leaf), (path, _) in zip(matched, target_leaves):
            if node[0] in ("none", "empty"):
                values.append(leaf)  # the target's own empty node (EmptyState(), None, {})
            else:
                values.append(_place_leaf(value_of(node), leaf, jax, path))
        return rebuild(values)

    def build(node):
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, list):
            return [build(v) for v in node]
        return value_of(node)

    return build(tree)
