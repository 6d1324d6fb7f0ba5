"""`_sharding`, written by the native layer from the facts cairn reads off jax
(layout/orbax/sharding.h), is the file orbax-checkpoint writes for the same
tree: named shardings with single-axis, multi-axis (tuple) and empty
partition-spec entries over a mesh whose devices are not in id order, and a
single-device sharding; Orbax restores every array onto the saved sharding."""

import orbax_helpers as h  # sets XLA_FLAGS first

import json

import jax
import numpy as np
import orbax.checkpoint as ocp

import cairn


def _tree():
    devices = np.array(jax.devices())
    mesh = h.Mesh(devices.reshape(4, 2), ("data", "model"))
    shuffled = h.Mesh(devices[[3, 1, 0, 2, 7, 5, 6, 4]].reshape(2, 2, 2), ("x", "y", "z"))
    values = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    return {
        "by_data_model": h.sharded(values, mesh, h.P("data", "model")),
        "by_both_axes": h.sharded(values, mesh, h.P(("data", "model"), None)),
        "replicated": h.sharded(values, mesh, h.P()),
        "shuffled_mesh": h.sharded(values, shuffled, h.P(("z", "x"), "y")),
        "one_device": jax.device_put(values, jax.sharding.SingleDeviceSharding(jax.devices()[5])),
    }


def test_sharding_file_is_orbaxs(tmp_path):
    tree = _tree()
    cairn.save(tmp_path / "cairn", tree)
    ocp.PyTreeCheckpointer().save(tmp_path / "orbax", tree)
    ours = json.loads((tmp_path / "cairn" / "_sharding").read_text())
    theirs = json.loads((tmp_path / "orbax" / "_sharding").read_text())
    assert len(theirs) == len(tree)
    assert {k: json.loads(v) for k, v in ours.items()} == {k: json.loads(v) for k, v in theirs.items()}

    restored = ocp.PyTreeCheckpointer().restore(tmp_path / "cairn")
    for name, value in tree.items():
        assert restored[name].sharding.is_equivalent_to(value.sharding, value.ndim), name
        np.testing.assert_array_equal(np.asarray(restored[name]), np.asarray(value))
