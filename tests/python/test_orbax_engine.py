"""The engine behind cairn.save / cairn.restore: asynchronous saves,
compression choices, restore onto another sharding and partial restore —
each checked against orbax-checkpoint restoring or having written the
checkpoint."""

import orbax_helpers as h  # sets XLA_FLAGS first

import json
import pathlib
import re

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import cairn


def orbax_restore(path):
    return ocp.PyTreeCheckpointer().restore(path)


def zarr_metadata(path, param):
    store = cairn.kvstore.open(f"file://{path}/|ocdbt:")
    return json.loads(store.get(f"{param}/zarr.json"))


def test_save_async_returns_once_the_arrays_are_copied(tmp_path):
    rng = np.random.default_rng(0)
    tree = {"a": rng.standard_normal((256, 64), dtype=np.float32), "b": np.arange(10), "s": "x"}
    expected = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in tree.items()}
    pending = cairn.save_async(tmp_path / "c", tree)
    tree["a"][...] = -1  # the caller's buffers are free once save_async returns
    tree["b"][...] = -1
    path = pending.wait_until_finished()
    assert pending.done()
    assert pending.wait_until_finished() == path  # idempotent
    h.assert_bit_equal(expected, orbax_restore(path))
    h.assert_bit_equal(expected, cairn.restore(path))


def test_save_async_holds_jax_arrays_it_reads_in_the_background(tmp_path):
    # jax.Arrays are not copied before save_async returns (they never
    # change); cairn holds them until the save is finished, so a caller that
    # drops every reference at once still gets its values saved. Several
    # chunks per array (chunk_byte_size) and a budget smaller than the state
    # make the background read them over time.
    import gc
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
    rng = np.random.default_rng(7)
    values = {f"w{i}": rng.standard_normal((512, 256), dtype=np.float32) for i in range(4)}
    tree = {k: jax.device_put(v, NamedSharding(mesh, P("x", "y"))) for k, v in values.items()}
    pending = cairn.save_async(tmp_path / "c", tree, chunk_byte_size=16 << 10, memory_budget=256 << 10)
    del tree
    gc.collect()
    path = pending.wait_until_finished()
    h.assert_bit_equal(values, orbax_restore(path))
    h.assert_bit_equal(values, cairn.restore(path))


def test_save_async_into_an_existing_directory_raises_on_start(tmp_path):
    # A directory holding anything is a checkpoint already; an empty one is
    # taken over, as on object stores, where an empty prefix does not exist.
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "_CHECKPOINT_METADATA").write_text("{}")
    with pytest.raises(FileExistsError, match=f"checkpoint directory {tmp_path / 'c'} already exists"):
        cairn.save_async(tmp_path / "c", {"a": np.zeros(3)})
    assert cairn.save(tmp_path / "d", {"a": np.zeros(3)})  # control


@pytest.mark.parametrize("compression", ["default", "none", "auto"])
def test_compression_choices_are_restored_by_orbax(tmp_path, compression):
    rng = np.random.default_rng(1)
    tree = {"random": rng.standard_normal((128, 128), dtype=np.float32),
            "zeros": np.zeros((128, 128), np.float32)}
    path = cairn.save(tmp_path / "c", tree, compression=compression)
    h.assert_bit_equal(tree, orbax_restore(path))
    codecs = {p: json.dumps(zarr_metadata(path, p)["codecs"]) for p in tree}
    want_zstd = {"default": {"random": True, "zeros": True},
                 "none": {"random": False, "zeros": False},
                 "auto": {"random": False, "zeros": True}}[compression]
    for p, z in want_zstd.items():
        assert ("zstd" in codecs[p]) is z, (p, codecs[p])


def test_bad_compression_name_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="compression"):
        cairn.save(tmp_path / "c", {"a": np.zeros(3)}, compression="lz4")


def test_restore_onto_another_sharding_reads_only_what_each_device_needs(tmp_path):
    mesh = h.mesh()  # 8 CPU devices
    devices = np.asarray(mesh.devices).reshape(-1)
    saved_mesh = jax.sharding.Mesh(devices.reshape(4, 2), ("x", "y"))
    values = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    arr = jax.device_put(values, NamedSharding(saved_mesh, P("x", "y")))
    path = cairn.save(tmp_path / "c", {"w": arr, "v": np.arange(6, dtype=np.int32)})
    other = jax.sharding.Mesh(devices.reshape(2, 4), ("a", "b"))
    target = {"w": jax.ShapeDtypeStruct((16, 8), np.float32, sharding=NamedSharding(other, P("b", "a")))}
    got = cairn.restore(path, target=target, partial_restore=True)  # "v" is not asked for
    assert set(got) == {"w"}
    assert got["w"].sharding == target["w"].sharding
    np.testing.assert_array_equal(np.asarray(got["w"]), values)
    for shard in got["w"].addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), values[shard.index])
    # Orbax restores the same checkpoint with that sharding (control).
    restore_args = ocp.checkpoint_utils.construct_restore_args(target)
    o = ocp.PyTreeCheckpointer().restore(path, args=ocp.args.PyTreeRestore(
        item=target, restore_args=restore_args, partial_restore=True))
    np.testing.assert_array_equal(np.asarray(o["w"]), values)


