"""HTTPS to object stores whose certificate a private authority signed (as
MinIO and other S3-compatible servers on premises often have): moto's S3 and
fake-gcs-server behind a TLS proxy (s3_helpers.FaultProxy with `tls`) whose
certificate a test authority signed for 127.0.0.1.

- Trusting only the system's authorities, cairn refuses the server: the
  error names the URL, the certificate problem and CAIRN_CA_BUNDLE, and no
  request reaches the server.
- With CAIRN_CA_BUNDLE (or AWS_CA_BUNDLE, or SSL_CERT_FILE) naming the
  authority, a checkpoint saves and restores over HTTPS, and TensorStore
  (TENSORSTORE_CA_BUNDLE, in a process of its own) reads its arrays over
  the same endpoint bit-exact.
- A bundle that does not exist is a ValueError at open naming the variable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cairn
from s3_helpers import FaultProxy, bucket_fixtures, gcs_environment, make_tls_authority, s3_environment

BUCKET = "cairn-tls"
CA_VARIABLES = ("CAIRN_CA_BUNDLE", "AWS_CA_BUNDLE", "TENSORSTORE_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE",
                "TENSORSTORE_CA_PATH", "SSL_CERT_DIR")


moto, gcs = bucket_fixtures(BUCKET)


def tensorstore_reads(spec: dict, env: dict, expected: np.ndarray) -> None:
    """TensorStore, in a process of its own (its HTTP transport reads the CA
    variables once), reads the array of `spec` and it equals `expected`."""
    code = textwrap.dedent(f"""
        import json, sys, tensorstore as ts
        a = ts.open(json.loads({json.dumps(json.dumps(spec))})).result().read().result()
        sys.stdout.buffer.write(a.tobytes())
    """)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert r.stdout == expected.tobytes()


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_https_with_a_private_authority(scheme, moto, gcs, monkeypatch, tmp_path):
    ca, cert, key = make_tls_authority(tmp_path)
    proxy = FaultProxy(f"127.0.0.1:{moto.port if scheme == 's3' else gcs.port}", tls=(cert, key))
    try:
        for name in CA_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        if scheme == "s3":
            s3_environment(monkeypatch, proxy.endpoint, tmp_path)
            ts_kv = {"driver": "s3", "bucket": BUCKET, "endpoint": proxy.endpoint, "aws_region": "us-east-1"}
        else:
            gcs_environment(monkeypatch, proxy.endpoint)
            ts_kv = {"driver": "gcs", "bucket": BUCKET}
        url = f"{scheme}://{BUCKET}/tls-{os.getpid()}"
        tree = {"w": np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32),
                "n": np.arange(10, dtype=np.int64)}

        # The system's authorities only: refused, clearly, and never sent.
        with pytest.raises(RuntimeError) as e:
            cairn.save(url + "/untrusted", tree)
        msg = str(e.value)
        assert proxy.endpoint in msg and "certificate" in msg and "CAIRN_CA_BUNDLE" in msg, msg
        assert proxy.requests == 0

        # Trusting the authority.
        monkeypatch.setenv("CAIRN_CA_BUNDLE", ca)
        cairn.save(url + "/trusted", tree)
        back = cairn.restore(url + "/trusted")
        assert all(np.asarray(back[k]).tobytes() == v.tobytes() for k, v in tree.items())
        assert proxy.requests > 0
        env = dict(os.environ, TENSORSTORE_CA_BUNDLE=ca)
        tensorstore_reads({"driver": "zarr3", "kvstore": {
            "driver": "ocdbt", "base": {**ts_kv, "path": f"tls-{os.getpid()}/trusted/"}, "path": "w/"}},
            env, tree["w"])

        # The other variables a user may already have set.
        monkeypatch.delenv("CAIRN_CA_BUNDLE")
        other = "AWS_CA_BUNDLE" if scheme == "s3" else "SSL_CERT_FILE"
        monkeypatch.setenv(other, ca)
        back = cairn.restore(url + "/trusted")
        assert np.asarray(back["n"]).tobytes() == tree["n"].tobytes()

        monkeypatch.setenv("CAIRN_CA_BUNDLE", str(tmp_path / "missing.pem"))
        with pytest.raises(ValueError, match=r"CAIRN_CA_BUNDLE=`.*missing\.pem`: no such file"):
            cairn.kvstore.open(url + "/")
    finally:
        proxy.stop()
