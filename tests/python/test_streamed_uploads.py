"""Values streamed to s3:// and gs:// through KvStore::OpenWriter
(s3/s3_writer.h, gcs/gcs_writer.h), seen from `cairn convert` to safetensors,
whose `model.safetensors` is one value written in pieces:

- a 512 MiB conversion onto each emulator peaks well below the file's size
  (the writer holds its first part, of the multipart/resumable threshold,
  and a few parts; the old writer held the whole file: 1058 MiB), with the
  default threshold (128 MiB) and with it lowered to the part size, and
  TensorStore's own `s3` / `gcs` drivers read the file back, checked against
  the generator on sample rows;
- on S3, a part that keeps failing fails the conversion naming the key, the
  URL and the status, and leaves neither the object nor a pending multipart
  upload;
- on S3, a completion whose answer is lost (the object was made; the retry
  is answered NoSuchUpload) is settled by the object's multipart ETag, and
  the conversion succeeds bit-exact; a completion that never reaches the
  server fails naming it and leaves neither object nor pending upload;
- on GCS, chunks that are lost in transit (before reaching the server, or
  after: the answer is lost) or answered 503 are resumed from the offset the
  session reports, and the object is bit-exact; chunks that keep failing fail
  the conversion and leave no object. The status queries are answered by the
  proxy as GCS documents them (s3_helpers.FaultProxy.gcs_status_queries).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
import urllib.request

import numpy as np
import pytest
import tensorstore as ts

from convert_memory_helpers import COLS, MiB, expected, sample_rows, write_axlearn_source
from s3_helpers import FaultProxy, MotoServer, bucket_fixtures, gcs_environment, s3_environment
from test_cli import cairn_cli as installed_cli
from test_convert_memory import run_measured


def cairn_cli():
    """The `cairn` built beside the imported package (a dev build's
    build/pydev/cli/cairn), else the installed one. In CI they are the same
    build; in a dev tree the installed one may be older (and a pyenv shim
    puts its directory first on PATH)."""
    import cairn
    dev = Path(cairn.__file__).resolve().parents[2] / "cli" / "cairn"
    return str(dev) if os.access(dev, os.X_OK) else installed_cli()


BUCKET = "cairn-streamed"
STEP = 3
SIZE = 512 * MiB          # the large file: one float32 array of 512 MiB
SMALL = 16 * MiB          # the fault tests' file
BUDGET = 64 * MiB
FIXED_OVERHEAD = 128 * MiB  # as in test_convert_memory.py: process, codecs, caches, slack
PART = 16 * MiB           # CAIRN_S3_PART_SIZE, CAIRN_GCS_CHUNK_SIZE (defaults)
THRESHOLD = 128 * MiB     # CAIRN_S3_MULTIPART_THRESHOLD, CAIRN_GCS_RESUMABLE_THRESHOLD (defaults)


def writer_bound(scheme: str, first: int) -> int:
    """What the writer may hold (s3_writer.h, gcs_writer.h): the first part
    (the threshold) and the parts after it: 3 more on S3, 1 on GCS."""
    return first + (3 if scheme == "s3" else 1) * PART


moto, gcs = bucket_fixtures(BUCKET)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """AXLearn steps of SIZE (8 MiB chunks) and SMALL (1 MiB chunks), and the
    SMALL one converted to a local safetensors file (the reference bytes)."""
    root = tmp_path_factory.mktemp("streamed")
    write_axlearn_source(root / "large", STEP, [SIZE], chunk_rows=256)
    write_axlearn_source(root / "small", STEP, [SMALL], chunk_rows=32)
    r = convert(root / "small", root / "small-st")
    assert r.returncode == 0, r.stderr
    return root, (root / "small-st" / "model.safetensors").read_bytes()


_counter = [0]


def fresh(name: str) -> str:
    _counter[0] += 1
    return f"{name}-{os.getpid()}-{_counter[0]}"


def convert(src, dst, *extra):
    return subprocess.run([cairn_cli(), "convert", str(src), str(dst), "--to", "safetensors", *extra],
                          capture_output=True, text=True, timeout=600)


def ts_kv(scheme: str, moto: MotoServer | None, path: str) -> dict:
    if scheme == "s3":
        return {"driver": "s3", "bucket": BUCKET, "path": path, "endpoint": moto.endpoint,
                "aws_region": "us-east-1"}
    return {"driver": "gcs", "bucket": BUCKET, "path": path}


def check_safetensors(data: bytes, what: str) -> None:
    """The file holds tensor `a0` of shape (SIZE rows, COLS) with the generator's bits."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    entry = header["a0"]
    rows = SIZE // (COLS * 4)
    assert entry["shape"] == [rows, COLS] and entry["dtype"] == "F32", entry
    begin, end = entry["data_offsets"]
    assert end - begin == SIZE and 8 + n + end == len(data), (entry, len(data))
    body = np.frombuffer(data, dtype=np.uint32, count=SIZE // 4, offset=8 + n).reshape(rows, COLS)
    for r in sample_rows(rows):
        assert np.array_equal(body[r], expected(0, r, r + 1)[0]), f"{what}: row {r} differs"


@pytest.mark.parametrize("first", [THRESHOLD, PART], ids=["threshold-128MiB", "threshold-16MiB"])
@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_large_conversion_streams_with_bounded_memory(scheme, first, sources, moto, gcs, monkeypatch,
                                                      tmp_path):
    root, _ = sources
    if scheme == "s3":
        s3_environment(monkeypatch, moto.endpoint, tmp_path)
        monkeypatch.setenv("CAIRN_S3_MULTIPART_THRESHOLD", str(first))
    else:
        gcs_environment(monkeypatch, gcs.endpoint)
        monkeypatch.setenv("CAIRN_GCS_RESUMABLE_THRESHOLD", str(first))
    p = fresh("large")
    rc, out, err, peak = run_measured([
        cairn_cli(), "convert", root / "large", f"{scheme}://{BUCKET}/{p}/st", "--to", "safetensors",
        "--memory-budget", f"{BUDGET >> 20}MiB", "--threads", "2"])
    assert rc == 0, err[-3000:]
    bound = BUDGET + FIXED_OVERHEAD + writer_bound(scheme, first)
    print(f"{scheme}, first part {first / MiB:.0f} MiB: peak RSS {peak / MiB:.0f} MiB converting "
          f"{SIZE / MiB:.0f} MiB (bound {bound / MiB:.0f} MiB)")
    # The old writer held the whole file: a peak above SIZE (1058 MiB measured).
    assert peak <= bound and peak < SIZE * 3 // 4, f"peak RSS {peak / MiB:.0f} MiB, bound {bound / MiB:.0f}"
    kv = ts.KvStore.open(ts_kv(scheme, moto, f"{p}/st/")).result()
    check_safetensors(kv.read("model.safetensors").result().value, f"{scheme} (TensorStore)")


def pending_uploads(moto) -> str:
    return urllib.request.urlopen(f"{moto.endpoint}/{BUCKET}/?uploads").read().decode()


def test_s3_part_failing_leaves_no_object_and_no_upload(sources, moto, monkeypatch, tmp_path):
    root, _ = sources
    proxy = FaultProxy(f"127.0.0.1:{moto.port}")
    try:
        s3_environment(monkeypatch, proxy.endpoint, tmp_path)
        monkeypatch.setenv("CAIRN_S3_PART_SIZE", str(5 * MiB))
        monkeypatch.setenv("CAIRN_S3_MULTIPART_THRESHOLD", str(5 * MiB))
        monkeypatch.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "2")
        proxy.only_method = "PUT"
        proxy.fail_after = 2  # parts 1 and 2 go through, then every PUT gets 503
        proxy.after_fault = 503
        p = fresh("s3-fault")
        r = convert(root / "small", f"s3://{BUCKET}/{p}/st")
        assert r.returncode != 0
        for part in ["model.safetensors", f"s3://{BUCKET}/{p}/", "streamed multipart upload",
                     "partNumber=", "HTTP 503"]:
            assert part in r.stderr, (part, r.stderr[-2000:])
        # Parts go up a few at a time: which one met the first 503 varies.
        assert re.search(r"part \d+ \(PUT http://", r.stderr), r.stderr
        assert proxy.served_faults >= 2
    finally:
        proxy.stop()
    kv = ts.KvStore.open(ts_kv("s3", moto, f"{p}/")).result()
    assert [k for k in kv.list().result() if k.endswith(b"model.safetensors")] == []
    assert "<Upload>" not in pending_uploads(moto)


