"""OCDBT interop, both directions, against the real tensorstore from PyPI.

TensorStore-written databases (several configs, many keys, several
generations, values of 0 bytes to 100 MiB) read bit-exactly by cairn;
cairn-written databases (same variety, several commits each) read
bit-exactly by TensorStore, including older generations.
"""

from __future__ import annotations

import os

import pytest
import tensorstore as ts

import cairn
from ocdbt_helpers import (CONFIGS, cairn_open, cairn_read_all, data_files, mixed_values,
                           ts_commit, ts_open, ts_read_all, value)


def _generations(n_keys: int):
    """Three commits: initial values, overwrites + new keys, deletes."""
    g1 = mixed_values(n_keys)
    g2 = {k: value(k + "v2", len(v) + 7) for k, v in list(g1.items())[::3]}
    g2.update(mixed_values(max(1, n_keys // 4), prefix="new"))
    g3 = {k: None for k in list(g1)[1::5]}
    return [g1, g2, g3]


def _apply(model: dict, items: dict) -> dict:
    out = dict(model)
    for k, v in items.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cairn_reads_tensorstore_databases(tmp_path, name):
    config = CONFIGS[name]
    n = 2000 if name in ("default", "tiny_nodes") else 300
    store = ts_open(tmp_path, config)
    models = []
    model: dict = {}
    for items in _generations(n):
        ts_commit(store, items)
        model = _apply(model, items)
        models.append(model)
    # Latest generation.
    db = cairn_open(tmp_path)
    got = cairn_read_all(db)
    assert got.keys() == models[-1].keys()
    for k, v in models[-1].items():
        assert got[k] == v, k
    assert dict(db.list()) == {k: len(v) for k, v in models[-1].items()}
    # Batched reads agree.
    keys = sorted(models[-1])[::7] + ["absent/key"]
    many = db._core.get_many(keys)
    assert many[-1] is None
    assert many[:-1] == [models[-1][k] for k in keys[:-1]]
    # Every generation, compared with TensorStore's own read of it (its
    # database starts with an empty generation 1); each model is one of them.
    latest = db._core.latest_generation
    seen = []
    for gen in range(1, latest + 1):
        mine = cairn_read_all(cairn_open(tmp_path, version=gen))
        assert mine == ts_read_all(ts_open(tmp_path, version=gen)), f"generation {gen}"
        seen.append(mine)
    for i, m in enumerate(models):
        assert m in seen, f"commit {i + 1}"
    # The config TensorStore stored is the one cairn reports.
    stored = ts.ocdbt.dump(ts.KvStore.open(f"file://{tmp_path}/").result()).result()["config"]
    assert db._core.config["max_inline_value_bytes"] == stored["max_inline_value_bytes"]
    assert db._core.config["max_decoded_node_bytes"] == stored["max_decoded_node_bytes"]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_tensorstore_reads_cairn_databases(tmp_path, name):
    config = CONFIGS[name]
    n = 2000 if name in ("default", "tiny_nodes") else 300
    db = cairn_open(tmp_path, config)
    models = []
    model: dict = {}
    for items in _generations(n):
        db.put_many(items)
        model = _apply(model, items)
        models.append(model)
    assert db._core.latest_generation == len(models)
    store = ts_open(tmp_path)
    got = ts_read_all(store)
    assert got == models[-1]
    for gen, m in enumerate(models, start=1):
        assert ts_read_all(ts_open(tmp_path, version=gen)) == m, f"generation {gen}"
    dump = ts.ocdbt.dump(ts.KvStore.open(f"file://{tmp_path}/").result()).result()
    for field, want in config.items():
        if field == "compression" and want is None:
            assert dump["config"].get("compression") is None
        elif field == "manifest_kind":
            numbered = sorted(p.name for p in tmp_path.glob("manifest.0*"))
            assert numbered[-1] == f"manifest.{len(models):016x}", numbered
        elif field != "compression":
            assert dump["config"][field] == want, field
    # TensorStore can keep writing on top of what cairn wrote, and cairn reads it.
    ts_commit(store, {"after/ts": b"tensorstore wrote this", "k/00000": None})
    after = _apply(models[-1], {"after/ts": b"tensorstore wrote this", "k/00000": None})
    assert cairn_read_all(cairn_open(tmp_path)) == after


def test_many_generations_version_tree(tmp_path):
    """40 commits with arity 1: a deep version tree both ways."""
    db = cairn_open(tmp_path / "c", {"version_tree_arity_log2": 1})
    tstore = ts_open(tmp_path / "t", {"version_tree_arity_log2": 1})
    for g in range(1, 41):
        db.put(f"key{g}", f"version {g}".encode())
        ts_commit(tstore, {f"key{g}": f"version {g}".encode()})
    for g in (1, 2, 7, 16, 17, 31, 40):
        want = {f"key{i}": f"version {i}".encode() for i in range(1, g + 1)}
        assert ts_read_all(ts_open(tmp_path / "c", version=g)) == want
        # TensorStore's generation 1 is its empty initial one.
        assert cairn_read_all(cairn_open(tmp_path / "t", version=g + 1)) == want
    # A generation that does not exist is NotFound, as in TensorStore.
    with pytest.raises(FileNotFoundError, match="generation 41"):
        cairn_open(tmp_path / "c", version=41).keys()
    with pytest.raises(ValueError, match="NOT_FOUND"):
        ts_read_all(ts_open(tmp_path / "c", version=41))


def test_large_values_and_empty_value(tmp_path):
    """0 bytes to 100 MiB, one commit each way (the 100 MiB case is the only one)."""
    sizes = {"zero": 0, "one": 1, "mib": 1 << 20, "odd": (3 << 20) + 17, "big": 100 << 20}
    items = {k: value(k, s) for k, s in sizes.items()}
    db = cairn_open(tmp_path / "c", {"max_inline_value_bytes": 1024},
                    target_data_file_size=64 << 20)
    db.put_many(items)
    # Rolled over: more than one data file, none past the target except the single big value.
    files = data_files(tmp_path / "c")
    assert len(files) >= 2
    assert max(os.path.getsize(f) for f in files) >= 100 << 20
    got = ts_read_all(ts_open(tmp_path / "c"))
    assert got.keys() == items.keys()
    for k in items:
        assert got[k] == items[k], k
    tstore = ts_open(tmp_path / "t", {"max_inline_value_bytes": 1024})
    ts_commit(tstore, items)
    back = cairn_open(tmp_path / "t")
    for k in items:
        assert back.get(k) == items[k], k
    assert back.get("big", 50 << 20, (50 << 20) + 10) == items["big"][50 << 20:(50 << 20) + 10]


def test_spec_config_mismatch_and_bad_spec(tmp_path):
    db = cairn_open(tmp_path, {"max_inline_value_bytes": 5})
    db.put("a", b"123456")
    with pytest.raises(ValueError, match="does not match"):
        cairn_open(tmp_path, {"max_inline_value_bytes": 6}).keys()
    assert cairn_open(tmp_path, {"max_inline_value_bytes": 5}).get("a") == b"123456"
    with pytest.raises(ValueError, match='OCDBT spec: unknown member "bogus"'):
        cairn.kvstore.open({"driver": "ocdbt", "base": f"file://{tmp_path}/", "bogus": 1})
    with pytest.raises(ValueError, match="OCDBT spec: `version` generation numbers start at 1"):
        cairn.kvstore.open({"driver": "ocdbt", "base": f"file://{tmp_path}/", "version": 0})
    old = cairn_open(tmp_path, version=1)
    with pytest.raises(RuntimeError, match=r"opened at generation 1 \(read-only\)"):
        old.put("b", b"x")


def test_url_and_spec_open_the_same_database(tmp_path):
    ts_commit(ts_open(tmp_path), {"params.w/c/0": b"abc", "params.w/zarr.json": b"{}"})
    by_url = cairn.kvstore.open(f"file://{tmp_path}/|ocdbt:")
    by_spec = cairn_open(tmp_path)
    sub = cairn.kvstore.open({"driver": "ocdbt", "base": {"driver": "file", "path": str(tmp_path) + "/"},
                              "path": "params.w/"})
    assert by_url.list() == by_spec.list()
    assert sub.keys() == ["c/0", "zarr.json"]
    assert sub.get("c/0") == b"abc"
