"""Orbax v1's ``PyTreeHandler`` over cairn: the seam of MaxText 0.2.5,
whose checkpointer is Orbax's v1 ``training.Checkpointer``::

    import orbax.checkpoint as ocp, cairn.orbax
    ocp.v1.handlers.register_handler(cairn.orbax.PyTreeHandler, checkpointable_name="items")

Every later v1 save and load of the checkpointable "items" (MaxText's
training state) then goes through cairn; the layout is Orbax's, so Orbax's
own handler restores it and the other way round. The handler reads its
storage options (``use_ocdbt``, ``use_zarr3``, compression, the write
memory limit) from the v1 ``Context`` as Orbax's does.
"""

from __future__ import annotations

import orbax.checkpoint as ocp

from cairn._orbax_handlers import PyTreeHandlerImpl

__all__ = ["PyTreeHandler"]


class PyTreeHandler(ocp.v1.handlers.PyTreeHandler):
    """Orbax v1's PyTreeHandler with cairn's implementation under it."""

    def __init__(self, *, context=None, **kwargs):
        super().__init__(context=context, **kwargs)
        saving = self._context.array_options.saving
        memory = self._context.memory_options
        mp = self._context.multiprocessing_options
        self._handler_impl = PyTreeHandlerImpl(
            use_ocdbt=saving.use_ocdbt, use_zarr3=saving.use_zarr3,
            compression="default" if saving.use_compression else "none",
            memory_budget=memory.write_concurrent_bytes,
            restore_concurrent_bytes=memory.read_concurrent_bytes,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                primary_host=mp.primary_host, active_processes=mp.active_processes,
                barrier_sync_key_prefix=mp.barrier_sync_key_prefix))
