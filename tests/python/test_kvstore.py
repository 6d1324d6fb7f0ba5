"""cairn.kvstore: the store API on memory://, file:// and |ocdbt:, and
interop with TensorStore's kvstores in both directions."""

import uuid

import pytest
import tensorstore as ts
import tensorstore.ocdbt

import cairn

VALUES = {"b": b"bee", "a/x": b"", "a/y": bytes(range(256)) * 40, "c.d": b"\x00\x01"}


def store_urls(tmp_path):
    return {
        "memory": f"memory://kv-{uuid.uuid4().hex}/",
        "file": f"file://{tmp_path}/files/",
        "ocdbt": f"file://{tmp_path}/db/|ocdbt:",
        "ocdbt_path": f"file://{tmp_path}/db2/|ocdbt:sub/dir/",
    }


@pytest.fixture(params=["memory", "file", "ocdbt", "ocdbt_path"])
def store(request, tmp_path):
    return cairn.kvstore.open(store_urls(tmp_path)[request.param])


def test_put_get_list_delete(store):
    for k, v in VALUES.items():
        store.put(k, v)
    assert store.keys() == sorted(VALUES)
    assert store.list() == [(k, len(VALUES[k])) for k in sorted(VALUES)]
    assert store.keys("a/") == ["a/x", "a/y"]
    for k, v in VALUES.items():
        assert store.get(k) == v
        assert store[k] == v
    assert "b" in store and "nope" not in store
    with pytest.raises(KeyError) as info:
        store.get("nope")
    assert info.value.args[0] == "nope"
    store.delete("b")
    store.delete("b")  # deleting a missing key is fine
    assert "b" not in store
    store.delete_prefix("a/")
    assert store.keys() == ["c.d"]


def test_byte_ranges(store):
    v = VALUES["a/y"]
    store.put("a/y", v)
    assert store.get("a/y", 10, 20) == v[10:20]
    assert store.get("a/y", 100) == v[100:]
    assert store.get("a/y", -7) == v[-7:]
    assert store.get("a/y", 5, 5) == b""
    with pytest.raises(ValueError, match=r"reading key `[^`]*a/y` of .*exceeds value size"):
        store.get("a/y", len(v) + 1, len(v) + 5)
    with pytest.raises(ValueError, match=r"byte range \[9, 3\) is not a range"):
        store.get("a/y", 9, 3)


def test_put_many(store):
    store.put("gone", b"x")
    store.put_many({"k1": b"1", "k2": memoryview(b"22"), "gone": None})
    store.put_many([("k3", bytearray(b"333"))])
    assert store.keys() == ["k1", "k2", "k3"]
    assert [store.get(k) for k in store.keys()] == [b"1", b"22", b"333"]


def test_bad_keys(store):
    for key in ["", "/abs", "a/../b", "a/./b"]:
        with pytest.raises(ValueError) as info:
            store.put(key, b"x")
        assert store.url.split("|")[0].rstrip("/") in str(info.value), str(info.value)
        assert f"invalid key `{key}`" in str(info.value), str(info.value)


def test_tensorstore_reads_what_cairn_put(tmp_path):
    for name, url in store_urls(tmp_path).items():
        if name == "memory":
            continue  # TensorStore's memory store lives in its own process state
        s = cairn.kvstore.open(url)
        s.put_many(VALUES)
        t = ts.KvStore.open(url).result()
        assert sorted(k.decode() for k in t.list().result()) == sorted(VALUES), name
        for k, v in VALUES.items():
            assert t.read(k).result().value == v, (name, k)


def test_cairn_reads_what_tensorstore_put(tmp_path):
    for name, url in store_urls(tmp_path).items():
        if name == "memory":
            continue
        t = ts.KvStore.open(url).result()
        with ts.Transaction() as txn:
            for k, v in VALUES.items():
                t.with_transaction(txn)[k] = v
        s = cairn.kvstore.open(url)
        assert s.keys() == sorted(VALUES), name
        for k, v in VALUES.items():
            assert s.get(k) == v, (name, k)


def test_put_many_is_one_ocdbt_generation(tmp_path):
    url = f"file://{tmp_path}/db/|ocdbt:"
    s = cairn.kvstore.open(url)
    s.put("first", b"1")
    base = ts.KvStore.open(f"file://{tmp_path}/db/").result()
    before = len(tensorstore.ocdbt.dump(base).result()["versions"])
    s.put_many({f"key{i}": bytes([i]) * i for i in range(50)})
    after = tensorstore.ocdbt.dump(base).result()["versions"]
    assert len(after) == before + 1
    assert after[-1]["root"]["statistics"]["num_keys"] == 51
    # TensorStore sees all 51 keys.
    t = ts.KvStore.open(url).result()
    assert len(t.list().result()) == 51


def test_plain_path_is_a_file_store(tmp_path):
    s = cairn.kvstore.open(str(tmp_path / "plain"))
    s.put("k", b"v")
    assert (tmp_path / "plain" / "k").read_bytes() == b"v"
    assert s.url.startswith("file://")


def test_arrays_in_ocdbt(tmp_path):
    """An array inside OCDBT, addressed with TensorStore's URL syntax, both ways."""
    import numpy as np
    from conftest import assert_bit_exact, random_array
    values = random_array("bfloat16", (6, 5), seed=31)
    a = cairn.create(f"file://{tmp_path}/db/|ocdbt:params.w/|zarr3:", shape=[6, 5],
                     dtype="bfloat16", chunks=[4, 5])
    a.write(values)
    t = ts.open(f"file://{tmp_path}/db/|ocdbt:params.w/|zarr3:").result()
    assert_bit_exact(t.read().result(), values)
    t2 = ts.open(f"file://{tmp_path}/db/|ocdbt:|zarr3:params.b/", create=True,
                 dtype=ts.float32, shape=[3]).result()
    t2.write(np.array([1, 2, 3], np.float32)).result()
    assert_bit_exact(cairn.open(f"file://{tmp_path}/db/|ocdbt:params.b/|zarr3:").read(),
                     np.array([1, 2, 3], np.float32))
    assert cairn.kvstore.open(f"file://{tmp_path}/db/|ocdbt:").keys() == [
        "params.b/c/0", "params.b/zarr.json", "params.w/c/0/0", "params.w/c/1/0",
        "params.w/zarr.json"]
