"""moto's S3 server and a fault-injecting HTTP proxy, for the s3:// tests.

`MotoServer` starts `moto_server` (PyPI moto[server]) on a free localhost
port; `FaultProxy` forwards every request to it, except that it first serves
the faults it was given: an HTTP status (503, 429, ...) with an S3-style error
body, or "drop" (the connection is closed without an answer).
"""

from __future__ import annotations

import http.client
import http.server
import shutil
import socket
import subprocess
import threading
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    def __init__(self):
        exe = shutil.which("moto_server")
        assert exe, "moto_server not found: pip install 'moto[server]' (requirements-dev.txt)"
        self.port = free_port()
        self.proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None, "moto_server exited"
                assert time.monotonic() < deadline, "moto_server did not start within 30 s"
                time.sleep(0.05)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def create_bucket(self, name: str) -> None:
        req = urllib.request.Request(f"{self.endpoint}/{name}/", method="PUT")
        urllib.request.urlopen(req).read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class FaultProxy:
    """Forwards to `target` ("127.0.0.1:port"). `faults` is consumed one per
    request (matching `only_method` when given); `always` answers every
    request with that status; `require_auth` answers 403 to unsigned requests."""

    def __init__(self, target: str):
        self.target = target
        self.faults: list = []
        self.only_method: str | None = None
        self.always: int | None = None
        self.require_auth = False
        # A bucket of these keys (all of size 1) that only the proxy serves:
        # ListObjectsV2 pages of at most max-keys (default 1000) for GETs of
        # /<synthetic_bucket>/?list-type=2.
        self.synthetic_bucket: str | None = None
        self.synthetic_keys: list[str] = []
        self.list_pages_served = 0
        self.served_faults = 0
        self.requests = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if proxy.synthetic_bucket and self.path.startswith(f"/{proxy.synthetic_bucket}/?"):
                    return self._send(200, proxy._list_page(self.path))
                fault = proxy._next_fault(self.command, self.headers)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault is not None:
                    code = {503: "SlowDown", 429: "TooManyRequests", 403: "AccessDenied"}.get(fault, "Fault")
                    payload = (f"<?xml version=\"1.0\"?><Error><Code>{code}</Code>"
                               f"<Message>injected by the test proxy</Message></Error>").encode()
                    return self._send(fault, payload)
                conn = http.client.HTTPConnection(proxy.target, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                         "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            def _send(self, status, payload):
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
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

    def _next_fault(self, method: str, headers):
        with self.lock:
            self.requests += 1
            if self.require_auth and not headers.get("Authorization"):
                self.served_faults += 1
                return 403
            if self.always is not None:
                self.served_faults += 1
                return self.always
            if self.faults and (self.only_method is None or self.only_method == method):
                self.served_faults += 1
                return self.faults.pop(0)
            return None

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
