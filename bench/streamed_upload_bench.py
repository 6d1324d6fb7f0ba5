#!/usr/bin/env python3
"""One large value to s3:// and gs:// (moto, fake-gcs-server): streamed through
KvStore::OpenWriter against a whole-value Put, time and peak RSS.

Three rows per store, each the median of --repeat runs, each run in a fresh
grandchild process whose peak resident set comes from os.wait4's rusage (as
in tests/python/test_convert_memory.py):

  convert -> local      `cairn convert` of an AXLearn step (one float32 array
                        of --mib, zstd) to a local safetensors file: the cost
                        of reading and decoding the source, no upload
  convert -> URL        the same conversion onto the emulator: the file is one
                        value written in pieces through OpenWriter (s3:
                        parts of CAIRN_S3_PART_SIZE, 4 held; gcs: chunks of
                        CAIRN_GCS_CHUNK_SIZE, 2 held)
  put whole file        the converted file read into memory and stored with
                        `cairn.kvstore.open(url).put` (one Put: S3
                        multipart with every part at once, GCS resumable in
                        chunks), which is what the old OpenWriter did at
                        Commit after holding the whole value

MB/s are of the file's bytes over the process's wall time (start-up
included, the same for every row). Prints the load average, since the
machine is shared.

    flock /tmp/bench.lock python3 bench/streamed_upload_bench.py [--mib 1024] [--repeat 3]
                                                              [--memory-budget 64MiB]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
sys.path.insert(0, HERE)

from common import results  # noqa: E402

from convert_memory_helpers import MiB, write_axlearn_source  # noqa: E402
from s3_helpers import FakeGcsServer, MotoServer  # noqa: E402

BUCKET = "streamed-bench"

_MEASURE = """
import json, os, sys, time
t = time.monotonic()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"status": status, "maxrss_kib": usage.ru_maxrss, "seconds": time.monotonic() - t}, f)
"""

_PUT = """
import sys, cairn
data = open(sys.argv[1], "rb").read()
cairn.kvstore.open(sys.argv[2]).put(sys.argv[3], data)
"""


def measured(argv, env):
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        p = subprocess.run([sys.executable, "-S", "-c", _MEASURE, report.name, *map(str, argv)],
                           env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-2000:]
        r = json.load(open(report.name))
        assert os.waitstatus_to_exitcode(r["status"]) == 0, p.stderr[-2000:]
        return r["seconds"], r["maxrss_kib"] * 1024


def cli():
    import cairn
    dev = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(cairn.__file__)))),
                       "cli", "cairn")
    return dev if os.access(dev, os.X_OK) else "cairn"


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-budget", default="64MiB", help="of the conversions")
    args = ap.parse_args()
    size = args.mib * MiB
    work = tempfile.mkdtemp(prefix="streamed-bench-")
    write_axlearn_source(os.path.join(work, "src"), 1, [size], chunk_rows=256)
    moto, gcs = MotoServer(), FakeGcsServer()
    moto.create_bucket(BUCKET)
    gcs.create_bucket(BUCKET)
    base = dict(os.environ)
    envs = {
        "s3": dict(base, AWS_ENDPOINT_URL=moto.endpoint, AWS_ACCESS_KEY_ID="testing",
                   AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1"),
        "gcs": dict(base, STORAGE_EMULATOR_HOST=gcs.endpoint),
    }
    print(f"one value of {args.mib} MiB (a safetensors file); conversions with --memory-budget "
          f"{args.memory_budget} --threads 2; median of {args.repeat}; "
          f"2 CPUs; at start: load average {load()}", flush=True)
    rows = []
    local = os.path.join(work, "local")
    runs = []
    for i in range(args.repeat):
        dst = f"{local}{i}"
        runs.append(measured([cli(), "convert", os.path.join(work, "src"), dst, "--to", "safetensors",
                              "--memory-budget", args.memory_budget, "--threads", "2"], base))
    file_path = os.path.join(f"{local}0", "model.safetensors")
    file_bytes = os.path.getsize(file_path)
    rows.append(("local", "convert -> local", runs))
    for store, env in envs.items():
        scheme = "s3" if store == "s3" else "gs"
        conv, put = [], []
        for i in range(args.repeat):
            conv.append(measured([cli(), "convert", os.path.join(work, "src"),
                                  f"{scheme}://{BUCKET}/conv{i}/st", "--to", "safetensors",
                                  "--memory-budget", args.memory_budget, "--threads", "2"], env))
            put.append(measured([sys.executable, "-c", _PUT, file_path,
                                 f"{scheme}://{BUCKET}/put{i}/", "model.safetensors"], env))
        rows.append((store, "convert -> URL (OpenWriter)", conv))
        rows.append((store, "put whole file (Put)", put))
    print(f"{'store':5} | {'case':28} | {'MB/s':>6} | {'seconds':>7} | {'peak RSS MiB':>12} | per run s")
    print("------|------------------------------|--------|---------|--------------|----------")
    for store, case, runs in rows:
        secs = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        print(f"{store:5} | {case:28} | {file_bytes / secs / 1e6:6.0f} | {secs:7.2f} | "
              f"{rss / MiB:12.0f} | {' '.join(f'{r[0]:.2f}' for r in runs)}")
    print(f"at end: load average {load()}")
    moto.stop()
    gcs.stop()


if __name__ == "__main__":
    with results("streamed_upload_bench"):
        main()
