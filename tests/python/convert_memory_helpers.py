"""Large, compressible checkpoints for the converter's memory tests and bench.

`write_axlearn_source` writes an AXLearn regular step (`step_%08d/index` and
one Zarr v2 + zstd array per tensor under `gda/`) with cairn's own zarr
writer, one chunk at a time from generated values, so a checkpoint of many
GiB costs the writing process one chunk of memory and the disk a few
percent of its size: every row is a 64-element cycle (256 bytes) that zstd
shrinks ~100x, but no two rows are equal, so a chunk copied to the wrong
place or a row shifted by one is caught by `expected`.

Element (r, c) of array number `k` holds the bits
    (r * 2654435761 + k * 40503) mod 2**32  XOR  (c mod 64)
as float32: any bit pattern (NaNs too), so comparisons are on bits.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import cairn

MiB = 1 << 20
GiB = 1 << 30
COLS = 8192           # float32 columns: 32 KiB rows
CHUNK_ROWS = 256      # 8 MiB chunks


def expected(k: int, r0: int, r1: int, c0: int = 0, c1: int = COLS, out=None) -> np.ndarray:
    """The uint32 bits of rows [r0, r1), columns [c0, c1) of array `k` (into
    `out` when given). uint32 arithmetic wraps, which is the mod 2**32; it
    makes a 64 MiB chunk in tens of milliseconds where uint64 took seconds."""
    rows = np.arange(r0, r1, dtype=np.uint32) * np.uint32(2654435761) + np.uint32(k * 40503 % (1 << 32))
    cols = np.arange(c0, c1, dtype=np.uint32) % np.uint32(64)
    return np.bitwise_xor(rows[:, None], cols[None, :], out=out)


def array_rows(nbytes: int) -> int:
    return nbytes // (COLS * 4)


def write_axlearn_source(root, step: int, sizes: list[int],
                         chunk_rows: int = CHUNK_ROWS) -> list[tuple[str, tuple[int, int]]]:
    """Writes arrays `a0`, `a1`, ... of the given byte sizes (multiples of
    one chunk of `chunk_rows` rows) as an AXLearn step under `root`; returns
    [(path, shape)]."""
    step_dir = os.path.join(os.fspath(root), f"step_{step:08d}")
    out = []
    for k, nbytes in enumerate(sizes):
        rows = array_rows(nbytes)
        assert rows % chunk_rows == 0 and rows * COLS * 4 == nbytes, nbytes
        path = f"a{k}"
        url = "file://" + os.path.join(step_dir, "gda", path) + "/|zarr2:"
        arr = cairn.create(url, {"zarr_format": 2, "compressor": {"id": "zstd", "level": 1},
                                 "fill_value": 0.0, "order": "C", "filters": None},
                           shape=(rows, COLS), dtype=np.float32, chunks=(chunk_rows, COLS))
        # Two writers, each generating into its own chunk buffer: cairn's
        # write releases the GIL, so generating and compressing overlap.
        def write_rows(first, buf, k=k, arr=arr, rows=rows):
            for r0 in range(first * chunk_rows, rows, 2 * chunk_rows):
                expected(k, r0, r0 + chunk_rows, out=buf)
                arr.write(buf.view(np.float32), origin=(r0, 0))
        with ThreadPoolExecutor(2) as pool:
            for f in [pool.submit(write_rows, 0, np.empty((chunk_rows, COLS), np.uint32)),
                      pool.submit(write_rows, 1, np.empty((chunk_rows, COLS), np.uint32))]:
                f.result()
        out.append((path, (rows, COLS)))
    index = [["step", step]] + [[p, {"dtype": "float32", "shape": f"({s[0]}, {s[1]})"}]
                                for p, s in sorted(out)]
    with open(os.path.join(step_dir, "index"), "w") as f:
        json.dump(index, f)
    return out


def sample_rows(rows: int) -> list[int]:
    """A few rows to compare: the first, the last, chunk edges, the middle."""
    picks = {0, 1, CHUNK_ROWS - 1, CHUNK_ROWS, rows // 2 - 1, rows // 2, rows - CHUNK_ROWS, rows - 1}
    return sorted(r for r in picks if 0 <= r < rows)