def s3_multipart_proxy(moto, monkeypatch, tmp_path) -> FaultProxy:
    """A proxy before moto whose faults go to POSTs (a multipart upload's
    start, then its completion), with 5 MiB parts."""
    proxy = FaultProxy(f"127.0.0.1:{moto.port}")
    proxy.only_method = "POST"
    s3_environment(monkeypatch, proxy.endpoint, tmp_path)
    monkeypatch.setenv("CAIRN_S3_PART_SIZE", str(5 * MiB))
    monkeypatch.setenv("CAIRN_S3_MULTIPART_THRESHOLD", str(5 * MiB))
    return proxy


def completions(proxy) -> int:
    return sum(1 for method, path, _ in proxy.log if method == "POST" and "uploadId=" in path)


def test_s3_completion_whose_answer_is_lost_is_settled_by_the_etag(sources, moto, monkeypatch, tmp_path):
    """The completion reaches moto and makes the object, and the connection
    closes before its answer. The POST is sent again and is answered
    NoSuchUpload (the upload is gone: it was completed), as S3 and MinIO may
    answer (moto answers 200 again: the proxy answers in its place). The old
    code failed
    the conversion on that 404 with the object in place; the object's ETag
    is the multipart ETag of the parts sent, so the upload succeeded."""
    root, reference = sources
    proxy = s3_multipart_proxy(moto, monkeypatch, tmp_path)
    try:
        proxy.s3_completed_uploads_gone = True
        proxy.faults = [None, "forward_then_hang_up"]  # the start goes through, the completion's answer is lost
        p = fresh("s3-lost-complete")
        r = convert(root / "small", f"s3://{BUCKET}/{p}/st")
        assert r.returncode == 0, r.stderr[-3000:]
        assert proxy.faults == [] and completions(proxy) == 2, proxy.log
        assert any(method == "HEAD" and "model.safetensors" in path for method, path, _ in proxy.log)
    finally:
        proxy.stop()
    kv = ts.KvStore.open(ts_kv("s3", moto, f"{p}/st/")).result()
    got = kv.read("model.safetensors").result().value
    assert len(got) == len(reference) and got == reference


