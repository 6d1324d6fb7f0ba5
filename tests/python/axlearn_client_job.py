"""Runs INSIDE the AXLearn 0.0.1.post20240213000026 venv (its own jax 0.4.21,
tensorstore 0.1.45, numpy 1.23.5), driven by test_axlearn_client.py.

    python axlearn_client_job.py save    BASE_DIR STEP EXPECTED_DIR
    python axlearn_client_job.py restore STEP_DIR OUT_DIR

`save`: AXLearn's Checkpointer saves a nested state on a 2x2 CPU mesh (some
arrays sharded, so their zarr arrays have several chunks) and writes every
leaf to EXPECTED_DIR as `<n>.npy` (bfloat16 viewed as uint16) plus
`manifest.json` {path: {"file", "dtype", "shape"}}.
`restore`: AXLearn's read_state_spec(STEP_DIR) and Checkpointer.restore(step,
state=spec) inside a Mesh; the leaves go to OUT_DIR the same way, and the spec
(path -> dtype, shape) into manifest.json too.
"""
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from axlearn.common import utils  # noqa: E402
from axlearn.common.checkpointer import Checkpointer, parse_step_from_dir, read_state_spec  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402


def mesh():
    return Mesh(mesh_utils.create_device_mesh((2, 2)), ("data", "model"))


def dump(tree, out_dir, specs=None):
    os.makedirs(out_dir, exist_ok=True)
    manifest = {}
    for n, (path, value) in enumerate(utils.flatten_items(tree, separator="/")):
        a = np.asarray(jax.device_get(value))
        dtype = str(a.dtype)
        raw = a.view(np.uint16) if dtype == "bfloat16" else a
        np.save(os.path.join(out_dir, f"{n}.npy"), raw)
        manifest[path] = {"file": f"{n}.npy", "dtype": dtype, "shape": list(a.shape)}
    if specs is not None:
        for path, spec in utils.flatten_items(specs, separator="/"):
            manifest[path]["spec"] = {"dtype": str(np.dtype(spec.dtype)), "shape": list(spec.shape)}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f)


def state(m):
    rng = np.random.default_rng(7)

    def put(a, spec=PartitionSpec()):
        return jax.device_put(a, NamedSharding(m, spec))

    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {
        "model": {
            "emb": put(jnp.asarray(f32(16, 8), dtype=jnp.bfloat16), PartitionSpec("data", "model")),
            "layer": {"w": put(f32(8, 4), PartitionSpec("data", "model")),
                      "b": put(f32(4)),
                      "scale": put(jnp.asarray(f32(6), dtype=jnp.bfloat16))},
        },
        "learner": {"optimizer": [{"count": put(np.int32(5))},
                                  {"mu": {"w": put(f32(8, 4), PartitionSpec("data"))}}]},
        "step_count": put(np.int32(-3)),
    }


def save(base_dir, step, expected_dir):
    cfg = Checkpointer.default_config().set(name="ckpt", dir=base_dir)
    ckpt = cfg.instantiate(parent=None)
    with mesh() as m:
        s = state(m)
        ckpt.save(step=step, state=s)
        ckpt.wait_until_finished()
        dump(s, expected_dir)
    ckpt.stop()


def restore(step_dir, out_dir):
    step = parse_step_from_dir(step_dir)
    cfg = Checkpointer.default_config().set(name="ckpt", dir=os.path.dirname(step_dir.rstrip("/")))
    ckpt = cfg.instantiate(parent=None)
    spec = read_state_spec(step_dir)
    with mesh():
        restored_step, restored = ckpt.restore(step=step, state=spec)
    assert restored_step == step, (restored_step, step)
    dump(restored, out_dir, specs=spec)
    ckpt.stop()


if __name__ == "__main__":
    if sys.argv[1] == "save":
        save(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "restore":
        restore(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
