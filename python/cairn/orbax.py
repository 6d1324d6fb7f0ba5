"""Orbax checkpoints: ``cairn.save(..., format="orbax")`` and ``cairn.restore``.

Writes and reads the on-disk layout of orbax-checkpoint's PyTree items in
all four storage variants (``use_ocdbt`` x ``use_zarr3``), so that Orbax
restores what cairn saved and cairn restores what Orbax saved.

The tree is flattened here (dicts, lists/tuples, arrays, scalars, strings,
None and empty containers) and handed to the native layer in one call,
which writes every array, the metadata files and commits. Restoring reads
``_METADATA``, rebuilds the tree from its ``key_metadata`` and fills every
array in one native call.

Several processes (or a test harness standing in for them) save one
checkpoint together by calling ``save`` with the same directory and their
own ``process_index``; ``barrier`` is a callable every process calls at the
same points (e.g. ``jax.experimental.multihost_utils.sync_global_devices``).
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Callable, Optional, Union


from cairn import _core
from cairn import _leaves
from cairn import _orbax_args
from cairn._orbax_restore import restore  # noqa: F401  (cairn.orbax.restore)

__all__ = ["save", "save_async", "PendingSave", "restore", "all_steps", "latest_step", "PYTREE_HANDLER",
           "PyTreeCheckpointHandler", "StandardCheckpointHandler", "PyTreeHandler", "register_handlers",
           "unregister_handlers"]

# A path or URL, and a size in bytes (an int, or a string such as "1GiB").
PathLike = Union[str, "os.PathLike[str]"]
Size = Union[int, str]

PYTREE_HANDLER = "orbax.checkpoint._src.handlers.pytree_checkpoint_handler.PyTreeCheckpointHandler"


def _coordinator_for(final_top: str, process_index: int, process_count: int, barrier, coordinator):
    """(coordinator, cleanup) for one save, from where the native rule says
    it comes (dist/file_coordinator.h): the caller's; jax.distributed's;
    one over files beside the checkpoint for processes that share only a
    `barrier` callable; or the one cairn.dist.detect() finds."""
    from cairn import dist

    source = _core._save_coordinator_source(
        coordinator is not None, process_count, process_count > 1 and _leaves.jax_runs(process_count),
        barrier is not None, final_top)
    if source == "given":
        return coordinator, lambda: None
    if source == "runtime":
        return dist.from_jax(), lambda: None
    if source == "files":
        directory, c = _core._begin_file_coordination(final_top, process_index, process_count, barrier)
        return c, lambda: _core._end_file_coordination(directory, process_index, barrier)
    return dist.detect(), lambda: None


class PendingSave:
    """A save in progress (``cairn.save_async``): the tree's arrays are
    already copied, the caller may change them. ``wait_until_finished()``
    returns once the checkpoint is committed and raises any error of any
    process."""

    def __init__(self, pending, cleanup, path: str, coordinator):
        self._pending = pending
        self._coordinator = coordinator  # used by the background work
        self._cleanup = cleanup
        self.path = path
        self._finished = False

    def done(self) -> bool:
        """True once the save is finished (committed or failed)."""
        return self._pending.done()

    def wait_until_finished(self) -> str:
        """Blocks until the checkpoint is committed and returns its
        directory; raises the error of any process."""
        if not self._finished:
            try:
                self._pending.wait()
            finally:
                self._finished = True
                self._cleanup()
        return self.path


def save_async(directory: PathLike, tree: Any = None, *, args: Any = None, force: bool = False,
               format: str = "orbax", use_ocdbt: bool = True, use_zarr3: bool = True,
               step: Optional[int] = None, item_name: str = "default",
               step_prefix: Optional[str] = None, step_format_fixed_length: Optional[int] = None,
               custom_metadata: Any = None, chunk_byte_size: Optional[Size] = None,
               ocdbt_target_data_file_size: Optional[Size] = None, process_index: int = 0,
               process_count: int = 1, barrier: Optional[Callable[[str], None]] = None,
               coordinator: Any = None, replica_parallel: bool = True, compression: str = "default",
               memory_budget: Optional[Size] = None, timeout_s: float = 600.0,
               progress: Optional[Callable[[int, int], None]] = None) -> PendingSave:
    """Starts saving `tree` (see `save`, which takes the same arguments) and
    returns once its numpy arrays are copied into memory cairn owns (within
    `memory_budget` bytes), so the caller may change them; jax.Arrays, which
    never change, are not copied first but read in the background (cairn
    holds them until the save is finished). Encoding and writing go on in
    the background. Returns a PendingSave: ``wait_until_finished()`` returns
    the checkpoint's directory once it is committed."""
    if args is not None:
        if tree is not None:
            raise ValueError("cairn.save: pass either `tree` or `args`, not both")
        tree, custom_metadata, ocdbt_target_data_file_size, chunk_byte_size = _tree_of_save_args(
            args, custom_metadata, ocdbt_target_data_file_size, chunk_byte_size)
    if format != "orbax":
        raise ValueError(f"cairn.save: format {format!r} is not supported here (only 'orbax')")
    root = _leaves.absolute(directory)
    if step is not None:
        final_top = os.path.join(root, _core._orbax_step_name(step, step_prefix or "", step_format_fixed_length))
    else:
        final_top = root
    target = _leaves.byte_size("ocdbt_target_data_file_size", ocdbt_target_data_file_size, 2 ** 31)
    budget = _leaves.byte_size("memory_budget", memory_budget)
    chunk_bytes = _leaves.byte_size("chunk_byte_size", chunk_byte_size)
    c, cleanup = _coordinator_for(final_top, process_index, process_count, barrier, coordinator)
    pending = None
    try:
        if force and c.is_primary:
            _remove_checkpoint(final_top)
        leaves = _leaves.flatten(tree, c.process_index, c.process_count)
        pending = _core._engine_save(
            final_top, item_name if step is not None else "", leaves, c, use_ocdbt=use_ocdbt,
            use_zarr3=use_zarr3, replica_parallel=replica_parallel, compression=compression,
            memory_budget=budget, target_data_file_size=target,
            chunk_byte_size=chunk_bytes, custom_metadata=_leaves.json_text(custom_metadata),
            timeout_s=timeout_s, progress=progress)
        path = os.path.join(final_top, item_name) if step is not None else final_top
        return PendingSave(pending, cleanup, path, c)
    except BaseException:
        # A KeyboardInterrupt between the start and the handle: the save
        # stops before its commit (dropping it waits for that).
        if pending is not None:
            pending.cancel()
        cleanup()
        raise


