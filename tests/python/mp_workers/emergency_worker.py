"""One process of a real jax.distributed emergency-checkpointing job (4
processes x 2 CPU devices; mesh (2, 4) with axes ("replica", "data"), so
replica 0 is processes 0-1 and replica 1 is processes 2-3).

    python emergency_worker.py <config.json>

The config gives the process id, the coordinator address, runs (a name ->
every process's local directory and the persistent directory) and a list of
jobs run in order, each on the directories of its ``run`` and with the
values of its ``values`` (see `values`):

* ``orbax_save``: orbax-checkpoint's emergency CheckpointManager saves
  ``steps`` (local every step on replica 1, persistent every
  ``persistent_interval`` on replica 0).
* ``cairn_save``: cairn.emergency.CheckpointManager saves ``steps`` (local
  every step on every process, persistent every ``persistent_interval``),
  ``peer_copies`` copies per local step.
* ``orbax_restore`` / ``cairn_restore``: the manager restores its latest
  step onto the job's shardings; the process writes
  ``<out>.process_<i>.json`` with the step, whether every addressable shard
  equals the values of ``expect_step`` bit for bit, and (cairn) the restore
  report.
* ``delete_local`` (``process``): that process deletes its local directory
  (its host is lost); ``delete_step`` (``process``, ``step``): that process
  deletes one local step. Every process then meets at a barrier.

Orbax's emergency manager needs on CPU what its multi-host code assumes
elsewhere: the runtime/distributed id tables initialized after
jax.distributed, absl flags marked parsed, and every local directory
created beforehand. Any exception exits non-zero with its traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

import jax  # noqa: E402
import numpy as np  # noqa: E402
from process_main import run_exiting_at_once_on_error  # noqa: E402  (this directory is sys.path[0])

T0 = time.monotonic()

# name -> (dtype, global shape, partition spec over ("replica", "data"))
LEAVES = {
    "w": ("float32", (16, 6), ("data", None)),
    "emb": ("bfloat16", (8, 12), (None, "data")),
    "b": ("float32", (6,), ()),
    "count": ("int32", (), ()),
}


def log(msg):
    print(f"[process {jax.process_index()} t={time.monotonic() - T0:.1f}s] {msg}", file=sys.stderr, flush=True)


def np_dtype(name):
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def values(step: int, kind: str = "bits") -> dict:
    """The global values of every leaf at `step`. "bits": random bit patterns
    (NaN payloads, -0.0, subnormals), so any conversion shows as a byte
    change. "normal": normal floats (random integers stay random bits), for
    restores through Orbax's emergency manager, whose broadcast from the
    restoring replica is an XLA sum that flushes subnormals to zero and
    turns -0.0 into +0.0."""
    out = {}
    for i, (name, (dtype, shape, _)) in enumerate(sorted(LEAVES.items())):
        dt = np_dtype(dtype)
        rng = np.random.default_rng([step, i])
        if kind == "normal" and (dt.kind == "f" or dt == np_dtype("bfloat16")):
            out[name] = rng.standard_normal(shape).astype(dt)
            continue
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        out[name] = rng.integers(0, 256, size=n, dtype=np.uint8).view(dt).reshape(shape)
    return out


def mesh():
    from jax.sharding import Mesh
    return Mesh(np.array(jax.devices()).reshape(2, 4), ("replica", "data"))


def shardings():
    from jax.sharding import NamedSharding, PartitionSpec as P
    m = mesh()
    return {name: NamedSharding(m, P(*spec)) for name, (_, _, spec) in LEAVES.items()}


def state(step: int, kind: str) -> dict:
    v, s = values(step, kind), shardings()
    return {name: jax.make_array_from_callback(v[name].shape, s[name], lambda idx, a=v[name]: a[idx])
            for name in LEAVES}


def abstract():
    s = shardings()
    return {name: jax.ShapeDtypeStruct(shape, np_dtype(dtype), sharding=s[name])
            for name, (dtype, shape, _) in LEAVES.items()}


def bit_exact(restored: dict, step: int, kind: str) -> dict:
    """{leaf: True when every addressable shard equals `step`'s values}."""
    want = values(step, kind)
    out = {}
    for name in LEAVES:
        arr = restored[name]
        ok = isinstance(arr, jax.Array) and tuple(arr.shape) == want[name].shape
        if ok:
            for shard in arr.addressable_shards:
                got = np.asarray(shard.data)
                same = got.dtype == want[name].dtype and got.tobytes() == want[name][shard.index].tobytes()
                if not same:
                    log(f"{name}{shard.index} on {shard.device} differs from step {step}: got {got.tobytes()[:16].hex()}"
                        f", want {want[name][shard.index].tobytes()[:16].hex()}")
                ok = ok and same
        out[name] = bool(ok)
    return out


def barrier(name):
    from jax.experimental import multihost_utils
    multihost_utils.sync_global_devices(name)


def local_dir(config, job):
    return config["runs"][job["run"]]["local_dirs"][config["process_id"]]


def persistent_dir(config, job):
    return config["runs"][job["run"]]["persistent_dir"]


def orbax_manager(config, job):
    from absl import flags
    flags.FLAGS.mark_as_parsed()
    from orbax.checkpoint.experimental.emergency import checkpoint_manager as ecm
    options = ecm.CheckpointManagerOptions(
        local=ecm.LocalCheckpointOptions(save_interval_steps=1, max_to_keep=job.get("local_max_to_keep", 2)),
        persistent=ecm.PersistentCheckpointOptions(save_interval_steps=job.get("persistent_interval", 2),
                                                   max_to_keep=None),
        replica_axis_index=0)
    if job.get("create_local", True):
        os.makedirs(local_dir(config, job), exist_ok=True)
    return ecm.CheckpointManager(local_dir(config, job), persistent_dir(config, job), global_mesh=mesh(),
                                 abstract_state=abstract(), options=options)


def cairn_manager(config, job):
    import cairn
    return cairn.emergency.CheckpointManager(
        local_dir(config, job), persistent_dir(config, job), num_replicas=2, peer_copies=job.get("peer_copies", 0),
        local_save_interval_steps=1, local_max_to_keep=job.get("local_max_to_keep", 2),
        persistent_save_interval_steps=job.get("persistent_interval", 2), zmq_host="127.0.0.1", timeout_s=60,
        global_mesh=mesh())


def write_result(config, job, out):
    with open(f"{job['out']}.process_{config['process_id']}.json", "w") as f:
        json.dump(out, f)


def run_job(config, job):
    kind = job["kind"]
    if kind == "orbax_save":
        import orbax.checkpoint as ocp
        m = orbax_manager(config, job)
        for step in job["steps"]:
            m.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave(state(step, job["values"]))))
        m.wait_until_finished()
        m.close()
    elif kind == "cairn_save":
        m = cairn_manager(config, job)
        for step in job["steps"]:
            if not m.save(step, state(step, job["values"])):
                raise AssertionError(f"cairn saved nothing at step {step}")
        m.wait_until_finished()
        m.close()
    elif kind == "orbax_restore":
        import orbax.checkpoint as ocp
        m = orbax_manager(config, job)
        step = m.latest_step()
        log(f"orbax latest_step {step}")
        restored = m.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
            item=abstract(), restore_args=ocp.checkpoint_utils.construct_restore_args(abstract())))).state
        write_result(config, job, {"step": int(step), "bit_exact": bit_exact(restored, job["expect_step"], job["values"])})
        m.close()
    elif kind == "cairn_restore":
        m = cairn_manager(config, job)
        restored = m.restore(target=abstract())
        report = dict(m.last_restore)
        write_result(config, job, {"step": int(report["step"]), "bit_exact": bit_exact(restored, job["expect_step"], job["values"]),
                                   "report": report})
        m.close()
    elif kind == "delete_local":
        if config["process_id"] == job["process"]:
            shutil.rmtree(local_dir(config, job))
        barrier(f"deleted_{job['process']}")
    elif kind == "delete_step":
        if config["process_id"] == job["process"]:
            shutil.rmtree(os.path.join(local_dir(config, job), str(job["step"])))
        barrier(f"deleted_{job['process']}_{job['step']}")
    else:
        raise ValueError(f"unknown job {kind!r}")


def main():
    config = json.load(open(sys.argv[1]))
    jax.distributed.initialize(coordinator_address=config["coordinator"], num_processes=config["num_processes"],
                               process_id=config["process_id"], initialization_timeout=120)
    if any(j["kind"].startswith("orbax") for j in config["jobs"]):
        from orbax.checkpoint._src.multihost import multihost
        multihost.initialize_runtime_to_distributed_ids()
        multihost.initialize_distributed_to_device_ids()
    for job in config["jobs"]:
        log(f"start {job}")
        run_job(config, job)
        log(f"done {job['kind']}")
    barrier("worker_done")
    jax.distributed.shutdown()
    log("exit 0")


if __name__ == "__main__":
    run_exiting_at_once_on_error(main)
