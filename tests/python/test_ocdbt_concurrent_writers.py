"""Concurrent writers on one single-manifest OCDBT database.

Every `cairn.kvstore.open` builds its own store object, so two stores in one
process, two processes, or cairn beside TensorStore commit independently;
each commit replaces `manifest.ocdbt` only if it still is the manifest the
commit was built on (a conditional write under `manifest.ocdbt.__lock`, the
lock TensorStore's file driver takes), and redoes the commit on top of the
winner otherwise. After the race every acknowledged key must be readable by
cairn and by TensorStore. Also: TensorStore reads a database that it wrote
and cairn extended, bit for bit.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import threading

import tensorstore as ts

import cairn
from ocdbt_helpers import (cairn_open, cairn_read_all, mixed_values, ts_commit, ts_open,
                           ts_read_all, value)

HERE = pathlib.Path(__file__).parent


def _batch(writer: str, b: int, keys: int = 3) -> dict:
    # Mixed sizes: inline values and values in data files.
    return {f"{writer}/b{b:03d}/k{i}": value(f"{writer}{b}{i}", (0, 7, 300, 5000)[i % 4])
            for i in range(keys)}


def _expect_everything(path, want: dict) -> None:
    mine = cairn_read_all(cairn_open(path))
    assert mine.keys() == want.keys(), sorted(set(want) ^ set(mine))[:10]
    assert mine == want
    theirs = ts_read_all(ts_open(path))
    assert theirs.keys() == want.keys(), sorted(set(want) ^ set(theirs))[:10]
    assert theirs == want
    assert not (pathlib.Path(path) / "manifest.ocdbt.__lock").exists()


def _race(writers: dict) -> dict:
    """Runs each writer (name -> callable(b) -> dict it acknowledged) for
    several batches in its own thread; returns everything acknowledged."""
    acknowledged: dict = {}
    errors: list = []
    lock = threading.Lock()

    def run(fn):
        try:
            for b in range(12):
                items = fn(b)
                with lock:
                    acknowledged.update(items)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(fn,)) for fn in writers.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    return acknowledged


def test_two_stores_in_one_process_lose_no_commit(tmp_path):
    stores = [cairn_open(tmp_path) for _ in range(2)]

    def writer(store, name):
        def fn(b):
            items = _batch(name, b)
            store.put_many(items)
            return items
        return fn

    want = _race({f"s{i}t{t}": writer(stores[i], f"s{i}t{t}") for i in range(2) for t in range(2)})
    assert len(want) == 4 * 12 * 3
    _expect_everything(tmp_path, want)
    # Every batch was its own generation: 48 commits, none overwritten.
    assert cairn_open(tmp_path).latest_generation == 48
    # The latest generation's predecessors are intact too (TensorStore reads
    # an old generation cairn wrote under contention).
    assert len(ts_read_all(ts_open(tmp_path, version=10))) == 10 * 3


_CHILD = """
import sys
sys.path.insert(0, {here!r})
from test_ocdbt_concurrent_writers import _batch
from ocdbt_helpers import cairn_open
db = cairn_open({path!r})
for b in range(15):
    db.put_many(_batch("p{i}", b))
    print("ack", b, flush=True)
"""


def test_two_processes_lose_no_commit(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c",
                               _CHILD.format(here=str(HERE), path=str(tmp_path), i=i)],
                              cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for i in range(3)]
    want = {}
    for i, p in enumerate(procs):
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out.decode()
        acks = [line for line in out.decode().splitlines() if line.startswith("ack")]
        assert len(acks) == 15, out.decode()
        for b in range(15):
            want.update(_batch(f"p{i}", b))
    _expect_everything(tmp_path, want)
    assert cairn_open(tmp_path).latest_generation == 45


def test_cairn_beside_tensorstore_lose_no_commit(tmp_path):
    # TensorStore creates the database (its config, its uuid).
    ts_commit(ts_open(tmp_path), {"created/by": b"tensorstore"})
    cairn_store = cairn_open(tmp_path)
    ts_store = ts_open(tmp_path)

    def by_cairn(b):
        items = _batch("cairn", b)
        cairn_store.put_many(items)
        return items

    def by_tensorstore(b):
        items = _batch("ts", b)
        ts_commit(ts_store, items)  # one transaction = one commit
        return items

    want = _race({"cairn": by_cairn, "tensorstore": by_tensorstore})
    want["created/by"] = b"tensorstore"
    _expect_everything(tmp_path, want)
    # TensorStore's empty first generation, its first commit, then at least
    # one generation per batch of each writer (TensorStore may add empty ones).
    assert cairn_open(tmp_path).latest_generation >= 2 + 2 * 12


def test_tensorstore_reads_a_database_cairn_extended(tmp_path):
    config = {"max_decoded_node_bytes": 400, "version_tree_arity_log2": 1}
    first = mixed_values(30, "ts")
    ts_store = ts_open(tmp_path, config)
    ts_commit(ts_store, first)
    # TensorStore may add an empty generation after a commit: note where
    # `first` landed instead of assuming it is the one before the latest.
    g_first = cairn_open(tmp_path).latest_generation
    ts_commit(ts_store, {"ts/00001": None, "ts/extra": b"x" * 3000})
    model_2 = dict(first)
    del model_2["ts/00001"]
    model_2["ts/extra"] = b"x" * 3000
    # cairn extends it: several generations of adds, overwrites and deletes.
    db = cairn_open(tmp_path)
    assert db.config["max_decoded_node_bytes"] == 400  # TensorStore's config is kept
    g0 = db.latest_generation  # TensorStore's (its empty first one included)
    models = {g0: dict(model_2)}
    model = dict(model_2)
    for g in range(3, 8):
        items = mixed_values(12, f"cairn{g}")
        items[f"ts/{g:05d}"] = value(f"overwritten{g}", 2000)
        db.put_many(items)  # one generation
        model.update(items)
        models[max(models) + 1] = dict(model)
        db.delete(f"ts/{g + 10:05d}")  # another
        del model[f"ts/{g + 10:05d}"]
        models[max(models) + 1] = dict(model)
    assert db.latest_generation == g0 + 10 == max(models)
    # TensorStore reads the latest generation and every older one (its own
    # and cairn's) exactly; and it can keep writing after cairn.
    for gen, want in models.items():
        assert ts_read_all(ts_open(tmp_path, version=gen)) == want, f"generation {gen}"
    assert ts_read_all(ts_open(tmp_path)) == model
    ts_commit(ts_open(tmp_path), {"after/cairn": b"ts again"})
    model["after/cairn"] = b"ts again"
    assert cairn_read_all(cairn_open(tmp_path)) == model
    assert ts_read_all(ts_open(tmp_path)) == model
    # Control: the untouched generations still read the same in cairn.
    assert cairn_read_all(cairn_open(tmp_path, version=g0)) == model_2
    assert ts_read_all(ts_open(tmp_path, version=g_first)) == first
