"""Shared helpers for cairn's interop tests against the real peers from PyPI.

tensorstore and zarr are imported unconditionally: a machine without them
fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import pathlib

# XLA ends a process whose CPU collective has not gathered every simulated
# device's thread within 40 s (warning at 20 s). At load 5 on 2 cores (two
# suites side by side) a training step of 8 simulated devices once took
# longer and was killed with SIGABRT. The tests' processes, and the jobs
# they start with this environment, wait longer; set before jax starts its
# backend (test modules add their device count to XLA_FLAGS after this).
XLA_COLLECTIVE_TIMEOUTS = ("--xla_cpu_collective_call_warn_stuck_timeout_seconds=120 "
                           "--xla_cpu_collective_call_terminate_timeout_seconds=900")
if XLA_COLLECTIVE_TIMEOUTS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + XLA_COLLECTIVE_TIMEOUTS).strip()

import ml_dtypes
import numpy as np
import pytest
import tensorstore as ts
import zarr  # noqa: F401  (imported here so that a missing zarr fails every test)

import cairn

# Every dtype tensorstore 0.1.86 supports in both zarr drivers (checked by
# creating an array of each), by their zarr v3 / TensorStore names.
ALL_DTYPES = [
    "bool", "int2", "int4", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "float8_e3m4", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn",
]
# The dtypes zarr-python itself knows (the rest are TensorStore extensions).
STANDARD_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]
FLOAT_DTYPES = [n for n in ALL_DTYPES if n.startswith(("float", "bfloat"))]

# Element types stored in fewer bits than a byte: the valid byte patterns
# (ml_dtypes keeps the value in the low bits).
_SUBBYTE_BITS = {"int2": 2, "int4": 4, "float4_e2m1fn": 4}


def np_dtype(name: str) -> np.dtype:
    ext = getattr(ml_dtypes, name, None)
    return np.dtype(ext) if ext is not None else np.dtype(name)


def random_array(name: str, shape, seed: int = 0) -> np.ndarray:
    """Random bit patterns valid for the dtype (NaNs with payloads included)."""
    dtype = np_dtype(name)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = rng.integers(0, 256, size=n, dtype=np.uint8)
    if name == "bool":
        raw &= 1
    elif name in _SUBBYTE_BITS:
        raw &= (1 << _SUBBYTE_BITS[name]) - 1
    return raw.view(dtype).reshape(shape)


def assert_bit_exact(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same shape, same dtype, same bytes (so NaN payloads and -0.0 count)."""
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.shape == tuple(expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    a = np.ascontiguousarray(actual).tobytes()
    e = np.ascontiguousarray(expected).tobytes()
    if a != e:
        av = np.frombuffer(a, np.uint8)
        ev = np.frombuffer(e, np.uint8)
        bad = np.flatnonzero(av != ev)
        raise AssertionError(
            f"{bad.size} of {av.size} bytes differ; first at byte {bad[0]}: "
            f"got {av[bad[:8]].tolist()}, want {ev[bad[:8]].tolist()}")


def same_bits(a, b) -> bool:
    """Same dtype, shape and bytes (NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def wait_processes(procs, log_paths, timeout: float):
    """Waits for every (Popen, open log file) in `procs`, killing them all
    once `timeout` seconds have passed; closes the logs. Returns the exit
    codes ("timeout" for a killed one) and the tails of the logs."""
    import time
    deadline = time.monotonic() + timeout
    codes = []
    for p, log in procs:
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
        except Exception:  # subprocess.TimeoutExpired
            for q, _ in procs:
                q.kill()
            codes.append("timeout")
        log.close()
    logs = "\n".join(f"--- process {i}\n" + pathlib.Path(path).read_text(errors="replace")[-3000:]
                     for i, path in enumerate(log_paths))
    return codes, logs


def file_url(path: pathlib.Path | str) -> str:
    return f"file://{os.fspath(path)}/"


def ts_open(path, driver: str, **kwargs) -> ts.TensorStore:
    """Opens (or creates, with metadata=...) a TensorStore zarr array in a directory."""
    spec = {"driver": driver, "kvstore": {"driver": "file", "path": f"{os.fspath(path)}/"}}
    metadata = kwargs.pop("metadata", None)
    if metadata is not None:
        spec["metadata"] = metadata
        kwargs.setdefault("create", True)
    return ts.open(spec, **kwargs).result()


def ts_write_array(path, driver: str, metadata: dict, values: np.ndarray, origin=None):
    """TensorStore creates the array and writes `values` at `origin`."""
    t = ts_open(path, driver, metadata=metadata)
    origin = origin or [0] * values.ndim
    index = tuple(slice(o, o + n) for o, n in zip(origin, values.shape))
    t[index].write(values).result()
    return t


def ts_read(path, driver: str | None = None) -> np.ndarray:
    """TensorStore opens the array from what is stored (no assume_metadata) and reads it."""
    spec = {"driver": driver or detect_driver(path),
            "kvstore": {"driver": "file", "path": f"{os.fspath(path)}/"}}
    return ts.open(spec, open=True).result().read().result()


def detect_driver(path) -> str:
    return "zarr3" if (pathlib.Path(path) / "zarr.json").exists() else "zarr"


def stored_json(path) -> dict:
    p = pathlib.Path(path)
    name = "zarr.json" if (p / "zarr.json").exists() else ".zarray"
    return json.loads((p / name).read_text())


def cairn_url(path, driver: str) -> str:
    return f"file://{os.fspath(path)}/|{'zarr3' if driver == 'zarr3' else 'zarr2'}:"


def sub_box(shape, seed=0):
    """An origin and shape inside `shape` that leaves some of the array unwritten."""
    rng = np.random.default_rng(seed)
    origin = [int(rng.integers(0, max(1, n // 2))) for n in shape]
    size = [max(1, n - o - int(rng.integers(0, max(1, (n - o) // 2)))) for n, o in
            zip(shape, origin)]
    return origin, size


@pytest.fixture
def arr_dir(tmp_path):
    """A directory for one array."""
    d = tmp_path / "arr"
    return d


def v3_metadata(dtype: str, shape, chunks, codecs=None, fill_value=None, **extra) -> dict:
    md = {"shape": list(shape), "data_type": dtype,
          "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}}}
    if codecs is not None:
        md["codecs"] = codecs
    if fill_value is not None:
        md["fill_value"] = fill_value
    md.update(extra)
    return md


def v2_metadata(dtype: str, shape, chunks, compressor="default", fill_value=None,
                order="C", **extra) -> dict:
    md = {"shape": list(shape), "dtype": dtype, "chunks": list(chunks), "order": order,
          "fill_value": fill_value}
    if compressor != "default":
        md["compressor"] = compressor
    md.update(extra)
    return md


def v2_typestr(name: str, big_endian: bool = False) -> str:
    """The zarr v2 dtype string TensorStore uses for a dtype name."""
    d = np_dtype(name)
    if d.type.__module__.startswith("ml_dtypes"):
        return name
    s = d.str
    if big_endian and s[0] == "<":
        s = ">" + s[1:]
    return s


__all__ = [name for name in dir() if not name.startswith("_")] + ["cairn", "ts"]


@pytest.fixture
def peer_transports():
    """The tests of the emergency checkpoints and of MPI jobs need cairn's MPI
    and ZeroMQ transports: a build without them fails these tests (it would
    otherwise fall back to no peer transport and test less), naming what to
    install."""
    import shutil
    assert cairn._core._emergency_zmq_available(), (
        "cairn was built without the ZeroMQ peer transport: install libzmq3-dev "
        "(scripts/install-deps.sh) and pip install . again")
    assert cairn._core.mpi_available, (
        "cairn was built without MPI: install libopenmpi-dev openmpi-bin (scripts/install-deps.sh) "
        "and pip install . again")
    assert shutil.which("mpirun"), "mpirun is not on PATH: install openmpi-bin"
