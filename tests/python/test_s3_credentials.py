"""s3:// credentials that expire, end to end on localhost: moto's S3 server
behind a proxy that records which key signed each request (and its session
token), a small fake credentials server (http.server on a free port) that
plays EC2 instance metadata (IMDSv2: it refuses reads without the session
token it handed out) and the ECS container endpoint, handing out credentials
that expire after a few seconds, and moto's own STS for web identity
(AssumeRoleWithWebIdentity); the fake server also plays STS for AssumeRole
(test_s3_profiles.py). Then the bad cases: a refused token, a
malformed answer, no credentials anywhere (anonymous)."""

from __future__ import annotations

import datetime
import http.server
import json
import os
import re
import threading
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest

import cairn
from s3_helpers import FaultProxy, MotoServer, free_port

BUCKET = "cairn-creds"
ROLE = "cairn-test-role"
LIFETIME = 4  # seconds the fake server's credentials live


class CredentialServer:
    """IMDSv2 (/latest/...) and the container endpoint (/ecs/creds, which
    wants `Authorization: <ecs_token>`). Each credentials answer is a new key
    "ASIAFAKE<n>" with session token "session-<n>", expiring in `lifetime`
    seconds; `malformed` answers broken JSON instead."""

    def __init__(self, lifetime: int = LIFETIME):
        self.lifetime = lifetime
        self.ecs_token = "ecs-secret-token"
        self.malformed = False
        self.sts_tokens: set[str] = set()  # web identity tokens STS accepts
        self.sts_seen: list[str | None] = []
        self.source_keys: set[str] = set()  # long-term keys AssumeRole accepts signatures of
        self.assumed: list[dict] = []  # every AssumeRole request
        self.issued: dict[str, dict] = {}  # key id -> {"token", "expiration"}
        self.imds_tokens: set[str] = set()
        self.requests: list[str] = []
        self.refused: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, ctype="text/plain"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _credentials(self):
                if server.malformed:
                    return self._send(200, b'{"AccessKeyId": "ASIA', "application/json")
                key, secret, token, stamp = server._issue()
                body = {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": key,
                        "SecretAccessKey": secret, "Token": token, "Expiration": stamp}
                self._send(200, json.dumps(body).encode(), "application/json")

            def _refuse(self, why: str, status: int = 401):
                with server.lock:
                    server.refused.append(f"{self.command} {self.path}: {why}")
                self._send(status, why.encode())

            def do_PUT(self):
                with server.lock:
                    server.requests.append(f"PUT {self.path}")
                if self.path != "/latest/api/token":
                    return self._refuse("no such path", 404)
                if self.headers.get("X-aws-ec2-metadata-token-ttl-seconds") != "21600":
                    return self._refuse("missing X-aws-ec2-metadata-token-ttl-seconds", 400)
                with server.lock:
                    token = f"imds-session-{len(server.imds_tokens)}"
                    server.imds_tokens.add(token)
                self._send(200, token.encode())

            def do_POST(self):  # STS: AssumeRoleWithWebIdentity for the tokens in `sts_tokens`
                form = dict(urllib.parse.parse_qsl(
                    self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()))
                with server.lock:
                    server.requests.append(f"POST {self.path}")
                    server.sts_seen.append(form.get("WebIdentityToken"))
                if form.get("Action") == "AssumeRole":
                    return self._assume_role(form)
                if (form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15"
                        or form.get("WebIdentityToken") not in server.sts_tokens or "Authorization" in self.headers):
                    return self._send(400, b"<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken"
                                           b"</Code><Message>No OpenIDConnect provider found</Message></Error>"
                                           b"</ErrorResponse>", "text/xml")
                key, secret, token, stamp = server._issue()
                self._send(200, (f"<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
                                 f"<Credentials><AccessKeyId>{key}</AccessKeyId><SecretAccessKey>{secret}"
                                 f"</SecretAccessKey><SessionToken>{token}</SessionToken><Expiration>{stamp}"
                                 f"</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
                                 f"</AssumeRoleWithWebIdentityResponse>").encode(), "text/xml")

            def _assume_role(self, form):
                """AssumeRole signed (SigV4, service sts) by a key this server
                issued or one of `source_keys`; records who signed what."""
                m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/([^/]+)/sts/aws4_request, "
                             r"SignedHeaders=([^,]+), Signature=[0-9a-f]{64}$", self.headers.get("Authorization") or "")
                signer = m.group(1) if m else None
                with server.lock:
                    known = signer in server.source_keys or signer in server.issued
                    token_ok = signer in server.source_keys or (
                        known and self.headers.get("x-amz-security-token") == server.issued[signer]["token"])
                    server.assumed.append({"role": form.get("RoleArn"), "signer": signer,
                                           "session": form.get("RoleSessionName"),
                                           "external_id": form.get("ExternalId"),
                                           "duration": form.get("DurationSeconds"),
                                           "signed_headers": m.group(3) if m else None})
                if form.get("Version") != "2011-06-15" or not form.get("RoleArn") or not known or not token_ok:
                    return self._send(403, b"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
                                           b"<Message>not authorized to perform sts:AssumeRole</Message></Error>"
                                           b"</ErrorResponse>", "text/xml")
                key, secret, token, stamp = server._issue()
                with server.lock:
                    server.assumed[-1]["issued"] = key
                self._send(200, (f"<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>{key}"
                                 f"</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey><SessionToken>{token}"
                                 f"</SessionToken><Expiration>{stamp}</Expiration></Credentials>"
                                 f"</AssumeRoleResult></AssumeRoleResponse>").encode(), "text/xml")

            def do_GET(self):
                with server.lock:
                    server.requests.append(f"GET {self.path}")
                if self.path.startswith("/latest/"):
                    if self.headers.get("X-aws-ec2-metadata-token") not in server.imds_tokens:
                        return self._refuse("missing or unknown X-aws-ec2-metadata-token")
                    if self.path == "/latest/meta-data/iam/security-credentials/":
                        return self._send(200, f"{ROLE}\n".encode())
                    if self.path == f"/latest/meta-data/iam/security-credentials/{ROLE}":
                        return self._credentials()
                    return self._refuse("no such path", 404)
                if self.path == "/ecs/creds":
                    if self.headers.get("Authorization") != server.ecs_token:
                        return self._refuse("wrong Authorization")
                    return self._credentials()
                return self._refuse("no such path", 404)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _issue(self):
        with self.lock:
            n = len(self.issued) + 1
            key = f"ASIAFAKE{n}"
            expiration = time.time() + self.lifetime
            self.issued[key] = {"token": f"session-{n}", "expiration": expiration}
        stamp = datetime.datetime.fromtimestamp(expiration, datetime.timezone.utc)
        return key, f"secret-{n}", f"session-{n}", stamp.strftime("%Y-%m-%dT%H:%M:%SZ")

    def credential_fetches(self) -> int:
        with self.lock:
            return len(self.issued)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class SigningProxy(FaultProxy):
    """Forwards to moto, keeping (key id, x-amz-security-token, time) of each request."""

    def __init__(self, target: str):
        super().__init__(target)
        self.signed: list[tuple[str | None, str | None, float]] = []

    def _next_fault(self, method, headers, path=""):
        auth = headers.get("Authorization")
        m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/", auth or "")
        with self.lock:
            self.signed.append((m.group(1) if m else auth, headers.get("x-amz-security-token"), time.time()))
        return super()._next_fault(method, headers, path)


