"""Orbax checkpoint handlers backed by cairn's engine, for Orbax's own
``CheckpointManager``, ``Checkpointer`` and ``AsyncCheckpointer`` (and the
v1 ``training.Checkpointer`` MaxText builds over them)::

    import orbax.checkpoint as ocp, cairn.orbax
    mngr = ocp.CheckpointManager(
        "/ckpt", item_names=("items",),
        item_handlers={"items": cairn.orbax.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True)},
        options=ocp.CheckpointManagerOptions(max_to_keep=3))
    mngr.save(step, args=ocp.args.Composite(items=ocp.args.PyTreeSave(state)))

Orbax's manager makes the step's temporary directory, waits for the
handler's commit futures, writes ``_CHECKPOINT_METADATA`` and commits the
step; the handler writes the item's files into the directory it is given,
exactly as Orbax's own ``PyTreeCheckpointHandler`` lays them out, so either
handler restores what the other saved. ``typestr()`` is Orbax's own, so a
step saved through cairn's handler names Orbax's handler in its metadata.

Importing cairn changes nothing in Orbax: cairn's handlers are used where
they are named, or after ``cairn.orbax.register_handlers()`` makes them
the handlers of ``ocp.args.PyTreeSave/PyTreeRestore/StandardSave/
StandardRestore`` in Orbax's process-wide args registry
(``unregister_handlers()`` gives those back to Orbax).

``colocated=True`` (Pathways): every host's shard writes and reads run
inside ``jax.experimental.colocated_python`` functions on that host's
colocated CPU devices (cairn._colocated); the controller writes the tree
metadata and commits once.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, List, Optional, Union

import numpy as np
import orbax.checkpoint as ocp

from cairn import _core
from cairn import _leaves
from cairn import _orbax_args
from cairn import _orbax_restore
from cairn import _tree

__all__ = ["PyTreeCheckpointHandler", "StandardCheckpointHandler", "PyTreeHandlerImpl",
           "register_handlers", "unregister_handlers"]

class PyTreeHandlerImpl(ocp.BasePyTreeCheckpointHandler):
    """The implementation under Orbax's ``PyTreeCheckpointHandler``
    (its ``handler_impl``) and under Orbax v1's ``PyTreeHandler``: saves
    and restores with cairn's engine, reads metadata as Orbax does (the
    files are Orbax's).

    `async_save` takes what the caller may change next (numpy leaves are
    copied; jax.Arrays never change) and returns the commit future that
    writes the item once Orbax has made the directory; every process writes
    its own shards, the primary the metadata, and the processes' databases
    are merged under the item's root manifest before the future finishes
    (so ``_finalize_async`` has nothing left to do)."""

    def __init__(self, *, use_ocdbt: bool = True, use_zarr3: bool = False, compression: str = "default",
                 memory_budget: Optional[Union[int, str]] = None, colocated: bool = False, **orbax_kwargs):
        super().__init__(use_ocdbt=use_ocdbt, use_zarr3=use_zarr3, **orbax_kwargs)
        self._cairn = dict(use_ocdbt=bool(use_ocdbt), use_zarr3=bool(use_zarr3), compression=compression,
                           memory_budget=_leaves.byte_size("memory_budget", memory_budget))
        self._colocated = bool(colocated)

    async def async_save(self, directory, args) -> Optional[List[Any]]:
        run = self._start_save(str(directory), args)

        async def commit():
            await asyncio.to_thread(run)

        return [ocp.future.CommitFutureAwaitingContractedSignals(commit(), name="cairn_pytree_save")]

    def save(self, directory, *args, **kwargs) -> None:
        args = kwargs.get("args", args[0] if args else None)
        self._start_save(str(directory), args)()

    def restore(self, directory, args=None) -> Any:
        target, partial_restore = _orbax_args.target_of_restore_args(args) if args is not None else (None, False)
        if self._colocated:
            from cairn import _colocated
            return _colocated.restore(str(directory), target, partial_restore)
        return _orbax_restore.restore_item(str(directory), target, partial_restore=partial_restore)

    async def _finalize_async(self, directory) -> None:
        """Nothing left: the engine merged the processes' databases under the
        item's root manifest before its commit future finished."""

    def finalize(self, directory) -> None:
        pass

    def _start_save(self, directory: str, args):
        """Flattens the item now (copying numpy leaves) and returns a
        function that saves it into `directory`, returning once durable."""
        from cairn import dist

        if getattr(args, "partial_save_mode", False):
            raise NotImplementedError("cairn.orbax: Orbax's partial_save_mode is not supported")
        item = args.item
        if item is None or (not isinstance(item, np.ndarray) and _tree.is_empty_node(item)):
            raise ValueError("cairn.orbax: found an empty item (nothing to save)")
        save_args = getattr(args, "save_args", None)
        item = _orbax_args.apply_save_args(item, save_args)
        target = getattr(args, "ocdbt_target_data_file_size", None)
        options = dict(self._cairn, target_data_file_size=target if target is not None else 2 ** 31,
                       chunk_byte_size=_orbax_args.chunk_byte_size(save_args) or 0,
                       custom_metadata=_leaves.json_text(getattr(args, "custom_metadata", None)))
        if self._colocated:
            from cairn import _colocated
            return _colocated.start_save(directory, _own_numpy(item), options)
        coordinator = _handler_coordinator(dist)
        leaves = _leaves.flatten(_own_numpy(item), coordinator.process_index, coordinator.process_count)
        # The numpy leaves are this handler's own copies, held until the save
        # is done: the engine may read them in the background, like a
        # jax.Array's shards, instead of copying them again.
        leaves = [leaf[:6] + ([(o, raw, rid, True) for o, raw, rid, _ in leaf[6]],) + leaf[7:]
                  if leaf[1] == "np.ndarray" else leaf for leaf in leaves]

        def run():
            pending = _core._engine_save(directory, "", leaves, coordinator, caller_commits=True, **options)
            pending.wait()

        return run


