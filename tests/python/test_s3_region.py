"""The region of an S3 bucket, found as TensorStore's s3 driver and the AWS
SDKs find it: AWS_REGION / AWS_DEFAULT_REGION, else `region` in the config
file's profile, else one unsigned HEAD of the bucket, whose answer names the
region in `x-amz-bucket-region` (kvstore/s3/aws_region.h). On moto's S3
server, with a recording proxy in front: every request is signed for the
bucket's own region, the HEAD is asked once per process, and TensorStore
(which finds the region the same way) reads what cairn wrote there."""

from __future__ import annotations

import http.client
import os
import re

import numpy as np
import pytest
import tensorstore as ts

import cairn
from s3_helpers import FaultProxy, MotoServer, s3_environment

EU_BUCKET = "cairn-region-eu"


@pytest.fixture(scope="module")
def moto():
    server = MotoServer()
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    c.request("PUT", f"/{EU_BUCKET}", body=(
        b"<CreateBucketConfiguration><LocationConstraint>eu-west-1</LocationConstraint>"
        b"</CreateBucketConfiguration>"))
    assert c.getresponse().status == 200
    c.close()
    yield server
    server.stop()


@pytest.fixture
def proxy(moto, monkeypatch, tmp_path):
    """cairn pointed at moto through a recording proxy, with no region set."""
    p = FaultProxy(f"127.0.0.1:{moto.port}")
    s3_environment(monkeypatch, p.endpoint, tmp_path)
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield p
    p.stop()


_counter = [0]


def fresh(name):
    _counter[0] += 1
    return f"{name}-{os.getpid()}-{_counter[0]}/"


def signed_regions(log):
    """The region of each signed request's credential scope."""
    out = []
    for _, _, auth in log:
        m = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/s3/aws4_request", auth)
        if m:
            out.append(m.group(1))
    return out


def heads_of_bucket(log, bucket):
    return [p for m, p, _ in log if m == "HEAD" and p.rstrip("/") == f"/{bucket}"]


def write_and_read(url, values):
    cairn.create(url, shape=list(values.shape), dtype="float32", chunks=[4, 4]).write(values)
    np.testing.assert_array_equal(cairn.open(url).read(), values)


def test_region_of_the_bucket_signs_every_request(moto, proxy):
    values = np.arange(64, dtype=np.float32).reshape(8, 8)
    path = fresh("eu")
    write_and_read(f"s3://{EU_BUCKET}/{path}|zarr3:", values)
    regions = signed_regions(proxy.log)
    assert len(regions) >= 5 and set(regions) == {"eu-west-1"}, regions
    # Asked at most once per process for this endpoint and bucket (an
    # earlier test in this process may have asked already), never per store.
    assert len(heads_of_bucket(proxy.log, EU_BUCKET)) <= 1, proxy.log
    # TensorStore, given no region either, finds the same one and reads it.
    t = ts.open({"driver": "zarr3", "kvstore": {
        "driver": "s3", "bucket": EU_BUCKET, "path": path, "endpoint": moto.endpoint}}).result()
    np.testing.assert_array_equal(t.read().result(), values)


def test_a_second_store_does_not_ask_again(moto, proxy):
    write_and_read(f"s3://{EU_BUCKET}/{fresh('first')}|zarr3:", np.ones((4, 4), np.float32))
    proxy.log.clear()
    write_and_read(f"s3://{EU_BUCKET}/{fresh('second')}|zarr3:", np.zeros((4, 4), np.float32))
    assert heads_of_bucket(proxy.log, EU_BUCKET) == []
    assert set(signed_regions(proxy.log)) == {"eu-west-1"}


def test_environment_and_config_file_come_before_the_bucket(moto, proxy, monkeypatch, tmp_path):
    url = f"s3://{EU_BUCKET}/{fresh('configured')}|zarr3:"
    config = tmp_path / "config"
    config.write_text("[default]\nregion = us-west-2\n\n"
                      "[profile eu]\n# the profile's own settings\nregion = ap-south-1\n"
                      "s3 =\n  addressing_style = path\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "eu")
    proxy.log.clear()
    write_and_read(url, np.full((4, 4), 2, np.float32))
    assert set(signed_regions(proxy.log)) == {"ap-south-1"}
    assert heads_of_bucket(proxy.log, EU_BUCKET) == []
    monkeypatch.delenv("AWS_PROFILE")
    proxy.log.clear()
    cairn.open(url).read()
    assert set(signed_regions(proxy.log)) == {"us-west-2"}
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ca-central-1")
    proxy.log.clear()
    cairn.open(url).read()
    assert set(signed_regions(proxy.log)) == {"ca-central-1"}
    monkeypatch.setenv("AWS_REGION", "sa-east-1")
    proxy.log.clear()
    cairn.open(url).read()
    assert set(signed_regions(proxy.log)) == {"sa-east-1"}


def test_bad_regions_and_files_are_clear_errors(moto, proxy, monkeypatch, tmp_path):
    url = f"s3://{EU_BUCKET}/{fresh('bad')}|zarr3:"
    monkeypatch.setenv("AWS_REGION", "eu west/1")
    with pytest.raises(ValueError, match="AWS_REGION: region `eu west/1` is not a region name"):
        cairn.open(url)
    monkeypatch.delenv("AWS_REGION")
    config = tmp_path / "broken-config"
    config.write_text("[default]\nregion us-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    with pytest.raises(ValueError, match=f"AWS config file {config} line 2"):
        cairn.open(url)


def test_a_bucket_that_never_answers_names_the_bucket_and_aws_region(moto, proxy, monkeypatch):
    monkeypatch.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "2")
    proxy.always = 503
    bucket = "cairn-region-unanswered"
    with pytest.raises(OSError) as e:
        cairn.open(f"s3://{bucket}/x/|zarr3:")
    assert f"finding the region of S3 bucket `{bucket}`" in str(e.value), str(e.value)
    assert "AWS_REGION" in str(e.value) and "503" in str(e.value), str(e.value)
    proxy.always = None
