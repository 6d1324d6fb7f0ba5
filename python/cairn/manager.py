"""``cairn.CheckpointManager``: numbered steps of a training run, as
orbax-checkpoint's ``CheckpointManager`` keeps them.

The directory holds ``<step>/default/`` (an Orbax PyTree item) and
``<step>/_CHECKPOINT_METADATA``, exactly what Orbax's manager writes for a
single item saved with ``args=ocp.args.StandardSave(tree)``: Orbax restores
and resumes what this manager saved, and this manager lists, restores,
numbers and prunes steps Orbax saved. ::

    with cairn.CheckpointManager("/ckpt", save_interval_steps=100, max_to_keep=3,
                                 keep_period=1000) as mngr:
        for step in range(start, end):
            ...
            mngr.save(step, state)          # False when should_save(step) says no
        mngr.wait_until_finished()
        state = mngr.restore(mngr.latest_step(), target=abstract_state)

All logic is native (src/cairn/engine/checkpoint_manager.h): this module
only flattens the tree (as ``cairn.save`` does) and calls it. Steps are
deleted by retention crash-safely (renamed to a name no reader takes for a
step before their files are removed; docs/CHECKPOINT_MANAGER.md).

Every process of a job creates the manager with the same arguments and calls
the same methods in the same order; in a multi-process jax job the
coordinator is jax.distributed's (as for ``cairn.save``), under ``mpirun``
MPI's, or pass ``coordinator=`` (``cairn.dist``).
"""

from __future__ import annotations

from typing import Any, Optional

from cairn import _core
from cairn import orbax as _orbax

__all__ = ["CheckpointManager"]


class CheckpointManager:
    """Saves, lists, restores and prunes the steps under `directory`.

    Options as Orbax's ``CheckpointManagerOptions``: `save_interval_steps`,
    `max_to_keep` (None: keep all), `keep_period` (also keep steps divisible
    by it), `enable_async` (``save`` returns once the arrays are copied;
    commit and retention go on in the background), `step_prefix` and
    `step_format_fixed_length`. Storage options as ``cairn.save``.
    """

    def __init__(self, directory, *, save_interval_steps: int = 1, max_to_keep: Optional[int] = None,
                 keep_period: Optional[int] = None, enable_async: bool = True,
                 step_prefix: Optional[str] = None, step_format_fixed_length: Optional[int] = None,
                 item_name: str = "default", use_ocdbt: bool = True, use_zarr3: bool = True,
                 replica_parallel: bool = True, compression: str = "default",
                 memory_budget: Optional[int] = None, chunk_byte_size: Optional[int] = None,
                 ocdbt_target_data_file_size: Optional[int] = None, coordinator=None,
                 timeout_s: float = 600.0, _crash_at: Optional[str] = None):
        from cairn import dist

        self.directory = _orbax._absolute(directory)
        self._item_name = item_name
        self._coordinator = coordinator if coordinator is not None else dist.detect()
        target = ocdbt_target_data_file_size if ocdbt_target_data_file_size is not None else 2 ** 31
        # `_crash_at` (tests only): the process kills itself with SIGKILL at
        # that named point of a save or a deletion (checkpoint_manager.h).
        self._native = _core._manager_open(
            self.directory, self._coordinator, save_interval_steps=save_interval_steps,
            max_to_keep=max_to_keep, keep_period=keep_period, enable_async=enable_async,
            step_prefix=step_prefix or "", step_format_fixed_length=step_format_fixed_length,
            item_name=item_name, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3,
            replica_parallel=replica_parallel, compression=compression,
            memory_budget=memory_budget or 0, target_data_file_size=target,
            chunk_byte_size=chunk_byte_size or 0, timeout_s=timeout_s, crash_at=_crash_at)

    def should_save(self, step: int) -> bool:
        """Orbax's default decision: above the latest step, and a multiple of
        save_interval_steps (or the first save)."""
        return self._native.should_save(int(step))

    def save(self, step: int, tree: Any = None, *, args: Any = None, force: bool = False) -> bool:
        """Saves `tree` (or ``args.item``, e.g. ``ocp.args.StandardSave(tree)``)
        as step `step`; returns False without saving when ``should_save``
        says no, unless `force`. FileExistsError for a committed step. With
        enable_async, returns once the arrays are copied."""
        if args is not None:
            tree = getattr(args, "item")
        c = self._coordinator
        leaves = _orbax._flatten(tree, c.process_index, c.process_count)
        return self._native.save(int(step), leaves, force)

    def wait_until_finished(self) -> None:
        """Blocks until the background save and retention are done; raises
        their error."""
        self._native.wait_until_finished()

    def all_steps(self) -> list:
        """Committed steps and the one being saved, ascending (as Orbax)."""
        return list(self._native.all_steps())

    def latest_step(self) -> Optional[int]:
        return self._native.latest_step()

    def restore(self, step: Optional[int] = None, target: Any = None, *, args: Any = None):
        """Restores step `step` (default: the latest) as ``cairn.restore``
        does; `target` (or ``args.item``) places arrays on its shardings."""
        if args is not None and target is None:
            target = getattr(args, "item", None)
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"cairn.CheckpointManager: no steps under {self.directory}")
        if self._native.pending_step() == step:
            self.wait_until_finished()
        return _orbax.restore(self._native.step_path(int(step)), target, item_name=self._item_name)

    def delete(self, step: int) -> None:
        """Deletes a committed step (crash-safely); FileNotFoundError if absent."""
        self._native.delete(int(step))

    def reload(self) -> None:
        """Lists the directory again (after another program changed it)."""
        self._native.reload()

    def close(self) -> None:
        """Waits for the background work; later saves fail."""
        self._native.close()

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
