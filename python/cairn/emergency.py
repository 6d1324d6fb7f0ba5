"""``cairn.emergency.CheckpointManager``: emergency checkpoints in two tiers.

Frequent saves go to each host's own fast storage (``local_directory``: a
RAM disk or local SSD, different on every host), in the layout Orbax's
emergency manager gives its local tier; every process saves all the shards it
holds, and each local step is copied to a peer in another data-parallel
replica (over MPI under ``mpirun``, over ZeroMQ otherwise). Infrequent saves go to ``persistent_directory``
(shared storage) as normal Orbax checkpoints of replica 0's shards, which
orbax-checkpoint restores as its own. ::

    mngr = cairn.emergency.CheckpointManager(
        "/host-tmp/checkpoints", "/gcs-fuse/run7", num_replicas=2,
        local_save_interval_steps=10, persistent_save_interval_steps=1000)
    for step in range(start, end):
        ...
        mngr.save(step, state)            # False when neither tier is due
    state = mngr.restore(target=abstract_state)   # after a restart

``restore`` picks, on every process alike, the newest local step that the
surviving hosts hold completely (own disks and peer copies) and that is newer
than the newest persistent step; a process reads its shards from its own disk
or fetches them from the peer that holds them. Otherwise every process
restores the newest persistent step. ``last_restore`` says which step and
tier were used and where the bytes came from.

The methods are those of ``cairn.CheckpointManager``. All logic is native
(src/cairn/emergency/, docs/EMERGENCY.md); this module flattens the tree as
``cairn.save`` does and builds the boxes to read as ``cairn.restore`` does.
Every process creates the manager with the same arguments (except the local
directory) and calls the same methods in the same order.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Optional, Union

from cairn import _core
from cairn import _leaves
from cairn import _orbax_args
from cairn import _orbax_restore

__all__ = ["CheckpointManager"]


def _process_metadata(process_count: int, global_mesh=None):
    """(global_process_metadata, mesh_metadata) JSON as Orbax writes them,
    from jax's devices when jax is in use; else "" (one pseudo-device per
    process). The mesh's device ids are `global_mesh`'s, flattened, or all
    devices in jax.devices() order without one."""
    jax = sys.modules.get("jax")
    if jax is None:
        return "", ""
    try:
        devices = jax.devices()
    except Exception:  # noqa: BLE001 - no backend: no device ids to record
        return "", ""
    per_process = [[] for _ in range(process_count)]
    for d in devices:
        if 0 <= d.process_index < process_count:
            per_process[d.process_index].append(int(d.id))
    if global_mesh is not None:
        mesh_ids = [int(i) for i in global_mesh.device_ids.flatten()]
    else:
        mesh_ids = [int(d.id) for d in devices]
    return json.dumps(per_process), json.dumps(mesh_ids)


def _composite_class(args):
    if args is not None and _orbax_args.is_composite(args):
        return type(args)
    import orbax.checkpoint as ocp  # Orbax's signature: the caller has orbax-checkpoint
    return ocp.args.Composite


class CheckpointManager:
    """Local and persistent emergency checkpoints (see the module docstring).

    Orbax's emergency signature works too, as MaxText and AXLearn build it:
    ``CheckpointManager(local_directory, persistent_directory, global_mesh,
    abstract_state, options=emergency.CheckpointManagerOptions(...))``
    (docs/ORBAX_INTEGRATION.md says what is read), with
    ``save(step, args=Composite(state=PyTreeSave(state)))`` and
    ``restore(step)`` answering ``Composite(state=...)`` restored onto
    `abstract_state`.

    `num_replicas`: data-parallel replicas (processes split into them in
    order, as Orbax takes replicas along the mesh's first axis).
    `peer_copies`: copies of each local step on peers (default 1 with more
    than one replica and a transport, else 0). `transport`: "mpi" (default
    under ``mpirun``), "zmq" (default in other multi-process jobs, such as
    jax.distributed; each process listens only on `zmq_host`, default this
    host's name resolved, and accepts only the job's processes: messages
    sealed under keys each pair derives from X25519 public keys exchanged
    through the coordinator, docs/PEER_TRANSPORT.md) or "none".
    Intervals and retention
    per tier (`persistent_max_to_keep` None: keep all). Storage options
    (`use_ocdbt`, `use_zarr3`, `compression`, `chunk_byte_size`,
    `ocdbt_target_data_file_size`, `memory_budget`: sizes as an int or a
    string such as ``"1GiB"``) as ``cairn.save``, for
    both tiers (`replica_parallel` is passed on, but the persistent tier is
    written by replica 0 alone, as Orbax's, and the local tier by every
    process for every shard it holds); `local_compression` is the local tier's ("none" by
    default: a restore from a RAM disk or local SSD is then a copy of the
    bytes rather than a decode; None: `compression`). `global_mesh`: the job's jax Mesh, recorded in each local
    step's ``process_metadata/mesh_metadata.json`` as Orbax's emergency
    manager records it (it rebuilds its restore mesh from it); without it,
    jax.devices() order, which is right for meshes built by reshaping
    jax.devices(). `at_point`: called with (point, step) at each named point
    of a local save, a transfer and a retention's deletion (C++
    EmergencyOptions::at_point), on the manager's threads.
    """

    def __init__(self, local_directory: Union[str, "os.PathLike[str]"],
                 persistent_directory: Union[str, "os.PathLike[str]"], global_mesh: Any = None,
                 abstract_state: Any = None, *, options: Any = None, metadata: Any = None,
                 logger: Any = None, item_handlers: Any = None, handler_registry: Any = None,
                 persistent_non_replicated_directory: Any = None, num_replicas: int = 1,
                 peer_copies: Optional[int] = None, local_save_interval_steps: int = 1,
                 local_max_to_keep: int = 2, persistent_save_interval_steps: int = 10,
                 persistent_max_to_keep: Optional[int] = None, use_ocdbt: bool = True,
                 use_zarr3: bool = True, compression: str = "default",
                 local_compression: Optional[str] = "none",
                 memory_budget: Optional[Union[int, str]] = None, coordinator: Any = None,
                 transport: Optional[str] = None,
                 zmq_host: str = "", timeout_s: float = 600.0, enable_async: bool = True,
                 at_point: Optional[Callable[[str, int], None]] = None, replica_parallel: bool = True,
                 chunk_byte_size: Optional[Union[int, str]] = None,
                 ocdbt_target_data_file_size: Optional[Union[int, str]] = None) -> None:
        for name, value in (("metadata", metadata), ("item_handlers", item_handlers),
                            ("handler_registry", handler_registry),
                            ("persistent_non_replicated_directory", persistent_non_replicated_directory)):
            if value is not None:
                raise NotImplementedError(f"cairn.emergency.CheckpointManager: Orbax's `{name}` is not supported")
        # Orbax's signature: the mesh and abstract state given, options Orbax's.
        self._orbax_signature = abstract_state is not None or options is not None
        if self._orbax_signature:
            from cairn import _emergency_options
            given = _emergency_options.from_orbax_emergency(options, global_mesh)
            num_replicas = given.get("num_replicas", num_replicas)
            local_save_interval_steps = given["local_save_interval_steps"]
            local_max_to_keep = given["local_max_to_keep"]
            persistent_save_interval_steps = given["persistent_save_interval_steps"]
            persistent_max_to_keep = given["persistent_max_to_keep"]
            enable_async = given["enable_async"]
        self._abstract_state = abstract_state
        self._enable_async = enable_async
        from cairn import dist

        self.local_directory = os.path.abspath(os.fspath(local_directory))
        self.persistent_directory = _leaves.absolute(persistent_directory)
        self._coordinator = coordinator if coordinator is not None else dist.detect()
        count = self._coordinator.process_count
        process_md, mesh_md = _process_metadata(count, global_mesh)
        self._native = _core._emergency_open(
            self.local_directory, self.persistent_directory, self._coordinator, transport=transport or "",
            num_replicas=num_replicas, peer_copies=peer_copies,
            local_save_interval_steps=local_save_interval_steps, local_max_to_keep=local_max_to_keep,
            persistent_save_interval_steps=persistent_save_interval_steps,
            persistent_max_to_keep=persistent_max_to_keep or 0, use_ocdbt=use_ocdbt,
            use_zarr3=use_zarr3, compression=compression,
            memory_budget=_leaves.byte_size("memory_budget", memory_budget),
            timeout_s=timeout_s, global_process_metadata=process_md, mesh_metadata=mesh_md,
            zmq_host=zmq_host, local_compression=local_compression or "", at_point=at_point,
            replica_parallel=replica_parallel,
            chunk_byte_size=_leaves.byte_size("chunk_byte_size", chunk_byte_size),
            target_data_file_size=_leaves.byte_size("ocdbt_target_data_file_size",
                                                    ocdbt_target_data_file_size, 2 ** 31))
        self.last_restore: Optional[dict] = None

    def should_save(self, step: int) -> bool:
        """True when `step` is due in either tier."""
        return self._native.should_save(int(step))

    def reached_preemption(self, step: int) -> bool:
        """True when jax's preemption sync point is reached at `step` (as
        Orbax's managers; False without jax.distributed's preemption service)."""
        from cairn import _manager_items
        return _manager_items.reached_preemption(int(step))

    @property
    def directory(self) -> Any:
        """The persistent directory, as Orbax's emergency manager names it."""
        from cairn import _manager_items
        return _manager_items.path_object(self.persistent_directory)

    def save(self, step: int, tree: Any = None, *, args: Any = None, force: bool = False,
             custom_metadata: Any = None) -> bool:
        """Saves `tree` (or the item of `args`: ``PyTreeSave``/``StandardSave``,
        or Orbax's ``Composite(state=PyTreeSave(...))``) as step `step` to the
        tiers that are due (both with `force`); False when none is. Returns
        once the arrays are copied; writing, peer copies and retention go on
        in the background (without enable_async, before returning)."""
        if args is not None:
            item_args = _orbax_args.single_item(args, "cairn.emergency.CheckpointManager.save")
            tree = _orbax_args.apply_save_args(item_args.item, getattr(item_args, "save_args", None))
        c = self._coordinator
        leaves = _leaves.flatten(tree, c.process_index, c.process_count)
        saved = self._native.save(int(step), leaves, force)
        if saved and not self._enable_async:
            self.wait_until_finished()
        return saved

    def wait_until_finished(self) -> None:
        """Blocks until the background work is done; raises its error."""
        self._native.wait_until_finished()

    def all_steps(self) -> list[int]:
        """Steps a restore could use: complete local steps (over all hosts'
        disks and peer copies) and persistent steps, ascending. Collective."""
        return list(self._native.all_steps())

    def latest_step(self) -> Optional[int]:
        """The newest step a restore could use; None if there is none. Collective."""
        return self._native.latest_step()

    def restore(self, step: Optional[int] = None, target: Any = None, *, args: Any = None) -> Any:
        """Restores `step` (default: the newest usable one, see the module
        docstring) like ``cairn.restore``; `target` (or ``args.item``) places
        arrays on its shardings; without one, arrays come back as numpy
        arrays (those of a local step on a RAM disk mapped, not copied).
        FileNotFoundError when there is nothing to restore. Collective."""
        partial_restore = False
        if args is not None and target is None:
            target, partial_restore = _orbax_args.target_of_restore_args(_orbax_args.single_item(args), False)
        if target is None:
            target = self._abstract_state
        tier, chosen, item_dir, log = self._native.prepare_restore(None if step is None else int(step))
        if tier == "none":
            raise FileNotFoundError("cairn.emergency: nothing to restore: " + "; ".join(log))
        if not item_dir:
            # This process could not fetch the local step and there is no
            # persistent step to read the tree from: it still joins the
            # others' agreement (which then fails on every process).
            self._native.restore([], map_boxes=False)
            raise FileNotFoundError("cairn.emergency: nothing to restore: " + "; ".join(log))
        report = {}
        # A local step's chunks on a RAM disk are mapped, not copied, where a
        # box is one stored chunk (docs/EMERGENCY.md, "Restoring by mapping");
        # so are a persistent step's chunks that the replicas of a host decode
        # once into its shared window ("Persistent restore time").
        maps = tier in ("local", "persistent")

        def read(requests):
            report.update(self._native.restore(requests, map_boxes=maps))
            return report.pop("mapped", [])

        tree = _orbax_restore.restore_item(item_dir, target, partial_restore=partial_restore,
                                           read_boxes=read, maps=maps, jax_arrays=False)
        self.last_restore = report
        if self._orbax_signature or (args is not None and _orbax_args.is_composite(args)):
            # Orbax's emergency manager answers Composite(state=...).
            return _composite_class(args)(state=tree)
        return tree

    def close(self) -> None:
        """Waits for the background work; later calls fail."""
        self._native.close()

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
