"""Pathways colocated Python: cairn's colocated handler against Orbax 0.12.8's
colocated dispatcher, on the same state, in one run.

    python3 bench/colocated_bench.py [--mib 256] [--repeat 5] [--directory DIR] [--plain]

`--plain`: the same comparison without Pathways: cairn's handler
(``cairn.orbax.PyTreeCheckpointHandler()``) against Orbax's own
``PyTreeCheckpointHandler``, both driven by ``ocp.Checkpointer`` (what a user
of Orbax's manager gets by naming cairn's handler).

The state (`--mib`, default 256 MiB) is a tree of float32 and bfloat16
jax.Arrays sharded over 8 CPU devices (4x2 mesh), one numpy array and a
scalar. Both sides save it through ``ocp.Checkpointer(PyTreeCheckpointHandler)``:
cairn's with ``colocated=True``, Orbax's with its colocated type handlers
(``ColocatedPythonDispatcher``, in a local type handler registry). On CPU jax
runs every colocated function in this process after a pickling round trip,
so both pay the dispatch; neither crosses a network. Saves start from an
empty directory; restores read each side's own checkpoint into the state's
shardings with the page cache dropped first. Medians of `--repeat` runs,
interleaved (common.interleaved_medians). The device's sequential O_DIRECT
write and read bandwidth is measured in the same run on a file of the
state's size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, drop_caches, interleaved_medians, print_table, results  # noqa: E402

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from orbax.checkpoint._src.serialization import pathways_handler_registry as phr  # noqa: E402
from orbax.checkpoint._src.serialization import type_handler_registry as thr  # noqa: E402
from orbax.checkpoint._src.serialization import type_handlers as th  # noqa: E402

import cairn.orbax  # noqa: E402
from cairn import _colocated  # noqa: E402


def orbax_colocated_registry():
    scalar = phr.get_pathways_scalar_handler()
    return thr.create_type_handler_registry(
        (int, scalar), (float, scalar), (bytes, scalar), (np.number, scalar),
        (np.ndarray, phr.get_pathways_numpy_handler()),
        (jax.Array, phr.get_pathways_array_handler(checkpointing_impl=phr.CheckpointingImpl.COLOCATED_PYTHON)),
        (str, th.StringHandler()), (type(th.PLACEHOLDER), th.PlaceholderHandler()))


def state(mib: int):
    """~`mib` MiB: 2048-wide float32 matrices (a quarter of the bytes in
    bfloat16), a 1 MiB numpy array, a scalar."""
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
    sharded = NamedSharding(mesh, P("data", "model"))
    rows = 1024  # 1024 x 2048 float32 = 8 MiB
    n = max(1, (mib - 1) // 8)
    tree = {"params": {}, "opt": {}, "mask": np.arange(1 << 18, dtype=np.float32), "step": 1000}
    for i in range(n):
        key = jax.random.key(i)
        if i % 4 == 3:  # bfloat16: 2048 rows for the same 8 MiB
            tree["params"][f"w{i}"] = jax.device_put(
                jax.random.normal(key, (2 * rows, 2048), jnp.bfloat16), sharded)
        else:
            tree["opt"][f"m{i}"] = jax.device_put(jax.random.normal(key, (rows, 2048), jnp.float32), sharded)
    jax.block_until_ready(tree)
    nbytes = sum(getattr(v, "nbytes", 8) for v in jax.tree.leaves(tree))
    return tree, nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--directory", default=tempfile.gettempdir())
    ap.add_argument("--plain", action="store_true", help="handlers without the colocated dispatch")
    a = ap.parse_args()
    tree, nbytes = state(a.mib)
    root = tempfile.mkdtemp(prefix="colocated-bench-", dir=a.directory)
    abstract = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding)
                            if isinstance(v, jax.Array) else v, tree)
    restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
    registry = orbax_colocated_registry()
    if a.plain:
        handlers = {"cairn": lambda: cairn.orbax.PyTreeCheckpointHandler(),
                    "orbax": lambda: ocp.PyTreeCheckpointHandler()}
    else:
        handlers = {"cairn": lambda: cairn.orbax.PyTreeCheckpointHandler(colocated=True),
                    "orbax": lambda: ocp.PyTreeCheckpointHandler(type_handler_registry=registry)}
    paths = {name: os.path.join(root, name) for name in handlers}
    check = {}

    def saver(name):
        def run():
            with ocp.Checkpointer(handlers[name]()) as c:
                c.save(paths[name], args=ocp.args.PyTreeSave(tree))
        return run, lambda: shutil.rmtree(paths[name], ignore_errors=True)

    def restorer(name):
        def run():
            with ocp.Checkpointer(handlers[name]()) as c:
                back = c.restore(paths[name], args=ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args))
                jax.block_until_ready(back)
            check[name] = back
        return run, lambda: drop_caches([paths[name]])

    try:
        for name in handlers:  # warm-up (compiles, first pickling)
            saver(name)[1](), saver(name)[0](), restorer(name)[0]()
        runs = _colocated.host_saves
        save = interleaved_medians({n: saver(n) for n in handlers}, a.repeat)
        restore = interleaved_medians({n: restorer(n) for n in handlers}, a.repeat)
        if not a.plain:
            assert _colocated.host_saves == runs + a.repeat, "cairn's host function did not run every save"
        for name, back in check.items():
            for g, w in zip(jax.tree.leaves(back), jax.tree.leaves(tree)):
                assert np.asarray(g).tobytes() == np.asarray(w).tobytes(), f"{name}: restored values differ"
        write_bw, read_bw, tool = device_bandwidth(root, nbytes)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for op, t, bw in (("save", save, write_bw), ("restore", restore, read_bw)):
        cairn_gbs = nbytes / GB / t["cairn"]
        rows.append([op, f"{t['cairn']:.3f}", f"{t['orbax']:.3f}", f"{t['orbax'] / t['cairn']:.2f}x",
                     f"{cairn_gbs:.2f}", f"{nbytes / GB / t['orbax']:.2f}", f"{bw:.2f}", f"{cairn_gbs / bw:.2f}"])
    print(f"{'plain handlers' if a.plain else 'colocated'}: "
          f"state {nbytes / 2**20:.0f} MiB in {len(jax.tree.leaves(tree))} leaves, 8 CPU devices, "
          f"medians of {a.repeat}; device {tool}")
    print_table(["op", "cairn s", "orbax s", "orbax/cairn", "cairn GB/s", "orbax GB/s", "device GB/s",
                 "cairn/device"], rows)


if __name__ == "__main__":
    with results("colocated_bench"):
        main()
