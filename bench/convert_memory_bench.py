"""Peak RSS of `cairn convert` within a memory budget, on checkpoints of 4 and 16 GiB.

The issue's memory test at full size: a checkpoint with a single 4 GiB array
and a 16 GiB checkpoint (16 arrays of 1 GiB), each converted with a 512 MiB
budget, must peak below the budget plus a fixed overhead (128 MiB, derived in
tests/python/test_convert_memory.py, which runs the 4 GiB case in CI; the
16 GiB case takes four times as long, so it lives here).

The sources are AXLearn steps written by cairn's zarr writer one chunk at a
time from generated values that zstd compresses ~100x (no two rows equal),
so a 16 GiB checkpoint takes ~150 MiB of disk; each is converted to Orbax
(OCDBT + Zarr v3), then the Orbax checkpoint to AXLearn and (with
--safetensors, which writes the full size uncompressed) to safetensors. A
few rows of every output are compared with the generator.

    python3 bench/convert_memory_bench.py [--dir /path] [--budget-mib 512] [--chunk-mib 64]
        [--sizes 4,16] [--safetensors]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
sys.path.insert(0, HERE)
from common import print_table, results  # noqa: E402
from convert_memory_helpers import COLS, GiB, MiB, expected, sample_rows, write_axlearn_source  # noqa: E402

FIXED_OVERHEAD = 128 * MiB
STEP = 7


def cairn_exe():
    exe = os.path.join(sysconfig.get_path("scripts"), "cairn")
    return exe if os.access(exe, os.X_OK) else shutil.which("cairn")


def run_measured(argv):
    """(seconds, peak RSS bytes, stdout) of `argv` run as a child."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{err.read().decode()[-3000:]}")
        return seconds, usage.ru_maxrss * 1024, out.read().decode()


def check_rows(read_rows, arrays, what):
    for k, (path, (rows, _)) in enumerate(arrays):
        for r in sample_rows(rows):
            got = np.asarray(read_rows(path, r, r + 1)).view(np.uint32)
            if not np.array_equal(got, expected(k, r, r + 1)):
                raise SystemExit(f"{what}: array {path} row {r} differs from the generator")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.environ.get("CAIRN_BENCH_DIR", "/work"))
    ap.add_argument("--budget-mib", type=int, default=512)
    ap.add_argument("--chunk-mib", type=int, default=64, help="source chunk size (default 64 MiB)")
    ap.add_argument("--sizes", default="4,16", help="GiB: 4 is one array, larger sizes 1 GiB arrays")
    ap.add_argument("--safetensors", action="store_true", help="also convert to safetensors")
    args = ap.parse_args()
    exe = cairn_exe()
    import tensorstore as ts
    budget = args.budget_mib * MiB
    chunk_rows = args.chunk_mib * MiB // (COLS * 4)
    bound = budget + FIXED_OVERHEAD
    rows_out = []
    print(f"load average {os.getloadavg()} on {os.cpu_count()} cores", flush=True)
    for gib in [int(x) for x in args.sizes.split(",")]:
        work = tempfile.mkdtemp(prefix="convert-mem-bench-", dir=args.dir)
        try:
            sizes = [4 * GiB] if gib == 4 else [GiB] * gib
            t0 = time.perf_counter()
            arrays = write_axlearn_source(os.path.join(work, "axl"), STEP, sizes, chunk_rows=chunk_rows)
            print(f"{gib} GiB source ({len(sizes)} arrays, {args.chunk_mib} MiB chunks) written in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
            common = ["--json", "--memory-budget", f"{args.budget_mib}MiB"]
            item = os.path.join(work, "orbax", f"step_{STEP:08d}", "state")
            jobs = [("AXLearn -> Orbax", os.path.join(work, "axl"), os.path.join(work, "orbax"), "orbax"),
                    ("Orbax -> AXLearn", item, os.path.join(work, "axl2"), "axlearn")]
            if args.safetensors:
                jobs.append(("Orbax -> safetensors", item, os.path.join(work, "st"), "safetensors"))
            for name, src, dst, to in jobs:
                seconds, peak, out = run_measured([exe, "convert", src, dst, "--to", to, *common])
                summary = json.loads(out)
                if to == "orbax":
                    def read(path, r0, r1):
                        return ts.open({"driver": "zarr3", "kvstore": {
                            "driver": "ocdbt", "base": f"file://{item}/", "path": f"{path}/"}}).result()[r0:r1].read().result()
                elif to == "axlearn":
                    def read(path, r0, r1):
                        return ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.join(
                            dst, f"step_{STEP:08d}", "gda", path)}}).result()[r0:r1].read().result()
                else:
                    from safetensors import safe_open
                    f = safe_open(os.path.join(dst, "model.safetensors"), "numpy")

                    def read(path, r0, r1):
                        return f.get_slice(path)[r0:r1]
                check_rows(read, arrays, name)
                if to == "safetensors":
                    shutil.rmtree(dst)
                rows_out.append([f"{gib}", len(sizes), name, f"{seconds:.1f}",
                                 f"{summary['bytes_written'] / seconds / 1e9:.2f}", f"{peak / MiB:.0f}",
                                 f"{bound / MiB:.0f}", "yes" if peak <= bound else "NO"])
                print("  " + " | ".join(str(c) for c in rows_out[-1]), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nbudget {args.budget_mib} MiB, source chunks {args.chunk_mib} MiB, bound = budget + "
          f"{FIXED_OVERHEAD // MiB} MiB fixed; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print_table(["GiB", "arrays", "conversion", "seconds", "GB/s", "peak RSS MiB", "bound MiB",
                 "within"], rows_out)


if __name__ == "__main__":
    with results("convert_memory_bench"):
        main()
