"""A hostile object-store server does not decide how much cairn reads, for
how long, or what a listing holds (http/response_limits.h,
http/listing_pages.h).

The server is written here, on a raw socket, so that it can do what no
emulator does: answer endlessly, drip, lie in its Content-Length, hand out
fresh or repeated continuation tokens forever, cut a listing short. The
`_METADATA` test puts it in front of moto as a proxy, so that a real
checkpoint is restored through it. cairn runs in a child process per case,
since the HTTP client reads its settings (CAIRN_HTTP_*) once per process;
each hostile stream stops by itself after a while, so the old code ends
too (with the wrong answer, which the assertions catch).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse

import pytest

import cairn
from test_object_store_checkpoints import S3_BUCKET, moto, step_tree  # noqa: F401

MiB = 1 << 20


def kernel_buffered_bytes() -> int:
    """What the kernel may hold between the server's `send` and cairn's
    read, which `sent` counts though cairn never received it: the client's
    receive buffer (autotuned up to tcp_rmem's maximum: 32 MiB on some
    machines, which let the server get 27 MiB past a bound under load),
    the server's send buffer (capped by HostileServer) and one chunk in
    flight."""
    try:
        with open("/proc/sys/net/ipv4/tcp_rmem") as f:
            receive = int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        receive = 6 * MiB  # Linux's default maximum
    return receive + HostileServer.SEND_BUFFER * 2 + MiB


class HostileServer:
    """An HTTP/1.1 server whose answers come from `respond(request, out)`:
    `request` has method, path, query (a dict), headers (lower-case) and body;
    `out` is the connection's socket, written raw. `respond` returns False to
    close the connection. `forward` ("host:port"): requests `respond` returns
    None for go there. `sent` counts the bytes written through `send`.
    Each connection's send buffer is SEND_BUFFER bytes (the kernel doubles
    it), so what was sent but not received stays small."""

    SEND_BUFFER = 256 << 10

    def __init__(self, respond, forward: str | None = None):
        self.respond, self.forward = respond, forward
        self.sent = 0
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, HostileServer.SEND_BUFFER)
                f = self.request.makefile("rb")
                try:
                    while server._serve_one(f, self.request):
                        pass
                except (ConnectionError, OSError):
                    pass

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.tcp.daemon_threads = True
        self.port = self.tcp.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.tcp.serve_forever, daemon=True).start()

    def send(self, out, data: bytes) -> None:
        out.sendall(data)
        with self.lock:
            self.sent += len(data)

    def _serve_one(self, f, out) -> bool:
        line = f.readline()
        if not line:
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers = {}
        while (h := f.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = f.read(int(headers.get("content-length", "0") or 0))
        url = urllib.parse.urlsplit(target)
        request = type("Request", (), dict(method=method, path=url.path, target=target, headers=headers, body=body,
                                           query=dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))))
        with self.lock:
            self.requests.append((method, target))
        keep = self.respond(request, out)
        if keep is None:
            return self._forward(request, out)
        return keep

    def _forward(self, request, out) -> bool:
        conn = http.client.HTTPConnection(self.forward, timeout=60)
        conn.request(request.method, request.target, body=request.body,
                     headers={k: v for k, v in request.headers.items() if k != "connection"})
        resp = conn.getresponse()
        data = resp.read()
        head = f"HTTP/1.1 {resp.status} {resp.reason}\r\n"
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                head += f"{k}: {v}\r\n"
        head += f"Content-Length: {len(data)}\r\n\r\n"
        out.sendall(head.encode() + (b"" if request.method == "HEAD" else data))
        conn.close()
        return True

    def stop(self):
        self.tcp.shutdown()
        self.tcp.server_close()


def answer(server, out, status: int, body: bytes, extra: str = "", length: int | str | None = None) -> bool:
    """One whole answer in one write; `length` overrides the Content-Length."""
    length = len(body) if length is None else length
    server.send(out, f"HTTP/1.1 {status} X\r\nContent-Length: {length}\r\n{extra}\r\n".encode() + body)
    return True


def endless(server, out, head: str, limit: int) -> bool:
    """`head`, then zeros until `limit` bytes or the client hangs up; closed."""
    server.send(out, head.encode())
    chunk = b"\0" * (1 << 20)
    try:
        while server.sent < limit:
            server.send(out, chunk)
    except OSError:
        pass
    return False


def s3_env(tmp_path, endpoint: str, **extra) -> dict:
    for name in ("credentials", "config"):
        (tmp_path / f"empty-{name}").write_text("")
    return {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "empty-credentials"),
            "AWS_CONFIG_FILE": str(tmp_path / "empty-config"), "AWS_EC2_METADATA_DISABLED": "true",
            "CAIRN_HTTP_MAX_ATTEMPTS": "1", **{k: str(v) for k, v in extra.items()}}


def in_child(env: dict, code: str, timeout: float = 30) -> dict:
    """Runs `code` (which sets `result`) in a child; {"result": ...} or
    {"error": message, "type": name}."""
    body = textwrap.indent(textwrap.dedent(code).strip(), "    ")
    script = (f"import json, sys\nsys.path.insert(0, {sys.path[0]!r})\nimport cairn\ntry:\n{body}\n"
              "    out = {'result': result}\n"
              "except Exception as e:\n"
              "    out = {'error': str(e), 'type': type(e).__name__}\n"
              "print(json.dumps(out, default=repr))\n")
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


GET_K = """
    result = list(cairn.kvstore.open("s3://bkt/").get("k"))
