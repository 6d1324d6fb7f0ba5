#!/usr/bin/env python3
"""What each client sends for the same work: cairn against TensorStore, request by request.

Starts fake-gcs-server (or moto) behind a recording proxy and runs, once per
side and in its own worker process, the bench's operations (save and restore
of a float32 zarr3 array directly on the bucket and inside an OCDBT database,
and a listing) with N requests in flight. For every side and operation it
prints: TCP connections opened to the proxy, requests by kind (method and
upload type), bytes sent and received, the largest and smallest upload, the
most requests the proxy saw in flight at once, and the time from the first
request to the last answer. The proxy (Python threads) is slower than the
emulator, so its times are not throughput figures; counts and shapes are what
this is for.

    python3 bench/objstore_trace.py [--store gcs] [--inflight 8] [--mib 64]
"""
from __future__ import annotations

import argparse
import collections
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import objstore_bench as ob  # noqa: E402


class RecordingProxy:
    """HTTP/1.1 keep-alive proxy to `target`; one upstream connection per
    client connection; records every request."""

    def __init__(self, target: str):
        self.target = target
        self.lock = threading.Lock()
        self.reset()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with proxy.lock:
                    proxy.connections += 1
                self.upstream = None

            def _handle(self):
                t_begin = time.monotonic()  # the request line and headers are in
                length = int(self.headers.get("Content-Length") or 0)
                chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
                if chunked:
                    parts = []
                    while True:
                        n = int(self.rfile.readline().split(b";")[0], 16)
                        if n == 0:
                            self.rfile.readline()
                            break
                        parts.append(self.rfile.read(n))
                        self.rfile.readline()
                    body = b"".join(parts)
                else:
                    body = self.rfile.read(length) if length else b""
                t0 = time.monotonic()
                with proxy.lock:
                    proxy.in_flight += 1
                    proxy.max_in_flight = max(proxy.max_in_flight, proxy.in_flight)
                if self.upstream is None:
                    self.upstream = http.client.HTTPConnection(proxy.target, timeout=120)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "transfer-encoding", "content-length")}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                resp = self.upstream.getresponse()
                data = resp.read()
                t1 = time.monotonic()
                with proxy.lock:
                    proxy.in_flight -= 1
                    proxy.log.append({"method": self.command, "path": self.path, "up": len(body),
                                      "down": len(data), "status": resp.status, "t0": t0, "t1": t1,
                                      "t_begin": t_begin,
                                      "expect": self.headers.get("Expect"), "chunked": chunked})
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self):
        with self.lock:
            self.connections = 0
            self.in_flight = 0
            self.max_in_flight = 0
            self.log = []
            self.op_start = time.monotonic()

    def summary(self) -> dict:
        with self.lock:
            log = list(self.log)
            out = {"connections": self.connections, "max_in_flight": self.max_in_flight}
        kinds = collections.Counter()
        for r in log:
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(r["path"]).query)
            kind = r["method"]
            if "uploadType" in q:
                kind += " " + q["uploadType"][0]
            elif "alt" in q:
                kind += " media"
            elif r["method"] == "GET" and ("/o?" in r["path"] or "list-type" in r["path"]):
                kind += " list"
            if r["status"] >= 300:
                kind += f" ->{r['status']}"
            kinds[kind] += 1
        ups = [r["up"] for r in log if r["up"]]
        out.update({"requests": len(log), "kinds": dict(sorted(kinds.items())),
                    "bytes_up": sum(r["up"] for r in log), "bytes_down": sum(r["down"] for r in log),
                    "largest_upload": max(ups, default=0), "smallest_upload": min(ups, default=0),
                    "expect_100": sum(1 for r in log if r["expect"]),
                    "chunked_uploads": sum(1 for r in log if r["chunked"]),
                    "span_s": round(max((r["t1"] for r in log), default=0) - min((r["t0"] for r in log), default=0), 3)})
        return out


