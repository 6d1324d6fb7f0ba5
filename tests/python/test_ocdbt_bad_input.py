"""Corrupt OCDBT input: every case is cairn.CorruptDataError (DataLoss) whose
message names the object and what is wrong with it, never a crash, a hang
or an unbounded allocation. Each must-fail case has a control beside it (the
same crafted database without the defect) that cairn, and where it applies
TensorStore, reads, so each error comes from the defect under test.
"""

from __future__ import annotations

import os
import pathlib
import struct
import subprocess
import sys

import pytest
import tensorstore as ts

import cairn
from ocdbt_helpers import (BTREE_MAGIC, VERSION_MAGIC, cairn_open, config_bytes, crc32c, envelope,
                           leaf_node_bytes, manifest_bytes, table_bytes, ts_commit, ts_open,
                           ts_read_all, varint)

NODE = "d/00000000000000000000000000000001"
NODE_AT = r"b\+tree node d/0+1@\[\d+,\+\d+\)"  # how errors name the node


def _read_everything(path, version=None):
    db = cairn_open(path, version=version)
    return {k: db.get(k) for k in db.keys()}


def _write(path, manifest: bytes, files: dict[str, bytes]):
    os.makedirs(path / "d", exist_ok=True)
    (path / "manifest.ocdbt").write_bytes(manifest)
    for name, data in files.items():
        (path / name).write_bytes(data)


def _crafted(path, *, ref_len=None, base="", root_height=0, cfg=None, version_nodes=b"\x00",
             generation=1, extra_files=None):
    node = leaf_node_bytes([("a", b"abc"), ("b/c", b"")])
    length = len(node) if ref_len is None else ref_len
    m = manifest_bytes([(generation, root_height, 0, 0, length, 2, 1_700_000_000_000_000_000)],
                       [(base, NODE)], version_nodes, cfg)
    files = {NODE: node}
    files.update(extra_files or {})
    _write(path, m, files)
    return m, node


def test_crafted_control_is_valid_for_both(tmp_path):
    _crafted(tmp_path)
    assert _read_everything(tmp_path) == {"a": b"abc", "b/c": b""}
    store = ts_open(tmp_path)
    assert store.read("a").result().value == b"abc"
    assert [k for k in store.list().result()] == [b"a", b"b/c"]