@pytest.fixture(scope="module")
def moto():
    server = MotoServer()
    server.create_bucket(BUCKET)
    yield server
    server.stop()


@pytest.fixture
def proxy(moto):
    p = SigningProxy(f"127.0.0.1:{moto.port}")
    yield p
    p.stop()


@pytest.fixture
def creds():
    s = CredentialServer()
    yield s
    s.stop()


@pytest.fixture
def env(monkeypatch, tmp_path, proxy):
    """No credentials anywhere; S3 requests through the recording proxy."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                 "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_DISABLED", "AWS_ENDPOINT_URL_S3",
                 "AWS_ENDPOINT_URL_STS"):
        monkeypatch.delenv(name, raising=False)
    for name in ("credentials", "config"):
        (tmp_path / f"empty-{name}").write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "empty-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "empty-config"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("CAIRN_HTTP_INITIAL_BACKOFF_MS", "5")
    monkeypatch.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "3")
    return monkeypatch


_counter = [0]


def fresh(name: str) -> str:
    _counter[0] += 1
    return f"{name}-{os.getpid()}-{_counter[0]}/"


def save_and_restore(prefix: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    tree = {"w": rng.standard_normal((32, 16)).astype(np.float32), "b": np.arange(7, dtype=np.int64)}
    url = f"s3://{BUCKET}/{prefix}"
    cairn.save(url, tree)
    back = cairn.restore(url)
    assert set(back) == set(tree)
    for k in tree:
        np.testing.assert_array_equal(np.asarray(back[k]), tree[k])


def check_signed_with_issued_credentials(proxy: SigningProxy, server: CredentialServer, since: int = 0):
    """Every request from index `since` was signed with a key the server issued
    and carried that key's session token; returns the keys used. (Whether a key
    was used after its expiry is checked without timing: callers wait until the
    keys they saw have expired, then require that none of them signs again.)"""
    with proxy.lock:
        signed = proxy.signed[since:]
    assert signed
    for key, token, _ in signed:
        assert key in server.issued, (key, sorted(server.issued))
        assert token == server.issued[key]["token"]
    return {key for key, _, _ in signed}


def wait_until_expired(server: CredentialServer, key: str) -> None:
    while time.time() <= server.issued[key]["expiration"] + 0.2:
        time.sleep(0.1)


def test_instance_metadata_v2_credentials_are_refreshed_after_expiry(env, proxy, creds):
    env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", creds.endpoint)
    save_and_restore(fresh("imds"), 1)
    assert creds.credential_fetches() >= 1
    first = check_signed_with_issued_credentials(proxy, creds)
    # Every metadata read carried the session token (the server refuses others).
    assert not creds.refused, creds.refused
    assert "PUT /latest/api/token" in creds.requests
    assert f"GET /latest/meta-data/iam/security-credentials/{ROLE}" in creds.requests

    # Wait out every key used so far; the next save must fetch new credentials.
    for key in first:
        wait_until_expired(creds, key)
    fetched, seen = creds.credential_fetches(), len(proxy.signed)
    save_and_restore(fresh("imds-later"), 2)
    assert creds.credential_fetches() > fetched
    later = check_signed_with_issued_credentials(proxy, creds, since=seen)
    assert not (later & first), (later, first)
    assert not creds.refused, creds.refused


def test_container_credentials_with_authorization_token_file(env, proxy, creds, tmp_path):
    token_file = tmp_path / "ecs-token"
    token_file.write_text(creds.ecs_token + "\n")
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{creds.endpoint}/ecs/creds")
    env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
    env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")  # never asked: ECS comes first
    save_and_restore(fresh("ecs"), 3)
    first = check_signed_with_issued_credentials(proxy, creds)
    assert not creds.refused and all(r == "GET /ecs/creds" for r in creds.requests), creds.requests

    # The token file is read at every fetch: a wrong token after expiry is refused,
    # and the error names the endpoint and the status.
    token_file.write_text("stale-token")
    for key in first:
        wait_until_expired(creds, key)
    with pytest.raises(RuntimeError) as e:
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('ecs-refused')}").put("k", b"v")
    msg = str(e.value)
    assert f"GET {creds.endpoint}/ecs/creds" in msg and "HTTP 401" in msg and "wrong Authorization" in msg
    assert "container credentials endpoint" in msg and "writing key `k`" in msg
    token_file.write_text(creds.ecs_token)  # control: it recovers
    save_and_restore(fresh("ecs-recovered"), 4)


def test_malformed_credentials_answer_is_a_clear_error(env, creds):
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{creds.endpoint}/ecs/creds")
    env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", creds.ecs_token)
    creds.malformed = True
    store = cairn.kvstore.open(f"s3://{BUCKET}/{fresh('malformed')}")
    with pytest.raises(cairn.CorruptDataError, match=r"(?s)container credentials endpoint.*not a JSON object"):
        store.put("k", b"v")
    creds.malformed = False  # control
    store.put("k", b"v")
    assert store.get("k") == b"v"


def test_web_identity_through_moto_sts(env, moto, proxy, tmp_path):
    token = tmp_path / "web-identity-token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.e30.c2ln\n")
    env.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    env.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/cairn-irsa")
    env.setenv("AWS_ROLE_SESSION_NAME", f"cairn-test-{os.getpid()}")
    env.setenv("AWS_ENDPOINT_URL_STS", moto.endpoint)
    save_and_restore(fresh("irsa"), 5)
    keys = {(k, t) for k, t, _ in proxy.signed}
    assert len(keys) == 1, keys  # one set, cached for the hour moto grants
    ((key, session),) = keys
    assert key.startswith("ASIA") and session, keys


def test_web_identity_token_file_is_read_again_at_each_refresh(env, proxy, creds, tmp_path):
    token = tmp_path / "rotating-token"
    token.write_text("projected-token-1\n")
    creds.sts_tokens = {"projected-token-1", "projected-token-2"}
    env.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    env.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/rotating")
    env.setenv("AWS_ENDPOINT_URL_STS", creds.endpoint)
    save_and_restore(fresh("irsa-1"), 6)
    first = check_signed_with_issued_credentials(proxy, creds)
    assert set(creds.sts_seen) == {"projected-token-1"}
    token.write_text("projected-token-2\n")  # the kubelet rotates the token
    for key in first:
        wait_until_expired(creds, key)
    seen = len(proxy.signed)
    save_and_restore(fresh("irsa-2"), 7)
    later = check_signed_with_issued_credentials(proxy, creds, since=seen)
    assert not (later & first)
    assert creds.sts_seen[-1] == "projected-token-2"


def test_web_identity_errors_name_the_role_and_token_file(env, creds, tmp_path):
    missing = tmp_path / "absent-token"
    env.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(missing))
    env.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/missing-file")
    env.setenv("AWS_ENDPOINT_URL_STS", creds.endpoint)
    with pytest.raises(FileNotFoundError, match=f"web identity token file `{missing}`"):
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('wi-missing')}").get("k")
    # STS (here: the fake server) refuses the token.
    missing.write_text("token")
    env.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/refused")
    with pytest.raises(RuntimeError) as e:
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('wi-refused')}").get("k")
    msg = str(e.value)
    assert "role/refused" in msg and f"POST {creds.endpoint}/" in msg and "HTTP 400" in msg
    assert "InvalidIdentityToken" in msg and str(missing) in msg
    env.delenv("AWS_ROLE_ARN")
    with pytest.raises(ValueError, match="AWS_ROLE_ARN"):
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('wi-norole')}")


def test_no_credentials_anywhere_is_anonymous(env, proxy, creds):
    # Instance metadata named but unreachable (connection refused): anonymous.
    env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    start = time.monotonic()
    store = cairn.kvstore.open(f"s3://{BUCKET}/{fresh('anon')}")
    opened = time.monotonic() - start
    store.put("k", b"v")  # moto takes unsigned PUTs (and refuses unsigned GETs)
    assert proxy.signed and all(k is None for k, _, _ in proxy.signed), proxy.signed
    print(f"opening without credentials took {opened * 1000:.1f} ms")
    # Disabled: a live metadata server is not even asked.
    env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", creds.endpoint)
    env.setenv("AWS_EC2_METADATA_DISABLED", "true")
    cairn.kvstore.open(f"s3://{BUCKET}/{fresh('anon-disabled')}").put("k", b"v")
    assert creds.requests == []
    # An emulator endpoint and nothing named: 169.254.169.254 is not probed
    # (checked in aws_credential_provider_test.cc); the store is anonymous.
    env.delenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
    env.delenv("AWS_EC2_METADATA_DISABLED")
    n = len(proxy.signed)
    cairn.kvstore.open(f"s3://{BUCKET}/{fresh('anon-emulator')}").put("k", b"v")
    assert all(k is None for k, _, _ in proxy.signed[n:])