def worker(args) -> None:
    import numpy as np
    import tensorstore as ts

    import cairn

    ends = json.loads(args.ends)
    n, store = args.inflight, args.store
    ctx = ts.Context({"s3_request_concurrency": {"limit": n}, "gcs_request_concurrency": {"limit": n}})
    cols = 1024
    chunk_rows = int(args.chunk_mib * (1 << 20)) // (cols * 4)
    rows = int(args.mib * (1 << 20)) // (cols * 4) // chunk_rows * chunk_rows
    data = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    md = {"zarr_format": 3, "node_type": "array", "shape": [rows, cols], "data_type": "float32",
          "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk_rows, cols]}},
          "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
          "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}
    side = args.side
    mark = lambda what: (print(json.dumps({"mark": what}), flush=True), sys.stdin.readline())  # noqa: E731
    for fmt in args.formats.split(","):
        path = f"trace-{side}-{fmt}-{os.getpid()}/"
        mark(f"save {fmt}")
        if side == "cairn":
            cairn.create(ob.cairn_url(store, path, fmt), metadata=md).write(data)
        else:
            ts.open(ob.ts_spec(store, ends, path, fmt), create=True, context=ctx, dtype=ts.float32,
                    shape=[rows, cols], chunk_layout=ts.ChunkLayout(chunk_shape=[chunk_rows, cols]),
                    codec=ts.CodecSpec({"driver": "zarr3", "codecs": md["codecs"]})).result().write(data).result()
        mark(f"restore {fmt}")
        if side == "cairn":
            out = cairn.open(ob.cairn_url(store, path, fmt)).read()
        else:
            out = ts.open(ob.ts_spec(store, ends, path, fmt), context=ctx).result().read().result()
        assert np.array_equal(out, data)
    mark("list")
    scheme = "s3" if store == "s3" else "gs"
    if side == "cairn":
        keys = cairn.kvstore.open(f"{scheme}://{ob.BUCKET}/list/").keys()
    else:
        keys = ts.KvStore.open(ob.ts_base(store, ends, "list/"), context=ctx).result().list().result()
    assert len(keys) == args.list_keys, len(keys)
    mark("end")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", default="gcs", choices=["gcs", "s3"])
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--mib", type=float, default=64)
    ap.add_argument("--chunk-mib", type=float, default=2)
    ap.add_argument("--list-keys", type=int, default=2000)
    ap.add_argument("--formats", default="zarr3,ocdbt")
    ap.add_argument("--requests", action="store_true", help="also print every request (method, path, sizes)")
    ap.add_argument("--side", default="", help=argparse.SUPPRESS)
    ap.add_argument("--ends", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        return worker(args)
    logdir = tempfile.mkdtemp(prefix="cairn-objstore-trace-")
    procs, ends = ob.start_emulators(logdir)
    proxy = RecordingProxy(ends[args.store].split("//")[1])
    try:
        env = ob.environment(ends, args.inflight)
        code = ("import cairn\n"
                f"cairn.kvstore.open('{'s3' if args.store == 's3' else 'gs'}://{ob.BUCKET}/list/').put_many("
                f"{{f'k{{i:05d}}': b'x' for i in range({args.list_keys})}})\n")
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        env_p = dict(env)
        if args.store == "s3":
            env_p["AWS_ENDPOINT_URL"] = proxy.endpoint
        else:
            env_p["STORAGE_EMULATOR_HOST"] = env_p["TENSORSTORE_GCS_HTTP_URL"] = proxy.endpoint
        ends_p = dict(ends, **{args.store: proxy.endpoint})
        results = {}
        for side in ("cairn", "ts"):
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--side", side,
                                  "--ends", json.dumps(ends_p), "--store", args.store,
                                  "--inflight", str(args.inflight), "--mib", str(args.mib),
                                  "--chunk-mib", str(args.chunk_mib), "--list-keys", str(args.list_keys),
                                  "--formats", args.formats],
                                 env=env_p, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            current = None
            for line in p.stdout:
                what = json.loads(line)["mark"]
                if current is not None:
                    results.setdefault(current, {})[side] = proxy.summary()
                    if args.requests:
                        # Seconds since the operation began (the worker's mark): the
                        # request's headers arrived, its body was in, its answer came.
                        t00 = proxy.op_start
                        for r in sorted(proxy.log, key=lambda r: r["t_begin"]):
                            print(f"  {side} {current}: {r['t_begin'] - t00:7.3f}s body in {r['t0'] - t00:7.3f}s "
                                  f"answered {r['t1'] - t00:7.3f}s {r['method']} {r['path'][:90]} "
                                  f"up {r['up']} down {r['down']} -> {r['status']}")
                proxy.reset()
                current = None if what == "end" else what
                p.stdin.write("\n")
                p.stdin.flush()
            if p.wait() != 0:
                raise SystemExit(f"{side} worker failed")
        print(f"{args.store}, {args.inflight} in flight, array {args.mib:g} MiB in {args.chunk_mib:g} MiB "
              f"chunks, listing {args.list_keys} keys; per operation, cairn then TensorStore:")
        for op, sides in results.items():
            for side in ("cairn", "ts"):
                print(f"{op:14s} {side:5s} {json.dumps(sides.get(side))}")
    finally:
        proxy.server.shutdown()
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


if __name__ == "__main__":
    main()
