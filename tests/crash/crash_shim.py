"""Finding and calling the crashfs shim (libcairn_crashfs.so) from Python.

The shim is built by CMake with the tests (build/release/tests/crash, as
scripts/test.sh builds it); CAIRN_CRASHFS names another copy. A missing shim
is an error, never a skip.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import shutil

REPO = pathlib.Path(__file__).resolve().parents[2]


def shim_path() -> str:
    env = os.environ.get("CAIRN_CRASHFS")
    candidates = [pathlib.Path(env)] if env else [
        REPO / "build" / "release" / "tests" / "crash" / "libcairn_crashfs.so"]
    for c in candidates:
        if c.is_file():
            return str(c)
    raise FileNotFoundError(
        f"the crashfs shim is not built: none of {[str(c) for c in candidates]} exists "
        "(cmake -S . -B build/release -DCAIRN_BUILD_TESTS=ON && cmake --build build/release "
        "--target cairn_crashfs, or set CAIRN_CRASHFS)")


_lib = None


def _shim():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(shim_path())
        _lib.crashfs_snapshot_tree.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        _lib.crashfs_rebuild.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    return _lib


def snapshot(shadow, root) -> None:
    """Records the tree below `root` as durable (the run's start state)."""
    rc = _shim().crashfs_snapshot_tree(os.fsencode(shadow), os.fsencode(root))
    if rc != 0:
        raise OSError(-rc, f"crashfs: snapshot of {root} into {shadow}: {os.strerror(-rc)}")


def power_loss(shadow, root) -> None:
    """Replaces `root` with what a power loss leaves of it (crashfs_model.h)."""
    root = pathlib.Path(root)
    shutil.rmtree(root)
    err = ctypes.create_string_buffer(1024)
    rc = _shim().crashfs_rebuild(os.fsencode(shadow), os.fsencode(root), err, len(err))
    if rc != 0:
        raise OSError(-rc, f"crashfs: rebuilding {root} from {shadow}: {err.value.decode()}")
