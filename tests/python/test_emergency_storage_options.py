"""cairn.emergency.CheckpointManager's storage options chunk_byte_size,
ocdbt_target_data_file_size and replica_parallel reach its saves, as
cairn.save's and cairn.CheckpointManager's do (the binding once dropped
them). Two processes are threads sharing an in-memory key-value store."""

import json

import numpy as np
import pytest

import cairn
from test_dist import run_threads


def tree():
    rng = np.random.default_rng(0)
    return {f"a{i}": rng.standard_normal((64, 64)).astype(np.float32) for i in range(4)}


def saved(root, coordinator=None, **options):
    local = root / f"local{coordinator.process_index if coordinator else 0}"
    mngr = cairn.emergency.CheckpointManager(local, root / "persistent", persistent_save_interval_steps=1,
                                             coordinator=coordinator, transport="none", **options)
    assert mngr.save(1, tree())
    mngr.wait_until_finished()
    mngr.close()
    return root


def item_of(tier_root):
    (item,) = [p.parent for p in tier_root.glob("1/*/_METADATA")]
    return item


def chunk_shape(item, param):
    zarr = json.loads(cairn.kvstore.open(f"file://{item}/|ocdbt:").get(f"{param}/zarr.json"))
    return zarr["chunk_grid"]["configuration"]["chunk_shape"]


def data_files(item, process):
    return [p for p in item.glob(f"ocdbt.process_{process}/d/*") if p.is_file()]


def test_chunk_byte_size_reaches_both_tiers(tmp_path):
    default = saved(tmp_path / "default")
    small = saved(tmp_path / "small", chunk_byte_size=4096)
    for tier in ("local0", "persistent"):
        assert chunk_shape(item_of(default / tier), "a0") == [64, 64], tier
        chunk = chunk_shape(item_of(small / tier), "a0")
        assert np.prod(chunk) * 4 <= 4096 and 64 % chunk[0] == 0, (tier, chunk)


def test_target_data_file_size_reaches_both_tiers(tmp_path):
    # Chunks larger than the target are split (Orbax's rule), as cairn.save does.
    default = saved(tmp_path / "default")
    small = saved(tmp_path / "small", ocdbt_target_data_file_size=8192)
    for tier in ("local0", "persistent"):
        assert chunk_shape(item_of(default / tier), "a0") == [64, 64], tier
        chunk = chunk_shape(item_of(small / tier), "a0")
        assert np.prod(chunk) * 4 <= 8192 and 64 % chunk[0] == 0, (tier, chunk)
        assert data_files(item_of(small / tier), 0), tier


@pytest.mark.parametrize("replica_parallel", [True, False])
def test_replica_parallel_leaves_the_tiers_rules(tmp_path, replica_parallel):
    # The option reaches the manager, whose tiers keep their own rule either
    # way: the persistent tier is written by replica 0 alone (as Orbax's
    # emergency manager writes it), the local tier by every process for
    # every shard it holds. Both processes hold each numpy array whole.
    results = run_threads(2, lambda c: saved(tmp_path, c, replica_parallel=replica_parallel))
    assert results == [tmp_path, tmp_path]
    item = item_of(tmp_path / "persistent")
    assert data_files(item, 0) and not data_files(item, 1)
    for p in (0, 1):
        assert data_files(item_of(tmp_path / f"local{p}"), p), p
    got = cairn.restore(item)
    for k, v in tree().items():
        np.testing.assert_array_equal(np.asarray(got[k]), v)