def test_cairn_restores_orbax_checkpoint_onto_a_new_sharding(tmp_path):
    mesh = h.mesh()
    devices = np.asarray(mesh.devices).reshape(-1)
    values = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    arr = jax.device_put(values, NamedSharding(jax.sharding.Mesh(devices.reshape(8, 1), ("x", "y")), P("x")))
    ocp.PyTreeCheckpointer().save(tmp_path / "o", {"w": arr})
    target = {"w": jax.ShapeDtypeStruct((8, 12), np.float32,
                                        sharding=NamedSharding(jax.sharding.Mesh(devices.reshape(2, 4), ("a", "b")), P(None, "b")))}
    got = cairn.restore(tmp_path / "o", target=target)
    assert got["w"].sharding == target["w"].sharding
    np.testing.assert_array_equal(np.asarray(got["w"]), values)


def _sharded_restore_case(tmp_path):
    mesh = h.mesh()
    rng = np.random.default_rng(3)
    values = {f"w{i}": rng.standard_normal((64, 256), dtype=np.float32) for i in range(3)}
    sharding = NamedSharding(mesh, P("data", "model"))
    path = pathlib.Path(cairn.save(tmp_path / "c", {k: jax.device_put(v, sharding) for k, v in values.items()}))
    target = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding) for k, v in values.items()}
    return path, values, target


def test_sharded_restore_adopts_the_buffers_it_reads_into(tmp_path):
    # The jax.Arrays are made while the engine reads, from the buffers it
    # reads into: each shard's memory is the restore's own (no copy after).
    path, values, target = _sharded_restore_case(tmp_path)
    seen = {}
    real = cairn._orbax_restore._adopts

    def spy(single, host):
        seen[host.ctypes.data] = real(single, host)
        return seen[host.ctypes.data]

    cairn._orbax_restore._adopts = spy
    try:
        got = cairn.restore(path, target=target)
    finally:
        cairn._orbax_restore._adopts = real
    assert seen and all(seen.values())
    for k, v in values.items():
        for shard in got[k].addressable_shards:
            assert shard.data.unsafe_buffer_pointer() in seen
            np.testing.assert_array_equal(np.asarray(shard.data), v[shard.index])


def test_sharded_restore_puts_shards_again_where_jax_copied_them(tmp_path, monkeypatch):
    # Buffers 8 bytes off jax's 64-byte alignment are copied by device_put,
    # before the engine filled them: the restore must put them again after.
    path, values, target = _sharded_restore_case(tmp_path)
    real = cairn._orbax_restore._aligned_empty

    def misaligned(shape, dtype, alignment=64):
        dtype = np.dtype(dtype)
        n = int(np.prod(shape)) * dtype.itemsize
        raw = real((n + 64,), np.uint8)
        return raw[8:8 + n].view(dtype).reshape(shape)

    monkeypatch.setattr(cairn._orbax_restore, "_aligned_empty", misaligned)
    adopted = []
    real_adopts = cairn._orbax_restore._adopts
    monkeypatch.setattr(cairn._orbax_restore, "_adopts", lambda s, host: adopted.append(real_adopts(s, host)) or adopted[-1])
    got = cairn.restore(path, target=target)
    assert adopted and not any(adopted)  # jax copied every one
    for k, v in values.items():
        np.testing.assert_array_equal(np.asarray(got[k]), v)


def test_sharded_restore_raises_the_engines_error(tmp_path):
    path, values, target = _sharded_restore_case(tmp_path)
    data = [f for f in sorted(path.rglob("*")) if f.is_file() and f.parent.name == "d"]
    assert data, "no OCDBT data files found"
    for f in data:
        f.write_bytes(b"\0" * f.stat().st_size)
    # The first damaged read names its array and key (the B+tree nodes are
    # zeroed too, so it may be any of the arrays' metadata or chunks).
    with pytest.raises(cairn.CorruptDataError,
                       match=rf"array `w[0-2]` of Orbax item {re.escape(str(path))}: reading key `w[0-2]/"):
        cairn.restore(path, target=target)
