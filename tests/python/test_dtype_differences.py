"""Where cairn and TensorStore differ on purpose, pinned against the installed
TensorStore (docs/formats/dtypes.md): a change on either side fails here."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorstore as ts

import cairn

from conftest import file_url

E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)


def e8m0_array(path, fill_value):
    return ts.open({"driver": "zarr3", "kvstore": file_url(path),
                    "metadata": {"shape": [4], "data_type": "float8_e8m0fnu",
                                 "chunk_grid": {"name": "regular",
                                                "configuration": {"chunk_shape": [2]}},
                                 "fill_value": fill_value}},
                   create=True).result()


# fill value -> (byte by the type's definition, as cairn stores it; byte
# TensorStore 0.1.86 fills missing chunks with)
CASES = {1.0: (0x7F, 0x3F), 0.5: (0x7E, 0x3E), 4.0: (0x81, 0x41)}


@pytest.mark.parametrize("fill", sorted(CASES))
def test_e8m0_fill_value_bytes_differ_from_tensorstore(tmp_path, fill):
    ours, theirs = CASES[fill]
    # The definition (ml_dtypes): bias 127.
    assert np.array([fill], E8M0).view(np.uint8)[0] == ours
    t = e8m0_array(tmp_path, fill)
    # Chunk 1 written (by TensorStore, from ml_dtypes values), chunk 0 missing.
    written = np.array([2.0, 8.0], E8M0)
    t[2:4].write(written).result()
    ts_bytes = t.read().result().view(np.uint8)
    cairn_bytes = cairn.open(file_url(tmp_path) + "|zarr3:").read().view(np.uint8)
    # Written chunks: the same bytes in both (control).
    assert cairn_bytes[2:].tolist() == ts_bytes[2:].tolist() == written.view(np.uint8).tolist()
    # Missing chunk: cairn follows the definition, TensorStore 0.1.86 does not.
    assert cairn_bytes[:2].tolist() == [ours, ours]
    assert ts_bytes[:2].tolist() == [theirs, theirs], (
        "TensorStore's float8_e8m0fnu fill value encoding changed: update "
        "docs/formats/dtypes.md")
    # Both write the same zarr.json fill value.
    assert cairn.open(file_url(tmp_path) + "|zarr3:").metadata["fill_value"] == fill


def test_e8m0_zero_fill_matches_tensorstore(tmp_path):
    """Where the definition has no answer (no zero), cairn follows TensorStore."""
    t = e8m0_array(tmp_path, 0.0)
    assert t.read().result().view(np.uint8).tolist() == [0, 0, 0, 0]
    a = cairn.open(file_url(tmp_path) + "|zarr3:")
    assert a.read().view(np.uint8).tolist() == [0, 0, 0, 0]
    assert a.metadata["fill_value"] == 0.0


@pytest.mark.parametrize("dtype,fill,ok", [
    ("int64", 9223372036854775808.0, False),    # 2^63: was stored as INT64_MIN
    ("int64", -9223372036854775808.0, True),
    ("int64", 9223372036854774784.0, True),     # largest double below 2^63
    ("uint64", 18446744073709551616.0, False),  # 2^64
    ("uint64", 18446744073709549568.0, True),
    ("int32", 2147483648.0, False),
    ("int32", 2147483647.0, True),
    ("uint8", -1.0, False),
])
def test_integer_fill_value_range_agrees_with_tensorstore(tmp_path, dtype, fill, ok):
    md = {"shape": [2], "data_type": dtype,
          "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
          "fill_value": fill}
    try:
        t = ts.open({"driver": "zarr3", "kvstore": file_url(tmp_path / "ts"), "metadata": md},
                    create=True).result()
        ts_value = t.read().result().tolist()
    except ValueError:
        ts_value = None
    assert (ts_value is not None) == ok
    if ok:
        a = cairn.create(file_url(tmp_path / "c") + "|zarr3:", md)
        assert a.read().tolist() == ts_value == [int(fill)] * 2
    else:
        with pytest.raises(ValueError, match="fill_value: expected an integer in the range"):
            cairn.create(file_url(tmp_path / "c") + "|zarr3:", md)