def test_s3_completion_that_never_arrives_fails_and_leaves_nothing(sources, moto, monkeypatch, tmp_path):
    """Control: every completion is dropped before moto sees it. The HEAD
    finds no object, so the failure stands (naming the key, the URL and the
    step), and the upload is aborted."""
    root, _ = sources
    proxy = s3_multipart_proxy(moto, monkeypatch, tmp_path)
    try:
        monkeypatch.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "2")
        proxy.fail_after = 1  # the start goes through, then every POST is dropped
        p = fresh("s3-no-complete")
        r = convert(root / "small", f"s3://{BUCKET}/{p}/st")
        assert r.returncode != 0
        for part in ["model.safetensors", f"s3://{BUCKET}/{p}/", "completing", "uploadId="]:
            assert part in r.stderr, (part, r.stderr[-2000:])
        assert completions(proxy) >= 2
    finally:
        proxy.stop()
    kv = ts.KvStore.open(ts_kv("s3", moto, f"{p}/")).result()
    assert [k for k in kv.list().result() if k.endswith(b"model.safetensors")] == []
    assert "<Upload>" not in pending_uploads(moto)


def gcs_proxy(gcs, monkeypatch) -> FaultProxy:
    proxy = FaultProxy(f"127.0.0.1:{gcs.port}")
    proxy.gcs_status_queries = True
    proxy.only_method = "PUT"
    gcs_environment(monkeypatch, gcs.endpoint)  # TensorStore reads the server itself
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
    monkeypatch.setenv("CAIRN_GCS_CHUNK_SIZE", str(1 * MiB))
    monkeypatch.setenv("CAIRN_GCS_RESUMABLE_THRESHOLD", str(1 * MiB))
    return proxy


def test_gcs_lost_chunks_resume_from_the_session_offset(sources, gcs, monkeypatch):
    root, reference = sources
    proxy = gcs_proxy(gcs, monkeypatch)
    try:
        # Chunk PUTs in order: the 2nd reaches the server and the connection
        # closes without a byte of answer (libcurl would resend that one by
        # itself on a reused connection: chunks go on a connection of their
        # own), the 3rd reaches the server but its answer is cut, the 5th is
        # answered 503, the 7th is cut before the server.
        proxy.faults = [None, "forward_then_hang_up", "forward_then_drop", None, 503, None, "cut"]
        p = fresh("gcs-resume")
        r = convert(root / "small", f"gs://{BUCKET}/{p}/st")
        assert r.returncode == 0, r.stderr[-3000:]
        assert proxy.faults == [] and proxy.status_queries == 4, (proxy.faults, proxy.status_queries)
    finally:
        proxy.stop()
    kv = ts.KvStore.open(ts_kv("gs", None, f"{p}/st/")).result()
    got = kv.read("model.safetensors").result().value
    assert len(got) == len(reference) and got == reference


def test_gcs_chunk_failing_leaves_no_object(sources, gcs, monkeypatch):
    root, _ = sources
    proxy = gcs_proxy(gcs, monkeypatch)
    try:
        monkeypatch.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "2")
        proxy.fail_after = 3  # 3 chunks go through, then every chunk gets 503
        proxy.after_fault = 503
        p = fresh("gcs-fault")
        r = convert(root / "small", f"gs://{BUCKET}/{p}/st")
        assert r.returncode != 0
        for part in ["model.safetensors", f"gs://{BUCKET}/{p}/", "streamed resumable upload",
                     "upload_id=", "HTTP 503"]:
            assert part in r.stderr, (part, r.stderr[-2000:])
    finally:
        proxy.stop()
    kv = ts.KvStore.open(ts_kv("gs", None, f"{p}/")).result()
    assert [k for k in kv.list().result() if k.endswith(b"model.safetensors")] == []
