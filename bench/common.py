"""Shared helpers for cairn's benchmarks: device bandwidth, cache dropping, timing.

Benchmarks are not tests: they print cairn against the peer doing the same
work in the same run, and against the device's own bandwidth measured in that
run. These machines are noisy, so every figure is the median of `repeat` runs.
"""
from __future__ import annotations

import contextlib
import datetime
import io
import json
import mmap
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

GB = 1e9


def drop_caches(paths=()):
    """Evicts `paths` (files or directory trees) from the page cache.

    Uses /proc/sys/vm/drop_caches when we may (root), and per-file
    posix_fadvise(DONTNEED) otherwise, so reads measure the device."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return
    except OSError:
        pass
    for p in paths:
        for root, _, files in os.walk(p) if os.path.isdir(p) else [(os.path.dirname(p), [], [os.path.basename(p)])]:
            for name in files:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_seconds(fn, repeat, setup=None):
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        times.append(timed(fn))
    return statistics.median(times)


def interleaved_medians(jobs, repeat):
    """Median seconds of each job in `jobs` ({name: (fn, setup or None)}), run
    in rotating order: repeat r starts with job r mod n. The disk here is
    virtual and its host caches favour whoever ran last, so no side may
    always go first."""
    names = list(jobs)
    times = {n: [] for n in names}
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn, setup = jobs[name]
            if setup is not None:
                setup()
            times[name].append(timed(fn))
    return {n: statistics.median(t) for n, t in times.items()}


def _fio(directory, rw, size_bytes):
    out = subprocess.run(
        ["fio", "--name=bw", f"--directory={directory}", f"--rw={rw}", "--bs=4M",
         f"--size={size_bytes}", "--direct=1", "--ioengine=libaio", "--iodepth=16",
         "--numjobs=1", "--end_fsync=1", "--output-format=json"],
        check=True, capture_output=True, text=True).stdout
    job = json.loads(out)["jobs"][0]
    side = job["write" if "write" in rw else "read"]
    return side["bw_bytes"] / GB


def _plain_odirect(directory, size_bytes):
    """Fallback without fio: one large O_DIRECT sequential write + fsync, then read."""
    path = os.path.join(directory, "odirect.bin")
    block = 64 << 20
    buf = mmap.mmap(-1, block)
    buf.write(os.urandom(1 << 20) * (block >> 20))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT)
    t0 = time.perf_counter()
    for _ in range(size_bytes // block):
        os.write(fd, buf)
    os.fsync(fd)
    w = size_bytes / (time.perf_counter() - t0) / GB
    os.close(fd)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    t0 = time.perf_counter()
    for _ in range(size_bytes // block):
        os.readv(fd, [buf])
    r = size_bytes / (time.perf_counter() - t0) / GB
    os.close(fd)
    os.unlink(path)
    return w, r


def device_bandwidth(directory, size_bytes=1 << 30, repeat=3):
    """Median sequential O_DIRECT write and read bandwidth (GB/s) of the device
    holding `directory`, measured now. Returns (write, read, tool)."""
    d = tempfile.mkdtemp(prefix="devbw-", dir=directory)
    try:
        if shutil.which("fio"):
            ws, rs = [], []
            for _ in range(repeat):
                ws.append(_fio(d, "write", size_bytes))
                drop_caches([d])
                rs.append(_fio(d, "read", size_bytes))
                for f in os.listdir(d):
                    os.unlink(os.path.join(d, f))
            return statistics.median(ws), statistics.median(rs), "fio O_DIRECT 4MiB qd16"
        pairs = [_plain_odirect(d, size_bytes) for _ in range(repeat)]
        return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
                "O_DIRECT 64MiB writes")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def files_read_bandwidth(root, threads=8, block=8 << 20):
    """GB/s of reading every file under `root` once with O_DIRECT, `threads`
    blocks of `block` bytes in flight (the page cache must have been dropped
    first). The device's bandwidth for exactly the bytes a restore reads, where
    they lie now: on a VM whose disk is a host file, this differs from a fresh
    fio file by the host's own caching."""
    from concurrent.futures import ThreadPoolExecutor
    jobs = []
    for d, _, names in os.walk(root):
        for n in names:
            path = os.path.join(d, n)
            size = os.path.getsize(path)
            jobs += [(path, off) for off in range(0, size, block)]
    local = __import__("threading").local()

    def read(job):
        path, off = job
        if not hasattr(local, "buf"):
            local.buf = mmap.mmap(-1, block)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            return os.preadv(fd, [local.buf], off)
        finally:
            os.close(fd)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(read, jobs))
    return total / (time.perf_counter() - t0) / GB


def print_table(headers, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = " | ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))


RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# An absolute path (a directory the run was pointed at, a temporary file):
# results name no machine's paths.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[\w.+-]+/)*[\w.+-]+/?")


def _without_paths(text: str) -> str:
    text = re.sub(r"file://(?:/[\w.+-]+)+/?", "file://<path>", text)
    return _ABSOLUTE_PATH.sub("<path>", text)


class _Tee(io.TextIOBase):
    def __init__(self, out):
        self.out, self.kept = out, io.StringIO()

    def write(self, text):
        self.kept.write(text)
        return self.out.write(text)

    def flush(self):
        self.out.flush()


@contextlib.contextmanager
def results(name: str):
    """Runs a benchmark's main with its output kept, and when it finishes
    without error writes bench/results/<name>.md: the date, the command, the
    machine's cores, and everything the run printed (its tables, the device
    bandwidth it measured). Each run replaces the file: it holds the latest
    table only. CAIRN_BENCH_RESULTS=0 leaves the file alone (a trial run)."""
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        yield
    finally:
        sys.stdout = tee.out
    if os.environ.get("CAIRN_BENCH_RESULTS", "1") == "0":
        return
    os.makedirs(RESULTS_DIR, exist_ok=True)
    command = " ".join(["python3", f"bench/{name}.py", *sys.argv[1:]])
    text = (f"# `{name}`: latest run\n\n"
            f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n"
            f"- Command: `{_without_paths(command)}`\n"
            f"- Machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end\n\n"
            "Written by the benchmark itself (`bench/common.py` `results`); "
            "figures are medians of the run's repeats.\n\n"
            "```\n" + _without_paths(tee.kept.getvalue()).rstrip() + "\n```\n")
    with open(os.path.join(RESULTS_DIR, f"{name}.md"), "w") as f:
        f.write(text)
