"""cairn's s3:// driver against moto's S3 server (started once for this
module on a free port) and against TensorStore's own s3 driver on the same
server: each reads what the other wrote, bit-exactly. A fault proxy between
cairn and moto answers 503/429 and drops connections; bad input (missing or
broken credentials, a missing bucket, keys needing escaping) and a listing
of 10,000 objects across pages."""

from __future__ import annotations

import os
import re
import urllib.request

import numpy as np
import pytest
import tensorstore as ts

import cairn
from s3_helpers import FaultProxy, MotoServer, check_ocdbt_uploaded_file_by_file, s3_environment

BUCKET = "cairn-py"


@pytest.fixture(scope="module")
def moto():
    server = MotoServer()
    server.create_bucket(BUCKET)
    yield server
    server.stop()


@pytest.fixture
def env(moto, monkeypatch, tmp_path):
    """Environment for cairn's s3:// URLs (read when a store is opened)."""
    s3_environment(monkeypatch, moto.endpoint, tmp_path)
    return monkeypatch


@pytest.fixture
def proxy(moto):
    p = FaultProxy(f"127.0.0.1:{moto.port}")
    yield p
    p.stop()


_counter = [0]


def fresh(name: str) -> str:
    """A prefix no other test uses."""
    _counter[0] += 1
    return f"{name}-{os.getpid()}-{_counter[0]}/"


def ts_kv(moto, path: str) -> dict:
    return {"driver": "s3", "bucket": BUCKET, "path": path, "endpoint": moto.endpoint,
            "aws_region": "us-east-1"}


def raw_objects(moto, prefix: str) -> dict:
    kv = ts.KvStore.open(ts_kv(moto, prefix)).result()
    return {k: kv.read(k).result().value for k in kv.list().result()}


def test_tensorstore_reads_zarr3_written_by_cairn(env, moto):
    p = fresh("cairn-zarr")
    values = np.arange(48, dtype=np.float32).reshape(6, 8) * 1.5
    a = cairn.create(f"s3://{BUCKET}/{p}|zarr3:", shape=[6, 8], dtype="float32", chunks=[3, 4])
    a.write(values)
    t = ts.open({"driver": "zarr3", "kvstore": ts_kv(moto, p)}).result()
    np.testing.assert_array_equal(t.read().result(), values)
    # TensorStore writing the same array elsewhere stores the same chunk bytes.
    q = fresh("ts-zarr-same")
    t2 = ts.open({"driver": "zarr3", "kvstore": ts_kv(moto, q)}, create=True,
                 dtype=ts.float32, shape=[6, 8], chunk_layout=ts.ChunkLayout(chunk_shape=[3, 4])).result()
    t2.write(values).result()
    ours = {k: v for k, v in raw_objects(moto, p).items() if k != b"zarr.json"}
    theirs = {k: v for k, v in raw_objects(moto, q).items() if k != b"zarr.json"}
    assert len(ours) == 4 and ours == theirs


def test_cairn_reads_zarr3_written_by_tensorstore(env, moto):
    p = fresh("ts-zarr")
    values = (np.arange(60, dtype=np.int16).reshape(6, 10) - 30) * 7
    spec = {"driver": "zarr3", "kvstore": ts_kv(moto, p),
            "metadata": {"codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                    {"name": "zstd", "configuration": {"level": 3}}]}}
    t = ts.open(spec, create=True, dtype=ts.int16, shape=[6, 10],
                chunk_layout=ts.ChunkLayout(chunk_shape=[4, 4])).result()
    t.write(values).result()
    a = cairn.open(f"s3://{BUCKET}/{p}|zarr3:")
    np.testing.assert_array_equal(a.read(), values)
    np.testing.assert_array_equal(a.read(origin=[1, 3], shape=[4, 5]), values[1:5, 3:8])


def test_ocdbt_both_ways(env, moto):
    # cairn writes an OCDBT database and a zarr3 array inside one; TensorStore reads both.
    p = fresh("cairn-ocdbt")
    items = {f"k/{i:03d}": os.urandom(i * 13 % 200) for i in range(60)}
    cairn.kvstore.open(f"s3://{BUCKET}/{p}|ocdbt:").put_many(items)
    db = ts.KvStore.open({"driver": "ocdbt", "base": ts_kv(moto, p)}).result()
    assert {k.decode(): db.read(k).result().value for k in db.list().result()} == items
    values = np.arange(24, dtype=np.uint8).reshape(4, 6)
    cairn.create(f"s3://{BUCKET}/{p}|ocdbt:arr/|zarr3:", shape=[4, 6], dtype="uint8",
                 chunks=[2, 3]).write(values)
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": ts_kv(moto, p),
                                                 "path": "arr/"}}).result()
    np.testing.assert_array_equal(t.read().result(), values)
    # TensorStore writes one; cairn reads it.
    q = fresh("ts-ocdbt")
    theirs = ts.KvStore.open({"driver": "ocdbt", "base": ts_kv(moto, q)}).result()
    for k, v in list(items.items())[:20]:
        theirs.write(k, v).result()
    mine = cairn.kvstore.open(f"s3://{BUCKET}/{q}|ocdbt:")
    assert mine.keys() == sorted(list(items)[:20])
    assert all(mine.get(k) == items[k] for k in list(items)[:20])