@pytest.mark.parametrize("config", [{}, {"compression": None}])
def test_every_truncation_of_a_manifest(tmp_path, config):
    src = tmp_path / "src"
    store = ts_open(src, config)
    ts_commit(store, {f"k{i}": bytes([i]) * (i * 40) for i in range(6)})
    ts_commit(store, {"k1": None, "z": b"zz"})
    good = (src / "manifest.ocdbt").read_bytes()
    assert len(_read_everything(src)) == 6
    for n in range(len(good)):
        (src / "manifest.ocdbt").write_bytes(good[:n])
        with pytest.raises(cairn.CorruptDataError, match=r"manifest\.ocdbt.*(shorter than the 16-byte|length field|crc32c mismatch)"):
            _read_everything(src)
    # Every flipped bit-pattern of every byte position is caught too.
    for i in range(len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x5A
        (src / "manifest.ocdbt").write_bytes(bytes(bad))
        with pytest.raises(cairn.CorruptDataError, match=r"manifest\.ocdbt.*(crc32c mismatch|magic 0x|length field)"):
            _read_everything(src)


def test_every_truncation_of_a_node(tmp_path):
    _, node = _crafted(tmp_path)
    for n in range(len(node)):
        # The manifest's reference says n bytes: the envelope length disagrees.
        _crafted(tmp_path / f"ref{n}", ref_len=n)
        with pytest.raises(cairn.CorruptDataError, match=NODE_AT + r".*(shorter than the 16-byte|length field \d+ != object size)"):
            _read_everything(tmp_path / f"ref{n}")
        # The file itself is cut: the reference reaches past its end.
        (tmp_path / NODE).write_bytes(node[:n])
        with pytest.raises(cairn.CorruptDataError, match=NODE + r".*outside the data file"):
            _read_everything(tmp_path)


def test_flipped_bytes_in_a_node(tmp_path):
    _, node = _crafted(tmp_path)
    for i in range(len(node)):
        bad = bytearray(node)
        bad[i] ^= 0xFF
        (tmp_path / NODE).write_bytes(bytes(bad))
        with pytest.raises(cairn.CorruptDataError, match=NODE_AT + r".*(crc32c mismatch|magic 0x|length field)"):
            _read_everything(tmp_path)


def test_reference_past_the_end_of_its_file(tmp_path):
    _, node = _crafted(tmp_path, ref_len=None)
    m = manifest_bytes([(1, 0, 0, 10, len(node), 2, 1)], [("", NODE)])
    (tmp_path / "manifest.ocdbt").write_bytes(m)
    with pytest.raises(cairn.CorruptDataError, match=NODE + r".*outside the data file"):
        _read_everything(tmp_path)
    # Offset + length overflowing 2^63 is rejected before any read.
    m = manifest_bytes([(1, 0, 0, (1 << 63) - 5, 100, 2, 1)], [("", NODE)])
    (tmp_path / "manifest.ocdbt").write_bytes(m)
    with pytest.raises(cairn.CorruptDataError, match=r"manifest\.ocdbt.*data reference offset"):
        _read_everything(tmp_path)


@pytest.mark.parametrize("base, legal", [
    ("sub/", True), ("a/b/", True), ("", True),
    ("../", False), ("x/../", False), ("ABSOLUTE", False), ("a/./", False), ("./", False),
])
def test_base_path_escaping_the_root(tmp_path, base, legal):
    """The node file is written where the base path resolves to, so a read
    that followed the base path would succeed: only the path check rejects
    the illegal ones, and the legal ones (the controls) read."""
    db = tmp_path / "db"
    if base == "ABSOLUTE":
        base = f"{db}/"  # an absolute path to the database itself
    _crafted(db, base=base)
    node = (db / NODE).read_bytes()
    target = pathlib.Path(os.path.normpath(os.path.join(db, base, NODE)))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(node)
    if legal:
        assert _read_everything(db) == {"a": b"abc", "b/c": b""}
        return
    with pytest.raises(cairn.CorruptDataError,
                       match=r"data file 0: path `.*` is absolute or has a `\.` or `\.\.` "
                             r"component"):
        _read_everything(db)


def test_impossible_btree_height(tmp_path):
    _crafted(tmp_path, root_height=200)
    with pytest.raises(cairn.CorruptDataError, match=r"b\+tree node d/[0-9a-f]+@\[0,\+\d+\): height 0, expected 200"):
        _read_everything(tmp_path)


VFILE = "d/000000000000000000000000000000ff"


def _version_leaf(generations=range(1, 17), arity_log2=4) -> bytes:
    """A height-0 version-tree node: each generation's root is the leaf NODE."""
    node_len = len(leaf_node_bytes([("a", b"abc")]))
    gens = list(generations)
    body = bytes([arity_log2, 0]) + table_bytes([("", NODE)]) + varint(len(gens))
    body += b"".join(varint(g) for g in gens)
    body += bytes(len(gens))  # root heights
    body += b"".join(varint(0) for _ in gens)  # file index
    body += b"".join(varint(0) for _ in gens)  # offset
    body += b"".join(varint(node_len) for _ in gens)
    body += b"".join(varint(1) for _ in gens)  # num_keys
    body += b"".join(varint(node_len) for _ in gens)  # num_tree_bytes
    body += b"".join(varint(0) for _ in gens)  # num_indirect_value_bytes
    body += b"".join(struct.pack("<Q", g) for g in gens)  # commit times
    return envelope(VERSION_MAGIC, body)


def _version_interior(child_offset, child_len, gen=16, arity_log2=4):
    """A height-1 version-tree node with one child in VFILE."""
    body = bytes([arity_log2, 1]) + table_bytes([("", VFILE)])
    body += varint(1) + varint(gen) + varint(0) + varint(child_offset) + varint(child_len)
    body += varint(gen) + struct.pack("<Q", 16)
    return envelope(VERSION_MAGIC, body)


def _version_tree_db(path, interior: bytes, leaf: bytes):
    """Generation 17 inline in the manifest; 1..16 behind `interior`, at
    offset 0 of VFILE, followed by `leaf`."""
    node = leaf_node_bytes([("a", b"abc")])
    versions = (varint(1) + varint(17) + bytes([0]) + varint(0) + varint(0) + varint(len(node)) +
                varint(1) + varint(len(node)) + varint(0) + struct.pack("<Q", 17))
    vn = (varint(1) + varint(16) + varint(1) + varint(0) + varint(len(interior)) + varint(16) +
          struct.pack("<Q", 16) + bytes([1]))
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE), ("", VFILE)]) + versions +
                 vn)
    _write(path, m, {NODE: node, VFILE: interior + leaf})


def _self_length_interior():
    length = 40
    for _ in range(5):
        length = len(_version_interior(0, length))
    vnode = _version_interior(0, length)
    assert len(vnode) == length
    return vnode


