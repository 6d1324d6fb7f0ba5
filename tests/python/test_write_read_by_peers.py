"""cairn writes, TensorStore and zarr-python read: TensorStore opens the
stored array from its metadata alone (no assume_metadata) and must see
exactly the bytes cairn wrote and the fill value everywhere else. Stored
chunks of uncompressed codec chains are also compared file by file with the
chunks TensorStore writes for the same metadata and values."""

import os
import pathlib

import numpy as np
import pytest
import zarr

import cairn
from conftest import (ALL_DTYPES, STANDARD_DTYPES, assert_bit_exact, cairn_url, random_array,
                      stored_json, sub_box, ts_read, ts_write_array, v2_metadata, v2_typestr,
                      v3_metadata)
from test_read_tensorstore_written import V2_COMPRESSORS, V3_CODECS


def cairn_write(path, driver, md, values, origin):
    a = cairn.create(cairn_url(path, driver), md)
    a.write(values, origin=origin)
    return a


def check_peers_read(path, driver, values, origin, *, reference, zarr_python=False):
    """TensorStore reads cairn's array at `path`: the written box holds
    `values`, and everything else (the unwritten parts of partly written
    chunks included, in every codec chain) is bit for bit what TensorStore
    reads from `reference`, the same metadata and values written by
    TensorStore itself. cairn's own reading must agree with both."""
    got = ts_read(path, driver)
    index = tuple(slice(o, o + n) for o, n in zip(origin, values.shape))
    assert_bit_exact(np.asarray(got[index]), values)
    expected = ts_read(reference, driver)
    assert_bit_exact(got, expected)
    assert_bit_exact(cairn.open(cairn_url(path, driver)).read(), expected)
    if zarr_python:
        z = zarr.open_array(store=os.fspath(path), mode="r")
        from_zarr = np.asarray(z[...])
        if not from_zarr.dtype.isnative:  # zarr-python keeps the stored byte order
            from_zarr = from_zarr.astype(from_zarr.dtype.newbyteorder("="))
        assert_bit_exact(from_zarr, got)
    return got


def stored_files(path):
    p = pathlib.Path(path)
    return {str(f.relative_to(p)): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()}


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("driver", ["zarr3", "zarr"])
def test_every_dtype(tmp_path, dtype, driver):
    shape, chunks = (7, 5), (3, 2)
    if driver == "zarr3":
        md = v3_metadata(dtype, shape, chunks)
    else:
        md = v2_metadata(v2_typestr(dtype), shape, chunks, compressor=None, fill_value=None)
    origin, size = sub_box(shape, seed=len(dtype))
    values = random_array(dtype, size, seed=11)
    cairn_write(tmp_path / "c", driver, md, values, origin)
    ts_write_array(tmp_path / "t", driver, md, values, origin)
    check_peers_read(tmp_path / "c", driver, values, origin,
                     zarr_python=dtype in STANDARD_DTYPES, reference=tmp_path / "t")
    # Uncompressed: the stored files are TensorStore's, byte for byte.
    assert stored_files(tmp_path / "c") == stored_files(tmp_path / "t")


UNCOMPRESSED = {"bytes_little", "bytes_big", "transpose", "crc32c", "sharding_end"}


@pytest.mark.parametrize("codecs", list(V3_CODECS), ids=list(V3_CODECS))
def test_v3_codecs(tmp_path, codecs):
    shape, chunks = (9, 13), (4, 6)
    md = v3_metadata("float32", shape, chunks, codecs=V3_CODECS[codecs], fill_value=-1.5)
    origin, size = [1, 2], [6, 11]
    values = random_array("float32", size, seed=12)
    cairn_write(tmp_path / "c", "zarr3", md, values, origin)
    ts_write_array(tmp_path / "t", "zarr3", md, values, origin)
    check_peers_read(tmp_path / "c", "zarr3", values, origin, zarr_python=True,
                     reference=tmp_path / "t")
    assert stored_json(tmp_path / "c") == stored_json(tmp_path / "t")
    if codecs in UNCOMPRESSED:
        assert stored_files(tmp_path / "c") == stored_files(tmp_path / "t")


