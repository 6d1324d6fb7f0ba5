"""cairn: a checkpoint engine for large-model training.

Checkpoints that orbax-checkpoint reads and writes, saved and restored
natively::

    import cairn
    cairn.save("/ckpt/run1", state)                 # an Orbax PyTree checkpoint
    state = cairn.restore("/ckpt/run1", target=abstract_state)
    pending = cairn.save_async("/ckpt/run2", state)  # returns once arrays are copied
    pending.wait_until_finished()

    with cairn.CheckpointManager("/ckpt", max_to_keep=3) as mngr:   # numbered steps
        mngr.save(step, state)

    cairn.convert("/ckpt", "/hf", to="safetensors")  # offline conversion
    cairn.emergency.CheckpointManager(local_dir, persistent_dir)  # two-tier emergency checkpoints

Public names: ``save``, ``save_async``, ``restore``, ``CheckpointManager``,
``convert``, ``emergency`` (its ``CheckpointManager``), ``orbax`` (Orbax's
handlers), ``dist`` (coordinators of multi-process jobs), and the lower
level ``open``/``create`` (zarr v2/v3 arrays addressed by TensorStore-style
URLs such as ``"file:///tmp/w/|zarr3:"``) and ``kvstore``.

Sizes (``memory_budget``, ``chunk_byte_size``, ...) are ints or strings
such as ``"1GiB"``. Errors are Python's own exceptions: ValueError (bad
argument, spec or metadata), FileNotFoundError, FileExistsError,
PermissionError, IsADirectoryError, NotADirectoryError and other OSErrors
with ``errno`` set where a system call failed, CorruptDataError (a
subclass of OSError: corrupt or truncated stored bytes), OSError (storage
unavailable or out of space), NotImplementedError, RuntimeError. Messages
name the key and URL. Events (dropped interrupted steps, fallbacks,
resumed conversions, retention deletions) are logged to
``logging.getLogger("cairn")``.
"""

import importlib.metadata as _metadata

from cairn._core import CorruptDataError
from cairn import _events
from cairn import kvstore
from cairn.array import Array, create, open
from cairn.orbax import restore, save, save_async  # Orbax checkpoints (orbax.py)
from cairn.convert import convert  # offline conversion (convert.py)
from cairn.manager import CheckpointManager  # numbered steps, as Orbax (manager.py)
from cairn import emergency  # cairn.emergency.CheckpointManager (emergency.py)

from cairn import dist  # coordinators (dist.py)
from cairn import orbax  # Orbax's handlers (orbax.py)

__all__ = ["Array", "CheckpointManager", "CorruptDataError", "convert", "create", "dist", "emergency",
           "kvstore", "open", "orbax", "restore", "save", "save_async"]
# The installed distribution's version: the CMake project's (pyproject.toml
# reads it from CMakeLists.txt), as `cairn --version` prints it.
__version__ = _metadata.version("cairn")

_events.install()
