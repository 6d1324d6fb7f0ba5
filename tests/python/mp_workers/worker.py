"""One process of a real multi-process run (or a single process).

    python worker.py <config.json>

The config gives this process's id, the process count, the coordinator
address and a list of jobs run in order:

* ``orbax_save``: Orbax saves the test tree (CheckpointManager,
  PyTreeCheckpointer or StandardCheckpointer, in a storage variant).
* ``cairn_save``: every process calls ``cairn.save`` with its own
  process index and a barrier on the jax.distributed client.
* ``orbax_restore``: Orbax restores a checkpoint, with the target shardings
  of mp_tree (``target: true``) or from the stored ``_sharding`` (false), and
  dumps every addressable shard it got to ``<out>.process_<i>.npz`` with the
  sharding it came back with, for the test process to compare.
* ``cairn_restore``: cairn restores a checkpoint onto the target shardings
  of mp_tree (every process reads only its own shards) and dumps them the
  same way.

XLA_FLAGS (the device count) is set by the launcher. Any exception exits
non-zero with its traceback on stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from mp_workers import mp_tree  # noqa: E402
from mp_workers.process_main import run_exiting_at_once_on_error  # noqa: E402


def log(msg):
    print(f"[process {jax.process_index()} t={time.monotonic() - T0:.1f}s] {msg}", file=sys.stderr,
          flush=True)


def orbax_save(ocp, job, tree):
    api, path = job["api"], job["dir"]
    handler_kw = {"use_ocdbt": job.get("use_ocdbt"), "use_zarr3": job.get("use_zarr3")}
    if api in ("manager", "cairn_handler_manager"):
        # cairn_handler_manager: Orbax's manager driving cairn's handler.
        if api == "manager":
            handler = ocp.PyTreeCheckpointHandler(**handler_kw)
        else:
            import cairn.orbax
            handler = cairn.orbax.PyTreeCheckpointHandler(**handler_kw)
        options = ocp.CheckpointManagerOptions(step_prefix=job.get("step_prefix"))
        with ocp.CheckpointManager(path, options=options, item_handlers={"state": handler}) as mngr:
            mngr.save(job["step"], args=ocp.args.Composite(state=ocp.args.PyTreeSave(tree)))
            mngr.wait_until_finished()
    elif api == "pytree_defaults":
        ocp.PyTreeCheckpointer().save(path, tree)
    elif api == "pytree":
        ocp.Checkpointer(ocp.PyTreeCheckpointHandler(**handler_kw)).save(
            path, args=ocp.args.PyTreeSave(tree))
    elif api == "standard_async":
        # StandardCheckpointHandler has no use_zarr3: it always writes zarr v2.
        if job["use_zarr3"]:
            raise ValueError("StandardCheckpointHandler writes zarr v2 only")
        ckptr = ocp.AsyncCheckpointer(ocp.StandardCheckpointHandler(use_ocdbt=job["use_ocdbt"]))
        ckptr.save(path, args=ocp.args.StandardSave(tree))
        ckptr.wait_until_finished()
        ckptr.close()
    else:
        raise ValueError(f"unknown api {api!r}")


def cairn_save(job, tree):
    import cairn
    from cairn import _multiprocess

    out = cairn.save(job["dir"], tree, use_ocdbt=job["use_ocdbt"], use_zarr3=job["use_zarr3"],
                     step=job.get("step"), item_name=job.get("item_name", "default"),
                     process_index=jax.process_index(), process_count=jax.process_count(),
                     barrier=_multiprocess.jax_barrier(prefix=f"cairn_save_{job['dir']}"))
    log(f"cairn.save -> {out}")


def orbax_restore(ocp, job):
    path = job["dir"]
    ckptr = ocp.PyTreeCheckpointer()
    if job.get("step") is not None:
        # A CheckpointManager over the checkpoint root finds the step and
        # restores its item (target shardings).
        abstract = mp_tree.abstract_target(jax)
        restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
        with ocp.CheckpointManager(path, item_handlers={job["item_name"]: ocp.PyTreeCheckpointHandler()}) as mngr:
            steps = list(mngr.all_steps())
            if steps != [job["step"]]:
                raise AssertionError(f"CheckpointManager lists steps {steps} under {path}")
            restored = mngr.restore(job["step"], args=ocp.args.Composite(**{
                job["item_name"]: ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args)}))
            restored = restored[job["item_name"]]
    elif job["target"] == "sharding":
        abstract = mp_tree.abstract_target(jax)
        restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
        restored = ckptr.restore(path, args=ocp.args.PyTreeRestore(item=abstract,
                                                                   restore_args=restore_args))
    elif job["target"] == "numpy":
        # No target sharding: every array read whole into host memory.
        restore_args = mp_tree.nest({p: ocp.RestoreArgs(restore_type=np.ndarray)
                                     for p in {**mp_tree.LEAVES, **mp_tree.NUMPY_LEAVES}})
        restored = ckptr.restore(path, args=ocp.args.PyTreeRestore(restore_args=restore_args))
    elif job["target"] == "none":
        restored = ckptr.restore(path)
    else:
        raise ValueError(f"unknown target {job['target']!r}")
    dump_restored(job, path, restored)


def cairn_restore(job):
    import cairn
    restored = cairn.restore(job["dir"], mp_tree.abstract_target(jax))
    dump_restored(job, job["dir"], restored)


def dump_restored(job, path, restored):
    flat = mp_tree.flatten(restored)
    arrays, info = {}, {}
    for leaf, value in flat.items():
        name = ".".join(leaf)
        entry = {"type": type(value).__name__}
        if isinstance(value, jax.Array):
            entry["sharding"] = repr(value.sharding)
            if isinstance(value.sharding, jax.sharding.NamedSharding):
                mesh = value.sharding.mesh
                entry["spec"] = [list(p) if isinstance(p, tuple) else p for p in value.sharding.spec]
                entry["mesh_shape"] = list(mesh.devices.shape)
                entry["mesh_axes"] = list(mesh.axis_names)
                ids = [int(d.id) for d in mesh.devices.flat]
                entry["mesh_in_id_order"] = ids == sorted(ids)
            entry["dtype"] = str(value.dtype)
            entry["shape"] = list(value.shape)
            for shard in value.addressable_shards:
                key = f"{name}@{mp_tree.index_key(shard.index, value.shape)}"
                arrays[key] = np.asarray(shard.data)
        else:
            arr = np.asarray(value)
            entry["dtype"] = str(arr.dtype)
            arrays[f"{name}@full"] = arr
        info[name] = entry
    out = f"{job['out']}.process_{jax.process_index()}"
    np.savez(out + ".npz", **arrays)
    with open(out + ".json", "w") as f:
        json.dump(info, f)
    log(f"restored {len(flat)} leaves from {path} into {out}.npz")


def main():
    config = json.load(open(sys.argv[1]))
    n = config["num_processes"]
    if n > 1:
        jax.distributed.initialize(coordinator_address=config["coordinator"], num_processes=n,
                                   process_id=config["process_id"], initialization_timeout=120)
    assert jax.process_count() == n and jax.process_index() == config["process_id"]
    log(f"jax {jax.__version__}: {jax.local_device_count()} local of {jax.device_count()} devices")
    import orbax.checkpoint as ocp
    from importlib import metadata
    version = metadata.version("orbax-checkpoint")
    if config.get("orbax_version") and version != config["orbax_version"]:
        raise RuntimeError(f"orbax-checkpoint {version} imported from {ocp.__file__}, "
                           f"expected {config['orbax_version']}")
    log(f"orbax-checkpoint {version} from {ocp.__file__}")
    tree = None
    for job in config["jobs"]:
        kind = job["kind"]
        if kind in ("orbax_save", "cairn_save") and tree is None:
            tree = mp_tree.jax_tree(jax)
        log(f"start {kind} {job}")
        if kind == "orbax_save":
            orbax_save(ocp, job, tree)
        elif kind == "cairn_save":
            cairn_save(job, tree)
        elif kind == "orbax_restore":
            orbax_restore(ocp, job)
        elif kind == "cairn_restore":
            cairn_restore(job)
        else:
            raise ValueError(f"unknown job {kind!r}")
        log(f"done {kind}")
    if n > 1:
        from jax.experimental import multihost_utils
        multihost_utils.sync_global_devices("worker_done")
        jax.distributed.shutdown()
    log("exit 0")
    # A process that is slow to finish after this line leaves its threads'
    # Python stacks in its log (one CI run saw a 2-process run's process 0
    # take ~150 s to exit here; not reproduced since).
    import faulthandler
    faulthandler.dump_traceback_later(60, exit=False)


T0 = time.monotonic()
if __name__ == "__main__":
    run_exiting_at_once_on_error(main)