def _impl_options(save_concurrent_gb, use_ocdbt, use_zarr3, use_compression, compression, colocated):
    if compression is None:
        compression = "default" if use_compression else "none"
    budget = int(save_concurrent_gb * (1 << 30)) if save_concurrent_gb else None
    return dict(use_ocdbt=use_ocdbt, use_zarr3=use_zarr3, compression=compression, memory_budget=budget,
                colocated=colocated)


def PyTreeCheckpointHandler(aggregate_filename: Optional[str] = None, *,  # noqa: N802 (Orbax's name)
                            save_concurrent_gb: Optional[int] = None, use_ocdbt: bool = True,
                            use_zarr3: bool = False, use_compression: bool = True,
                            compression: Optional[str] = None, colocated: bool = False,
                            **orbax_kwargs) -> ocp.PyTreeCheckpointHandler:
    """Orbax's own ``PyTreeCheckpointHandler`` with cairn's implementation
    under it (``handler_impl``): Orbax's args registry, managers and
    metadata see Orbax's handler; every byte is written and read by cairn.

    Takes Orbax's arguments (`use_ocdbt`, `use_zarr3` False by default as
    Orbax's, `use_compression`, `save_concurrent_gb`: cairn's memory budget
    for a save, and the rest of Orbax's tuning arguments) and cairn's
    (`compression`: "default", "none", "auto"; `colocated`: Pathways)."""
    cls = _CairnPyTree if ocp.args.get_registered_handler_cls(ocp.args.PyTreeSave) is _CairnPyTree \
        else ocp.PyTreeCheckpointHandler
    return cls(aggregate_filename, handler_impl=_impl_for(
        save_concurrent_gb, use_ocdbt, use_zarr3, use_compression, compression, colocated, orbax_kwargs),
        save_concurrent_gb=save_concurrent_gb, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3,
        use_compression=use_compression, **orbax_kwargs)


def _impl_for(save_concurrent_gb, use_ocdbt, use_zarr3, use_compression, compression, colocated,
              orbax_kwargs) -> PyTreeHandlerImpl:
    if orbax_kwargs.pop("handler_impl", None) is not None:
        raise ValueError("cairn.orbax.PyTreeCheckpointHandler: `handler_impl` is cairn's")
    if orbax_kwargs.get("type_handler_registry") not in (None, _global_type_registry()):
        raise NotImplementedError("cairn.orbax: a custom `type_handler_registry` changes how leaves are "
                                  "written; use Orbax's own handler for that")
    restore_gb = orbax_kwargs.get("restore_concurrent_gb")
    return PyTreeHandlerImpl(**_impl_options(save_concurrent_gb, use_ocdbt, use_zarr3, use_compression,
                                              compression, colocated),
                             restore_concurrent_bytes=int(restore_gb * (1 << 30)) if restore_gb else None)


def StandardCheckpointHandler(*, save_concurrent_gb: int = 96, restore_concurrent_gb: int = 96,  # noqa: N802
                              use_ocdbt: bool = True, compression: Optional[str] = None,
                              colocated: bool = False, **orbax_kwargs) -> ocp.StandardCheckpointHandler:
    """Orbax's own ``StandardCheckpointHandler`` (``StandardSave`` /
    ``StandardRestore``: arrays and scalars, the target's exact structure)
    over cairn's implementation."""
    cls = _CairnStandard if ocp.args.get_registered_handler_cls(ocp.args.StandardSave) is _CairnStandard \
        else ocp.StandardCheckpointHandler
    handler = ocp.StandardCheckpointHandler.__new__(cls)
    ocp.StandardCheckpointHandler.__init__(handler, save_concurrent_gb=save_concurrent_gb,
                                           restore_concurrent_gb=restore_concurrent_gb,
                                           use_ocdbt=use_ocdbt, **orbax_kwargs)
    _use_cairn_under(handler, save_concurrent_gb, restore_concurrent_gb, use_ocdbt, compression, colocated,
                     orbax_kwargs)
    return handler


