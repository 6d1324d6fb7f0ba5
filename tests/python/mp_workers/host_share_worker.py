"""Worker for test_restore_host_share.py: N jax.distributed processes save
one array by rows with cairn (Orbax's default zstd chain), then restore it
onto columns (every process needs a part of every stored chunk) and onto
the saved rows, and write, per process, whether the restored shards are
bit-exact and what the restore did with its chunks
(cairn._orbax_restore.last_restore_stats)."""

from __future__ import annotations

import json
import os
import sys

import jax  # noqa: E402
import numpy as np  # noqa: E402

from process_main import run_exiting_at_once_on_error  # noqa: E402  (this directory is sys.path[0])

ROWS, COLS = 1024, 512  # 2 MiB of float32; 8 row chunks of 256 KiB


def values():
    rng = np.random.default_rng(7)
    return rng.integers(0, 2**32, size=(ROWS, COLS), dtype=np.uint32).view(np.float32)


def main():
    config = json.load(open(sys.argv[1]))
    jax.distributed.initialize(coordinator_address=config["coordinator"], num_processes=config["num_processes"],
                               process_id=config["process_id"], initialization_timeout=120)
    import cairn
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("d",))
    rows, cols = NamedSharding(mesh, P("d", None)), NamedSharding(mesh, P(None, "d"))
    full = values()
    tree = {"w": jax.make_array_from_callback((ROWS, COLS), rows, lambda idx: full[idx])}
    path = config["dir"]
    cairn.save(path, tree)
    out = {}
    for name, sharding in (("cols", cols), ("rows", rows)):
        target = {"w": jax.ShapeDtypeStruct((ROWS, COLS), np.float32, sharding=sharding)}
        got = cairn.restore(path, target)["w"]
        exact = all(np.array_equal(np.asarray(s.data).view(np.uint32), full[s.index].view(np.uint32))
                    for s in got.addressable_shards)
        out[name] = {"exact": exact, "stats": cairn._orbax_restore.last_restore_stats}
    with open(os.path.join(config["out"], f"process_{jax.process_index()}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    run_exiting_at_once_on_error(main)
