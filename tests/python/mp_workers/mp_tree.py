"""The deterministic tree every worker process builds (and the test process
compares against), with no jax import at module level.

Eight devices in all (2 processes x 4 devices or 4 x 2). Two meshes: "m"
puts the devices in jax.devices() order, so its first axis spans the
processes; "r" reverses them, so the first device of the mesh (replica 0 of
every replicated shard) lives on the last process. Values are random bit
patterns (NaN payloads, -0.0 and subnormals included), so any conversion on
the way shows up as a byte mismatch.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

TOTAL_DEVICES = 8

# leaf path -> (dtype, global shape, mesh name, partition spec as a tuple,
#               target spec for restores with a different sharding)
LEAVES = {
    ("params", "dense", "kernel"): ("float32", (16, 6), "m", ("data", None), (None, "model")),
    ("params", "dense", "bias"): ("float32", (6,), "m", (), ("model",)),
    ("params", "both"): ("int32", (8, 4), "m", ("data", "model"), ("model", "data")),
    ("params", "cols"): ("bfloat16", (4, 8), "m", (None, "model"), ("data", None)),
    ("params", "mixed"): ("float16", (8, 8), "m", ("model", "data"), ()),
    ("params", "rev"): ("float32", (6, 8), "r", ("x", "y"), (None, "data")),
    ("params", "rev_rep"): ("uint8", (4, 12), "r", (None, "y"), ("data", "model")),
    ("opt", "count"): ("int32", (), "m", (), ()),
    ("opt", "mu"): ("float32", (16, 6), "m", ("data", None), ("data", "model")),
}
# Host (numpy) leaves: process 0 writes them in Orbax.
NUMPY_LEAVES = {
    ("host", "table"): ("int64", (5, 3)),
}


def np_dtype(name):
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def _name(path):
    return ".".join(path)


def global_values(seed: int = 0) -> dict:
    """{leaf path: numpy array} with the full (global) values."""
    out = {}
    for i, (path, spec) in enumerate(sorted({**LEAVES, **NUMPY_LEAVES}.items())):
        dtype, shape = np_dtype(spec[0]), spec[1]
        rng = np.random.default_rng([seed, i])
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        out[path] = rng.integers(0, 256, size=n, dtype=np.uint8).view(dtype).reshape(shape)
    return out


def nest(flat: dict) -> dict:
    tree = {}
    for path, v in flat.items():
        node = tree
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = v
    return tree


def flatten(tree, prefix=()):
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            out.update(flatten(v, prefix + (k,)))
        return out
    return {prefix: tree}


def expected_tree(seed: int = 0) -> dict:
    """The global values as the nested tree Orbax/cairn restore."""
    return nest(global_values(seed))


def meshes(jax):
    from jax.sharding import Mesh
    devices = sorted(jax.devices(), key=lambda d: d.id)
    assert len(devices) == TOTAL_DEVICES, (
        f"expected {TOTAL_DEVICES} devices across all processes, got {len(devices)}")
    return {
        "m": Mesh(np.array(devices).reshape(4, 2), ("data", "model")),
        "r": Mesh(np.array(devices[::-1]).reshape(2, 4), ("x", "y")),
    }


def sharding(jax, mesh_map, mesh_name, spec):
    from jax.sharding import NamedSharding, PartitionSpec as P
    return NamedSharding(mesh_map[mesh_name], P(*spec))


def target_sharding(jax, mesh_map, path):
    """The sharding restores ask for: always on mesh "m", different specs."""
    _, _, _, _, target = LEAVES[path]
    return sharding(jax, mesh_map, "m", target)


def jax_tree(jax, seed: int = 0) -> dict:
    """The tree as global jax.Arrays (each process provides only its own
    shards, through make_array_from_callback) plus the numpy leaves."""
    mesh_map = meshes(jax)
    values = global_values(seed)
    flat = {}
    for path, (_, shape, mesh_name, spec, _) in LEAVES.items():
        v = values[path]
        flat[path] = jax.make_array_from_callback(
            shape, sharding(jax, mesh_map, mesh_name, spec), lambda idx, v=v: v[idx])
    for path in NUMPY_LEAVES:
        flat[path] = values[path]
    return nest(flat)


def abstract_target(jax, seed: int = 0) -> dict:
    """ShapeDtypeStructs with the target shardings (numpy leaves stay numpy)."""
    mesh_map = meshes(jax)
    flat = {}
    for path, (dtype, shape, _, _, _) in LEAVES.items():
        flat[path] = jax.ShapeDtypeStruct(shape, np_dtype(dtype),
                                          sharding=target_sharding(jax, mesh_map, path))
    values = global_values(seed)
    for path in NUMPY_LEAVES:
        flat[path] = values[path]
    return nest(flat)


def index_key(index, shape) -> str:
    """'0:8,2:4' for a tuple of slices."""
    parts = []
    for sl, n in zip(index, shape):
        start, stop, _ = sl.indices(n)
        parts.append(f"{start}:{stop}")
    return ",".join(parts)


def parse_index_key(key: str):
    if not key:
        return ()
    return tuple(slice(int(a), int(b)) for a, b in (p.split(":") for p in key.split(",")))


def _mesh_positions(mesh_name):
    """[(mesh coords, device id)] in row-major mesh order."""
    if mesh_name == "m":
        return [((a, b), a * 2 + b) for a in range(4) for b in range(2)], ("data", "model")
    return [((x, y), 7 - (x * 4 + y)) for x in range(2) for y in range(4)], ("x", "y")


def replica0_chunks(path, num_processes: int) -> dict:
    """{chunk grid index: process} for the replica-0 shards of a jax leaf
    (one chunk per shard): the process that owns replica 0 writes it."""
    _, shape, mesh_name, spec, _ = LEAVES[path]
    per_process = TOTAL_DEVICES // num_processes
    positions, axes = _mesh_positions(mesh_name)
    spec = tuple(spec) + (None,) * (len(shape) - len(spec))
    used = {a for a in spec if a is not None}
    owners = {}
    for coords, device in positions:
        c = dict(zip(axes, coords))
        if any(c[a] != 0 for a in axes if a not in used):
            continue
        index = tuple(c[a] if a is not None else 0 for a in spec)
        owners[index] = device // per_process
    return owners


def chunk_key(name: str, index, zarr3: bool) -> str:
    if zarr3:
        return "/".join([name, "c"] + [str(i) for i in index])
    return f"{name}/" + (".".join(str(i) for i in index) if index else "0")
