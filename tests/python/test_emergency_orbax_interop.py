"""The local tier of emergency checkpoints, both ways between cairn and
orbax-checkpoint's `experimental.emergency.CheckpointManager`, in a real
jax.distributed job: 4 processes x 2 CPU devices, mesh (2, 4) over
("replica", "data"), each process with its own local directory standing for
its host's disk, one shared persistent directory.

Two runs of the job (workers: mp_workers/emergency_worker.py):

1. Saves, steps 1-3 (local every step, persistent every 2): Orbax's
   emergency manager into run "orbax" (it writes local steps only on
   replica 1's processes 2 and 3, persistent ones from replica 0); cairn's
   emergency manager into run "cairn" (every process writes its own local
   step, plus a peer copy for another replica).
2. Restores, as after a restart: cairn restores run "orbax" (the newest
   local step, 3; processes 0 and 1 fetch the steps they lack from replica
   1). Orbax restores run "cairn" (local step 3, read by replica 0), and
   again after process 0's step 3 is deleted (now read by replica 1). Then
   process 3's local directory in run "orbax" is deleted (host lost: its
   shards existed nowhere else; Orbax's own manager raises on that process
   and the others block) and cairn falls back to Orbax's newest persistent
   step, 2, on every process.

Every restored shard is compared bit for bit with the values the workers
compute for that step: random bit patterns (float32, bfloat16, int32) for
what cairn restores; normal floats for what Orbax restores, since Orbax's
broadcast between replicas is an XLA sum, which flushes subnormals and
-0.0.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from mp_workers import launch

# ZeroMQ and MPI are required, not optional (conftest.peer_transports).
pytestmark = pytest.mark.usefixtures("peer_transports")

WORKER = launch.HERE / "emergency_worker.py"


def _runs(root: pathlib.Path) -> dict:
    return {run: {"local_dirs": [str(root / run / f"host_{i}") for i in range(4)],
                  "persistent_dir": str(root / run / "persistent")} for run in ("orbax", "cairn")}


def _results(out: pathlib.Path) -> list:
    return [json.loads(pathlib.Path(f"{out}.process_{i}.json").read_text()) for i in range(4)]


def _listing(root: pathlib.Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "d" not in p.relative_to(root).parts}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("emergency_orbax_interop")
    runs = _runs(root)
    for run in runs.values():
        for d in run["local_dirs"] + [run["persistent_dir"]]:
            pathlib.Path(d).mkdir(parents=True)  # Orbax wants every directory created by the caller
    steps = [1, 2, 3]
    # Orbax's broadcast alters floats that are not normal (see
    # emergency_worker.values), so what Orbax restores holds normal floats.
    launch.run(root / "logs_save", 4, [
        {"kind": "orbax_save", "run": "orbax", "values": "bits", "steps": steps, "persistent_interval": 2},
        {"kind": "cairn_save", "run": "cairn", "values": "normal", "steps": steps, "persistent_interval": 2,
         "peer_copies": 1},
    ], worker=WORKER, extra_config={"runs": runs}, timeout=240)
    saved = {"orbax_local": {i: sorted(p.name for p in (root / "orbax" / f"host_{i}").iterdir()) for i in range(4)},
             "orbax_persistent": sorted(p.name for p in (root / "orbax" / "persistent").iterdir()),
             "orbax_host_3": _listing(root / "orbax" / "host_3")}
    launch.run(root / "logs_restore", 4, [
        {"kind": "cairn_restore", "run": "orbax", "values": "bits", "expect_step": 3,
         "out": str(root / "cairn_reads_orbax")},
        {"kind": "orbax_restore", "run": "cairn", "values": "normal", "expect_step": 3,
         "out": str(root / "orbax_reads_cairn")},
        # Process 0 loses its step 3: Orbax then reads step 3 on replica 1.
        {"kind": "delete_step", "run": "cairn", "process": 0, "step": 3},
        {"kind": "orbax_restore", "run": "cairn", "values": "normal", "expect_step": 3,
         "out": str(root / "orbax_reads_cairn_replica_1")},
        {"kind": "delete_local", "run": "orbax", "process": 3},
        {"kind": "cairn_restore", "run": "orbax", "values": "bits", "expect_step": 2,
         "out": str(root / "cairn_reads_orbax_host3_lost")},
    ], worker=WORKER, extra_config={"runs": runs}, timeout=240)
    return root, saved


def test_orbax_writes_local_steps_only_on_replica_1(job):
    root, saved = job
    # What the interop below starts from: Orbax's own layout on CPU.
    assert saved["orbax_local"][0] == [] and saved["orbax_local"][1] == [], saved
    assert saved["orbax_local"][2] == ["2", "3"] and saved["orbax_local"][3] == ["2", "3"], saved
    assert [s for s in saved["orbax_persistent"] if s.isdigit()] == ["1", "2"], saved
    files = saved["orbax_host_3"]
    assert "3/process_metadata/global_process_metadata.json" in files, files
    assert "3/process_metadata/mesh_metadata.json" in files, files
    assert "3/state/ocdbt.process_3" in files and "3/state/_sharding" in files, files
    assert not any("ocdbt.process_2" in f for f in files), files
    assert "3/cairn_local_step.json" not in files, files


def test_cairn_restores_orbax_local_tier_bit_exact(job):
    root, _ = job
    results = _results(root / "cairn_reads_orbax")
    for i, r in enumerate(results):
        assert r["report"]["tier"] == "local" and r["step"] == 3, (i, r)
        assert all(r["bit_exact"].values()), (i, r["bit_exact"])
    # Replica 1 read its own disks; replica 0 (no local steps in Orbax's
    # layout) fetched the step of the process in its slot.
    for i in (2, 3):
        assert results[i]["report"]["bytes_fetched"] == 0, results[i]
        assert results[i]["report"]["bytes_from_own_disk"] > 0, results[i]
    for i, owner in ((0, 2), (1, 3)):
        report = results[i]["report"]
        assert report["bytes_fetched"] > 0 and report["bytes_from_peers"] > 0, report
        assert any(f"fetched process {owner}'s step 3 from process {owner}" in line for line in report["log"]), report


def test_cairn_falls_back_to_orbax_persistent_step_when_an_orbax_host_is_lost(job):
    # Control: test_cairn_restores_orbax_local_tier_bit_exact, the same
    # directories before process 3's was deleted.
    root, _ = job
    results = _results(root / "cairn_reads_orbax_host3_lost")
    for i, r in enumerate(results):
        assert r["report"]["tier"] == "persistent" and r["step"] == 2, (i, r)
        assert all(r["bit_exact"].values()), (i, r["bit_exact"])
        log = " ".join(r["report"]["log"])
        assert "local step 3 is incomplete" in log, log


@pytest.mark.parametrize("out", ["orbax_reads_cairn", "orbax_reads_cairn_replica_1"])
def test_orbax_restores_cairn_local_tier_bit_exact(job, out):
    # Every process's local step is one Orbax accepts: first replica 0's
    # (the replica Orbax picks first), then, with process 0's step 3
    # deleted, replica 1's.
    root, _ = job
    for i, r in enumerate(_results(root / out)):
        assert r["step"] == 3, (i, r)
        assert all(r["bit_exact"].values()), (i, r["bit_exact"])