def test_version_tree_cycle(tmp_path):
    leaf = _version_leaf()
    # Control: the height-1 node's child is the real leaf right after it.
    offset = 40
    for _ in range(5):  # the leaf sits right after the interior node
        good = _version_interior(offset, len(leaf))
        offset = len(good)
    assert len(_version_interior(offset, len(leaf))) == offset
    _version_tree_db(tmp_path / "good", good, leaf)
    for gen in (1, 5, 16, 17):
        assert _read_everything(tmp_path / "good", version=gen) == {"a": b"abc"}, gen
    # Must fail: the height-1 node at offset 0 names itself as its child.
    _version_tree_db(tmp_path / "cycle", _self_length_interior(), leaf)
    assert _read_everything(tmp_path / "cycle") == {"a": b"abc"}  # generation 17 is inline
    with pytest.raises(cairn.CorruptDataError,
                       match=r"version tree node d/0+ff@\[0,\+\d+\): height 1, expected 0"):
        _read_everything(tmp_path / "cycle", version=5)


def test_impossible_version_node_height(tmp_path):
    node = leaf_node_bytes([("a", b"abc")])
    versions = (varint(1) + varint(17) + bytes([0]) + varint(0) + varint(0) + varint(len(node)) +
                varint(1) + varint(len(node)) + varint(0) + struct.pack("<Q", 2))
    vn = (varint(1) + varint(16) + varint(0) + varint(0) + varint(len(node)) + varint(16) +
          struct.pack("<Q", 1) + bytes([60]))  # height 60 > 63/4 - 1
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + versions + vn)
    _write(tmp_path, m, {NODE: node})
    with pytest.raises(cairn.CorruptDataError, match=r"manifest\.ocdbt.*height 60 is outside"):
        _read_everything(tmp_path)


def test_varint_longer_than_10_bytes(tmp_path):
    node = leaf_node_bytes([("a", b"abc")])
    eleven = b"\x81" + b"\x80" * 9 + b"\x00"  # value 1, but 11 bytes
    versions = (varint(1) + eleven + bytes([0]) + varint(0) + varint(0) + varint(len(node)) +
                varint(1) + varint(len(node)) + varint(0) + struct.pack("<Q", 2))
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + versions + b"\x00")
    _write(tmp_path, m, {NODE: node})
    with pytest.raises(cairn.CorruptDataError, match=r"manifest\.ocdbt.*generation"):
        _read_everything(tmp_path)
    # The same manifest with the canonical 1-byte varint is valid.
    versions = versions.replace(eleven, varint(1))
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + versions + b"\x00")
    _write(tmp_path, m, {NODE: node})
    assert _read_everything(tmp_path) == {"a": b"abc"}


_MEASURE = """
import resource, sys, time
import cairn
for path in sys.argv[1:]:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        db = cairn.kvstore.open({"driver": "ocdbt", "base": "file://" + path + "/"})
        {k: db.get(k) for k in db.keys()}
        outcome = "ok"
    except Exception as e:
        outcome = type(e).__name__ + ": " + str(e).replace("\\n", " ")
    took = time.perf_counter() - start
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(took, grew_kib, outcome, sep="\\t")
"""


def _read_in_subprocess(*paths):
    """Reads each database in turn in one fresh process; per database:
    (seconds, KiB of peak memory growth, "ok" or "<exception>: <message>")."""
    out = subprocess.run([sys.executable, "-c", _MEASURE] + [str(p) for p in paths],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    results = []
    for line in out.stdout.strip().split("\n"):
        took, grew, outcome = line.split("\t", 2)
        results.append((float(took), int(grew), outcome))
    assert len(results) == len(paths), out.stdout
    return results if len(paths) > 1 else results[0]


def _versions(count: int, complete: int) -> bytes:
    """A manifest versions block claiming `count` versions with the columns
    of `complete` of them present."""
    node_len = len(leaf_node_bytes([("a", b"abc")]))
    n = range(complete)
    return (varint(count) + b"".join(varint(i + 1) for i in n) + bytes(complete) +
            b"".join(varint(0) for _ in n) + b"".join(varint(0) for _ in n) +
            b"".join(varint(node_len) for _ in n) + b"".join(varint(1) for _ in n) +
            b"".join(varint(node_len) for _ in n) + b"".join(varint(0) for _ in n) +
            b"".join(struct.pack("<Q", i + 1) for i in n))


@pytest.mark.parametrize("count", [1 << 60, 1 << 32, 100000, 2])
def test_huge_counts_fail_fast(tmp_path, count):
    """A count the rest of the manifest cannot hold fails before anything is
    allocated for it: in milliseconds and without memory growth."""
    node = leaf_node_bytes([("a", b"abc")])
    # Control: the same manifest with a count of 1 and its one version.
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + _versions(1, 1) +
                 b"\x00")
    _write(tmp_path / "control", m, {NODE: node})
    # The versions count.
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + _versions(count, 1) +
                 b"\x00")
    _write(tmp_path / "versions", m, {NODE: node})
    # The data file table count.
    m = envelope(0x0CDB3A2A, config_bytes() + varint(count) + table_bytes([("", NODE)])[1:] +
                 _versions(1, 1) + b"\x00")
    _write(tmp_path / "table", m, {NODE: node})
    control, versions, table = _read_in_subprocess(tmp_path / "control", tmp_path / "versions",
                                                   tmp_path / "table")
    assert control[2] == "ok"
    for (took, grew, outcome), what in ((versions, "versions"), (table, "data file")):
        assert outcome.startswith("CorruptDataError: "), outcome
        assert "manifest.ocdbt" in outcome and what in outcome, outcome
        assert took < 1.0 and grew < 32 << 10, (took, grew)


