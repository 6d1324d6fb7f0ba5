"""cairn.emergency.CheckpointManager in one process with 8 CPU devices: the
persistent tier is a normal Orbax checkpoint (orbax-checkpoint restores it,
and Orbax's CheckpointManager lists its steps), the local tier follows
Orbax's local layout (orbax-checkpoint reads its item), restores pick the
newest usable step and fall back to the persistent tier when the local
directory is lost. Several processes with peer copies are tested in C++
(ctest emergency_mpi)."""

import orbax_helpers as h  # sets XLA_FLAGS first

import json
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import cairn

# ZeroMQ and MPI are required, not optional (conftest.peer_transports).
pytestmark = pytest.mark.usefixtures("peer_transports")


def state_at(step, m):
    rng = np.random.default_rng(step)
    return {
        "params": {"w": h.sharded(rng.standard_normal((8, 6)).astype(np.float32), m, P("data", None)),
                   "b": h.sharded(rng.standard_normal(6).astype(np.float32), m, P())},
        "step": step,
        "name": "run-7",
    }


def as_numpy(tree):
    return jax.tree_util.tree_map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, tree)


def saved_run(tmp_path, steps=6):
    m = h.mesh()
    mngr = cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                             local_save_interval_steps=1, local_max_to_keep=2,
                                             persistent_save_interval_steps=5)
    for step in range(1, steps + 1):
        assert mngr.save(step, state_at(step, m))
    mngr.wait_until_finished()
    mngr.close()
    return m


def test_persistent_tier_is_an_orbax_checkpoint(tmp_path):
    m = saved_run(tmp_path)
    expected = as_numpy(state_at(5, m))
    # Orbax's own manager lists the persistent root and restores the step.
    with ocp.CheckpointManager(tmp_path / "persistent") as orbax_mngr:
        assert orbax_mngr.all_steps() == [5]
        restored = orbax_mngr.restore(5, args=ocp.args.PyTreeRestore())
    h.assert_bit_equal(expected, restored)
    # Control: a step that is only in the local tier is not there.
    assert not (tmp_path / "persistent" / "6").exists()


def test_local_tier_layout_and_restore(tmp_path):
    m = saved_run(tmp_path)
    step = tmp_path / "local" / "6"
    assert sorted(p.name for p in (tmp_path / "local").iterdir()) == ["5", "6", "cairn_emergency.json"]  # local_max_to_keep=2
    for name in ("_CHECKPOINT_METADATA", "commit_success.txt", "state/_METADATA", "state/manifest.ocdbt",
                 "state/ocdbt.process_0", "process_metadata/global_process_metadata.json",
                 "process_metadata/mesh_metadata.json"):
        assert (step / name).exists(), name
    # Every process saved every shard it holds: all 8 devices are this process's.
    devices = json.loads((step / "process_metadata/global_process_metadata.json").read_text())
    assert sorted(devices[0]) == sorted(d.id for d in jax.devices())
    # orbax-checkpoint reads the local step's item as its own.
    h.assert_bit_equal(as_numpy(state_at(6, m)), ocp.PyTreeCheckpointer().restore(step / "state"))

    mngr = cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                             persistent_save_interval_steps=5)
    assert mngr.all_steps() == [5, 6]
    assert mngr.latest_step() == 6
    target = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding) if isinstance(x, jax.Array) else x,
        state_at(6, m))
    restored = mngr.restore(target=target)
    assert mngr.last_restore["tier"] == "local" and mngr.last_restore["step"] == 6
    assert mngr.last_restore["bytes_from_own_disk"] == (48 + 6) * 4 + 8  # w, b and the int64 step
    assert isinstance(restored["params"]["w"], jax.Array)
    assert restored["params"]["w"].sharding == target["params"]["w"].sharding
    h.assert_bit_equal(as_numpy(state_at(6, m)), as_numpy(restored))
    # A requested step from the persistent tier.
    h.assert_bit_equal(as_numpy(state_at(5, m)), as_numpy(mngr.restore(5)))
    assert mngr.last_restore["tier"] == "local"  # step 5 is still a local step too
    mngr.close()


def test_lost_local_directory_falls_back_to_persistent(tmp_path):
    m = saved_run(tmp_path)
    shutil.rmtree(tmp_path / "local")  # the host's disk is gone
    with cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                           persistent_save_interval_steps=5) as mngr:
        assert mngr.latest_step() == 5
        restored = mngr.restore()
        assert mngr.last_restore["tier"] == "persistent" and mngr.last_restore["step"] == 5
        assert any("newest persistent step" in line for line in mngr.last_restore["log"])
        h.assert_bit_equal(as_numpy(state_at(5, m)), as_numpy(restored))
        with pytest.raises(FileNotFoundError, match="step 6 is neither complete"):
            mngr.restore(6)


