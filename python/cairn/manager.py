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

import os
from typing import Any, Callable, Optional, Sequence, Union

from cairn import _core
from cairn import _leaves
from cairn import _manager_items
from cairn import _manager_options
from cairn import _orbax_restore

__all__ = ["CheckpointManager"]


class CheckpointManager:
    """Saves, lists, restores and prunes the steps under `directory`.

    Options as Orbax's ``CheckpointManagerOptions``: `save_interval_steps`,
    `max_to_keep` (None: keep all), `keep_period` (also keep steps divisible
    by it), `enable_async` (``save`` returns once the arrays are copied;
    commit and retention go on in the background), `step_prefix` and
    `step_format_fixed_length`. Storage options as ``cairn.save``
    (`memory_budget`, `chunk_byte_size`, `ocdbt_target_data_file_size`: an
    int or a string such as ``"1GiB"``). `at_point`: an observer called with
    the name of each point a save or a deletion reaches (data_written,
    before_item_commit, before_step_commit, ...), on the manager's threads.

    Orbax's own signature works too (docs/ORBAX_INTEGRATION.md says which
    options map)::

        cairn.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(max_to_keep=3),
                                item_names=("items", "config"),
                                item_handlers={"items": ocp.PyTreeCheckpointHandler()})
        mngr.save(step, args=ocp.args.Composite(items=ocp.args.PyTreeSave(state),
                                                config=ocp.args.JsonSave({...})))

    A step holds one PyTree item (``PyTreeSave``/``StandardSave``; named by
    `item_names`/`item_handlers`, `item_name`, or the Composite's key) and
    any number of JSON items (``JsonSave``), written and committed with it.
    """

    def __init__(self, directory: Union[str, "os.PathLike[str]"], checkpointers: Any = None,
                 options: Any = None, metadata: Any = None, item_names: Optional[Sequence[str]] = None,
                 item_handlers: Any = None, logger: Any = None, handler_registry: Any = None, *,
                 save_interval_steps: int = 1, max_to_keep: Optional[int] = None,
                 keep_period: Optional[int] = None, enable_async: bool = True,
                 step_prefix: Optional[str] = None, step_format_fixed_length: Optional[int] = None,
                 item_name: Optional[str] = None, use_ocdbt: bool = True, use_zarr3: bool = True,
                 replica_parallel: bool = True, compression: str = "default",
                 memory_budget: Optional[Union[int, str]] = None,
                 chunk_byte_size: Optional[Union[int, str]] = None,
                 ocdbt_target_data_file_size: Optional[Union[int, str]] = None, coordinator: Any = None,
                 timeout_s: float = 600.0, at_point: Optional[Callable[[str], None]] = None) -> None:
        from cairn import dist

        for name, value in (("checkpointers", checkpointers), ("handler_registry", handler_registry),
                            ("metadata", metadata)):
            if value is not None:
                raise NotImplementedError(f"cairn.CheckpointManager: Orbax's `{name}` is not supported "
                                          "(use item_names/item_handlers and args=)")
        self.directory = _leaves.absolute(directory)
        self._items = _manager_items.ItemLayout.from_orbax(item_names, item_handlers, item_name)
        if options is not None:
            policy = _manager_options.from_orbax_options(options)
        else:
            policy = _manager_options.ManagerPolicy(native=dict(
                save_interval_steps=save_interval_steps, max_to_keep=max_to_keep, keep_period=keep_period,
                enable_async=enable_async, step_prefix=step_prefix,
                step_format_fixed_length=step_format_fixed_length))
        self._policy = policy
        self._coordinator = coordinator if coordinator is not None else dist.detect()
        target = _leaves.byte_size("ocdbt_target_data_file_size", ocdbt_target_data_file_size, 2 ** 31)
        budget = _leaves.byte_size("memory_budget", memory_budget)
        chunk_bytes = _leaves.byte_size("chunk_byte_size", chunk_byte_size)
        native = dict(policy.native)
        native["step_prefix"] = native.get("step_prefix") or ""
        # `at_point`: called with the name of each point a save or a deletion
        # reaches (checkpoint_manager.h: data_written, before_item_commit,
        # before_step_commit, ...), on the manager's threads; crash tests
        # kill the process from it.
        self._native = _core._manager_open(
            self.directory, self._coordinator, item_name=self._items.pytree_name or "default",
            use_ocdbt=use_ocdbt, use_zarr3=use_zarr3, replica_parallel=replica_parallel,
            compression=compression, memory_budget=budget, target_data_file_size=target,
            chunk_byte_size=chunk_bytes, timeout_s=timeout_s, at_point=at_point, **native)
        self._closed = False
        self._scores = {}  # step -> best_fn(metrics), with best_fn
        self._load_scores()

    def _load_scores(self) -> None:
        """With best_fn: the value of every committed step's metrics (its
        "metrics" item), for retention and best_step."""
        if self._policy.best_fn is None:
            return
        scores = {}
        for step in self._native.all_steps():
            metrics = _manager_items.read_metrics(self._native.step_path(int(step)))
            if metrics is not None:
                scores[int(step)] = float(self._policy.best_fn(metrics))
        self._scores = scores
        self._native.set_scores(scores)

    def should_save(self, step: int) -> bool:
        """Orbax's default decision: above the latest step, and a multiple of
        save_interval_steps (or the first save), or one of `save_on_steps`,
        or a preemption sync point; `should_save_fn` when given instead."""
        step = int(step)
        if self._policy.read_only:
            return False
        latest = self.latest_step()
        if latest is not None and step <= latest:
            return False
        if self._policy.should_save_fn is not None:
            return bool(self._policy.should_save_fn(step, latest))
        return (self._native.should_save(step) or step in self._policy.save_on_steps
                or self.reached_preemption(step))

    def reached_preemption(self, step: int) -> bool:
        """True when jax's preemption sync point is reached at `step` (as
        Orbax's manager; False without jax.distributed's preemption service)."""
        return _manager_items.reached_preemption(int(step))

    def save(self, step: int, tree: Any = None, *, args: Any = None, force: bool = False,
             metrics: Any = None, custom_metadata: Any = None,
             progress: Optional[Callable[[int, int], None]] = None) -> bool:
        """Saves `tree` (or the items of `args`: ``StandardSave(tree)``,
        ``PyTreeSave``, or a ``Composite`` of one PyTree item and JSON items)
        as step `step`; returns False without saving when ``should_save``
        says no, unless `force`. FileExistsError for a committed step. With
        enable_async, returns once the arrays are copied. `metrics` (a tree
        of numbers): with `best_fn`, written as the step's "metrics" item
        (as Orbax writes them) and ranked by best_fn for retention; without,
        ignored as Orbax ignores them. `custom_metadata` (JSON) goes into the
        step's ``_CHECKPOINT_METADATA``, as Orbax's. `progress`: called as
        ``progress(bytes_done, bytes_total)`` with the bytes this process has
        written of the step's arrays, about every 1% and once at the end, on
        the save's background threads (as ``cairn.save``'s)."""
        step = int(step)
        if self._closed:
            raise RuntimeError(f"cairn.CheckpointManager: saving step {step} under {self.directory}: "
                               "the manager is closed")
        if self._policy.read_only:
            return False
        parts = self._items.parts_of_save(tree, args)
        if not force and not self.should_save(step):
            return False
        c = self._coordinator
        leaves = _leaves.flatten(parts.tree, c.process_index, c.process_count)
        score = None
        if self._policy.best_fn is not None and metrics is not None:
            score = float(self._policy.best_fn(metrics))
            self._scores[step] = score
            if self._policy.write_metrics:
                parts.add_metrics(metrics)
        return self._native.save(step, leaves, True, extra_files=parts.files,
                                 extra_item_handlers=parts.handlers, item_name=parts.pytree_name,
                                 score=score, custom_metadata=_leaves.json_text(custom_metadata),
                                 progress=progress)

    def wait_until_finished(self) -> None:
        """Blocks until the background save and retention are done; raises
        their error."""
        self._native.wait_until_finished()

    def all_steps(self, read: bool = False) -> list[int]:
        """Committed steps and the one being saved, ascending (as Orbax)."""
        if read:
            self.reload()
        return list(self._native.all_steps())

    def latest_step(self) -> Optional[int]:
        """The newest committed (or being saved) step; None if there is none."""
        return self._native.latest_step()

    def best_step(self) -> Optional[int]:
        """The step whose metrics best_fn ranks best (ties: the later step);
        the latest step without best_fn or without any metrics (as Orbax)."""
        steps = self.all_steps()
        scored = [s for s in steps if s in self._scores]
        if self._policy.best_fn is None or not scored:
            return self.latest_step()
        higher = self._policy.native.get("higher_is_better", True)
        return max(scored, key=lambda s: ((self._scores[s] if higher else -self._scores[s]), s))

    def is_saving_in_progress(self) -> bool:
        """True while a background save has not finished."""
        return self._native.pending_step() is not None

    def restore(self, step: Optional[int] = None, target: Any = None, *, args: Any = None,
                partial_restore: bool = False,
                progress: Optional[Callable[[int, int], None]] = None) -> Any:
        """Restores step `step` (default: the latest) as ``cairn.restore``
        does; `target` (or the item of ``args``: ``StandardRestore``,
        ``PyTreeRestore``, or a ``Composite`` that also names JSON items,
        which then come back in an Orbax-like mapping by item name) places
        arrays on its shardings. `progress`: called as
        ``progress(bytes_done, bytes_total)`` with the bytes read, as
        ``cairn.restore``'s."""
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"cairn.CheckpointManager: no steps under {self.directory}")
        if self._native.pending_step() == step:
            self.wait_until_finished()
        step_path = self._native.step_path(int(step))
        plan = self._items.parts_of_restore(target, args, partial_restore, step_path)

        def pytree(name, t, partial):
            return _orbax_restore.restore_item(step_path, t, item_name=name, partial_restore=partial,
                                               progress=progress)

        return plan.run(pytree)

    def item_metadata(self, step: int) -> Any:
        """The PyTree item's tree of ``_METADATA`` as cairn reads it (nested
        dicts/lists of (kind, ...) tuples)."""
        return _core._orbax_open_item(self._native.step_path(int(step)), self._items.pytree_name or "").tree()

    def delete(self, step: int) -> None:
        """Deletes a committed step (crash-safely); FileNotFoundError if absent."""
        self._native.delete(int(step))

    def reload(self) -> None:
        """Lists the directory again (after another program changed it)."""
        self._native.reload()
        self._load_scores()

    def close(self) -> None:
        """Waits for the background work; later saves fail."""
        self._closed = True
        self._native.close()

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