"""


@pytest.fixture
def hostile():
    servers = []

    def make(respond, forward=None):
        servers.append(HostileServer(respond, forward))
        return servers[-1]
    yield make
    for s in servers:
        s.stop()


# --- bodies -----------------------------------------------------------------

def test_a_content_length_that_overflows_is_not_taken(hostile, tmp_path):
    # libcurl ignores a Content-Length it cannot hold and reads to the close:
    # the old code returned these 2 bytes as the value.
    server = hostile(lambda req, out: answer(server, out, 200, b"ab", "Connection: close\r\n",
                                             length="99999999999999999999") and False)
    out = in_child(s3_env(tmp_path, server.endpoint), GET_K)
    assert "error" in out, out
    assert "Content-Length `99999999999999999999` is not a byte count" in out["error"]
    assert f"127.0.0.1:{server.port}/bkt/k" in out["error"]


def test_a_body_longer_than_its_content_length_is_not_taken(hostile, tmp_path):
    # Content-Length 2, then 10 bytes: the old code returned the first 2.
    server = hostile(lambda req, out: answer(server, out, 200, b"abcdefghij", length=2))
    out = in_child(s3_env(tmp_path, server.endpoint), GET_K)
    assert "error" in out, out
    assert "more bytes than its Content-Length of 2" in out["error"]
    assert f"127.0.0.1:{server.port}/bkt/k" in out["error"]


def test_a_body_shorter_than_its_content_length_is_not_taken(hostile, tmp_path):
    server = hostile(lambda req, out: answer(server, out, 200, b"ab", "Connection: close\r\n", length=1000) and False)
    out = in_child(s3_env(tmp_path, server.endpoint), GET_K)
    assert "error" in out, out
    assert f"127.0.0.1:{server.port}/bkt/k" in out["error"]


@pytest.mark.parametrize("case", ["announced", "endless", "error_document"])
def test_a_body_over_what_was_asked_is_not_received(hostile, tmp_path, case):
    # A read of 4 bytes answered with 64 MiB (announced, or close-delimited),
    # and a 404 whose error document does not end: the old code buffered
    # all of it (up to its 1 TiB cap). Now the transfer stops at the bound
    # (or at the Content-Length, before the body): the server gets no
    # further than its socket buffers.
    heads = {"announced": f"HTTP/1.1 206 X\r\nContent-Range: bytes 0-3/{64 * MiB}\r\nContent-Length: {64 * MiB}\r\n\r\n",
             "endless": "HTTP/1.1 206 X\r\nContent-Range: bytes 0-3/4\r\nConnection: close\r\n\r\n",
             "error_document": "HTTP/1.1 404 X\r\nConnection: close\r\n\r\n"}
    server = hostile(lambda req, out: endless(server, out, heads[case], 64 * MiB))
    start = time.monotonic()
    out = in_child(s3_env(tmp_path, server.endpoint), """
        result = list(cairn.kvstore.open("s3://bkt/").get("k", 0, 4))
    """)
    assert "error" in out, out
    assert "not read further" in out["error"] and f"127.0.0.1:{server.port}/bkt/k" in out["error"], out
    time.sleep(0.2)  # the server's last write fails once the client has gone
    assert server.sent < 16 * MiB, server.sent
    assert time.monotonic() - start < 20


def restore_through_endless_answers(hostile, tmp_path, moto, endless_for, **save_kwargs) -> tuple:
    """Saves a real checkpoint on moto, then restores it in a child through
    a proxy that answers the GETs whose path `endless_for(path)` picks with
    an endless body: the 256 MiB limit plus twice what the kernel may
    buffer, more than any bound below (so the old code, which took it all,
    is caught), and finite (so it ends too). Returns (the child's outcome, bytes the proxy sent)."""
    endless_bytes = 256 * MiB + 2 * kernel_buffered_bytes() + 16 * MiB
    root = f"bounds-{os.getpid()}-{time.monotonic_ns()}"
    save = in_child(s3_env(tmp_path, moto.endpoint), f"""
        from test_object_store_checkpoints import step_tree
        cairn.save("s3://{S3_BUCKET}/{root}", step_tree(1), step=1, **{save_kwargs!r})
        result = "saved"
    """, timeout=120)
    assert save == {"result": "saved"}, save

    def respond(req, out):
        if req.method == "GET" and endless_for(req.path):
            return endless(server, out, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", endless_bytes)
        return None
    server = hostile(respond, forward=f"127.0.0.1:{moto.port}")
    out = in_child(s3_env(tmp_path, server.endpoint), f"""
        result = repr(cairn.restore("s3://{S3_BUCKET}/{root}"))
    """, timeout=120)
    time.sleep(0.2)
    return out, server.sent


def test_an_endless_metadata_file_is_not_held(hostile, tmp_path, moto):  # noqa: F811
    # The GET of `_METADATA` answers endlessly. The old code received it all
    # (the 256 MiB small-file limit was checked after the whole body had
    # come); now nothing past the limit is received: the server gets no
    # further than the limit and what the kernel buffers.
    out, sent = restore_through_endless_answers(hostile, tmp_path, moto, lambda p: p.endswith("/_METADATA"))
    assert "error" in out, out
    assert "_METADATA" in out["error"] and "limit" in out["error"], out
    assert sent < 256 * MiB + kernel_buffered_bytes(), sent


def test_an_endless_chunk_is_not_held(hostile, tmp_path, moto):  # noqa: F811
    # Chunks stored as objects of their own (use_ocdbt=False): the GET of
    # `w`'s chunk answers endlessly. A whole chunk is at most what its
    # codecs can make of it (KeyRead::max_bytes): the restore fails naming
    # the limit, having received a little more than that bound (the old
    # code took all 300 MiB, then failed to decode it).
    out, sent = restore_through_endless_answers(hostile, tmp_path, moto, lambda p: "/w/c/" in p, use_ocdbt=False)
    assert "error" in out, out
    assert "w/c/" in out["error"] and "limit" in out["error"], out
    assert sent < 16 * MiB, sent


def test_a_drip_ends_by_the_deadline(hostile, tmp_path):
    # 2 bytes a second of a 1 KB value: the stall rule (under 1 byte/s) lets
    # it through, and the old code read it for 8 minutes (stopped after 20 s
    # here). With a minimum average of 1 KiB/s after 1 s it ends at once.
    def respond(req, out):
        server.send(out, b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(40):
            server.send(out, b"xy")
            time.sleep(1)
        return False
    server = hostile(respond)
    start = time.monotonic()
    try:
        out = in_child(s3_env(tmp_path, server.endpoint, CAIRN_HTTP_RATE_GRACE_S=1,
                              CAIRN_HTTP_MIN_RATE_BYTES_S=1024), GET_K, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("the drip was still being read after 20 s")
    assert "error" in out, out
    assert "under the minimum average of 1024 bytes/s" in out["error"], out
    assert f"127.0.0.1:{server.port}/bkt/k" in out["error"]
    assert time.monotonic() - start < 20


# --- listings ---------------------------------------------------------------

def s3_page(keys, next_token=None, tail="</ListBucketResult>", truncated=True, sizes=None) -> bytes:
    contents = "".join(f"<Contents><Key>{k}</Key><Size>{(sizes or {}).get(k, 1)}</Size></Contents>" for k in keys)
    flag = "" if not truncated else f"<IsTruncated>{'true' if next_token else 'false'}</IsTruncated>"
    token = f"<NextContinuationToken>{next_token}</NextContinuationToken>" if next_token else ""
    return (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name><Prefix></Prefix>'
            f"{flag}{token}{contents}{tail}").encode()


LIST = """
    result = cairn.kvstore.open("s3://bkt/").list()
"""


def paging_server(hostile, token_of_page, pages: int, page_body):
    """Pages 1..`pages`, page n continued with token_of_page(n); the last ends."""
    def respond(req, out):
        with server.lock:
            server.pages += 1
            n = server.pages
        return answer(server, out, 200, page_body(n, token_of_page(n) if n < pages else None))
    server = hostile(respond)
    server.pages = 0
    return server


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_endless_pagination_ends_at_the_page_cap(hostile, tmp_path, scheme):
    # Fresh tokens for 200 pages (then an end, so the old code ends too,
    # with all 200 pages taken): with a cap of 20 the listing fails there.
    body = (lambda n, t: s3_page([f"k{n}"], t)) if scheme == "s3" else \
        (lambda n, t: json.dumps({"items": [{"name": f"k{n}", "size": "1"}], **({"nextPageToken": t} if t else {})}).encode())
    server = paging_server(hostile, lambda n: f"t{n}", 200, body)
    env = s3_env(tmp_path, server.endpoint, CAIRN_LIST_MAX_PAGES=20, STORAGE_EMULATOR_HOST=server.endpoint)
    out = in_child(env, LIST.replace("s3://", f"{scheme}://"))
    assert "error" in out, out
    assert "past 20 pages" in out["error"] and f"127.0.0.1:{server.port}" in out["error"], out
    assert server.pages == 20


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_repeated_token_ends_the_listing(hostile, tmp_path, scheme):
    # Tokens a, b, a, b, ... (100 pages, then an end): the old code only
    # compared a token with the one before and went round 100 times.
    body = (lambda n, t: s3_page([f"k{n}"], t)) if scheme == "s3" else \
        (lambda n, t: json.dumps({"items": [{"name": f"k{n}", "size": "1"}], **({"nextPageToken": t} if t else {})}).encode())
    server = paging_server(hostile, lambda n: "ab"[n % 2], 100, body)
    env = s3_env(tmp_path, server.endpoint, STORAGE_EMULATOR_HOST=server.endpoint)
    out = in_child(env, LIST.replace("s3://", f"{scheme}://"))
    assert "error" in out, out
    assert "a token an earlier page of this listing gave" in out["error"], out
    assert f"127.0.0.1:{server.port}" in out["error"]
    assert server.pages == 3


@pytest.mark.parametrize("case", ["cut_off", "no_is_truncated", "unclosed_contents", "negative_size",
                                  "overflowing_size"])
def test_a_malformed_listing_page_is_an_error(hostile, tmp_path, case):
    # The old code returned a partial listing (cut off, unclosed), took a
    # missing IsTruncated as the end, and read -5 as 18446744073709551611.
    whole = s3_page(["a", "b"], truncated=True)
    bodies = {"cut_off": whole[: whole.index(b"<Contents><Key>b")] + b"<Contents><Key>b</Key><Si",
              "no_is_truncated": s3_page(["a", "b"], truncated=False),
              "unclosed_contents": s3_page(["a"], tail="<Contents><Key>b</Key><Size>1</Size></ListBucketResult>"),
              "negative_size": s3_page(["a", "b"], sizes={"b": -5}),
              "overflowing_size": s3_page(["a", "b"], sizes={"b": 18446744073709551616})}
    server = hostile(lambda req, out: answer(server, out, 200, bodies[case]))
    out = in_child(s3_env(tmp_path, server.endpoint), LIST)
    assert "error" in out, out
    assert "malformed ListObjectsV2 page 1" in out["error"] and f"127.0.0.1:{server.port}/bkt/" in out["error"], out