def test_ocdbt_array_uploaded_file_by_file_read_by_tensorstore(env, moto):
    p = fresh("cairn-ocdbt-early")
    check_ocdbt_uploaded_file_by_file(env, f"s3://{BUCKET}/{p}", ts_kv(moto, p))


def test_keys_needing_escaping_agree_with_tensorstore(env, moto):
    p = fresh("escape")
    keys = ["a b/c+d", "pct%41/q?x=1#f", "amp&lt;/semi;colon", "uni/\u00e9t\u00e9", "eq=/ap'os\""]
    store = cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    store.put_many({k: k.encode() * 2 for k in keys})
    kv = ts.KvStore.open(ts_kv(moto, p)).result()
    assert sorted(k.decode() for k in kv.list().result()) == sorted(keys)
    assert all(kv.read(k).result().value == k.encode() * 2 for k in keys)
    kv.write("from ts/\u00fc &+", b"ts").result()
    assert store.get("from ts/\u00fc &+") == b"ts"


def test_ranged_reads_and_large_multipart_value(env, moto):
    env.setenv("CAIRN_S3_MULTIPART_THRESHOLD", str(6 << 20))
    env.setenv("CAIRN_S3_PART_SIZE", str(5 << 20))
    p = fresh("big")
    store = cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    value = np.random.default_rng(1).integers(0, 256, (13 << 20) + 7, dtype=np.uint8).tobytes()
    store.put("big", value)
    kv = ts.KvStore.open(ts_kv(moto, p)).result()
    assert kv.read("big").result().value == value
    assert store.get("big", 5, 100) == value[5:100]
    assert store.get("big", -1000) == value[-1000:]
    with pytest.raises(KeyError) as info:
        store.get("missing")
    assert info.value.args[0] == "missing"


def test_retries_survive_503_429_and_dropped_connections(env, moto, proxy):
    env.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    p = fresh("faults")
    store = cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    proxy.faults = [503, 429, "drop", 503, "drop"]
    items = {f"x/{i}": bytes([i]) * (i + 1) for i in range(20)}
    store.put_many(items)
    assert proxy.served_faults == 5
    proxy.faults = [503, "drop", 429]
    assert store.keys() == sorted(items)
    assert store.get("x/7") == items["x/7"]
    assert proxy.served_faults == 8
    direct = ts.KvStore.open(ts_kv(moto, p)).result()
    assert {k.decode(): direct.read(k).result().value for k in direct.list().result()} == items


def test_retry_budget_exhausted_names_url_operation_and_status(env, moto, proxy):
    env.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    env.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "3")
    p = fresh("budget")
    store = cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    proxy.always = 503
    with pytest.raises(OSError) as e:
        store.put("dir/key", b"v")
    msg = str(e.value)
    assert f"writing key `dir/key` of s3://{BUCKET}/{p}" in msg
    assert f"PUT {proxy.endpoint}/{BUCKET}/{p}dir/key" in msg
    assert "HTTP 503" in msg and "SlowDown" in msg and "after 3 attempts" in msg
    assert proxy.served_faults == 3
    proxy.always = None  # control: the same store writes once the server recovers
    store.put("dir/key", b"v")
    assert store.get("dir/key") == b"v"