# ---- Small input, huge work ------------------------------------------------

def _zstd_envelope(magic: int, body: bytes) -> bytes:
    from numcodecs import Zstd
    frame = Zstd(level=1).encode(body)
    head = struct.pack(">I", magic)
    rest = varint(0) + varint(1) + bytes(frame)
    data = head + struct.pack("<Q", 4 + 8 + len(rest) + 4) + rest
    return data + struct.pack("<I", crc32c(data))


def test_node_decoding_past_the_limit_is_rejected(tmp_path):
    """A 64 MiB node body compresses to a few KB; the database says nodes are
    at most 8 MiB, so the read stops at the limit instead of decoding it."""
    good_body = leaf_node_bytes([("a", b"abc")])[14:-4]  # the raw body of a valid leaf
    small = _zstd_envelope(BTREE_MAGIC, good_body)
    bomb = _zstd_envelope(BTREE_MAGIC, good_body + bytes(64 << 20))
    assert len(bomb) < 64 << 10
    for name, node in (("small", small), ("bomb", bomb)):
        m = manifest_bytes([(1, 0, 0, 0, len(node), 1, 1)], [("", NODE)])
        _write(tmp_path / name, m, {NODE: node})
    # Control: the compressed valid leaf reads, in cairn and in TensorStore.
    assert _read_everything(tmp_path / "small") == {"a": b"abc"}
    assert ts_open(tmp_path / "small").read("a").result().value == b"abc"
    took, grew, outcome = _read_in_subprocess(tmp_path / "bomb")
    assert outcome.startswith("CorruptDataError: "), outcome
    assert f"b+tree node {NODE}@[0,+{len(bomb)})" in outcome, outcome
    assert "over the limit of" in outcome, outcome
    assert took < 1.0 and grew < 48 << 10, (took, grew)


def _interior_node_bytes(entries, files) -> bytes:
    """A height-1 B+tree node; entries: (key, subtree_common_prefix_length,
    file_index, offset, length, num_keys); no key prefix compression."""
    body = b"\x01" + table_bytes(files) + varint(len(entries))
    body += b"".join(varint(0) for _ in entries[1:])
    body += b"".join(varint(len(e[0])) for e in entries)
    body += b"".join(varint(e[1]) for e in entries)
    body += b"".join(e[0].encode() for e in entries)
    for column in (2, 3, 4, 5, 4):
        body += b"".join(varint(e[column]) for e in entries)
    body += b"".join(varint(0) for _ in entries)
    return envelope(BTREE_MAGIC, body)


def _shared_child_db(path, fanout: int, shared: bool):
    """Root entries "00".."ff"[:fanout], each giving its key to the child's
    prefix, over leaves of two keys: with `shared` all point at ONE leaf."""
    leaf = leaf_node_bytes([("k1", b"v1"), ("k2", b"v2")])
    copies = 1 if shared else fanout
    entries = [(f"{i:02x}", 2, 0, 0 if shared else i * len(leaf), len(leaf), 2)
               for i in range(fanout)]
    root = _interior_node_bytes(entries, [("", NODE)])
    m = manifest_bytes([(1, 1, 0, copies * len(leaf), len(root), 2 * fanout, 1)], [("", NODE)])
    _write(path, m, {NODE: leaf * copies + root})


def test_child_reached_twice_is_rejected(tmp_path):
    # Control: 200 distinct leaves list 400 keys, in cairn and TensorStore.
    _shared_child_db(tmp_path / "distinct", 200, shared=False)
    want = {f"{i:02x}k{j}": f"v{j}".encode() for i in range(200) for j in (1, 2)}
    assert _read_everything(tmp_path / "distinct") == want
    assert ts_read_all(ts_open(tmp_path / "distinct")) == want
    # 200 entries over one leaf: listing would multiply the leaf per entry
    # (and per level, 256^height); cairn refuses the second visit.
    _shared_child_db(tmp_path / "shared", 200, shared=True)
    db = cairn_open(tmp_path / "shared")
    with pytest.raises(cairn.CorruptDataError, match=r"b\+tree node d/0+1@\[0,\+\d+\) is "
                                                     r"referenced twice in one tree"):
        db.keys()
    with pytest.raises(cairn.CorruptDataError, match="referenced twice"):
        db.get_many(["00k1", "01k1"])
    # A lookup along one path never meets the repetition.
    assert db.get("05k2") == b"v2"
    assert db.keys("07") == ["07k1", "07k2"]
