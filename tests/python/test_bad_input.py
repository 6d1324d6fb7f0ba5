"""Corrupt or inconsistent stored arrays and bad arguments raise the mapped
Python exception, naming the key and the URL, in-process (a crash fails the
whole suite)."""

import json
import struct

import google_crc32c
import numpy as np
import pytest

import cairn
from conftest import cairn_url, random_array, ts_write_array, v2_metadata, v3_metadata

BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}


def written(tmp_path, codecs, driver="zarr3", shape=(8, 8), chunks=(4, 8)):
    if driver == "zarr3":
        md = v3_metadata("uint16", shape, chunks, codecs=codecs)
    else:
        md = v2_metadata("<u2", shape, chunks, compressor=codecs)
    ts_write_array(tmp_path, driver, md, random_array("uint16", shape, seed=21))
    return cairn_url(tmp_path, driver)


def expect_error(exc_type, url, key, fn):
    with pytest.raises(exc_type) as info:
        fn()
    message = str(info.value)
    assert key in message, message
    assert url.split("|")[0].rstrip("/") in message, message
    return info.value


@pytest.mark.parametrize("codecs", [
    [BYTES_LE],
    [BYTES_LE, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
    [BYTES_LE, {"name": "gzip", "configuration": {"level": 6}}],
    [BYTES_LE, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                   "shuffle": "shuffle", "typesize": 2,
                                                   "blocksize": 0}}],
    [BYTES_LE, {"name": "crc32c"}],
], ids=["bytes", "zstd", "gzip", "blosc", "crc32c"])
def test_truncated_chunk(tmp_path, codecs):
    url = written(tmp_path, codecs)
    chunk = tmp_path / "c" / "1" / "0"
    data = chunk.read_bytes()
    chunk.write_bytes(data[: len(data) // 2])
    a = cairn.open(url)
    err = expect_error(cairn.CorruptDataError, url, "c/1/0", a.read)
    assert isinstance(err, OSError)
    # The intact chunk still reads.
    assert a.read(origin=[0, 0], shape=[4, 8]).shape == (4, 8)


@pytest.mark.parametrize("compressor", [{"id": "zstd", "level": 1}, {"id": "zlib", "level": 1},
                                        {"id": "blosc", "cname": "lz4", "clevel": 5,
                                         "shuffle": 1, "blocksize": 0}, None],
                         ids=["zstd", "zlib", "blosc", "none"])
def test_truncated_v2_chunk(tmp_path, compressor):
    url = written(tmp_path, compressor, driver="zarr")
    chunk = tmp_path / "1.0"
    chunk.write_bytes(chunk.read_bytes()[:-3])
    expect_error(cairn.CorruptDataError, url, "1.0", cairn.open(url).read)


def test_flipped_byte_under_crc32c(tmp_path):
    url = written(tmp_path, [BYTES_LE, {"name": "crc32c"}])
    chunk = tmp_path / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[5] ^= 0x10
    chunk.write_bytes(bytes(data))
    expect_error(cairn.CorruptDataError, url, "c/0/0", cairn.open(url).read)


SHARDED = [{"name": "sharding_indexed", "configuration": {
    "chunk_shape": [2, 4], "codecs": [BYTES_LE],
    "index_codecs": [BYTES_LE, {"name": "crc32c"}]}}]


def rewrite_index(path, edit):
    """Decodes the shard index at the end of `path`, applies `edit` to the
    (n, 2) uint64 array, and re-encodes it with a valid crc32c."""
    data = path.read_bytes()
    n = 4  # (4/2) * (8/4) inner chunks
    index_bytes = data[-(16 * n + 4):-4]
    index = np.frombuffer(index_bytes, "<u8").reshape(n, 2).copy()
    edit(index, len(data))
    raw = index.astype("<u8").tobytes()
    path.write_bytes(data[:-(16 * n + 4)] + raw + struct.pack("<I", google_crc32c.value(raw)))


def test_shard_index_past_the_end(tmp_path):
    url = written(tmp_path, SHARDED)
    shard = tmp_path / "c" / "0" / "0"

    def past_end(index, size):
        index[1, 0] = size + 100
    rewrite_index(shard, past_end)
    expect_error(cairn.CorruptDataError, url, "c/0/0", cairn.open(url).read)


def test_shard_index_length_overflows(tmp_path):
    url = written(tmp_path, SHARDED)
    shard = tmp_path / "c" / "1" / "0"

    def overflow(index, size):
        index[2] = [8, 2**64 - 8]
    rewrite_index(shard, overflow)
    expect_error(cairn.CorruptDataError, url, "c/1/0", cairn.open(url).read)


def test_shard_index_bad_checksum(tmp_path):
    url = written(tmp_path, SHARDED)
    shard = tmp_path / "c" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[-10] ^= 1
    shard.write_bytes(bytes(data))
    expect_error(cairn.CorruptDataError, url, "c/0/0", cairn.open(url).read)


def edit_zarr_json(tmp_path, edit):
    p = tmp_path / "zarr.json"
    md = json.loads(p.read_text())
    edit(md)
    p.write_text(json.dumps(md))


# Each edit and a fragment of the message it must produce. The fragments are
# checked against the message with the array's directory cut out: the
# directory holds the test id, which repeats words such as "chunk" or
# "shape", so a bare `what in str(err)` could not fail.
@pytest.mark.parametrize("edit,what", [
    (lambda md: md["codecs"].append({"name": "no_such_codec"}),
     "unknown codec `no_such_codec`"),
    (lambda md: md["chunk_grid"]["configuration"].update(chunk_shape=[4, 8, 1]),
     "chunk_grid.chunk_shape: rank 3 does not match the rank 2 of the shape"),
    (lambda md: md.update(shape=[8]),
     "chunk_grid.chunk_shape: rank 2 does not match the rank 1 of the shape"),
    (lambda md: md.update(data_type="float31"), "unknown data type `float31`"),
    (lambda md: md["codecs"].insert(0, {"name": "transpose",
                                        "configuration": {"order": [0, 0]}}),
     "transpose codec: order [0,0] is not a permutation"),
    (lambda md: md.update(zarr_format=4), "zarr_format: expected 3, got 4"),
    (lambda md: md.update(node_type="group"), 'node_type: expected "array", got "group"'),
    (lambda md: md.update(fill_value="banana"),
     'fill_value: expected an integer in the range [0, 65535], got "banana"'),
], ids=["unknown_codec", "chunk_rank", "shape_rank", "data_type", "transpose_order",
        "zarr_format", "group", "fill_value"])
def test_bad_zarr_json(tmp_path, edit, what):
    url = written(tmp_path, [BYTES_LE])
    assert cairn.open(url).shape == (8, 8)  # control: the unedited metadata opens
    edit_zarr_json(tmp_path, edit)
    err = expect_error(ValueError, url, "zarr.json", lambda: cairn.open(url))
    message = str(err).replace(str(tmp_path), "<dir>")
    assert str(tmp_path) not in message and what in message, message


def test_bad_zarr_json_check_ignores_the_directory(tmp_path):
    """The check above looks past the directory: a word that only the test's
    directory contains is not found in the message."""
    word = "only_in_the_directory"
    d = tmp_path / word
    url = written(d, [BYTES_LE])
    edit_zarr_json(d, lambda md: md.update(zarr_format=4))
    err = expect_error(ValueError, url, "zarr.json", lambda: cairn.open(url))
    assert word in str(err)  # the directory is in the message...
    assert word not in str(err).replace(str(d), "<dir>")  # ...and cut out before checking


def test_sharding_shape_not_dividing(tmp_path):
    url = written(tmp_path, SHARDED)
    edit_zarr_json(tmp_path, lambda md: md["codecs"][0]["configuration"].update(
        chunk_shape=[3, 4]))
    expect_error(ValueError, url, "zarr.json", lambda: cairn.open(url))


def test_metadata_not_json(tmp_path):
    url = written(tmp_path, [BYTES_LE])
    (tmp_path / "zarr.json").write_text('{"zarr_format": 3, ')
    expect_error(ValueError, url, "zarr.json", lambda: cairn.open(url))


def test_missing_array(tmp_path):
    url = cairn_url(tmp_path / "nothing", "zarr3")
    expect_error(FileNotFoundError, url, "nothing", lambda: cairn.open(url))
    expect_error(FileNotFoundError, f"file://{tmp_path}/nothing/", "nothing",
                 lambda: cairn.open(f"file://{tmp_path}/nothing/"))


def test_create_existing(tmp_path):
    url = written(tmp_path, [BYTES_LE])
    expect_error(FileExistsError, url, str(tmp_path),
                 lambda: cairn.create(url, shape=[2], dtype="uint8"))
    # overwrite=True replaces the metadata.
    a = cairn.create(url, shape=[2], dtype="uint8", overwrite=True)
    assert a.shape == (2,) and a.dtype == np.uint8


def test_write_dtype_mismatch(tmp_path):
    url = written(tmp_path, [BYTES_LE])
    a = cairn.open(url)
    for values in [np.zeros((2, 2), np.int16), np.zeros((2, 2), np.float16),
                   np.zeros((2, 2), ">i2")]:
        expect_error(ValueError, url, "uint16", lambda: a.write(values))


def test_out_of_bounds_and_rank(tmp_path):
    url = written(tmp_path, [BYTES_LE])
    a = cairn.open(url)
    expect_error(ValueError, url, str(tmp_path), lambda: a.read(origin=[6, 0], shape=[4, 8]))
    expect_error(ValueError, url, str(tmp_path),
                 lambda: a.write(np.zeros((3, 3), np.uint16), origin=[6, 6]))
    expect_error(ValueError, url, str(tmp_path), lambda: a.write(np.zeros(3, np.uint16)))
    expect_error(ValueError, url, str(tmp_path), lambda: a.read(origin=[0]))


def test_bad_urls():
    for url, why in [("file:///tmp/x/|zarr3:|zarr3:", "the driver part `zarr3:` must be the last part"),
                     ("zarr3:", "the driver part `zarr3:` needs a kvstore before it"),
                     ("nosuchscheme://x/|zarr3:", "unknown kvstore scheme `nosuchscheme`"),
                     ("file:///tmp/|zarr3:a?b", "query strings are not supported")]:
        with pytest.raises(ValueError) as info:
            cairn.open(url)
        assert f"`{url}`" in str(info.value) and why in str(info.value), str(info.value)
    with pytest.raises(ValueError, match=r"creating array memory://bad_urls/: say the format with a `\|zarr3:`"):
        cairn.create("memory://bad_urls/", shape=[2], dtype="uint8")


def test_a_path_or_key_with_a_nul_is_refused_naming_it_whole(tmp_path):
    """The unsafe-path error shows the whole path, the NUL escaped as \\x00,
    not the part before the NUL."""
    with pytest.raises(ValueError) as e:
        cairn.save(str(tmp_path / "ck\x00pt-tail"), {"a": np.zeros(4, np.float32)})
    message = str(e.value)
    assert "ck\\x00pt-tail" in message and "NUL byte" in message, message
    assert "\x00" not in message
    with pytest.raises(ValueError) as e:
        cairn.save(str(tmp_path / "ok"), {"w\x00evil": np.zeros(4, np.float32)})
    message = str(e.value)
    assert "w\\x00evil" in message and "NUL byte" in message, message
    assert not (tmp_path / "ok" / "w").exists()
