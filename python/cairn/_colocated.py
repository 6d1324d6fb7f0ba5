"""Pathways colocated Python: ``cairn.orbax.PyTreeCheckpointHandler(colocated=True)``.

A single controller drives the hosts: every host's shard writes and reads
run inside ``jax.experimental.colocated_python`` functions on that host's
colocated CPU devices, and the controller writes the tree's metadata once.
The layout is Orbax 0.12's colocated one (docs/COLOCATED.md), so either
side restores what the other saved. The protocol is written down in
src/cairn/engine/colocated.h; here:

Save (`start_save`, then the function it returns):
  1. The controller flattens the tree and puts its jax.Arrays on their
     colocated CPU devices (the device-to-host copy; on CPU an alias), before
     returning to Orbax, which may then let the caller change the arrays.
  2. The controller starts saving its numpy arrays and scalars itself, as
     process "pwcontroller" (shards only, `ocdbt.process_pwcontroller/`).
  3. One colocated function per save runs on every host: it builds the
     host's leaves from the shards its CPU devices hold and runs the engine
     in shards-only mode as process `jax.process_index()` (the host's
     `ocdbt.process_<i>/`, `array_metadatas/process_<i>`). It returns, per
     CPU device, the host's process index.
  4. The controller blocks on that result (every host finished) and on its
     own save, then finalizes the item over the databases that were written
     (`_engine_finalize`: `_strings.json`, `_sharding`, `_METADATA`, the root
     database). Orbax's manager commits the step.

Restore (`restore`): the controller checks the target against the
checkpoint's tree; one colocated function per restore reads, on every host,
the boxes of the sharded jax leaves into arrays on the colocated CPU
shardings (cairn's own restore, into the CPU devices' buffers); the
controller reads the other leaves, then puts the hosts' arrays on the
target's shardings.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Tuple

import numpy as np

from cairn import _core
from cairn import _leaves
from cairn import _orbax_restore
from cairn import _tree

CONTROLLER = "pwcontroller"  # Orbax's name for the controller's database

# How many times a host function ran in this process (tests: on CPU, jax
# runs colocated functions in the calling process after unpickling them).
host_saves = 0
host_restores = 0


def _jax():
    return sys.modules["jax"]


def _cp():
    from jax.experimental import colocated_python
    return colocated_python


def _cpu_sharding(sharding, where: str):
    """The sharding `sharding` has on the colocated CPU devices."""
    jax, cp = _jax(), _cp()
    if isinstance(sharding, jax.sharding.NamedSharding):
        return jax.sharding.NamedSharding(cp.colocated_cpu_devices(sharding.mesh), sharding.spec,
                                          memory_kind=sharding.memory_kind)
    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        (device,) = sharding.device_set
        return jax.sharding.SingleDeviceSharding(cp.colocated_cpu_devices((device,))[0],
                                                 memory_kind=sharding.memory_kind)
    raise TypeError(f"cairn.orbax (colocated): {where} has a {type(sharding).__name__}; colocated "
                    "Python takes NamedSharding and SingleDeviceSharding")


def _per_device_spec(devices):
    """(sharding, ShapeDtypeStruct) of one int32 per device of `devices`."""
    jax = _jax()
    ordered = sorted(set(devices), key=lambda d: d.id)
    mesh = jax.sharding.Mesh(np.array(ordered), ("d",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
    return sharding, jax.ShapeDtypeStruct((len(ordered),), np.int32, sharding=sharding)


def _devices_of(arrays):
    return [d for a in arrays for d in a.sharding.device_set]


def _is_placed(leaf) -> bool:
    """A jax leaf the hosts read or write: a jax.Array (or abstract one) with
    a sharding, and not a typed PRNG key (the controller handles those)."""
    jax = _jax()
    sharding = getattr(leaf, "sharding", None)
    if not isinstance(sharding, jax.sharding.Sharding) or not hasattr(leaf, "dtype"):
        return False
    return not jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _engine_options(options: Dict[str, Any]) -> Dict[str, Any]:
    return {k: options[k] for k in ("use_ocdbt", "use_zarr3", "compression", "memory_budget",
                                    "target_data_file_size", "chunk_byte_size")}


# ---------------------------------------------------------------- save


def _save_on_host(arrays, paths, directory: str, options: Dict[str, Any]):
    """Step 3, inside the colocated function on one host: writes the shards
    this host's CPU devices hold; returns its result array."""
    global host_saves
    host_saves += 1
    from cairn import dist

    jax = _jax()
    me, count = jax.process_index(), jax.process_count()
    leaves = [_leaves.leaf(list(p), a, me, count) for p, a in zip(paths, arrays)]
    _core._engine_save(directory, "", leaves, dist.single(), caller_commits=True, shards_only=True,
                       process_name=str(me), **options).wait()
    sharding, spec = _per_device_spec(_devices_of(arrays))
    return jax.make_array_from_callback(spec.shape, sharding, lambda _: np.array([me], np.int32))


