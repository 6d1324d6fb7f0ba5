"""TensorStore writes, cairn reads: every dtype, codec chain, v2 compressor,
order, rank and fill value, compared byte for byte with TensorStore's own
read of the same stored array (missing chunks included)."""

import numpy as np
import pytest

import cairn
from conftest import (ALL_DTYPES, FLOAT_DTYPES, assert_bit_exact, cairn_url, np_dtype,
                      random_array, stored_json, sub_box, ts_read, ts_write_array,
                      v2_metadata, v2_typestr, v3_metadata)


def check_cairn_reads(path, driver, written, origin):
    a = cairn.open(cairn_url(path, driver))
    expected = ts_read(path, driver)
    assert a.shape == expected.shape
    assert a.dtype == expected.dtype
    assert a.metadata == stored_json(path)
    whole = a.read()
    assert_bit_exact(whole, expected)
    # The region TensorStore wrote, read by itself (a box read, not the whole).
    box = a.read(origin=origin, shape=written.shape)
    assert_bit_exact(box, written)
    # Detected from the stored metadata, without a driver part.
    assert_bit_exact(cairn.open(f"file://{path}/").read(origin=origin, shape=written.shape),
                     written)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("driver", ["zarr3", "zarr"])
def test_every_dtype(tmp_path, dtype, driver):
    shape, chunks = (7, 5), (3, 2)
    if driver == "zarr3":
        md = v3_metadata(dtype, shape, chunks)
    else:
        md = v2_metadata(v2_typestr(dtype), shape, chunks)
    origin, size = sub_box(shape, seed=len(dtype))
    values = random_array(dtype, size, seed=1)
    ts_write_array(tmp_path, driver, md, values, origin)
    check_cairn_reads(tmp_path, driver, values, origin)
    assert cairn.open(cairn_url(tmp_path, driver)).dtype == np_dtype(dtype)


BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
BYTES_BE = {"name": "bytes", "configuration": {"endian": "big"}}
V3_CODECS = {
    "bytes_little": [BYTES_LE],
    "bytes_big": [BYTES_BE],
    "transpose": [{"name": "transpose", "configuration": {"order": [1, 0]}}, BYTES_LE],
    "transpose_big_zstd": [{"name": "transpose", "configuration": {"order": [1, 0]}}, BYTES_BE,
                           {"name": "zstd", "configuration": {"level": 5, "checksum": True}}],
    "zstd": [BYTES_LE, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
    "gzip": [BYTES_LE, {"name": "gzip", "configuration": {"level": 6}}],
    "crc32c": [BYTES_LE, {"name": "crc32c"}],
    "gzip_crc32c": [BYTES_LE, {"name": "gzip", "configuration": {"level": 1}},
                    {"name": "crc32c"}],
    **{f"blosc_{cname}_{shuffle}": [
        BYTES_LE, {"name": "blosc", "configuration": {
            "cname": cname, "clevel": 5, "shuffle": shuffle, "typesize": 4, "blocksize": 0}}]
       for cname, shuffle in [("lz4", "shuffle"), ("lz4hc", "noshuffle"),
                              ("blosclz", "bitshuffle"), ("zstd", "shuffle"),
                              ("zlib", "bitshuffle"), ("snappy", "noshuffle")]},
    "sharding_end": [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2, 3], "codecs": [BYTES_LE],
        "index_codecs": [BYTES_LE, {"name": "crc32c"}]}}],
    "sharding_start_zstd": [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2, 3], "index_location": "start",
        "codecs": [BYTES_BE, {"name": "zstd", "configuration": {"level": 1, "checksum": False}}],
        "index_codecs": [BYTES_LE, {"name": "crc32c"}]}}],
    "sharding_nested": [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2, 6],
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1, 3],
            "codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}}, BYTES_LE,
                       {"name": "gzip", "configuration": {"level": 3}}],
            "index_codecs": [BYTES_BE]}}],
        "index_codecs": [BYTES_LE, {"name": "crc32c"}], "index_location": "start"}}],
}


@pytest.mark.parametrize("codecs", list(V3_CODECS), ids=list(V3_CODECS))
def test_v3_codecs(tmp_path, codecs):
    shape, chunks = (9, 13), (4, 6)  # not divisible: edge chunks are padded
    md = v3_metadata("float32", shape, chunks, codecs=V3_CODECS[codecs], fill_value=-1.5)
    origin, size = [1, 2], [6, 11]   # leaves chunks (and inner chunks) missing
    values = random_array("float32", size, seed=3)
    ts_write_array(tmp_path, "zarr3", md, values, origin)
    check_cairn_reads(tmp_path, "zarr3", values, origin)


@pytest.mark.parametrize("dtype", ["uint16", "complex128", "bfloat16", "int4"])
def test_v3_sharded_dtypes(tmp_path, dtype):
    md = v3_metadata(dtype, (10, 4), (6, 4), codecs=[{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [3, 2], "codecs": [BYTES_LE, {"name": "zstd", "configuration": {
            "level": 3, "checksum": False}}],
        "index_codecs": [BYTES_LE, {"name": "crc32c"}]}}])
    values = random_array(dtype, (7, 3), seed=4)
    ts_write_array(tmp_path, "zarr3", md, values, [2, 1])
    check_cairn_reads(tmp_path, "zarr3", values, [2, 1])


