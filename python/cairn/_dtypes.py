"""Element types: cairn's dtype names <-> numpy dtypes (ml_dtypes for the
extension types bfloat16, float8_*, int4, ...)."""

import ml_dtypes
import numpy as np

# numpy dtypes of the same element size that numpy can hand to native code
# (DLPack) whatever the element type: a view, not a copy.
_RAW_BY_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}


def to_numpy(name: str) -> np.dtype:
    """The native-byte-order numpy dtype for a cairn/zarr v3 dtype name."""
    ext = getattr(ml_dtypes, name, None)
    if ext is not None and name not in ("finfo", "iinfo"):
        return np.dtype(ext)
    return np.dtype(name)


def is_extension(dtype: np.dtype) -> bool:
    """True for types numpy itself does not define (bfloat16, float8_*, int4, ...)."""
    return dtype.type.__module__.startswith("ml_dtypes")


def zarr3_name(dtype) -> str:
    """The zarr v3 `data_type` name for a numpy dtype (or anything np.dtype takes)."""
    return np.dtype(dtype).name


def zarr2_name(dtype) -> str:
    """The zarr v2 `dtype` string: a typestr with byte order ("<f4", "|b1"), or the
    extension name ("bfloat16") as TensorStore writes it."""
    d = np.dtype(dtype)
    return d.name if is_extension(d) else d.str


def native(values: np.ndarray) -> np.ndarray:
    """`values` in native byte order (a copy only when it was not)."""
    if values.dtype.isnative:
        return values
    return values.astype(values.dtype.newbyteorder("="))


def raw_view(values: np.ndarray) -> np.ndarray:
    """A view of native-order `values` as unsigned integers of the same size,
    with the same shape and strides."""
    return values.view(_RAW_BY_SIZE[values.dtype.itemsize])
