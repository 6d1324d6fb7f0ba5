"""README command 2 (scripts/install-deps.sh, then scripts/test.sh) on a
fresh clone, cold and warm: the time of each phase of scripts/test.sh and
the total, against CI's 90-minute limit and issue 28's 45-minute target.

- cold: a fresh clone of HEAD with an empty ccache directory (as a
  developer's first run: nothing compiled before). The peers' venvs under
  build/ are made afresh too, as on any fresh clone.
- warm: another fresh clone with the ccache the cold run filled (as CI's
  clean clone on a machine that built cairn before).

Each phase's time runs from its `== ` header to the next. The ccache
statistics say how much of each build came from the cache. The load
average is sampled every 10 s: on a loaded machine the times are not the
machine's, and the table says so.

    python3 bench/build_bench.py [--only cold|warm] [--keep]

Takes about an hour cold on 2 cores; run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table, results  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ccache_stats(ccache_dir: str) -> tuple[int, int]:
    """(hits, misses) of the ccache at `ccache_dir` since its last zeroing."""
    out = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                         env=dict(os.environ, CCACHE_DIR=ccache_dir)).stdout
    stats = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    hits = int(stats.get("direct_cache_hit", 0)) + int(stats.get("preprocessed_cache_hit", 0))
    return hits, int(stats.get("cache_miss", 0))


def run_readme_command_2(clone: str, ccache_dir: str) -> tuple[list[tuple[str, float]], float, int, list[float]]:
    """Runs install-deps.sh and test.sh in `clone`; returns the phases
    (header, seconds), the total seconds, the exit status and the load
    averages sampled."""
    env = dict(os.environ, CCACHE_DIR=ccache_dir)
    subprocess.run(["ccache", "-z"], env=env, check=True, capture_output=True)
    loads: list[float] = []
    done = threading.Event()

    def sample():
        while not done.wait(10):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    phases: list[tuple[str, float]] = []
    start = time.monotonic()
    current, since = "install-deps.sh", start
    log = open(os.path.join(clone, "build-bench.log"), "w")
    proc = subprocess.Popen(["bash", "-c", "bash scripts/install-deps.sh && bash scripts/test.sh"], cwd=clone,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        log.write(line)
        if line.startswith("== "):
            now = time.monotonic()
            phases.append((current, now - since))
            current, since = line[3:].strip(), now
    status = proc.wait()
    end = time.monotonic()
    phases.append((current, end - since))
    done.set()
    log.close()
    return phases, end - start, status, loads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["cold", "warm"], help="run one of the two")
    parser.add_argument("--keep", action="store_true", help="keep the clones and the cache")
    args = parser.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip()
    work = tempfile.mkdtemp(prefix="cairn-build-bench-")
    ccache_dir = os.path.join(work, "ccache")
    os.makedirs(ccache_dir)
    print(f"README command 2 on fresh clones of {head}; {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    rows, totals = [], {}
    try:
        for kind in ("cold", "warm"):
            if args.only and kind != args.only:
                continue
            clone = os.path.join(work, kind)
            subprocess.run(["git", "clone", "-q", REPO, clone], check=True)
            subprocess.run(["git", "checkout", "-q", head], cwd=clone, check=True)
            phases, total, status, loads = run_readme_command_2(clone, ccache_dir)
            hits, misses = ccache_stats(ccache_dir)
            load = statistics.median(loads) if loads else os.getloadavg()[0]
            totals[kind] = total
            for name, seconds in phases:
                rows.append([kind, name, f"{seconds / 60:.1f}"])
            rows.append([kind, f"total (exit {status}; ccache {hits} hits, {misses} misses; "
                               f"median load {load:.1f})", f"{total / 60:.1f}"])
        print()
        print_table(["run", "phase", "minutes"], rows)
        print()
        for kind, total in totals.items():
            print(f"{kind}: {total / 60:.1f} min = {total / 60 / 45:.2f}x the 45-minute target, "
                  f"{total / 60 / 90:.2f}x CI's 90-minute limit")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    with results("build_bench"):
        code = main()
    sys.exit(code)
