"""No flipped byte is ever restored: every chunk cairn writes carries a
checksum its readers verify (issue 25).

- Compressed chunks: zstd frames with their content checksum.
- Uncompressed zarr3 chunks: the `crc32c` codec, which TensorStore (and so
  Orbax) verifies too.
- Uncompressed zarr2 chunks (zarr v2 has no checksum codec TensorStore
  reads): zstd frames of raw blocks, not compressed, with the content
  checksum; the `.zarray` says zstd.

One byte is flipped inside a stored chunk of an array (found by its bytes),
on a local disk and in S3 / GCS emulators; then `cairn.restore`,
`cairn.convert` and `cairn verify` must refuse it, naming the array, and
TensorStore must refuse it as well. Before the flip, Orbax and TensorStore
read cairn's uncompressed checkpoints bit-exactly.
"""

from __future__ import annotations

import json
import os
import pathlib
import re

import numpy as np
import pytest
import tensorstore as ts

import cairn
from conftest import assert_bit_exact
from test_cli import run_cli
from test_object_store_checkpoints import ObjectStore, fake_gcs, moto, store  # noqa: F401 (fixtures)


def tree():
    rng = np.random.default_rng(25)
    return {"w": rng.standard_normal((64, 96)).astype(np.float32),
            "b": np.arange(48, dtype=np.int32)}


def flip_in_files(root: pathlib.Path, needle: bytes) -> list:
    """Flips one bit inside `needle` in every file below `root` holding it."""
    changed = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = bytearray(path.read_bytes())
        at = data.find(needle)
        if at < 0:
            continue
        data[at + 7] ^= 0x20
        path.write_bytes(bytes(data))
        changed.append(path)
    return changed


def ts_read_item(item_url_or_kv, name, ocdbt: bool, zarr3: bool = True):
    base = item_url_or_kv if isinstance(item_url_or_kv, dict) else {"driver": "file",
                                                                      "path": str(item_url_or_kv) + "/"}
    kv = {"driver": "ocdbt", "base": base} if ocdbt else base
    spec = {"driver": "zarr3" if zarr3 else "zarr", "kvstore": kv, "path": name}
    return ts.open(spec, open=True).result().read().result()


@pytest.mark.parametrize("use_zarr3", [True, False], ids=["zarr3", "zarr2"])
@pytest.mark.parametrize("use_ocdbt", [True, False], ids=["ocdbt", "files"])
def test_uncompressed_chunks_carry_a_checksum_that_orbax_and_tensorstore_read(tmp_path, use_ocdbt, use_zarr3):
    import orbax.checkpoint as ocp

    item = tmp_path / "item"
    t = tree()
    cairn.save(str(item), t, compression="none", use_ocdbt=use_ocdbt, use_zarr3=use_zarr3)
    restored = ocp.PyTreeCheckpointer().restore(str(item))
    for k in t:
        assert_bit_exact(np.asarray(restored[k]), t[k])
        assert_bit_exact(ts_read_item(item, k, use_ocdbt, use_zarr3), t[k])
    if use_ocdbt:
        return
    if use_zarr3:
        md = json.loads((item / "w" / "zarr.json").read_text())
        inner = md["codecs"][0]["configuration"]["codecs"]
        assert [c["name"] for c in inner] == ["bytes", "crc32c"], inner
    else:
        # What TensorStore accepts (no cairn-only members), and chunk files
        # that are the elements in raw blocks: 18 bytes of frame, 3 per block.
        md = json.loads((item / "w" / ".zarray").read_text())
        assert md["compressor"] == {"id": "zstd", "level": 1}, md
        chunk = (item / "w" / "0.0").read_bytes()
        assert len(chunk) == t["w"].nbytes + 18 + 3 * -(-t["w"].nbytes // (128 << 10))
        assert t["w"].tobytes()[:1000] in chunk


@pytest.mark.parametrize("compression,use_zarr3", [("none", True), ("default", True), ("none", False)],
                         ids=["none-zarr3", "default-zarr3", "none-zarr2"])
@pytest.mark.parametrize("use_ocdbt", [True, False], ids=["ocdbt", "files"])
def test_a_flipped_byte_is_refused_by_restore_convert_verify_and_tensorstore(tmp_path, compression, use_zarr3,
                                                                             use_ocdbt):
    item = tmp_path / "ckpt" / "3" / "state"
    t = tree()
    cairn.save(str(item), t, compression=compression, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3)
    if compression == "none":
        assert flip_in_files(item, t["w"][10].tobytes()), "the chunk's bytes are stored as they are"
    else:
        # `w`'s zstd frame is the largest file (a data file or a chunk file).
        largest = max((f for f in item.rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
        data = bytearray(largest.read_bytes())
        assert len(data) > 10_000, largest
        data[len(data) // 2] ^= 0x20
        largest.write_bytes(bytes(data))

    with pytest.raises(cairn.CorruptDataError, match=r"restoring `w` of .*: reading key `(state/)?w/(c/0/0|0\.0)`"):
        cairn.restore(str(item))
    # The other array is still whole.
    assert_bit_exact(np.asarray(cairn.restore(str(item), partial_restore=True,
                                              target={"b": np.zeros(48, np.int32)})["b"]), t["b"])

    r = run_cli("verify", str(item))
    assert r.returncode != 0, r.stdout + r.stderr
    assert "corrupt_chunk: array `w`" in r.stdout, r.stdout

    with pytest.raises(cairn.CorruptDataError, match=r"array `w` of Orbax item .*: reading key `w/(c/0/0|0\.0)`"):
        cairn.convert(str(item), str(tmp_path / "out.safetensors"), to="safetensors")

    # TensorStore names the chunk and what failed: the crc32c codec of an
    # uncompressed zarr3 chunk, the zstd frame checksum otherwise.
    key = "w/c/0/0" if use_zarr3 else "w/0.0"
    failure = ("Digest mismatch" if compression == "none" and use_zarr3
               else "ZSTD_decompressStream() failed: Restored data doesn't match checksum")
    with pytest.raises(ValueError, match=rf'Error reading .*{re.escape(key)}".*: {re.escape(failure)}'):
        ts_read_item(item, "w", use_ocdbt, use_zarr3)


def test_a_flipped_byte_in_an_object_store_is_refused(store):  # noqa: F811 (fixture)
    p = store.fresh("crc")
    t = tree()
    cairn.save(store.url(p + "/5/state"), t, compression="none")
    kv = ts.KvStore.open(store.ts_kv(p)).result()
    needle = t["w"][10].tobytes()
    flipped = 0
    for key in kv.list().result():
        value = kv.read(key).result().value
        at = value.find(needle)
        if at < 0:
            continue
        data = bytearray(value)
        data[at + 7] ^= 0x20
        kv.write(key, bytes(data)).result()
        flipped += 1
    assert flipped == 1

    with pytest.raises(cairn.CorruptDataError, match=r"`w`.*crc32c mismatch"):
        cairn.restore(store.url(p + "/5/state"))
    r = run_cli("verify", store.url(p + "/5/state"), env=dict(os.environ))
    assert r.returncode != 0, r.stdout + r.stderr
    assert "corrupt_chunk: array `w`" in r.stdout, r.stdout