@pytest.mark.parametrize("codecs", ["zstd", "gzip", "sharding_start_zstd"])
def test_peer_check_sees_the_unwritten_region(tmp_path, codecs):
    """The check above can fail: a TensorStore reference whose unwritten
    region differs (another fill value) from cairn's partly written chunks
    is caught. Control: the matching reference passes."""
    shape, chunks, origin = (9, 13), (4, 6), [1, 2]
    values = random_array("float32", (6, 11), seed=12)
    md = v3_metadata("float32", shape, chunks, codecs=V3_CODECS[codecs], fill_value=-1.5)
    cairn_write(tmp_path / "c", "zarr3", md, values, origin)
    ts_write_array(tmp_path / "t", "zarr3", md, values, origin)
    check_peers_read(tmp_path / "c", "zarr3", values, origin, reference=tmp_path / "t")
    other = v3_metadata("float32", shape, chunks, codecs=V3_CODECS[codecs], fill_value=-2.5)
    ts_write_array(tmp_path / "other", "zarr3", other, values, origin)
    with pytest.raises(AssertionError, match="bytes differ"):
        check_peers_read(tmp_path / "c", "zarr3", values, origin, reference=tmp_path / "other")


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS))
def test_v2_compressors_orders(tmp_path, order, compressor):
    shape, chunks = (6, 5, 4), (4, 3, 3)
    md = v2_metadata("<i4", shape, chunks, compressor=V2_COMPRESSORS[compressor], order=order,
                     fill_value=7)
    origin, size = [1, 0, 1], [4, 5, 2]
    values = random_array("int32", size, seed=13)
    cairn_write(tmp_path / "c", "zarr", md, values, origin)
    ts_write_array(tmp_path / "t", "zarr", md, values, origin)
    check_peers_read(tmp_path / "c", "zarr", values, origin, zarr_python=True,
                     reference=tmp_path / "t")
    assert stored_json(tmp_path / "c") == stored_json(tmp_path / "t")
    if compressor == "none":
        assert stored_files(tmp_path / "c") == stored_files(tmp_path / "t")


@pytest.mark.parametrize("driver", ["zarr3", "zarr"])
@pytest.mark.parametrize("shape,chunks", [((), ()), ((17,), (5,)), ((3, 2, 4, 2, 5), (2, 1, 3, 2, 2))],
                         ids=["0d", "1d", "5d"])
def test_ranks(tmp_path, driver, shape, chunks):
    if driver == "zarr3":
        md = v3_metadata("float64", shape, chunks, fill_value=2.5)
    else:
        md = v2_metadata(">f8", shape, chunks, fill_value=2.5, compressor=None)
    origin, size = sub_box(shape, seed=3) if shape else ([], [])
    values = random_array("float64", tuple(size), seed=14)
    cairn_write(tmp_path / "c", driver, md, values, origin)
    ts_write_array(tmp_path / "t", driver, md, values, origin)
    check_peers_read(tmp_path / "c", driver, values, origin, zarr_python=True,
                     reference=tmp_path / "t")
    assert stored_files(tmp_path / "c") == stored_files(tmp_path / "t")


