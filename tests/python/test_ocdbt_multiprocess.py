"""Multi-process OCDBT: per-process databases merged under one root.

4 real processes each write their own `ocdbt.process_<i>/` database through
cairn; cairn merges them and TensorStore reads through the root. TensorStore
builds a root with `experimental_copy_range_to`; cairn reads it, and cairn's
merge of the same children has exactly the same leaf entries.
"""

from __future__ import annotations

import os
import shutil
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorstore as ts

import cairn
from ocdbt_helpers import (ORBAX_CONFIG, cairn_open, cairn_read_all, expected_array, leaf_entries,
                           process_blob, ts_commit, ts_open, ts_read_all, value)

HERE = pathlib.Path(__file__).parent


def _dir_bytes(path) -> int:
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


def test_four_processes_merged_by_cairn_read_by_tensorstore(tmp_path):
    item = tmp_path / "state"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c",
             f"import ocdbt_helpers; ocdbt_helpers.write_process_database({str(item)!r}, {i}, 4)"],
            cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for i in range(4)
    ]
    pids = {p.pid for p in procs}
    assert len(pids) == 4
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out.decode()
    children_bytes = _dir_bytes(item)

    cairn.kvstore.merge_ocdbt(f"file://{item}/", config=ORBAX_CONFIG)

    # No value bytes were copied: the root's own files are small.
    root_own = sum(f.stat().st_size for f in item.glob("d/*")) + (item / "manifest.ocdbt").stat().st_size
    assert root_own < 64 << 10
    assert children_bytes > 4 * (3 << 20)
    # TensorStore reads the array and the raw values through the root.
    t = ts.open(f"file://{item}/|ocdbt:params.w/|zarr3:").result()
    np.testing.assert_array_equal(t.read().result(), expected_array())
    root = ts_open(item)
    for i in range(4):
        assert root.read(f"raw/p{i}/blob").result().value == process_blob(i)
        assert root.read(f"raw/p{i}/small").result().value == f"small {i}".encode()
    # Out-of-line values point into the children with their base paths.
    entries = leaf_entries(item)
    for i in range(4):
        assert entries[f"raw/p{i}/blob"].startswith(f"value:ocdbt.process_{i}/:d/")
        assert entries[f"params.w/c/{i}/0"].startswith(f"value:ocdbt.process_{i}/:d/")
    assert entries["raw/p0/small"] == b"small 0"  # inline stays inline
    # cairn reads the root the same way, and each child is still valid alone.
    mine = cairn_read_all(cairn_open(item))
    assert mine == ts_read_all(root)
    assert cairn_open(item / "ocdbt.process_2").get("raw/p2/small") == b"small 2"
    np.testing.assert_array_equal(cairn.open(f"file://{item}/|ocdbt:params.w/|zarr3:").read(),
                                  expected_array())


def _ts_children(item, n, ctx):
    want = {}
    for i in range(n):
        child = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{item}/ocdbt.process_{i}/",
                                 "config": ORBAX_CONFIG}, context=ctx).result()
        items = {f"arr/c/{i}/{j}": value(f"{i}.{j}", 100 + 700 * j) for j in range(6)}
        items[f"arr{i}/zarr.json"] = b'{"zarr_format":3}'
        ts_commit(child, items)
        want.update(items)
    return want


def test_tensorstore_copy_range_to_root_read_by_cairn(tmp_path):
    ctx = ts.Context()
    item = tmp_path / "state"
    want = _ts_children(item, 3, ctx)
    parent = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{item}/",
                              "config": ORBAX_CONFIG}, context=ctx).result()
    txn = ts.Transaction()
    for i in range(3):
        child = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{item}/ocdbt.process_{i}/"},
                                context=ctx).result()
        child.experimental_copy_range_to(parent.with_transaction(txn)).result()
    txn.commit_async().result()
    got = cairn_read_all(cairn_open(item))
    assert got == want
    ts_structure = leaf_entries(item)
    assert any(isinstance(v, str) and v.startswith("value:ocdbt.process_1/:d/")
               for v in ts_structure.values())

    # cairn's merge of the same children into another root dir gives the same
    # leaf entries (same keys, same inline bytes, same child references).
    other = tmp_path / "state2"
    os.makedirs(other)
    for i in range(3):  # copies: the file store follows no symlinks below its root
        shutil.copytree(item / f"ocdbt.process_{i}", other / f"ocdbt.process_{i}")
    cairn.kvstore.merge_ocdbt(f"file://{other}/", [f"ocdbt.process_{i}" for i in range(3)],
                            ORBAX_CONFIG)
    assert leaf_entries(other) == ts_structure
    assert ts_read_all(ts_open(other)) == want


def test_merge_collision_names_key_and_children(tmp_path):
    item = tmp_path / "state"
    cairn_open(item / "ocdbt.process_0").put_many({"a": b"1", "dup/key": b"x" * 2000})
    cairn_open(item / "ocdbt.process_7").put_many({"dup/key": b"2"})
    with pytest.raises(RuntimeError, match=r"dup/key.*ocdbt\.process_0/.*ocdbt\.process_7/"):
        cairn.kvstore.merge_ocdbt(f"file://{item}/")
    assert not (item / "manifest.ocdbt").exists()


@pytest.mark.parametrize("fmt", ["zarr3", "zarr2"])
def test_arrays_inside_ocdbt_both_ways(tmp_path, fmt):
    import ml_dtypes
    values = (np.arange(40 * 30, dtype=np.float32).reshape(40, 30) / 3).astype(ml_dtypes.bfloat16)
    dtype = "bfloat16"
    # cairn writes, TensorStore reads.
    url = f"file://{tmp_path}/db/|ocdbt:params.w/|{fmt}:"
    a = cairn.create(url, shape=[40, 30], dtype=dtype, chunks=[16, 16])
    a.write(values)
    t = ts.open(url).result()
    np.testing.assert_array_equal(t.read().result().view(np.uint16), values.view(np.uint16))
    # TensorStore writes, cairn reads (in the same database, another array).
    url2 = f"file://{tmp_path}/db/|ocdbt:params.b/|{fmt}:"
    t2 = ts.open(url2, create=True, dtype=ts.bfloat16, shape=[40, 30],
                 chunk_layout=ts.ChunkLayout(chunk_shape=[8, 30])).result()
    t2.write(values).result()
    got = cairn.open(url2).read()
    np.testing.assert_array_equal(got.view(np.uint16), values.view(np.uint16))
    keys = cairn_open(tmp_path / "db").keys()
    meta = "zarr.json" if fmt == "zarr3" else ".zarray"
    assert f"params.w/{meta}" in keys and f"params.b/{meta}" in keys
