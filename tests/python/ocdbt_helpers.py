"""Helpers for the OCDBT interop tests: writing and reading databases with
TensorStore (the reference, from PyPI) and with cairn, plus a tiny OCDBT
envelope/manifest encoder used to build corrupt inputs.

tensorstore is imported unconditionally: without it these tests fail.
"""

from __future__ import annotations

import hashlib
import os
import struct

import tensorstore as ts

import cairn

# TensorStore configs the interop tests cover (the `config` member of an
# ocdbt spec).
CONFIGS = {
    "default": {},
    "tiny_nodes": {"max_decoded_node_bytes": 300},
    "inline_0": {"max_inline_value_bytes": 0},
    "inline_1024": {"max_inline_value_bytes": 1024},
    "uncompressed": {"compression": None},
    "zstd_19_arity_1": {"compression": {"id": "zstd", "level": 19}, "version_tree_arity_log2": 1},
    "orbax": {"max_inline_value_bytes": 1024, "max_decoded_node_bytes": 100000000},
    "numbered_manifests": {"manifest_kind": "numbered"},
}


def value(key: str, size: int) -> bytes:
    """Deterministic, incompressible-ish bytes for `key`."""
    seed = hashlib.sha256(key.encode()).digest()
    reps = size // len(seed) + 1
    raw = bytearray((seed * reps)[:size])
    for i in range(0, size, 4099):
        raw[i] = (i * 31 + len(key)) & 0xFF
    return bytes(raw)


def mixed_values(n: int, prefix: str = "k", sizes=(0, 1, 50, 100, 101, 1023, 1024, 1025, 5000, 70000)):
    return {f"{prefix}/{i:05d}": value(f"{prefix}{i}", sizes[i % len(sizes)]) for i in range(n)}


def ts_spec(path, config=None, version=None, **extra) -> dict:
    spec = {"driver": "ocdbt", "base": f"file://{path}/"}
    if config is not None:
        spec["config"] = config
    if version is not None:
        spec["version"] = version
    spec.update(extra)
    return spec


def ts_open(path, config=None, version=None, **extra) -> ts.KvStore:
    return ts.KvStore.open(ts_spec(path, config, version, **extra)).result()


def ts_commit(store: ts.KvStore, items: dict) -> None:
    """Writes `items` (None deletes) as ONE TensorStore transaction."""
    txn = ts.Transaction()
    futures = []
    for k, v in items.items():
        if v is None:
            futures.append(store.with_transaction(txn).delete_range(ts.KvStore.KeyRange(k, k + "\0")))
        else:
            futures.append(store.with_transaction(txn).write(k, v))
    for f in futures:
        f.result()
    txn.commit_async().result()


def ts_read_all(store: ts.KvStore) -> dict:
    keys = [k.decode() for k in store.list().result()]
    futures = {k: store.read(k) for k in keys}
    return {k: f.result().value for k, f in futures.items()}


def cairn_open(path, config=None, version=None, **extra):
    spec = {"driver": "ocdbt", "base": f"file://{path}/"}
    if config is not None:
        spec["config"] = config
    if version is not None:
        spec["version"] = version
    spec.update(extra)
    return cairn.kvstore.open(spec)


def cairn_read_all(store) -> dict:
    keys = store.keys()
    return {k: store.get(k) for k in keys}


def data_files(path) -> list[str]:
    out = []
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            if "/d/" in full + "/" and not f.startswith("manifest"):
                out.append(full)
    return sorted(out)


# ---- A minimal OCDBT encoder (uncompressed), for crafting corrupt input ----

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


MANIFEST_MAGIC = 0x0CDB3A2A
BTREE_MAGIC = 0x0CDB20DE
VERSION_MAGIC = 0x0CDB1234


def envelope(magic: int, body: bytes) -> bytes:
    """An uncompressed envelope (format version 0, compression 0) with CRC."""
    head = struct.pack(">I", magic)
    rest = varint(0) + varint(0) + body
    length = 4 + 8 + len(rest) + 4
    data = head + struct.pack("<Q", length) + rest
    return data + struct.pack("<I", crc32c(data))


def config_bytes(max_inline=100, max_node=8388608, arity_log2=4) -> bytes:
    return (bytes(16) + b"\x00" + varint(max_inline) + varint(max_node) + bytes([arity_log2]) +
            varint(0))


