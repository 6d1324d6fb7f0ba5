"""The items of a step for ``cairn.CheckpointManager`` under Orbax's
signature: which item is the PyTree item (``item_names`` /
``item_handlers`` / ``Composite`` keys), and the JSON items beside it
(``ocp.args.JsonSave`` / ``JsonRestore``), which are written as Orbax's
``JsonCheckpointHandler`` writes them (``<step>/<item>/metadata``) and
committed with the step by the native manager.

Only Orbax's args objects are read here (by class name: nothing imports
orbax-checkpoint); the manager's logic is native."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from cairn import _orbax_args

JSON_HANDLER = "orbax.checkpoint._src.handlers.json_checkpoint_handler.JsonCheckpointHandler"
_PYTREE_SAVE = ("PyTreeSaveArgs", "StandardSaveArgs", "PyTreeSave", "StandardSave")
_PYTREE_RESTORE = ("PyTreeRestoreArgs", "StandardRestoreArgs", "PyTreeRestore", "StandardRestore")
_JSON_SAVE = ("JsonSaveArgs", "JsonSave")
_JSON_RESTORE = ("JsonRestoreArgs", "JsonRestore")


def _kind(obj) -> str:
    return type(obj).__name__


def _is_handler_of(handler, *names) -> bool:
    return any(c.__name__ in names for c in type(handler).__mro__)


METRICS_ITEM = "metrics"  # Orbax's: the item and its file name


@dataclasses.dataclass
class SaveParts:
    tree: Any
    files: List[Tuple[str, str]]       # (path relative to the step, content)
    handlers: Dict[str, str]           # JSON item name -> Orbax handler typestr
    pytree_name: str

    def add_metrics(self, metrics) -> None:
        """The step's metrics as Orbax's manager writes them (a JSON item)."""
        if METRICS_ITEM in self.handlers or self.pytree_name == METRICS_ITEM:
            raise ValueError("cairn.CheckpointManager.save: `metrics` is a reserved item name")
        self.files.append((f"{METRICS_ITEM}/{METRICS_ITEM}", json.dumps(metrics, default=_json_number)))
        self.handlers[METRICS_ITEM] = JSON_HANDLER


def _json_number(value):
    """numpy and jax scalars in metrics, as their Python numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"metrics hold {type(value).__name__}, which is not JSON")


def read_metrics(step_path: str):
    """A step's metrics (its "metrics" item), or None when it has none."""
    try:
        return json.loads(read_small_file(step_path, f"{METRICS_ITEM}/{METRICS_ITEM}"))
    except FileNotFoundError:
        return None