def start_save(directory: str, item, options: Dict[str, Any]):
    """Step 1 now; returns the function that runs steps 2-4 (blocking)."""
    jax = _jax()
    if jax.process_count() > 1:
        raise ValueError("cairn.orbax (colocated): a Pathways job has one controller; this jax job "
                         f"runs {jax.process_count()} processes (use colocated=False)")
    if options.get("compression") == "auto":
        raise ValueError("cairn.orbax (colocated): compression 'auto' needs every host's samples; "
                         "use 'default' or 'none'")
    leaves, _ = _tree.flatten(item)
    described, host_paths, host_arrays, mine = [], [], [], []
    for path, value in leaves:
        described.append(_leaves.leaf(list(path), value, 0, 1, with_shards=False))
        if isinstance(value, jax.Array) and _is_placed(value):
            host_paths.append(list(path))
            host_arrays.append(value)
        elif not isinstance(value, str) and not _tree.is_empty_node(value):
            mine.append(_leaves.leaf(list(path), value, 0, 1))
    where = [_tree.path_string(p) for p in host_paths]
    cpu_arrays = jax.device_put(host_arrays, [_cpu_sharding(a.sharding, w) for a, w in zip(host_arrays, where)],
                                may_alias=True) if host_arrays else []
    engine = _engine_options(options)

    def run():
        names = []
        pending = None
        if mine:  # Step 2.
            pending = _core._engine_save(directory, "", mine, _dist_single(), caller_commits=True,
                                         shards_only=True, process_name=CONTROLLER, **engine)
        try:
            if cpu_arrays:  # Step 3.
                hosts = _host_save_function(host_paths, directory, engine, cpu_arrays)(cpu_arrays)
                names = [str(h) for h in sorted(set(np.asarray(hosts).tolist()))]
        finally:
            if pending is not None:
                pending.wait()
        if mine:
            names.append(CONTROLLER)
        # Step 4.
        _core._engine_finalize(directory, described, names, use_ocdbt=options["use_ocdbt"],
                               use_zarr3=options["use_zarr3"],
                               custom_metadata=options.get("custom_metadata", "null"))

    return run


def _dist_single():
    from cairn import dist
    return dist.single()


def _host_save_function(paths, directory, engine, cpu_arrays):
    cp = _cp()
    _, spec = _per_device_spec(_devices_of(cpu_arrays))

    @cp.colocated_python
    def save_on_hosts(arrays):
        return _save_on_host(arrays, paths, directory, engine)

    return save_on_hosts.specialize(out_specs_fn=lambda *_: spec)


# ------------------------------------------------------------- restore


def _nest(pairs: List[Tuple[Tuple[str, ...], Any]]) -> dict:
    """A tree of dicts holding each value at its names: matched to the
    checkpoint by key names (a list index is its string)."""
    out: dict = {}
    for names, value in pairs:
        node = out
        for n in names[:-1]:
            node = node.setdefault(n, {})
        node[names[-1]] = value
    return out


def _at(tree, names):
    for n in names:
        tree = tree[n]
    return tree


def _restore_on_host(directory: str, names, specs):
    """Inside the colocated function on one host: the sharded leaves, read
    into this host's CPU devices' buffers."""
    global host_restores
    host_restores += 1
    restored = _orbax_restore.restore_item(directory, _nest(list(zip(names, specs))), partial_restore=True)
    return [_at(restored, n) for n in names]


def restore(directory: str, target, partial_restore: bool):
    if target is None:  # no shardings to place: numpy arrays, as Orbax's plain restore
        return _orbax_restore.restore_item(directory, None)
    jax = _jax()
    item = _core._orbax_open_item(directory, "")
    target_leaves, rebuild = _tree.flatten(target)
    # Checks the whole target against the checkpoint, naming the key path.
    _orbax_restore.match_target(_orbax_restore.saved_leaves(item.tree()), target_leaves,
                                 partial_restore, item.dir)
    values = [leaf for _, leaf in target_leaves]  # empty nodes stay the target's own
    on_hosts, on_controller = [], []
    for i, (path, leaf) in enumerate(target_leaves):
        names = tuple(n for n, _ in path)
        if _is_placed(leaf):
            on_hosts.append((i, names, leaf))
        elif not _tree.is_empty_node(leaf):
            on_controller.append((i, names, leaf))
    if on_controller:
        mine = _orbax_restore.restore_item(directory, _nest([(n, leaf) for _, n, leaf in on_controller]),
                                           partial_restore=True)
        for i, names, _ in on_controller:
            values[i] = _at(mine, names)
    if on_hosts:
        specs = [jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype,
                                      sharding=_cpu_sharding(leaf.sharding, _tree.path_string(target_leaves[i][0])))
                 for i, _, leaf in on_hosts]
        names = [n for _, n, _ in on_hosts]
        cp = _cp()

        @cp.colocated_python
        def restore_on_hosts(_):
            return _restore_on_host(directory, names, specs)

        sharding, _ = _per_device_spec([d for s in specs for d in s.sharding.device_set])
        ready = jax.device_put(np.ones((), np.bool_),
                               jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec()))
        cpu = restore_on_hosts.specialize(out_specs_fn=lambda *_: specs)(ready)
        placed = jax.device_put(cpu, [leaf.sharding for _, _, leaf in on_hosts], may_alias=True)
        for (i, _, _), value in zip(on_hosts, placed):
            values[i] = value
    return rebuild(values)