V2_COMPRESSORS = {
    "none": None,
    "zstd": {"id": "zstd", "level": 1},
    "zlib": {"id": "zlib", "level": 5},
    "gzip": {"id": "gzip", "level": 9},
    "blosc_lz4_auto": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": -1,
                       "blocksize": 0},
    "blosc_zstd_bit": {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2,
                       "blocksize": 0},
    "blosc_zlib_none": {"id": "blosc", "cname": "zlib", "clevel": 1, "shuffle": 0,
                        "blocksize": 0},
}


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS))
@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
def test_v2_compressors_orders(tmp_path, order, compressor, big_endian):
    shape, chunks = (6, 5, 4), (4, 3, 3)
    md = v2_metadata(v2_typestr("int32", big_endian), shape, chunks,
                     compressor=V2_COMPRESSORS[compressor], order=order, fill_value=7,
                     dimension_separator="/" if big_endian else ".")
    origin, size = [1, 0, 1], [4, 5, 2]
    values = random_array("int32", size, seed=5)
    ts_write_array(tmp_path, "zarr", md, values, origin)
    check_cairn_reads(tmp_path, "zarr", values, origin)


@pytest.mark.parametrize("driver", ["zarr3", "zarr"])
@pytest.mark.parametrize("shape,chunks", [((), ()), ((17,), (5,)), ((3, 2, 4, 2, 5), (2, 1, 3, 2, 2))],
                         ids=["0d", "1d", "5d"])
def test_ranks(tmp_path, driver, shape, chunks):
    dtype = "float64"
    if driver == "zarr3":
        md = v3_metadata(dtype, shape, chunks, fill_value=2.5)
    else:
        md = v2_metadata("<f8", shape, chunks, fill_value=2.5)
    origin, size = sub_box(shape, seed=2) if shape else ([], [])
    values = random_array(dtype, tuple(size), seed=6)
    ts_write_array(tmp_path, driver, md, values, origin)
    check_cairn_reads(tmp_path, driver, values, origin)


FILL_VALUES = ["NaN", "Infinity", "-Infinity", -0.0, 0.5, 3.0]


@pytest.mark.parametrize("fill", FILL_VALUES, ids=[str(f) for f in FILL_VALUES])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64",
                                   "float8_e5m2", "float8_e4m3fn", "complex64"])
def test_v3_fill_values(tmp_path, dtype, fill):
    if fill in ("Infinity", "-Infinity") and dtype == "float8_e4m3fn":
        fill = 448.0  # no infinities in the fn types: the largest finite value instead
    fv = [fill, fill] if dtype.startswith("complex") else fill
    md = v3_metadata(dtype, (5, 6), (2, 4), fill_value=fv)
    values = random_array(dtype, (2, 3), seed=7)
    ts_write_array(tmp_path, "zarr3", md, values, [1, 1])
    check_cairn_reads(tmp_path, "zarr3", values, [1, 1])


@pytest.mark.parametrize("fill", ["NaN", "Infinity", -0.0, 1.25, None],
                         ids=["NaN", "Infinity", "-0.0", "1.25", "null"])
@pytest.mark.parametrize("dtype", ["<f4", ">f8", "<f2", "bfloat16"])
def test_v2_fill_values(tmp_path, dtype, fill):
    md = v2_metadata(dtype, (5, 6), (2, 4), fill_value=fill, compressor=None)
    name = {"<f4": "float32", ">f8": "float64", "<f2": "float16"}.get(dtype, dtype)
    values = random_array(name, (2, 3), seed=8)
    ts_write_array(tmp_path, "zarr", md, values, [1, 1])
    check_cairn_reads(tmp_path, "zarr", values, [1, 1])


@pytest.mark.parametrize("dtype", ["int4", "int2", "int8", "uint64", "bool"])
def test_integer_fill_values(tmp_path, dtype):
    fill = {"int4": -3, "int2": -1, "int8": -128, "uint64": 2**64 - 1, "bool": True}[dtype]
    md = v3_metadata(dtype, (4, 4), (2, 2), fill_value=fill)
    values = random_array(dtype, (2, 2), seed=9)
    ts_write_array(tmp_path, "zarr3", md, values, [0, 2])
    check_cairn_reads(tmp_path, "zarr3", values, [0, 2])


def test_chunk_key_encodings(tmp_path):
    for i, cke in enumerate([{"name": "default", "configuration": {"separator": "."}},
                             {"name": "v2"}, {"name": "v2", "configuration": {"separator": "/"}}]):
        d = tmp_path / f"a{i}"
        md = v3_metadata("uint8", (5, 5), (2, 2), chunk_key_encoding=cke)
        values = random_array("uint8", (4, 3), seed=i)
        ts_write_array(d, "zarr3", md, values, [1, 1])
        check_cairn_reads(d, "zarr3", values, [1, 1])
