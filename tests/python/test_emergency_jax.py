"""cairn.emergency.CheckpointManager in a real jax.distributed job: 4
processes x 2 CPU devices, a mesh of 2 data-parallel replicas, peer copies over
ZeroMQ (endpoints exchanged through jax's coordination service), local saves
every step and persistent saves every 5. The job saves steps 1..6; then host
1's local directory is deleted and the job restarts with process ids changed
(a replacement runs as process 3 on host 1's empty directory, process 1 on
host 3's disk): every process restores local step 6 bit-exactly, the
replacement from its peer. Then both hosts holding the only copies of one
slot's shards are lost: every process falls back to persistent step 5,
bit-exact."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import wait_processes
import ports

# ZeroMQ and MPI are required, not optional (conftest.peer_transports).
pytestmark = pytest.mark.usefixtures("peer_transports")

WORKER = r"""
import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

phase, address, i, root, host_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
want_step = int(sys.argv[6])
jax.distributed.initialize(coordinator_address=address, num_processes=4, process_id=i)
import cairn


mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("replica", "data"))
sharding = NamedSharding(mesh, P("data", None))

def state_at(step):
    w = np.random.default_rng(step).standard_normal((8, 6)).astype(np.float32)
    # Row blocks of 128 KiB: large enough for a host's replicas to share
    # their decoding (restore_host_share.h) when restoring the persistent tier.
    big = np.random.default_rng(100 + step).standard_normal((2048, 64)).astype(np.float32)
    return {"w": jax.make_array_from_callback(w.shape, sharding, lambda idx: w[idx]),
            "big": jax.make_array_from_callback(big.shape, sharding, lambda idx: big[idx]), "step": step}

mngr = cairn.emergency.CheckpointManager(
    os.path.join(root, host_dir), os.path.join(root, "persistent"), num_replicas=2,
    local_save_interval_steps=1, persistent_save_interval_steps=5, zmq_host="127.0.0.1", timeout_s=60)
out = {}
if phase == "save":
    for step in range(1, 7):
        assert mngr.save(step, state_at(step))
    mngr.wait_until_finished()
else:
    target = {"w": jax.ShapeDtypeStruct((8, 6), np.float32, sharding=sharding),
              "big": jax.ShapeDtypeStruct((2048, 64), np.float32, sharding=sharding), "step": 0}
    restored = mngr.restore(target=target)
    want = state_at(want_step)
    out["bit_exact"] = all(
        np.asarray(a.data).tobytes() == np.asarray(b.data).tobytes()
        for k in ("w", "big") for a, b in zip(restored[k].addressable_shards, want[k].addressable_shards))
    out["step_value"] = int(restored["step"])
    out["report"] = {k: v for k, v in mngr.last_restore.items()}
mngr.close()
with open(os.path.join(root, f"{phase}_{i}.json"), "w") as f:
    json.dump(out, f)
jax.distributed.shutdown()
"""


def _run_job(tmp_path, phase, host_dirs, want_step=0):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ)
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "XLA_FLAGS"):
        env.pop(name, None)
    address = f"127.0.0.1:{ports.unused_port()}"
    procs = []
    for i in range(4):
        log = open(tmp_path / f"{phase}_{i}.log", "wb")
        procs.append((subprocess.Popen([sys.executable, str(script), phase, address, str(i), str(tmp_path),
                                        host_dirs[i], str(want_step)], env=env, stdout=log, stderr=subprocess.STDOUT), log))
    codes, logs = wait_processes(procs, [tmp_path / f"{phase}_{i}.log" for i in range(4)], timeout=240)
    assert codes == [0] * 4, logs
    return [json.loads((tmp_path / f"{phase}_{i}.json").read_text()) for i in range(4)]


def test_jax_job_restores_a_lost_host_from_its_peer_over_zeromq(tmp_path):
    hosts = [f"host_{i}" for i in range(4)]
    _run_job(tmp_path, "save", hosts)
    # Peer copies: host 1 keeps host 3's steps and the other way round.
    assert (tmp_path / "host_1" / "peer_copies" / "process_3" / "6" / "state").is_dir()
    assert (tmp_path / "host_3" / "peer_copies" / "process_1" / "6" / "state").is_dir()
    assert sorted(p.name for p in (tmp_path / "persistent").iterdir() if p.name.isdigit()) == ["5"]

    # Host 1 is lost; its replacement starts as process 3 with an empty
    # directory, and process 1 now runs on host 3's disk.
    shutil.rmtree(tmp_path / "host_1")
    results = _run_job(tmp_path, "restore_local", ["host_0", "host_3", "host_2", "host_1"], want_step=6)
    for r in results:
        assert r["report"]["tier"] == "local" and r["report"]["step"] == 6, r
        assert r["bit_exact"] and r["step_value"] == 6, r
    assert results[3]["report"]["bytes_fetched"] > 0, results[3]
    assert results[3]["report"]["bytes_from_peers"] > 0, results[3]
    assert results[1]["report"]["bytes_fetched"] == 0, results[1]  # host 3's disk holds its shards
    assert results[0]["report"]["bytes_fetched"] == 0, results[0]

    # Both holders of slot 1's shards (hosts 1 and 3: each one's step and the
    # other's copy) are lost: nobody can rebuild step 6, so every process
    # restores persistent step 5 together.
    shutil.rmtree(tmp_path / "host_1")
    shutil.rmtree(tmp_path / "host_3")
    results = _run_job(tmp_path, "restore_persistent", hosts, want_step=5)
    for r in results:
        assert r["report"]["tier"] == "persistent" and r["report"]["step"] == 5, r
        assert r["bit_exact"] and r["step_value"] == 5, r
        # Each process's two row blocks of "big" (128 KiB each) are pages its
        # host decoded once, mapped; "w"'s chunks are too small to share.
        assert r["report"]["bytes_mapped"] == 2 * 512 * 64 * 4, r["report"]
        counts = re.search(r"(\d+) decoded for this host, (\d+) taken from another process's decoding, "
                           r"(\d+) of these two mapped", r["report"]["log"][-1])
        assert counts, r["report"]["log"]
        decoded, taken, mapped = (int(x) for x in counts.groups())
        assert decoded + taken == 2 and mapped == 2, r["report"]["log"]
    # Orbax's reading of this tier is tested in test_emergency.py.
    import cairn
    restored = cairn.restore(tmp_path / "persistent" / "5" / "default")
    want = np.random.default_rng(5).standard_normal((8, 6)).astype(np.float32)
    assert np.asarray(restored["w"]).tobytes() == want.tobytes()
