"""Assertions the multi-process Orbax tests share: restored trees and the
shards Orbax workers dumped are bit-exact against mp_tree's values."""

from __future__ import annotations

import numpy as np

from mp_workers import launch, mp_tree


def assert_tree_bit_exact(actual_tree, where):
    expected = mp_tree.global_values()
    actual = mp_tree.flatten(actual_tree)
    assert sorted(actual) == sorted(expected), (where, sorted(actual), sorted(expected))
    for path, e in expected.items():
        a = np.asarray(actual[path])
        assert (a.dtype, a.shape) == (e.dtype, e.shape), (where, path, a.dtype, a.shape, e.dtype, e.shape)
        assert a.tobytes() == e.tobytes(), f"{where}: {'.'.join(path)} differs"


def assert_restored_shards_bit_exact(out_prefix, num_processes, where, target):
    """The shards every worker got from Orbax cover each array and hold the
    expected bytes. `target` is how the workers restored: "sharding" (each
    array must come back with its target spec on mesh "m"), "none" (with the
    saved spec and mesh) or "numpy" (host arrays)."""
    shards, infos = launch.load_restored(out_prefix, num_processes)
    expected = mp_tree.global_values()
    names = {".".join(p): p for p in expected}
    assert sorted(shards) == sorted(names), (where, sorted(shards))
    for name, pieces in shards.items():
        path = names[name]
        e = expected[path]
        if path in mp_tree.NUMPY_LEAVES:
            for idx, arr in pieces:
                assert idx == "full" and arr.dtype == e.dtype and arr.tobytes() == e.tobytes(), (where, name)
            continue
        covered = np.zeros(e.shape, bool)
        for idx, arr in pieces:
            sl = () if idx == "full" else mp_tree.parse_index_key(idx)
            assert arr.dtype == e.dtype, (where, name, arr.dtype)
            assert arr.tobytes() == np.ascontiguousarray(e[sl]).tobytes(), f"{where}: {name}[{idx}] differs"
            covered[sl] = True
        assert covered.all(), f"{where}: {name}: the processes' shards do not cover the array"
        for i, info in enumerate(infos):
            entry = info[name]
            assert entry["dtype"] == str(e.dtype), (where, i, entry)
            if target == "sharding":
                assert entry["type"] == "ArrayImpl", (where, i, entry)
                assert entry["spec"] == list(mp_tree.LEAVES[path][4]), (where, name, entry["spec"])
                assert (entry["mesh_shape"], entry["mesh_axes"], entry["mesh_in_id_order"]) == (
                    [4, 2], ["data", "model"], True), (where, name, entry)
            elif target == "none":  # the shardings saved in `_sharding`
                assert entry["type"] == "ArrayImpl", (where, i, entry)
                _, _, mesh_name, spec, _ = mp_tree.LEAVES[path]
                assert entry["spec"] == list(spec), (where, name, entry["spec"])
                assert (entry["mesh_axes"], entry["mesh_in_id_order"]) == (
                    ["data", "model"] if mesh_name == "m" else ["x", "y"], mesh_name == "m"), (where, name, entry)
            else:
                assert entry["type"] == "ndarray", (where, i, entry)
