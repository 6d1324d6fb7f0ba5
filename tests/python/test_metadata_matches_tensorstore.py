"""The metadata cairn writes for a (partial) spec is the document TensorStore
writes for the same spec: parsed and compared as JSON."""

import pytest

import cairn
from conftest import cairn_url, stored_json, ts_open

BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}

V3_SPECS = {
    "minimal": {"shape": [100, 200], "data_type": "float32"},
    "large_default_chunks": {"shape": [3000, 5000, 3], "data_type": "bfloat16"},
    "zero_extent": {"shape": [0, 7], "data_type": "uint8"},
    "rank0": {"shape": [], "data_type": "int64"},
    "chunks": {"shape": [10, 20], "data_type": "int16",
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3, 7]}}},
    "zstd_short": {"shape": [8], "data_type": "float64", "codecs": [{"name": "zstd"}]},
    "gzip_short": {"shape": [8], "data_type": "uint32", "codecs": [{"name": "gzip"}]},
    "blosc_short": {"shape": [8], "data_type": "float32", "codecs": [{"name": "blosc"}]},
    "blosc_short_u8": {"shape": [8], "data_type": "uint8", "codecs": [{"name": "blosc"}]},
    "crc32c_short": {"shape": [8], "data_type": "int8", "codecs": [{"name": "crc32c"}]},
    "big_endian": {"shape": [8], "data_type": "int32",
                   "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]},
    "transpose": {"shape": [4, 5], "data_type": "float16",
                  "codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}},
                             BYTES_LE]},
    "sharding": {"shape": [16, 16], "data_type": "float32",
                 "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 16]}},
                 "codecs": [{"name": "sharding_indexed", "configuration": {
                     "chunk_shape": [4, 4], "codecs": [BYTES_LE, {"name": "zstd"}],
                     "index_codecs": [BYTES_LE, {"name": "crc32c"}]}}]},
    "sharding_start": {"shape": [16], "data_type": "uint16",
                       "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8]}},
                       "codecs": [{"name": "sharding_indexed", "configuration": {
                           "chunk_shape": [2], "codecs": [BYTES_LE],
                           "index_codecs": [BYTES_LE], "index_location": "start"}}]},
    "fill_nan": {"shape": [3], "data_type": "float32", "fill_value": "NaN"},
    "fill_nan_payload": {"shape": [3], "data_type": "bfloat16", "fill_value": "0x7fc1"},
    "fill_inf": {"shape": [3], "data_type": "float16", "fill_value": "-Infinity"},
    "fill_negzero": {"shape": [3], "data_type": "float64", "fill_value": -0.0},
    "fill_number": {"shape": [3], "data_type": "float8_e4m3fn", "fill_value": 1.5},
    "fill_complex": {"shape": [3], "data_type": "complex64", "fill_value": [1.0, "NaN"]},
    "fill_int": {"shape": [3], "data_type": "int4", "fill_value": -2},
    "fill_bool": {"shape": [3], "data_type": "bool", "fill_value": True},
    "dimension_names": {"shape": [2, 3], "data_type": "uint8", "dimension_names": ["x", None]},
    "attributes": {"shape": [2], "data_type": "uint8", "attributes": {"a": [1, "b"]}},
    "key_encoding_v2": {"shape": [4, 4], "data_type": "uint8",
                        "chunk_key_encoding": {"name": "v2"}},
    "key_encoding_dot": {"shape": [4, 4], "data_type": "uint8",
                         "chunk_key_encoding": {"name": "default",
                                                "configuration": {"separator": "."}}},
}

V2_SPECS = {
    "minimal": {"shape": [100, 200], "dtype": "<f4"},
    "big_endian": {"shape": [10], "dtype": ">i8", "chunks": [3]},
    "bool": {"shape": [10], "dtype": "|b1", "chunks": [4]},
    "bfloat16": {"shape": [10], "dtype": "bfloat16", "chunks": [4]},
    "zstd": {"shape": [10], "dtype": "<u2", "compressor": {"id": "zstd"}},
    "zlib": {"shape": [10], "dtype": "<u2", "compressor": {"id": "zlib", "level": 3}},
    "gzip": {"shape": [10], "dtype": "<u2", "compressor": {"id": "gzip"}},
    "blosc": {"shape": [10], "dtype": "<u2",
              "compressor": {"id": "blosc", "cname": "zstd", "clevel": 2, "shuffle": 1}},
    "no_compressor": {"shape": [10], "dtype": "<u2", "compressor": None},
    "order_f": {"shape": [4, 5], "dtype": "<f8", "order": "F"},
    "fill_nan": {"shape": [4], "dtype": "<f4", "fill_value": "NaN"},
    "fill_inf": {"shape": [4], "dtype": "<f2", "fill_value": "Infinity"},
    "fill_number": {"shape": [4], "dtype": "<i2", "fill_value": -5},
    "fill_complex": {"shape": [4], "dtype": "<c16", "fill_value": [1.5, -2.0]},
    "separator_slash": {"shape": [4, 4], "dtype": "|u1", "dimension_separator": "/"},
    "rank0": {"shape": [], "dtype": "<f8"},
}


@pytest.mark.parametrize("name", list(V3_SPECS))
def test_zarr3_metadata(tmp_path, name):
    spec = V3_SPECS[name]
    cairn.create(cairn_url(tmp_path / "c", "zarr3"), spec)
    ts_open(tmp_path / "t", "zarr3", metadata=spec)
    assert stored_json(tmp_path / "c") == stored_json(tmp_path / "t")
    # And the exact text: compact, keys sorted, as TensorStore dumps it.
    assert (tmp_path / "c" / "zarr.json").read_bytes() == (tmp_path / "t" / "zarr.json").read_bytes()


@pytest.mark.parametrize("name", list(V2_SPECS))
def test_zarr2_metadata(tmp_path, name):
    spec = V2_SPECS[name]
    cairn.create(cairn_url(tmp_path / "c", "zarr"), spec)
    ts_open(tmp_path / "t", "zarr", metadata=spec)
    assert stored_json(tmp_path / "c") == stored_json(tmp_path / "t")
    assert (tmp_path / "c" / ".zarray").read_bytes() == (tmp_path / "t" / ".zarray").read_bytes()


def test_keywords_stand_in_for_fields(tmp_path):
    import ml_dtypes
    cairn.create(cairn_url(tmp_path / "c3", "zarr3"), shape=[6, 4], dtype=ml_dtypes.bfloat16,
                 chunks=[3, 4])
    ts_open(tmp_path / "t3", "zarr3", metadata=V3_SPECS["chunks"] | {
        "shape": [6, 4], "data_type": "bfloat16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3, 4]}}})
    assert stored_json(tmp_path / "c3") == stored_json(tmp_path / "t3")
    cairn.create(cairn_url(tmp_path / "c2", "zarr"), {"compressor": None}, shape=[6],
                 dtype=">u4", chunks=[4])
    ts_open(tmp_path / "t2", "zarr", metadata={"shape": [6], "dtype": ">u4", "chunks": [4],
                                                 "compressor": None})
    assert stored_json(tmp_path / "c2") == stored_json(tmp_path / "t2")
    a = cairn.open(cairn_url(tmp_path / "c2", "zarr"))
    assert a.shape == (6,) and a.chunks == (4,) and a.dtype.name == "uint32"
