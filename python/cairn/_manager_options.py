"""Orbax's ``CheckpointManagerOptions`` read once into cairn's manager
options: the one place ``cairn.CheckpointManager(options=...)`` (and the
emergency manager's persistent tier) turns Orbax's settings into cairn's.

Options cairn's manager does the same with: save_interval_steps,
max_to_keep, keep_period, step_prefix, step_format_fixed_length,
enable_async_checkpointing, save_on_steps, should_save_fn, read_only,
best_fn with best_mode and keep_checkpoints_without_metrics (Orbax's BestN:
max_to_keep counts the best steps; their metrics are the step's "metrics"
JSON item, as Orbax writes it), prevent_write_metrics, create,
cleanup_tmp_directories (cairn always removes what interrupted
saves left), and the policies that say the same (``FixedIntervalPolicy``,
``ContinuousCheckpointingPolicy``, ``LatestN``, ``EveryNSteps``, and
``AnySavePolicy`` / ``AnyPreservationPolicy`` of those). Options that only
tune Orbax's own machinery (async_options, file_options, deletion threads)
are accepted and change nothing. Any other option set to something other
than its default is refused with NotImplementedError naming it: cairn
never silently saves or deletes differently from what the options say.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional

__all__ = ["ManagerPolicy", "from_orbax_options"]

# Orbax's own tuning: no effect on which steps exist or what they hold.
_TUNING = {"async_options", "multiprocessing_options", "file_options", "atomicity_options",
           "enable_background_delete", "num_deletion_threads", "save_root_metadata",
           "enable_should_save_is_saving_in_progress_check", "enable_per_process_directory_creation",
           "lightweight_initialize", "temporary_path_class", "create", "cleanup_tmp_directories"}
_MAPPED = {"save_interval_steps", "max_to_keep", "keep_period", "step_prefix", "step_format_fixed_length",
           "enable_async_checkpointing", "save_on_steps", "should_save_fn", "read_only",
           "save_decision_policy", "preservation_policy", "best_fn", "best_mode",
           "keep_checkpoints_without_metrics", "prevent_write_metrics"}


@dataclasses.dataclass
class ManagerPolicy:
    """What cairn's manager does with a step: the native options, and the
    decisions only Python can make (a user's function)."""
    native: Dict[str, Any]
    save_on_steps: frozenset = frozenset()
    should_save_fn: Optional[Callable[[int, Optional[int]], bool]] = None
    read_only: bool = False
    best_fn: Optional[Callable[[Any], float]] = None  # the value of a step's metrics
    write_metrics: bool = True


def _refuse(name: str, value: Any) -> None:
    raise NotImplementedError(
        f"cairn.CheckpointManager: CheckpointManagerOptions.{name}={value!r} is not supported; "
        "ocp.CheckpointManager with item_handlers={...: cairn.orbax.PyTreeCheckpointHandler()} "
        "supports every Orbax option with cairn writing the arrays")


def _interval_of(policy) -> Optional[int]:
    """save_interval_steps of a save decision policy that is an interval."""
    name = type(policy).__name__
    if name == "FixedIntervalPolicy":
        return int(policy.interval)
    if name == "ContinuousCheckpointingPolicy" and getattr(policy, "minimum_interval_secs", None) in (None, 0):
        return 1
    if name == "AnySavePolicy":
        intervals = [_interval_of(p) for p in policy.policies]
        if len(intervals) == 1:
            return intervals[0]
    _refuse("save_decision_policy", policy)
    return None


def _retention_of(policy, native: Dict[str, Any]) -> None:
    name = type(policy).__name__
    if name == "LatestN":
        native["max_to_keep"] = int(policy.n)
    elif name == "EveryNSteps":
        native["keep_period"] = int(policy.interval_steps)
    elif name == "AnyPreservationPolicy":
        for p in policy.policies:
            _retention_of(p, native)
    else:
        _refuse("preservation_policy", policy)


def from_orbax_options(options) -> ManagerPolicy:
    """Reads an ``ocp.CheckpointManagerOptions``; NotImplementedError for a
    setting cairn's manager would not honour."""
    defaults = type(options)()
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if f.name in _TUNING or f.name in _MAPPED:
            continue
        if value != getattr(defaults, f.name):
            _refuse(f.name, value)
    native: Dict[str, Any] = {
        # Orbax sets 0 with read_only or should_save_fn (which decide instead).
        "save_interval_steps": max(1, int(options.save_interval_steps)),
        "max_to_keep": options.max_to_keep,
        "keep_period": options.keep_period,
        "enable_async": bool(options.enable_async_checkpointing),
        "step_prefix": options.step_prefix,
        "step_format_fixed_length": options.step_format_fixed_length,
    }
    if options.best_fn is not None:
        # Orbax's BestN: max_to_keep counts the best steps by best_fn.
        native.update(retention_by_score=True, higher_is_better=options.best_mode != "min",
                      keep_unscored=bool(options.keep_checkpoints_without_metrics))
    if options.save_decision_policy is not None:
        native["save_interval_steps"] = _interval_of(options.save_decision_policy)
    if options.preservation_policy is not None:
        _retention_of(options.preservation_policy, native)
    return ManagerPolicy(native=native, save_on_steps=frozenset(options.save_on_steps or ()),
                         should_save_fn=options.should_save_fn, read_only=bool(options.read_only),
                         best_fn=options.best_fn, write_metrics=not options.prevent_write_metrics)