def test_failed_multipart_upload_leaves_nothing_visible(env, moto, proxy):
    env.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    env.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "2")
    env.setenv("CAIRN_S3_MULTIPART_THRESHOLD", str(5 << 20))
    env.setenv("CAIRN_S3_PART_SIZE", str(5 << 20))
    p = fresh("abort")
    store = cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    value = b"\x5a" * ((11 << 20) + 1)
    proxy.only_method = "PUT"
    proxy.faults = [503] * 6  # every part fails twice: the upload fails
    with pytest.raises(OSError, match="multipart upload.*HTTP 503"):
        store.put("big", value)
    assert store.keys() == []
    listing = urllib.request.urlopen(f"{moto.endpoint}/{BUCKET}/?uploads").read().decode()
    assert f"<Key>{p}big</Key>" not in listing  # aborted, not left pending
    proxy.faults = []  # control
    store.put("big", value)
    assert store.keys() == ["big"] and store.get("big") == value


def test_missing_and_broken_credentials(env, moto, proxy, tmp_path):
    env.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    proxy.require_auth = True
    p = fresh("creds")
    env.delenv("AWS_ACCESS_KEY_ID")
    env.delenv("AWS_SECRET_ACCESS_KEY")
    anonymous = cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    with pytest.raises(RuntimeError, match="HTTP 403.*AccessDenied.*no AWS credentials were found"):
        anonymous.put("k", b"v")
    creds = tmp_path / "credentials"
    creds.write_text("[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n")
    env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    cairn.kvstore.open(f"s3://{BUCKET}/{p}").put("k", b"v")  # control: signed, accepted
    creds.write_text("[default\naws_access_key_id = AK\n")
    with pytest.raises(ValueError, match=f"credentials file {creds} line 1"):
        cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    env.setenv("AWS_ACCESS_KEY_ID", "only-the-id")
    with pytest.raises(ValueError, match="AWS_SECRET_ACCESS_KEY"):
        cairn.kvstore.open(f"s3://{BUCKET}/{p}")


def test_missing_bucket_and_bad_urls(env, moto):
    store = cairn.kvstore.open("s3://no-such-bucket-cairn/p/")
    with pytest.raises(FileNotFoundError, match="no-such-bucket-cairn.*does not exist"):
        store.keys()
    with pytest.raises(FileNotFoundError, match="no-such-bucket-cairn"):
        store.get("k")
    assert cairn.kvstore.open(f"s3://{BUCKET}/").keys(fresh("empty")) == []  # control
    for bad, why in [("s3://", "invalid S3 bucket name ``"), ("s3://UPPER/x/", "invalid S3 bucket name `UPPER`"),
                     ("s3://b/x/", "invalid S3 bucket name `b`"), (f"s3://{BUCKET}/../x/", "`..` component")]:
        with pytest.raises(ValueError, match=f"invalid kvstore URL `{re.escape(bad)}`.*{re.escape(why)}"):
            cairn.kvstore.open(bad)


def test_listing_across_pages_on_moto(env, moto):
    # moto stores ~250 objects/s here, so the pages are made small instead of
    # the objects many: 600 objects in pages of 50.
    env.setenv("CAIRN_S3_LIST_PAGE_SIZE", "50")
    p = fresh("pages")
    store = cairn.kvstore.open(f"s3://{BUCKET}/{p}")
    keys = [f"d{i % 7}/k{i:05d}" for i in range(600)]
    store.put_many({k: b"" if i % 3 else b"xy" for i, k in enumerate(keys)})
    listed = store.list()
    assert [k for k, _ in listed] == sorted(keys)
    assert sum(size for _, size in listed) == 2 * len(range(0, 600, 3))
    assert len(store.keys("d3/")) == len([k for k in keys if k.startswith("d3/")])
    assert len(ts.KvStore.open(ts_kv(moto, p)).result().list().result()) == 600
    store.delete_prefix("d1/")
    assert len(store.keys()) == 600 - len([k for k in keys if k.startswith("d1/")])


def test_listing_10000_objects_across_pages(env, proxy):
    # 10,000 keys in a bucket the proxy itself serves (ListObjectsV2 pages of
    # 1000, as S3), so the listing is checked at full size in well under a second.
    env.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    proxy.synthetic_bucket = "synthetic"
    proxy.synthetic_keys = [f"p/{i % 10}/\u00e9 &{i:05d}" for i in range(10000)]
    store = cairn.kvstore.open("s3://synthetic/p/")
    listed = store.list()
    assert len(listed) == 10000 and proxy.list_pages_served == 10
    assert [k for k, _ in listed] == sorted(k[2:] for k in proxy.synthetic_keys)
    assert all(size == 1 for _, size in listed)
    assert len(store.keys("3/")) == 1000 and proxy.list_pages_served == 11