def _use_cairn_under(handler, save_concurrent_gb, restore_concurrent_gb, use_ocdbt, compression, colocated,
                     orbax_kwargs) -> None:
    # Orbax's StandardCheckpointHandler delegates everything to the
    # PyTreeCheckpointHandler it holds (`_impl`); cairn's takes its place.
    handler._impl = ocp.PyTreeCheckpointHandler(
        save_concurrent_gb=save_concurrent_gb, restore_concurrent_gb=restore_concurrent_gb,
        use_ocdbt=use_ocdbt, handler_impl=_impl_for(save_concurrent_gb, use_ocdbt, False, True, compression,
                                                    colocated, {"restore_concurrent_gb": restore_concurrent_gb}),
        multiprocessing_options=orbax_kwargs.get("multiprocessing_options",
                                                 ocp.options.MultiprocessingOptions()))


def _global_type_registry():
    from orbax.checkpoint._src.serialization import type_handler_registry
    return type_handler_registry.GLOBAL_TYPE_HANDLER_REGISTRY


def _handler_coordinator(dist):
    """jax.distributed's coordinator in a multi-process jax job, else the
    one cairn.dist.detect() finds."""
    jax = sys.modules.get("jax")
    if jax is not None and jax.process_count() > 1:
        return dist.from_jax()
    return dist.detect()


def _own_numpy(item):
    """`item` with its numpy arrays copied: Orbax's caller may change them
    once async_save returns, before the commit future writes them."""
    leaves, rebuild = _tree.flatten(item)
    return rebuild([np.array(v, copy=True) if isinstance(v, np.ndarray) else v for _, v in leaves])


def register_handlers() -> None:
    """Makes cairn the implementation of every ``ocp.PyTreeCheckpointHandler``
    and ``StandardCheckpointHandler`` that Orbax creates from its args
    registry in this process (``ocp.args.PyTreeSave/PyTreeRestore/
    StandardSave/StandardRestore`` without explicit handlers). Process-wide,
    as Orbax's registry is; ``unregister_handlers()`` undoes it. (Orbax v1,
    MaxText 0.2.5: ``ocp.v1.handlers.register_handler(cairn.orbax.PyTreeHandler,
    checkpointable_name="items")``.)"""
    for save, restore, ours in (("PyTreeSave", "PyTreeRestore", _CairnPyTree),
                                ("StandardSave", "StandardRestore", _CairnStandard)):
        _register_args(getattr(ocp.args, save), getattr(ocp.args, restore), ours)


def unregister_handlers() -> None:
    """Gives the args back to Orbax's own handlers."""
    for save, restore, theirs in (("PyTreeSave", "PyTreeRestore", ocp.PyTreeCheckpointHandler),
                                  ("StandardSave", "StandardRestore", ocp.StandardCheckpointHandler)):
        _register_args(getattr(ocp.args, save), getattr(ocp.args, restore), theirs)


def _register_args(save_args, restore_args, handler_cls) -> None:
    """What ``ocp.args.register_with_handler`` does to the args registry,
    without its handler-type registration: cairn's handler classes carry
    Orbax's typestr (a step they save names Orbax's handler, so Orbax alone
    restores it), and Orbax's type registry refuses a second class under a
    typestr it holds."""
    from orbax.checkpoint import checkpoint_args

    checkpoint_args._SAVE_ARG_TO_HANDLER[save_args] = handler_cls
    checkpoint_args._RESTORE_ARG_TO_HANDLER[restore_args] = handler_cls


class _CairnPyTree(ocp.PyTreeCheckpointHandler):
    """What Orbax's args registry creates after ``register_handlers()``:
    Orbax's PyTree handler over cairn's implementation (same typestr)."""

    def __init__(self, aggregate_filename=None, *, handler_impl=None, save_concurrent_gb=None,
                 use_ocdbt=True, use_zarr3=False, use_compression=True, **kwargs):
        if handler_impl is None:
            handler_impl = _impl_for(save_concurrent_gb, use_ocdbt, use_zarr3, use_compression, None, False,
                                     kwargs)
        super().__init__(aggregate_filename, handler_impl=handler_impl, save_concurrent_gb=save_concurrent_gb,
                         use_ocdbt=use_ocdbt, use_zarr3=use_zarr3, use_compression=use_compression, **kwargs)

    @classmethod
    def typestr(cls) -> str:
        return ocp.PyTreeCheckpointHandler.typestr()


class _CairnStandard(ocp.StandardCheckpointHandler):
    def __init__(self, *, save_concurrent_gb=96, restore_concurrent_gb=96, use_ocdbt=True, **kwargs):
        super().__init__(save_concurrent_gb=save_concurrent_gb, restore_concurrent_gb=restore_concurrent_gb,
                         use_ocdbt=use_ocdbt, **kwargs)
        _use_cairn_under(self, save_concurrent_gb, restore_concurrent_gb, use_ocdbt, None, False, kwargs)

    @classmethod
    def typestr(cls) -> str:
        return ocp.StandardCheckpointHandler.typestr()
