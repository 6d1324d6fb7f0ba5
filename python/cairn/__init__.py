"""cairn: a checkpoint engine for large-model training.

Arrays (zarr v2/v3, as TensorStore writes them) and key-value stores (file,
memory, OCDBT), addressed by TensorStore-style pipeline URLs::

    import cairn
    a = cairn.create("file:///tmp/w/|zarr3:", shape=[4, 4], dtype="bfloat16", chunks=[2, 4])
    a.write(values)
    cairn.open("file:///tmp/w/|zarr3:").read(origin=[0, 0], shape=[2, 2])
    cairn.kvstore.open("file:///tmp/db/|ocdbt:").keys()

Errors from the native library arrive as Python exceptions, one table for
all (python/src/status_translation.cc): ValueError (bad argument, spec or
metadata), FileNotFoundError, FileExistsError, CorruptDataError (a subclass
of OSError: corrupt or truncated stored bytes), OSError (storage unavailable
or out of space), NotImplementedError, RuntimeError. Messages name the key
and URL.
"""

import importlib.metadata as _metadata

from cairn._core import CorruptDataError
from cairn import kvstore
from cairn.array import Array, create, open
from cairn.orbax import restore, save, save_async  # Orbax checkpoints (orbax.py)
from cairn.convert import convert  # offline conversion (convert.py)
from cairn.manager import CheckpointManager  # numbered steps, as Orbax (manager.py)
from cairn import emergency  # cairn.emergency.CheckpointManager (emergency.py)

__all__ = ["Array", "CheckpointManager", "CorruptDataError", "convert", "create", "kvstore", "open"]
# The installed distribution's version: the CMake project's (pyproject.toml
# reads it from CMakeLists.txt), as `cairn --version` prints it.
__version__ = _metadata.version("cairn")