def test_fresh_start_and_intervals(tmp_path):
    m = h.mesh()
    with cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                           local_save_interval_steps=2,
                                           persistent_save_interval_steps=3) as mngr:
        assert mngr.latest_step() is None
        with pytest.raises(FileNotFoundError, match="nothing to restore"):
            mngr.restore()
        assert [s for s in range(1, 7) if mngr.should_save(s)] == [2, 3, 4, 6]
        assert not mngr.save(1, state_at(1, m))
        assert mngr.save(3, state_at(3, m))
        mngr.wait_until_finished()
        assert (tmp_path / "persistent" / "3" / "default").exists()
        assert not (tmp_path / "local" / "3").exists()  # not due locally
        with pytest.raises(ValueError, match="peer copies need a transport"):
            cairn.emergency.CheckpointManager(tmp_path / "l2", tmp_path / "p2", peer_copies=1)


def test_jax_arrays_are_held_until_written_then_released(tmp_path):
    # save() does not copy jax.Arrays (they never change): the manager holds
    # views of their buffers until both tiers' writes have read them, so a
    # caller that drops its tree at once still gets its values saved; once
    # the writes are done the views are gone, which jax shows by donating
    # the array's buffers to a jitted call (a buffer something still views
    # is not donated: the control keeps a view itself).
    import gc
    m = h.mesh()
    values = {f"w{i}": np.random.default_rng(i).standard_normal((64, 32)).astype(np.float32) for i in range(3)}
    mngr = cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                             local_save_interval_steps=1, persistent_save_interval_steps=1)
    tree = {k: h.sharded(v, m, P("data", None)) for k, v in values.items()}
    assert mngr.save(1, tree)
    kept = tree["w0"]
    del tree
    gc.collect()
    mngr.wait_until_finished()
    h.assert_bit_equal(values, as_numpy(mngr.restore()))
    donate = jax.jit(lambda a: a * 2, donate_argnums=0)
    doubled = donate(kept)
    assert kept.is_deleted()  # the manager no longer views its buffers
    np.testing.assert_array_equal(np.asarray(doubled), values["w0"] * 2)
    # Control: a view held elsewhere keeps jax from donating.
    other = h.sharded(values["w1"], m, P("data", None))
    view = np.asarray(other.addressable_shards[0].data)
    donate(other)
    assert not other.is_deleted()
    del view
    mngr.close()


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_persistent_tier_on_an_object_store(tmp_path, monkeypatch, scheme):
    # Orbax's emergency checkpointer is mostly run with its persistent tier
    # on a bucket: the same here, on fake-gcs-server and on moto. After the
    # host's local directory is lost, the newest persistent step is restored
    # from the bucket, and TensorStore's own driver lists its commit marker.
    import tensorstore as ts
    from s3_helpers import FakeGcsServer, MotoServer, gcs_environment, s3_environment

    bucket = f"cairn-em-{scheme}"
    if scheme == "gs":
        server = FakeGcsServer.shared()
        server.create_bucket(bucket)
        gcs_environment(monkeypatch, server.endpoint)
        ts_kv = {"driver": "gcs", "bucket": bucket, "path": "run/"}
    else:
        server = MotoServer()
        server.create_bucket(bucket)
        s3_environment(monkeypatch, server.endpoint, tmp_path)
        ts_kv = {"driver": "s3", "bucket": bucket, "path": "run/", "endpoint": server.endpoint,
                 "aws_region": "us-east-1"}
    try:
        m = h.mesh()
        persistent = f"{scheme}://{bucket}/run"
        with cairn.emergency.CheckpointManager(tmp_path / "local", persistent, local_save_interval_steps=1,
                                               local_max_to_keep=2, persistent_save_interval_steps=5) as mngr:
            for step in range(1, 7):
                assert mngr.save(step, state_at(step, m))
            mngr.wait_until_finished()
        assert cairn.orbax.all_steps(persistent) == [5]
        keys = ts.KvStore.open(ts_kv).result().list().result()
        assert b"5/commit_success.txt" in keys and not any(k.startswith(b"6/") for k in keys)
        shutil.rmtree(tmp_path / "local")  # the host's disk is gone
        with cairn.emergency.CheckpointManager(tmp_path / "local", persistent,
                                               persistent_save_interval_steps=5) as mngr:
            restored = mngr.restore()
            assert mngr.last_restore["tier"] == "persistent" and mngr.last_restore["step"] == 5
        h.assert_bit_equal(as_numpy(state_at(5, m)), as_numpy(restored))
    finally:
        if scheme == "s3":
            server.stop()


def test_at_point_observes_local_saves_and_crash_safe_retention(tmp_path):
    """`at_point` is an observer of the named points (no test hook is read
    from the environment): each local save's, then retention's crash-safe
    deletion of the oldest local step (renamed before it is removed)."""
    m = h.mesh()
    seen = []
    mngr = cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                             local_save_interval_steps=1, local_max_to_keep=1,
                                             persistent_save_interval_steps=100,
                                             at_point=lambda point, step: seen.append((point, step)))
    for step in (1, 2):
        assert mngr.save(step, state_at(step, m))
        mngr.wait_until_finished()
    mngr.close()
    save = ["data_written", "before_item_commit", "before_step_commit"]
    assert [p for p, s in seen if s == 1] == save, seen
    assert [p for p, s in seen if s == 2] == save + ["before_delete_rename", "delete_renamed"], seen
    assert sorted(p.name for p in (tmp_path / "local").iterdir() if p.name[0].isdigit()) == ["2"]