def table_bytes(paths: list[tuple[str, str]]) -> bytes:
    """A data file table without prefix compression: (base_path, relative_path)."""
    out = varint(len(paths))
    full = [b.encode() + r.encode() for b, r in paths]
    for _ in paths[1:]:
        out += varint(0)
    for f in full:
        out += varint(len(f))
    for b, _ in paths:
        out += varint(len(b.encode()))
    for f in full:
        out += f
    return out


def manifest_bytes(versions, files, version_nodes=b"\x00", cfg=None) -> bytes:
    """versions: list of (generation, root_height, file_index, offset, length,
    num_keys, commit_time); `files` the table entries."""
    body = cfg if cfg is not None else config_bytes()
    body += table_bytes(files)
    n = len(versions)
    body += varint(n)
    body += b"".join(varint(v[0]) for v in versions)
    body += bytes(v[1] for v in versions)
    body += b"".join(varint(v[2]) for v in versions)
    body += b"".join(varint(v[3]) for v in versions)
    body += b"".join(varint(v[4]) for v in versions)
    body += b"".join(varint(v[5]) for v in versions)  # num_keys
    body += b"".join(varint(v[4]) for v in versions)  # num_tree_bytes
    body += b"".join(varint(0) for v in versions)  # num_indirect_value_bytes
    body += b"".join(struct.pack("<Q", v[6]) for v in versions)
    body += version_nodes
    return envelope(MANIFEST_MAGIC, body)


def leaf_node_bytes(entries: list[tuple[str, bytes]]) -> bytes:
    """A height-0 B+tree node with inline values, no prefix compression."""
    body = b"\x00" + table_bytes([]) + varint(len(entries))
    body += b"".join(varint(0) for _ in entries[1:])
    body += b"".join(varint(len(k.encode())) for k, _ in entries)
    body += b"".join(k.encode() for k, _ in entries)
    body += b"".join(varint(len(v)) for _, v in entries)
    body += bytes(len(entries))  # all inline
    body += b"".join(v for _, v in entries)
    return envelope(BTREE_MAGIC, body)


# ---- Multi-process writes and merged roots ----

ORBAX_CONFIG = {"max_inline_value_bytes": 1024, "max_decoded_node_bytes": 100000000}
ARRAY_SHAPE = (64, 48)
ARRAY_CHUNKS = (16, 48)


def expected_array():
    import numpy as np
    return (np.arange(ARRAY_SHAPE[0] * ARRAY_SHAPE[1], dtype=np.float32)
            .reshape(ARRAY_SHAPE) * 0.5 - 7)


def process_blob(i: int) -> bytes:
    return value(f"blob{i}", (3 << 20) + i * 4097)


def write_process_database(item_dir: str, i: int, n: int) -> None:
    """What process `i` of `n` does in a multi-host save: writes its rows of
    params.w (zarr3) and its own raw values into `<item>/ocdbt.process_<i>/`
    through cairn. Only process 0 keeps the array metadata."""
    db = f"file://{item_dir}/ocdbt.process_{i}/"
    spec = {"driver": "ocdbt", "base": db, "config": ORBAX_CONFIG}
    store = cairn.kvstore.open(spec)  # creates the database with Orbax's config
    store.put_many({f"raw/p{i}/blob": process_blob(i), f"raw/p{i}/small": f"small {i}".encode()})
    arr = cairn.create(f"{db}|ocdbt:params.w/|zarr3:", shape=list(ARRAY_SHAPE), dtype="float32",
                       chunks=list(ARRAY_CHUNKS))
    rows = ARRAY_SHAPE[0] // n
    arr.write(expected_array()[i * rows:(i + 1) * rows], origin=[i * rows, 0])
    if i != 0:
        store.delete("params.w/zarr.json")


def leaf_entries(path) -> dict:
    """key -> value description of every leaf entry of the latest root, from
    TensorStore's own dump (so base paths show as TensorStore resolves them)."""
    base = ts.KvStore.open(f"file://{path}/").result()
    manifest = ts.ocdbt.dump(base).result()
    out = {}

    def walk(location):
        node = ts.ocdbt.dump(base, location).result()
        for e in node["entries"]:
            key = e["key"].decode() if isinstance(e["key"], bytes) else e["key"]
            if "indirect_value" in e:
                out[key] = e["indirect_value"]
            elif "inline_value" in e:
                out[key] = e["inline_value"]
            else:
                child = [v for v in _strings(e) if v.startswith("btreenode:")]
                assert len(child) == 1, e
                walk(child[0])

    root = manifest["versions"][-1]["root"]
    if "location" in root:
        walk(root["location"])
    return out


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