def _tree_of_save_args(args, custom_metadata, target_data_file_size, chunk_byte_size):
    """(tree, custom_metadata, target data file size, chunk byte size) of
    ``ocp.args.PyTreeSave`` / ``StandardSave``; the keywords given to
    cairn.save win over those of `args`."""
    save_args = getattr(args, "save_args", None)
    tree = _orbax_args.apply_save_args(getattr(args, "item"), save_args)
    if custom_metadata is None:
        custom_metadata = getattr(args, "custom_metadata", None)
    if target_data_file_size is None:
        target_data_file_size = getattr(args, "ocdbt_target_data_file_size", None)
    if chunk_byte_size is None:
        chunk_byte_size = _orbax_args.chunk_byte_size(save_args)
    return tree, custom_metadata, target_data_file_size, chunk_byte_size


def _remove_checkpoint(final_top: str) -> None:
    """`save(..., force=True)`: removes what is at `final_top` first, as
    Orbax's ``Checkpointer.save(force=True)`` does."""
    if "://" not in final_top:
        if os.path.isdir(final_top):
            shutil.rmtree(final_top)
        return
    from cairn import kvstore
    kvstore.open(final_top.rstrip("/") + "/").delete_prefix("")


def save(directory: PathLike, tree: Any = None, *, args: Any = None, force: bool = False,
         format: str = "orbax", use_ocdbt: bool = True, use_zarr3: bool = True,
         step: Optional[int] = None, item_name: str = "default", step_prefix: Optional[str] = None,
         step_format_fixed_length: Optional[int] = None, custom_metadata: Any = None,
         chunk_byte_size: Optional[Size] = None, ocdbt_target_data_file_size: Optional[Size] = None,
         process_index: int = 0, process_count: int = 1,
         barrier: Optional[Callable[[str], None]] = None, coordinator: Any = None,
         replica_parallel: bool = True, compression: str = "default",
         memory_budget: Optional[Size] = None, timeout_s: float = 600.0,
         progress: Optional[Callable[[int, int], None]] = None) -> str:
    """Saves `tree` as an Orbax PyTree checkpoint; returns the final directory.

    Without `step`, `directory` becomes the item directory, as
    ``ocp.PyTreeCheckpointer().save(directory, tree)`` makes it. With
    `step`, `directory` is a checkpoint root and the tree goes to
    ``<directory>/<step name>/<item_name>/`` as ``CheckpointManager`` lays it
    out (`step_prefix`, `step_format_fixed_length` as Orbax's). The
    directory is written under a ``.orbax-checkpoint-tmp`` name, marked with
    ``commit_success.txt`` and renamed; FileExistsError if it exists,
    PermissionError if it cannot be written. `force=True` replaces an
    existing checkpoint. ValueError when two key paths map to the same Orbax
    param name (Orbax joins keys with '.' without escaping). Ctrl-C stops
    the save before its commit and raises KeyboardInterrupt within about a
    second, leaving nothing behind.

    Args:
      directory: a local path or a URL (``file://``, ``s3://``, ``gs://``).
      tree: any jax pytree of jax.Arrays, numpy arrays, scalars and strings.
      args: ``ocp.args.PyTreeSave(...)`` or ``StandardSave`` instead of
        `tree` (with its `save_args` casts, `custom_metadata` and
        `ocdbt_target_data_file_size`).
      format: "orbax" (the only one).
      use_ocdbt, use_zarr3: Orbax's four storage variants.
      custom_metadata: JSON-able value stored in ``_METADATA``.
      chunk_byte_size, ocdbt_target_data_file_size, memory_budget: sizes in
        bytes, as an int or a string such as ``"1GiB"`` or ``"512MiB"``.
        Chunks follow Orbax's rule: one chunk per write (shard) shape, split
        when larger than the target data file size (2 GiB) or
        `chunk_byte_size`. `memory_budget`: bytes of array data copied at a
        time (0 or None: no limit).
      compression: "default" (Orbax's zstd), "none", or "auto" (zstd only
        where a sample shrinks by 10% or more).
      process_index, process_count, barrier, coordinator: several processes
        save together with a `coordinator` (cairn.dist), or with their
        `process_index`, `process_count` and a `barrier` callable; in a
        multi-process jax job the coordinator is found from jax.
      replica_parallel: replicated arrays are written by all their replicas,
        a part each (as Orbax's ``replica_parallel``).
      timeout_s: how long a process waits for the others.
      progress: called as ``progress(bytes_done, bytes_total)`` with the
        bytes of this process's array data written, about every 1% and once
        at the end (bytes_done == bytes_total), from cairn's threads (as
        ``convert``'s progress).
    """
    return save_async(
        directory, tree, args=args, force=force, format=format, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3,
        step=step, item_name=item_name, step_prefix=step_prefix,
        step_format_fixed_length=step_format_fixed_length, custom_metadata=custom_metadata,
        chunk_byte_size=chunk_byte_size, ocdbt_target_data_file_size=ocdbt_target_data_file_size,
        process_index=process_index, process_count=process_count, barrier=barrier,
        coordinator=coordinator, replica_parallel=replica_parallel, compression=compression,
        memory_budget=memory_budget, timeout_s=timeout_s, progress=progress).wait_until_finished()


def all_steps(root: PathLike) -> list:
    """Finalized steps under a checkpoint root, ascending."""
    return [s for s, _ in _core._orbax_list_steps(os.fspath(root))]


def latest_step(root: PathLike) -> Optional[int]:
    """The newest finalized step under a checkpoint root; None if there is none."""
    steps = all_steps(root)
    return steps[-1] if steps else None




_HANDLERS = ("PyTreeCheckpointHandler", "StandardCheckpointHandler", "register_handlers",
             "unregister_handlers")


def __getattr__(name: str):
    # Orbax's handlers import orbax-checkpoint: loaded when first asked for,
    # so that `import cairn` neither imports nor changes Orbax.
    if name in _HANDLERS:
        from cairn import _orbax_handlers
        return getattr(_orbax_handlers, name)
    if name == "PyTreeHandler":
        from cairn import _orbax_v1
        return _orbax_v1.PyTreeHandler
    if name == "last_restore_stats":
        from cairn import _orbax_restore
        return _orbax_restore.last_restore_stats
    raise AttributeError(f"module 'cairn.orbax' has no attribute {name!r}")