@pytest.mark.parametrize("fill", ["NaN", "Infinity", -0.0, 0.1],
                         ids=["NaN", "Infinity", "-0.0", "0.1"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8_e5m2"])
@pytest.mark.parametrize("driver", ["zarr3", "zarr"])
def test_fill_values(tmp_path, dtype, fill, driver):
    if driver == "zarr3":
        md = v3_metadata(dtype, (5, 6), (2, 4), fill_value=fill)
    else:
        md = v2_metadata(v2_typestr(dtype), (5, 6), (2, 4), fill_value=fill, compressor=None)
    values = random_array(dtype, (2, 3), seed=15)
    cairn_write(tmp_path / "c", driver, md, values, [1, 1])
    ts_write_array(tmp_path / "t", driver, md, values, [1, 1])
    check_peers_read(tmp_path / "c", driver, values, [1, 1],
                     zarr_python=driver == "zarr3" and dtype in STANDARD_DTYPES,
                     reference=tmp_path / "t")
    assert stored_files(tmp_path / "c") == stored_files(tmp_path / "t")


def test_write_any_strides_and_byte_order(tmp_path):
    """Writes from views with negative, zero and non-contiguous strides, and
    from big-endian arrays, land as their values."""
    a = cairn.create(cairn_url(tmp_path, "zarr3"), shape=[6, 8], dtype="float32", chunks=[4, 3])
    base = random_array("float32", (12, 16), seed=16)
    cases = [
        (base[::2, ::-2], [0, 0]),                           # strided, negative
        (np.broadcast_to(base[0, :3], (6, 3)), [0, 5]),      # zero stride, read-only
        (base[:6, :8].T.copy().T, [0, 0]),                   # F order
        (base[:3, :4].astype(">f4"), [3, 4]),                # big-endian
        (np.asfortranarray(base[:6, :8]).astype(">f4")[::-1], [0, 0]),
    ]
    for values, origin in cases:
        a.write(values, origin=origin)
        got = ts_read(tmp_path, "zarr3")
        index = tuple(slice(o, o + n) for o, n in zip(origin, values.shape))
        assert_bit_exact(got[index], values.astype("=f4"))


def test_bfloat16_and_float8_come_back_as_ml_dtypes(tmp_path):
    import ml_dtypes
    for i, (name, t) in enumerate([("bfloat16", ml_dtypes.bfloat16),
                                   ("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
                                   ("int4", ml_dtypes.int4)]):
        a = cairn.create(cairn_url(tmp_path / str(i), "zarr3"), shape=[3], dtype=t)
        assert a.dtype == np.dtype(t)
        v = np.array([1, -2, 3], dtype=t)
        a.write(v)
        assert_bit_exact(cairn.open(cairn_url(tmp_path / str(i), "zarr3")).read(), v)
        assert_bit_exact(ts_read(tmp_path / str(i), "zarr3"), v)


def test_empty_boxes_and_default_extents(tmp_path):
    a = cairn.create(cairn_url(tmp_path, "zarr3"), shape=[5, 4], dtype="int16", chunks=[2, 2])
    values = random_array("int16", (5, 4), seed=17)
    a.write(values)
    a.write(np.zeros((0, 4), np.int16), origin=[5, 0])
    assert a.read(origin=[2, 1], shape=[0, 3]).shape == (0, 3)
    assert_bit_exact(a.read(origin=[3, 1]), values[3:, 1:])
    assert_bit_exact(ts_read(tmp_path, "zarr3"), values)
    # Python lists are converted to the array's dtype.
    a.write([[7, 8]], origin=[0, 0])
    assert a.read(shape=[1, 2]).tolist() == [[7, 8]]


def test_threads_write_and_read_disjoint_chunks(tmp_path):
    """The GIL is released around I/O: many Python threads at once, each on
    its own chunk row, end with every row in place."""
    from concurrent.futures import ThreadPoolExecutor
    a = cairn.create(cairn_url(tmp_path, "zarr3"),
                     {"codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "zstd", "configuration": {"level": 1,
                                                                    "checksum": False}}]},
                     shape=[32, 64], dtype="float32", chunks=[1, 64])
    values = random_array("float32", (32, 64), seed=18)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: a.write(values[i:i + 1], origin=[i, 0]), range(32)))
        rows = list(pool.map(lambda i: a.read(origin=[i, 0], shape=[1, 64]), range(32)))
    assert_bit_exact(np.concatenate(rows), values)
    assert_bit_exact(ts_read(tmp_path, "zarr3"), values)
