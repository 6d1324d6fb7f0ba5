"""Multi-process saves straight to object stores: 2 processes joined by
``jax.distributed`` (8 CPU devices, meshes spanning both) each call
``cairn.save`` with their own shards on an s3:// (moto) or gs://
(fake-gcs-server) URL, then restore onto target shardings from the bucket.

Checked: the step and its item are committed by their `commit_success.txt`
markers, and nothing else is left beside them; with OCDBT every process
wrote its own ``ocdbt.process_<i>`` holding exactly the chunks it owns;
the 2 processes get their shards back bit-exact; cairn in this process
restores the tree bit-exact; TensorStore's own s3/gcs driver reads every
array of the checkpoint bit-exact (zarr3 over OCDBT, or zarr3 directly).
The workers are tests/python/mp_workers/worker.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorstore as ts

import cairn
from mp_workers import launch, mp_tree
from mp_workers.checks import assert_restored_shards_bit_exact, assert_tree_bit_exact
from test_object_store_checkpoints import fake_gcs, moto, store  # noqa: F401 (fixtures)

STEP = 3
N = 2


@pytest.mark.parametrize("use_ocdbt", [True, False], ids=["ocdbt-zarr3", "dir-zarr3"])
def test_processes_save_their_shards_to_the_bucket_and_restore(store, tmp_path, use_ocdbt):
    root = store.fresh("mp")
    item = f"{root}/{STEP}/state"
    jobs = [{"kind": "cairn_save", "use_ocdbt": use_ocdbt, "use_zarr3": True, "dir": store.url(root),
             "step": STEP, "item_name": "state"},
            {"kind": "cairn_restore", "dir": store.url(item), "out": str(tmp_path / "restored")}]
    launch.run(tmp_path / "logs", N, jobs, timeout=300)
    where = f"{N}-process save and restore on {store.scheme}://"
    assert_restored_shards_bit_exact(tmp_path / "restored", N, where, target="sharding")

    keys = store.keys(root)
    # The markers, the metadata of both processes, and then only array data:
    # with OCDBT each process's database and the root manifest over them,
    # without it each array's directory.
    files = {f"{STEP}/_CHECKPOINT_METADATA", f"{STEP}/commit_success.txt"} | {
        f"{STEP}/state/{f}" for f in ["_METADATA", "_sharding", "commit_success.txt"] +
        [f"array_metadatas/process_{i}" for i in range(N)]}
    assert files <= set(keys), sorted(files - set(keys))
    names = [".".join(p) for p in mp_tree.global_values()]
    if use_ocdbt:
        data = (f"{STEP}/state/manifest.ocdbt", f"{STEP}/state/d/",
                *(f"{STEP}/state/ocdbt.process_{i}/" for i in range(N)))
    else:
        data = tuple(f"{STEP}/state/{name}/" for name in names)
    assert [k for k in keys if k not in files and not k.startswith(data)] == [], keys
    assert_tree_bit_exact(cairn.restore(store.url(root)), f"cairn restore of {where}")

    if use_ocdbt:
        owned = {i: set(cairn.kvstore.open(store.url(f"{item}/ocdbt.process_{i}/") + "|ocdbt:").keys())
                 for i in range(N)}
        assert all(owned.values()), owned
        root_keys = set(cairn.kvstore.open(store.url(f"{item}/") + "|ocdbt:").keys())
        assert root_keys == set().union(*owned.values())
        for path in mp_tree.LEAVES:
            name = ".".join(path)
            for index, owner in mp_tree.replica0_chunks(path, N).items():
                key = mp_tree.chunk_key(name, index, True)
                holders = [i for i in range(N) if key in owned[i]]
                assert holders == [owner], f"chunk {key} is in processes {holders}, expected {owner}"

    # The peer: TensorStore's own driver reads every array from the bucket.
    base = store.ts_kv(item)
    for path, expected in mp_tree.global_values().items():
        name = ".".join(path)
        kv = ({"driver": "ocdbt", "base": base, "path": f"{name}/"} if use_ocdbt
              else {**base, "path": base["path"] + f"{name}/"})
        got = ts.open({"driver": "zarr3", "kvstore": kv}).result().read().result()
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes(), f"TensorStore: {name}"