@dataclasses.dataclass
class ItemLayout:
    pytree_name: Optional[str] = None  # fixed by the constructor, else named by each save
    json_files: Dict[str, str] = dataclasses.field(default_factory=dict)  # JSON item -> file name
    names: Optional[Tuple[str, ...]] = None  # Orbax's item_names, when given

    @classmethod
    def from_orbax(cls, item_names, item_handlers, item_name) -> "ItemLayout":
        layout = cls(pytree_name=item_name, names=tuple(item_names) if item_names else None)
        if item_handlers is None:
            return layout
        if not isinstance(item_handlers, dict):
            item_handlers = {item_name or "default": item_handlers}
        for name, handler in item_handlers.items():
            if handler is None:
                continue
            if _is_handler_of(handler, "PyTreeCheckpointHandler", "StandardCheckpointHandler"):
                if layout.pytree_name not in (None, name):
                    raise ValueError(f"cairn.CheckpointManager: items `{layout.pytree_name}` and `{name}` are "
                                     "both PyTree items; a step holds one")
                layout.pytree_name = name
            elif _is_handler_of(handler, "JsonCheckpointHandler"):
                layout.json_files[name] = getattr(handler, "_filename", None) or "metadata"
            else:
                raise NotImplementedError(
                    f"cairn.CheckpointManager: item `{name}` has handler {type(handler).__name__}; cairn's "
                    "manager holds one PyTree item and JSON items (for others: ocp.CheckpointManager with "
                    "item_handlers={...: cairn.orbax.PyTreeCheckpointHandler()})")
        return layout

    def _check_name(self, name: str) -> None:
        if self.names is not None and name not in self.names:
            raise ValueError(f"cairn.CheckpointManager: item `{name}` is not among item_names {list(self.names)}")

    def parts_of_save(self, tree, args) -> SaveParts:
        if args is None:
            if tree is None:
                raise ValueError("cairn.CheckpointManager.save: nothing to save (pass a tree or args=)")
            return SaveParts(tree, [], {}, self.pytree_name or "default")
        if tree is not None:
            raise ValueError("cairn.CheckpointManager.save: pass either a tree or args=, not both")
        items = _orbax_args.composite_items(args) if _orbax_args.is_composite(args) else {
            self.pytree_name or "default": args}
        parts = SaveParts(None, [], {}, "")
        for name, a in items.items():
            self._check_name(name)
            if _kind(a) in _PYTREE_SAVE:
                if parts.pytree_name:
                    raise ValueError(f"cairn.CheckpointManager.save: items `{parts.pytree_name}` and `{name}` "
                                     "are both PyTree items; a step holds one")
                if self.pytree_name not in (None, name):
                    raise ValueError(f"cairn.CheckpointManager.save: item `{name}` is a PyTree, but this "
                                     f"manager's PyTree item is `{self.pytree_name}`")
                parts.tree = _orbax_args.apply_save_args(a.item, getattr(a, "save_args", None))
                parts.pytree_name = name
            elif _kind(a) in _JSON_SAVE:
                filename = self.json_files.get(name, "metadata")
                parts.files.append((f"{name}/{filename}", json.dumps(a.item)))
                parts.handlers[name] = JSON_HANDLER
            else:
                raise NotImplementedError(f"cairn.CheckpointManager.save: item `{name}`: {_kind(a)} is not "
                                          "supported (PyTreeSave, StandardSave and JsonSave are)")
        if not parts.pytree_name:
            raise ValueError("cairn.CheckpointManager.save: the args hold no PyTree item "
                             "(PyTreeSave or StandardSave)")
        return parts

    def parts_of_restore(self, target, args, partial_restore: bool, step_path: str) -> "RestorePlan":
        if args is None or not _orbax_args.is_composite(args):
            if args is not None:
                if target is not None:
                    raise ValueError("cairn.CheckpointManager.restore: pass either target or args=, not both")
                target, partial_restore = _orbax_args.target_of_restore_args(args, partial_restore)
            return RestorePlan(step_path, self.pytree_name or "default", target, partial_restore, None, {})
        items = _orbax_args.composite_items(args)
        plan = RestorePlan(step_path, None, None, False, type(args), {})
        for name, a in items.items():
            self._check_name(name)
            if _kind(a) in _PYTREE_RESTORE:
                plan.pytree_name = name
                plan.target, plan.partial_restore = _orbax_args.target_of_restore_args(a, partial_restore)
            elif _kind(a) in _JSON_RESTORE:
                plan.json_items[name] = self.json_files.get(name, "metadata")
            else:
                raise NotImplementedError(f"cairn.CheckpointManager.restore: item `{name}`: {_kind(a)} is not "
                                          "supported (PyTreeRestore, StandardRestore and JsonRestore are)")
        return plan


@dataclasses.dataclass
class RestorePlan:
    step_path: str
    pytree_name: Optional[str]
    target: Any
    partial_restore: bool
    composite: Optional[type]           # the Composite class to answer with, or None
    json_items: Dict[str, str]          # item -> file name

    def run(self, pytree: Callable[[str, Any, bool], Any]):
        if self.composite is None:
            return pytree(self.pytree_name, self.target, self.partial_restore)
        out = {}
        if self.pytree_name is not None:
            out[self.pytree_name] = pytree(self.pytree_name, self.target, self.partial_restore)
        for name, filename in self.json_items.items():
            out[name] = json.loads(read_small_file(self.step_path, f"{name}/{filename}"))
        return self.composite(**out)


def read_small_file(directory: str, relative: str) -> bytes:
    """A small file below a step directory (a local path or a URL)."""
    if "://" not in directory:
        with open(os.path.join(directory, relative), "rb") as f:
            return f.read()
    from cairn import kvstore
    try:
        return kvstore.open(directory.rstrip("/") + "/").get(relative)
    except KeyError:
        raise FileNotFoundError(f"{directory.rstrip('/')}/{relative} does not exist") from None


def path_object(directory: str):
    """`directory` as the path object Orbax's managers answer with
    (``etils.epath.Path`` where etils is installed, as with Orbax)."""
    try:
        from etils import epath
        return epath.Path(directory)
    except ImportError:
        import pathlib
        return pathlib.Path(directory)


def reached_preemption(step: int) -> bool:
    """Orbax's ``reached_preemption``: jax's preemption sync point, False
    without jax or without its preemption service."""
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    from jax.experimental import multihost_utils
    try:
        return bool(multihost_utils.reached_preemption_sync_point(step))
    except RuntimeError:  # the preemption service is not running
        return False
