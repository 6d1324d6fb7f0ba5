"""Zarr arrays: `cairn.open`, `cairn.create` and the `Array` they return."""

from __future__ import annotations

import json
import os
import math
from typing import Any, Mapping, Sequence

import numpy as np

from cairn import _core, _dtypes, _memory


class Array:
    """A zarr v2 or v3 array. Reads return new numpy arrays; writes take any
    numpy array of the array's dtype (any byte order, any strides)."""

    def __init__(self, core):
        # `core`: the native array (cairn.open and cairn.create make it).
        self._core = core
        self._dtype = _dtypes.to_numpy(core.dtype_name)

    @property
    def url(self) -> str:
        return self._core.url

    @property
    def shape(self) -> tuple[int, ...]:
        return self._core.shape

    @property
    def ndim(self) -> int:
        return len(self._core.shape)

    @property
    def dtype(self) -> np.dtype:
        """numpy dtype (ml_dtypes for bfloat16, float8_*, int4, ...)."""
        return self._dtype

    @property
    def chunks(self) -> tuple[int, ...]:
        """The stored chunk shape (`chunk_grid` / `chunks`; the shard when sharded)."""
        return self._core.chunks

    @property
    def zarr_format(self) -> int:
        return self._core.zarr_format

    @property
    def metadata(self) -> dict:
        """The metadata document (zarr.json or .zarray) as a dict."""
        return json.loads(self._core.metadata_json)

    def __repr__(self) -> str:
        return (f"cairn.Array({self.url!r}, shape={self.shape}, dtype={self.dtype.name}, "
                f"chunks={self.chunks})")

    def _origin(self, origin: Sequence[int] | None) -> list[int]:
        if origin is None:
            return [0] * self.ndim
        origin = [int(x) for x in origin]
        if len(origin) != self.ndim:
            raise ValueError(f"array {self.url}: origin {origin} needs {self.ndim} entries")
        return origin

    def read(self, origin: Sequence[int] | None = None,
             shape: Sequence[int] | None = None) -> np.ndarray:
        """Reads the box [origin, origin + shape) (default: from origin to the end)."""
        origin = self._origin(origin)
        if shape is None:
            shape = [n - o for n, o in zip(self.shape, origin)]
        shape = [int(x) for x in shape]
        if any(x < 0 for x in shape):
            raise ValueError(f"array {self.url}: negative read shape {shape}")
        # One allocation (ordinary pages, not numpy's transparent huge pages:
        # _memory.aligned_empty says why); C++ fills it through a flat
        # same-size unsigned view.
        out = _memory.aligned_empty(shape, self._dtype)
        self._core.read_into(origin, shape, _dtypes.raw_view(out.reshape(-1)))
        return out

    def write(self, values: Any, origin: Sequence[int] | None = None) -> None:
        """Writes `values` (a numpy array of this array's dtype, in any byte order
        and with any strides; other array-likes are converted) at `origin`."""
        if isinstance(values, np.ndarray):
            if values.dtype.newbyteorder("=") != self._dtype:
                raise ValueError(
                    f"array {self.url}: values have dtype {values.dtype}, the array's dtype "
                    f"is {self._dtype.name}")
            values = _dtypes.native(values)
        else:
            values = np.asarray(values, dtype=self._dtype)
        if values.ndim != self.ndim:
            raise ValueError(f"array {self.url}: values have {values.ndim} dimensions, the "
                             f"array has {self.ndim}")
        self._core.write(self._origin(origin), _dtypes.raw_view(values))


def open(url: str) -> Array:  # noqa: A001 (mirrors tensorstore.open)
    """Opens an existing array: `file:///dir/|zarr3:`, `file:///dir/|zarr2:`,
    `file:///db/|ocdbt:name/|zarr3:`, or a URL or local path with no driver
    part (the format is detected: zarr.json -> v3, .zarray -> v2). A local
    path is taken as the file:// URL of that path (TensorStore itself
    rejects bare paths as URLs)."""
    return Array(_core.Array.open(_core.normalize_url(os.fspath(url))))


def _url_format(url: str, metadata: Mapping[str, Any]) -> int | None:
    last = url.rsplit("|", 1)[-1] if "|" in url else ""
    if last.startswith("zarr3:"):
        return 3
    if last.startswith("zarr2:"):
        return 2
    zf = metadata.get("zarr_format")
    return zf if zf in (2, 3) else None


def _json_default(x):
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return np.dtype(x).name
    raise TypeError(f"metadata value {x!r} is not JSON serializable")


def _special_floats(x):
    """NaN and infinities in the zarr JSON spelling ("NaN", "Infinity")."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {k: _special_floats(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_special_floats(v) for v in x]
    return x


def create(url: str, metadata: Mapping[str, Any] | str | None = None, *,
           shape: Sequence[int] | None = None, dtype: Any = None,
           chunks: Sequence[int] | None = None, overwrite: bool = False) -> Array:
    """Creates a zarr3 (`...|zarr3:`) or zarr2 (`...|zarr2:`) array.

    `metadata` holds full or partial metadata in the format's own JSON (the
    fields of zarr.json or .zarray, as a dict or a JSON string); fields left
    out take TensorStore's defaults. `shape`, `dtype` and `chunks` stand in
    for the format's fields (v3: shape, data_type, chunk_grid; v2: shape,
    dtype, chunks). Float NaN/inf values are written as "NaN"/"Infinity".
    `overwrite` replaces existing metadata (chunks are kept).
    """
    url = _core.normalize_url(os.fspath(url))
    if isinstance(metadata, str):
        metadata = json.loads(metadata)
    md = dict(metadata or {})
    fmt = _url_format(url, md)
    if fmt is None and (dtype is not None or chunks is not None):
        raise ValueError(f"creating array {url}: say the format with a `|zarr3:` or "
                         "`|zarr2:` part (or zarr_format in metadata) to use dtype=/chunks=")
    if shape is not None:
        md["shape"] = [int(x) for x in shape]
    if dtype is not None:
        if fmt == 3:
            md["data_type"] = _dtypes.zarr3_name(dtype)
        else:
            md["dtype"] = _dtypes.zarr2_name(dtype)
    if chunks is not None:
        chunks = [int(x) for x in chunks]
        if fmt == 3:
            md["chunk_grid"] = {"name": "regular", "configuration": {"chunk_shape": chunks}}
        else:
            md["chunks"] = chunks
    text = json.dumps(_special_floats(md), default=_json_default, allow_nan=False)
    return Array(_core.Array.create(url, text, overwrite))
