#!/usr/bin/env python3
"""Zarr v3 write/read throughput: cairn against TensorStore, and against the device.

Writes and reads a bfloat16 array (default 1 GiB, 64 MiB chunks) uncompressed
and with zstd levels 1 and 3, with cairn and with TensorStore (PyPI) in the same
run, with the same metadata, durably (both fsync each chunk file), dropping the
page cache before every read. Also measures the device's own sequential
O_DIRECT write/read bandwidth in the same run. Prints one table of GB/s (of
array bytes) with the ratio cairn/TensorStore and cairn/device; medians of
--repeat runs, cairn and TensorStore taking turns to go first.

    python3 bench/zarr_bench.py [--dir /path/on/the/device] [--gib 1] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import ml_dtypes
import numpy as np
import tensorstore as ts

import cairn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, drop_caches, interleaved_medians, print_table, results  # noqa: E402

CODECS = {
    "none": [],
    "zstd-1": [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}],
    "zstd-3": [{"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
}


def metadata(shape, chunks, extra_codecs):
    return {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "bfloat16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}] + extra_codecs,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir on /work)")
    ap.add_argument("--gib", type=float, default=1.0, help="array size in GiB")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    base = args.dir or ("/work" if os.path.isdir("/work") else tempfile.gettempdir())
    root = tempfile.mkdtemp(prefix="cairn-zarr-bench-", dir=base)
    try:
        cols = 32768
        rows = int(args.gib * (1 << 30)) // (cols * 2)
        chunk_rows = (64 << 20) // (cols * 2)
        shape, chunks = (rows, cols), (chunk_rows, cols)
        nbytes = rows * cols * 2
        rng = np.random.default_rng(0)
        data = rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)

        dev_w, dev_r, tool = device_bandwidth(root)
        print(f"device: write {dev_w:.2f} GB/s, read {dev_r:.2f} GB/s ({tool}); "
              f"array {nbytes / GB:.2f} GB bfloat16 {list(shape)} in {list(chunks)} chunks; "
              f"median of {args.repeat}; threads: {os.cpu_count()}")

        table = []
        for name, extra in CODECS.items():
            md = metadata(shape, chunks, extra)
            cdir, tdir = os.path.join(root, f"cairn-{name}"), os.path.join(root, f"ts-{name}")

            def cairn_write():
                a = cairn.create(f"file://{cdir}/|zarr3:", metadata=md)
                a.write(data)

            def ts_write():
                a = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": tdir + "/"},
                             "metadata": md}, create=True, delete_existing=True).result()
                a.write(data).result()

            def clean(d):
                return lambda: (shutil.rmtree(d, ignore_errors=True), drop_caches([root]))

            w = interleaved_medians({"cairn": (cairn_write, clean(cdir)),
                                     "ts": (ts_write, clean(tdir))}, args.repeat)
            c_w, t_w = w["cairn"], w["ts"]

            out = {}

            def cairn_read():
                out["c"] = cairn.open(f"file://{cdir}/|zarr3:").read()

            def ts_read():
                out["t"] = ts.open({"driver": "zarr3",
                                    "kvstore": {"driver": "file", "path": tdir + "/"}}
                                   ).result().read().result()

            cache = lambda: drop_caches([root])  # noqa: E731
            r = interleaved_medians({"cairn": (cairn_read, cache), "ts": (ts_read, cache)},
                                    args.repeat)
            c_r, t_r = r["cairn"], r["ts"]
            if not (out["c"].view(np.uint16) == data.view(np.uint16)).all() or \
               not (out["t"].view(np.uint16) == data.view(np.uint16)).all():
                raise SystemExit(f"{name}: read back differs from what was written")
            stored = sum(os.path.getsize(os.path.join(dp, f))
                         for dp, _, fs in os.walk(cdir) for f in fs)
            for op, c, t, dev in (("write", c_w, t_w, dev_w), ("read", c_r, t_r, dev_r)):
                cg, tg = nbytes / c / GB, nbytes / t / GB
                table.append([name, op, f"{stored / nbytes:.3f}", f"{cg:.2f}", f"{tg:.2f}",
                              f"{cg / tg:.2f}", f"{cg / dev:.2f}"])
        print_table(["codec", "op", "stored/raw", "cairn GB/s", "tensorstore GB/s",
                     "cairn/ts", "cairn/device"], table)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    with results("zarr_bench"):
        main()
