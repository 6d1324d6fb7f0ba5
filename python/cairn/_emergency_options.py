"""Orbax's emergency ``CheckpointManager`` signature read once into
cairn's: ``(local_directory, persistent_directory, global_mesh,
abstract_state, options=emergency.CheckpointManagerOptions(...))``, as
MaxText's ``create_orbax_emergency_checkpoint_manager`` and AXLearn's
``checkpointer_orbax_emergency`` build it.

Read: the local tier's ``save_interval_steps`` and ``max_to_keep`` (None:
every step is kept, as Orbax), the persistent tier's ``save_interval_steps``
and ``max_to_keep``, ``replica_axis_index`` (the data-parallel replicas are
the processes of each slice of the mesh along it), and
``enable_async_checkpointing``. Orbax's tuning options change nothing; any
other option set away from its default is refused by name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict

__all__ = ["from_orbax_emergency", "replicas_of_mesh"]

_TUNING = {"async_options", "multiprocessing_options", "cleanup_tmp_directories",
           "single_host_load_and_broadcast", "debug_use_full_global_mesh"}


def _refuse(where: str, name: str, value: Any) -> None:
    raise NotImplementedError(f"cairn.emergency.CheckpointManager: {where}.{name}={value!r} is not supported")


def _check_rest(obj, where: str, mapped: set) -> None:
    defaults = type(obj)()
    for f in dataclasses.fields(obj):
        if f.name in mapped or f.name in _TUNING:
            continue
        if getattr(obj, f.name) != getattr(defaults, f.name):
            _refuse(where, f.name, getattr(obj, f.name))


def replicas_of_mesh(mesh, axis: int) -> int:
    """How many data-parallel replicas of processes `mesh` has along `axis`:
    the slices' process sets when they are disjoint (one replica when
    slices share a process, as on a single host)."""
    import numpy as np

    devices = np.asarray(mesh.devices)
    groups = []
    for i in range(devices.shape[axis]):
        groups.append(frozenset(int(d.process_index) for d in np.take(devices, i, axis=axis).flat))
    distinct = set(groups)
    if sum(len(g) for g in distinct) != len(frozenset().union(*distinct)):
        return 1
    return len(distinct)


def from_orbax_emergency(options, global_mesh) -> Dict[str, Any]:
    """cairn.emergency.CheckpointManager keywords from Orbax's emergency
    ``CheckpointManagerOptions`` (None: Orbax's defaults)."""
    if options is None:
        from orbax.checkpoint.experimental.emergency import checkpoint_manager as em
        options = em.CheckpointManagerOptions()
    _check_rest(options, "options", {"local", "persistent", "replica_axis_index", "enable_async_checkpointing",
                                     "step_name_format"})
    if options.step_name_format != type(options)().step_name_format:
        _refuse("options", "step_name_format", options.step_name_format)
    _check_rest(options.local, "options.local", {"save_interval_steps", "max_to_keep"})
    _check_rest(options.persistent, "options.persistent", {"save_interval_steps", "max_to_keep"})
    local_keep = options.local.max_to_keep
    kwargs: Dict[str, Any] = dict(
        local_save_interval_steps=int(options.local.save_interval_steps),
        local_max_to_keep=0 if local_keep is None else int(local_keep),  # 0: every step is kept
        persistent_save_interval_steps=int(options.persistent.save_interval_steps),
        persistent_max_to_keep=options.persistent.max_to_keep,
        enable_async=bool(options.enable_async_checkpointing))
    if global_mesh is not None:
        kwargs["num_replicas"] = replicas_of_mesh(global_mesh, int(options.replica_axis_index))
    return kwargs
