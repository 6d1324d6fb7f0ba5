"""cairn.emergency restores a local step on a RAM disk by mapping its chunks
instead of copying them (docs/EMERGENCY.md, "Restoring by mapping"): each
restored shard that is one stored chunk is the tmpfs file's own pages (seen
in /proc/self/maps at the jax buffer's address), bit-exact, and stays so
after later saves delete the step. Local directories on a disk, a
compressed local tier and shards that are not one stored chunk are copied
as before. One process with 8 CPU devices."""

import orbax_helpers as h  # sets XLA_FLAGS first

import os
import shutil
import subprocess
import tempfile

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import cairn

# ZeroMQ and MPI are required, not optional (conftest.peer_transports).
pytestmark = pytest.mark.usefixtures("peer_transports")


def state_at(step, m):
    rng = np.random.default_rng(step)
    return {
        # 8 row blocks of 8 x 1024 float32 (32 KiB each), each on 2 devices.
        "w": h.sharded(rng.standard_normal((32, 1024)).astype(np.float32), m, P("data", None)),
        # Replicated: one stored chunk, the whole array.
        "r": h.sharded(rng.standard_normal((16, 512)).astype(np.float32), m, P()),
        "small": h.sharded(rng.standard_normal(6).astype(np.float32), m, P()),
    }


def as_numpy(tree):
    return jax.tree_util.tree_map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, tree)


def abstract(tree):
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)


def mapped_file(address):
    """The file /proc/self/maps names for the mapping holding `address`
    ("" for anonymous memory)."""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5].strip() if len(fields) > 5 else ""
    return ""


def shard_files(array):
    return [mapped_file(s.data.unsafe_buffer_pointer()) for s in array.addressable_shards]


@pytest.fixture
def ram_dir():
    d = tempfile.mkdtemp(prefix="cairn_mapped_", dir="/dev/shm")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(local, persistent, m, steps, **kwargs):
    mngr = cairn.emergency.CheckpointManager(local, persistent, local_save_interval_steps=1,
                                             local_max_to_keep=1, persistent_save_interval_steps=100,
                                             **kwargs)
    for step in steps:
        assert mngr.save(step, state_at(step, m))
    mngr.wait_until_finished()
    return mngr


def test_restored_shards_are_the_ram_disks_pages_and_survive_deletion(ram_dir, tmp_path):
    m = h.mesh()
    local = os.path.join(ram_dir, "local")
    mngr = run(local, tmp_path / "persistent", m, [1, 2])
    restored = mngr.restore(target=abstract(state_at(2, m)))
    report = mngr.last_restore
    assert report["tier"] == "local" and report["step"] == 2
    h.assert_bit_equal(as_numpy(state_at(2, m)), as_numpy(restored))
    # Every shard of w and r is a mapping of a data file of local step 2.
    step_data = os.path.join(local, "2", "state", "ocdbt.process_0", "d") + "/"
    for name in ("w", "r"):
        files = shard_files(restored[name])
        assert all(f.startswith(step_data) for f in files), (name, files)
    assert report["bytes_mapped"] == (4 * 8 * 1024 + 16 * 512) * 4  # 4 distinct row blocks, 1 replicated
    # The small array is below a page: copied (anonymous memory).
    assert not any(f.startswith(ram_dir) for f in shard_files(restored["small"]))

    # Later saves delete step 2 (local_max_to_keep=1): the arrays keep their pages.
    for step in (3, 4):
        assert mngr.save(step, state_at(step, m))
    mngr.wait_until_finished()
    assert not os.path.exists(os.path.join(local, "2"))
    assert all(f.endswith("(deleted)") for f in shard_files(restored["w"]))
    h.assert_bit_equal(as_numpy(state_at(2, m)), as_numpy(restored))
    # jax computes on them; writing a copy-on-write page leaves the others alone.
    doubled = jax.jit(lambda x: x * 2)(restored["w"])
    np.testing.assert_array_equal(np.asarray(doubled), np.asarray(state_at(2, m)["w"]) * 2)
    mngr.close()


def test_numpy_restore_without_target_maps_whole_array_chunks(ram_dir, tmp_path):
    m = h.mesh()
    mngr = run(os.path.join(ram_dir, "local"), tmp_path / "persistent", m, [1])
    restored = mngr.restore()
    h.assert_bit_equal(as_numpy(state_at(1, m)), restored)
    # r is one stored chunk (mapped); w spans 4 chunks (copied).
    assert mapped_file(restored["r"].ctypes.data).startswith(ram_dir)
    assert not mapped_file(restored["w"].ctypes.data).startswith(ram_dir)
    assert mngr.last_restore["bytes_mapped"] == 16 * 512 * 4
    restored["r"][0, 0] = 123.0  # a private mapping: writable, the step stays intact
    again = mngr.restore()
    h.assert_bit_equal(as_numpy(state_at(1, m)), again)
    mngr.close()


def test_local_tier_on_a_disk_is_copied(tmp_path):
    m = h.mesh()
    fs_type = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True).stdout
    assert fs_type.strip() not in ("tmpfs", "ramfs"), f"the test needs {tmp_path} on a disk"
    mngr = run(tmp_path / "local", tmp_path / "persistent", m, [1])
    restored = mngr.restore(target=abstract(state_at(1, m)))
    h.assert_bit_equal(as_numpy(state_at(1, m)), as_numpy(restored))
    assert mngr.last_restore["bytes_mapped"] == 0
    assert not any(f.startswith(str(tmp_path)) for f in shard_files(restored["w"]))
    mngr.close()


def test_compressed_local_tier_is_copied(ram_dir, tmp_path):
    m = h.mesh()
    mngr = run(os.path.join(ram_dir, "local"), tmp_path / "persistent", m, [1], local_compression="default")
    restored = mngr.restore(target=abstract(state_at(1, m)))
    h.assert_bit_equal(as_numpy(state_at(1, m)), as_numpy(restored))
    assert mngr.last_restore["bytes_mapped"] == 0
    mngr.close()


def test_another_sharding_is_copied(ram_dir, tmp_path):
    m = h.mesh()
    mngr = run(os.path.join(ram_dir, "local"), tmp_path / "persistent", m, [1])
    # Columns instead of rows: no restored shard is one stored chunk.
    target = abstract(state_at(1, m))
    target["w"] = jax.ShapeDtypeStruct((32, 1024), np.float32, sharding=NamedSharding(m, P(None, "data")))
    restored = mngr.restore(target=target)
    h.assert_bit_equal(as_numpy(state_at(1, m)), as_numpy(restored))
    assert not any(f.startswith(ram_dir) for f in shard_files(restored["w"]))
    assert mngr.last_restore["bytes_mapped"] == 16 * 512 * 4  # r still is one chunk
    mngr.close()
