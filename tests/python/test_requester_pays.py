"""Requester Pays buckets: the reader names who pays. cairn's
CAIRN_S3_REQUESTER_PAYS puts `x-amz-request-payer: requester` on every S3
request (signed), and CAIRN_GCS_USER_PROJECT puts `userProject=<project>` on
every GCS request, as TensorStore's `requester_pays` and `gcs_user_project`
do (TensorStore 0.1.86 spells the S3 header `x-amz-requester-payer`, which
is not the header AWS documents; cairn sends AWS's). Checked through a recording proxy in front of moto and fake-gcs-server,
against TensorStore doing the same through the same proxy, both reading what
the other wrote; without the setting no request carries it; a malformed
setting is a clear error."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import tensorstore as ts

import cairn
from s3_helpers import FaultProxy, bucket_fixtures, gcs_environment, s3_environment

BUCKET = "cairn-payer"
PROJECT = "billed-project-7"


class RecordingProxy(FaultProxy):
    """Keeps (method, path, headers) of every request."""

    def __init__(self, target: str):
        super().__init__(target)
        self.seen: list[tuple[str, str, dict]] = []

    def _next_fault(self, method, headers, path=""):
        with self.lock:
            self.seen.append((method, path, {k.lower(): v for k, v in headers.items()}))
        return super()._next_fault(method, headers, path)

    def take(self) -> list[tuple[str, str, dict]]:
        with self.lock:
            seen, self.seen = self.seen, []
        return seen


moto, gcs = bucket_fixtures(BUCKET)


def pays(scheme: str, request: tuple[str, str, dict], header: str = "x-amz-request-payer") -> bool:
    """Whether the request names the payer: on S3 `header: requester`, signed
    (AWS documents `x-amz-request-payer`; TensorStore 0.1.86 sends
    `x-amz-requester-payer`, which S3 does not know); on GCS the project."""
    method, path, headers = request
    if scheme == "s3":
        signed = re.search(r"SignedHeaders=([^,]*)", headers.get("authorization", ""))
        return (headers.get(header) == "requester" and signed is not None
                and header in signed.group(1).split(";"))
    return f"userProject={PROJECT}" in path


def tensorstore_pays(scheme: str, request: tuple[str, str, dict]) -> bool:
    return pays(scheme, request) or pays(scheme, request, "x-amz-requester-payer")


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_every_request_names_the_payer_as_tensorstore_does(scheme, moto, gcs, monkeypatch, tmp_path):
    proxy = RecordingProxy(f"127.0.0.1:{moto.port if scheme == 's3' else gcs.port}")
    try:
        if scheme == "s3":
            s3_environment(monkeypatch, proxy.endpoint, tmp_path)
            monkeypatch.setenv("CAIRN_S3_REQUESTER_PAYS", "true")
            ts_base = {"driver": "s3", "bucket": BUCKET, "endpoint": proxy.endpoint, "aws_region": "us-east-1",
                       "requester_pays": True}
            ts_context = {"aws_credentials": {"type": "environment"}}
        else:
            gcs_environment(monkeypatch, proxy.endpoint)
            monkeypatch.setenv("CAIRN_GCS_USER_PROJECT", PROJECT)
            ts_base = {"driver": "gcs", "bucket": BUCKET}
            ts_context = {"gcs_user_project": {"project_id": PROJECT}}
        root = f"payer-{os.getpid()}"
        tree = {"w": np.random.default_rng(5).standard_normal((32, 16)).astype(np.float32)}

        cairn.save(f"{scheme}://{BUCKET}/{root}/cairn", tree)
        back = cairn.restore(f"{scheme}://{BUCKET}/{root}/cairn")
        assert np.asarray(back["w"]).tobytes() == tree["w"].tobytes()
        seen = proxy.take()
        assert seen and [r[:2] for r in seen if not pays(scheme, r)] == [], "cairn"

        # TensorStore with its own setting, through the same proxy: the same
        # mark on each of its requests; each reads what the other wrote.
        spec = {"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": {**ts_base, "path": f"{root}/cairn/"},
                                               "path": "w/"}, "context": ts_context}
        assert ts.open(spec).result().read().result().tobytes() == tree["w"].tobytes()
        values = np.arange(24, dtype=np.int32).reshape(4, 6)
        t = ts.open({"driver": "zarr3", "kvstore": {**ts_base, "path": f"{root}/ts/"}, "context": ts_context,
                     "metadata": {"shape": [4, 6], "data_type": "int32"}, "create": True}).result()
        t.write(values).result()
        ts_seen = proxy.take()
        assert ts_seen and [r[:2] for r in ts_seen if not tensorstore_pays(scheme, r)] == [], "TensorStore"
        assert cairn.open(f"{scheme}://{BUCKET}/{root}/ts/|zarr3:").read().tobytes() == values.tobytes()
        assert all(pays(scheme, r) for r in proxy.take())  # cairn's read

        # Control: without the setting, no request carries the mark.
        monkeypatch.delenv("CAIRN_S3_REQUESTER_PAYS" if scheme == "s3" else "CAIRN_GCS_USER_PROJECT")
        assert cairn.open(f"{scheme}://{BUCKET}/{root}/ts/|zarr3:").read().tobytes() == values.tobytes()
        plain = proxy.take()
        assert plain and not any(pays(scheme, r) for r in plain)
    finally:
        proxy.stop()


def test_a_malformed_setting_names_the_variable(moto, monkeypatch, tmp_path):
    s3_environment(monkeypatch, moto.endpoint, tmp_path)
    monkeypatch.setenv("CAIRN_S3_REQUESTER_PAYS", "sometimes")
    with pytest.raises(ValueError, match="CAIRN_S3_REQUESTER_PAYS=`sometimes` is not true or false"):
        cairn.kvstore.open(f"s3://{BUCKET}/x/")
