"""Corrupt OCDBT input: every case is CorruptDataError (DataLoss) or
ValueError (InvalidArgument) from cairn, never a crash or an unbounded
allocation. Crafted databases are first checked valid (TensorStore and cairn
read the uncorrupted control), so each error comes from the corruption.
"""

from __future__ import annotations

import os
import struct

import pytest
import tensorstore as ts

import cairn
from ocdbt_helpers import (VERSION_MAGIC, cairn_open, config_bytes, envelope, leaf_node_bytes,
                           manifest_bytes, table_bytes, ts_commit, ts_open, varint)

BAD = (cairn.CorruptDataError, ValueError)
NODE = "d/00000000000000000000000000000001"


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
        with pytest.raises(BAD):
            _read_everything(src)
    # Every flipped bit-pattern of every byte position is caught too.
    for i in range(len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x5A
        (src / "manifest.ocdbt").write_bytes(bytes(bad))
        with pytest.raises(BAD):
            _read_everything(src)


def test_every_truncation_of_a_node(tmp_path):
    _, node = _crafted(tmp_path)
    for n in range(len(node)):
        # The manifest's reference says n bytes: the envelope length disagrees.
        _crafted(tmp_path / f"ref{n}", ref_len=n)
        with pytest.raises(BAD):
            _read_everything(tmp_path / f"ref{n}")
        # The file itself is cut: the reference reaches past its end.
        (tmp_path / NODE).write_bytes(node[:n])
        with pytest.raises(BAD):
            _read_everything(tmp_path)


def test_flipped_bytes_in_a_node(tmp_path):
    _, node = _crafted(tmp_path)
    for i in range(len(node)):
        bad = bytearray(node)
        bad[i] ^= 0xFF
        (tmp_path / NODE).write_bytes(bytes(bad))
        with pytest.raises(BAD):
            _read_everything(tmp_path)


def test_reference_past_the_end_of_its_file(tmp_path):
    _, node = _crafted(tmp_path, ref_len=None)
    m = manifest_bytes([(1, 0, 0, 10, len(node), 2, 1)], [("", NODE)])
    (tmp_path / "manifest.ocdbt").write_bytes(m)
    with pytest.raises(BAD, match="outside|past|short|ended"):
        _read_everything(tmp_path)
    # Offset + length overflowing 2^63 is rejected before any read.
    m = manifest_bytes([(1, 0, 0, (1 << 63) - 5, 100, 2, 1)], [("", NODE)])
    (tmp_path / "manifest.ocdbt").write_bytes(m)
    with pytest.raises(BAD):
        _read_everything(tmp_path)


@pytest.mark.parametrize("base", ["../", "x/../", "/abs/", "a/./"])
def test_base_path_escaping_the_root(tmp_path, base):
    _crafted(tmp_path, base=base)
    with pytest.raises(BAD):
        _read_everything(tmp_path)


def test_impossible_btree_height(tmp_path):
    _crafted(tmp_path, root_height=200)
    with pytest.raises(BAD, match="height"):
        _read_everything(tmp_path)


def _version_node(child_offset, child_len, height=1, gen=16, arity_log2=4):
    body = bytes([arity_log2, height]) + varint(1) + varint(0) + varint(len(NODE)) + varint(0)
    body += NODE.encode()
    body += varint(1) + varint(gen) + varint(0) + varint(child_offset) + varint(child_len)
    body += varint(gen) + struct.pack("<Q", 1)
    return envelope(VERSION_MAGIC, body)


def test_version_tree_cycle(tmp_path):
    # A height-1 version node at offset 0 of its file whose only child is itself.
    length = 40
    for _ in range(5):
        vnode = _version_node(0, length)
        length = len(vnode)
    vnode = _version_node(0, length)
    assert len(vnode) == length
    vfile = "d/000000000000000000000000000000ff"
    node = leaf_node_bytes([("a", b"abc")])
    # Generation 17 inline; generations 1..16 behind the cyclic node.
    cfg = config_bytes()
    versions = (varint(1) + varint(17) + bytes([0]) + varint(0) + varint(0) + varint(len(node)) +
                varint(1) + varint(len(node)) + varint(0) + struct.pack("<Q", 2))
    vn = (varint(1) + varint(16) + varint(1) + varint(0) + varint(length) + varint(16) +
          struct.pack("<Q", 1) + bytes([1]))
    m = envelope(0x0CDB3A2A, cfg + table_bytes([("", NODE), ("", vfile)]) + versions + vn)
    _write(tmp_path, m, {NODE: node, vfile: vnode})
    assert _read_everything(tmp_path) == {"a": b"abc"}  # the latest generation is fine
    with pytest.raises(BAD):
        _read_everything(tmp_path, version=5)


def test_impossible_version_node_height(tmp_path):
    node = leaf_node_bytes([("a", b"abc")])
    versions = (varint(1) + varint(17) + bytes([0]) + varint(0) + varint(0) + varint(len(node)) +
                varint(1) + varint(len(node)) + varint(0) + struct.pack("<Q", 2))
    vn = (varint(1) + varint(16) + varint(0) + varint(0) + varint(len(node)) + varint(16) +
          struct.pack("<Q", 1) + bytes([60]))  # height 60 > 63/4 - 1
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + versions + vn)
    _write(tmp_path, m, {NODE: node})
    with pytest.raises(BAD):
        _read_everything(tmp_path)


def test_varint_longer_than_10_bytes(tmp_path):
    node = leaf_node_bytes([("a", b"abc")])
    eleven = b"\x81" + b"\x80" * 9 + b"\x00"  # value 1, but 11 bytes
    versions = (varint(1) + eleven + bytes([0]) + varint(0) + varint(0) + varint(len(node)) +
                varint(1) + varint(len(node)) + varint(0) + struct.pack("<Q", 2))
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + versions + b"\x00")
    _write(tmp_path, m, {NODE: node})
    with pytest.raises(BAD):
        _read_everything(tmp_path)
    # The same manifest with the canonical 1-byte varint is valid.
    versions = versions.replace(eleven, varint(1))
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + versions + b"\x00")
    _write(tmp_path, m, {NODE: node})
    assert _read_everything(tmp_path) == {"a": b"abc"}


@pytest.mark.parametrize("count", [1 << 60, 1 << 32, 100000])
def test_huge_counts_fail_fast(tmp_path, count):
    node = leaf_node_bytes([("a", b"abc")])
    m = envelope(0x0CDB3A2A, config_bytes() + table_bytes([("", NODE)]) + varint(count) + b"\x01")
    _write(tmp_path, m, {NODE: node})
    with pytest.raises(BAD):
        _read_everything(tmp_path)
    m = envelope(0x0CDB3A2A, config_bytes() + varint(count) + b"\x01\x02")
    _write(tmp_path, m, {NODE: node})
    with pytest.raises(BAD):
        _read_everything(tmp_path)
