"""Real multi-process runs: 2 and 4 processes on localhost joined by
``jax.distributed`` (8 CPU devices in all, so the meshes span processes).

* orbax-checkpoint saves a tree sharded across the processes (several
  shardings, replicated ones included; replica 0 of some arrays on the last
  process) with CheckpointManager / PyTreeCheckpointer / AsyncCheckpointer +
  StandardCheckpointHandler in OCDBT+zarr3, OCDBT+zarr2 and two non-OCDBT
  variants; cairn, in this process, restores every array bit-exactly, and
  so do 4 (2) cairn processes onto shardings other than the saved ones
  when 2 (4) processes saved.
* Every process calls ``cairn.save`` with its own addressable shards and a
  barrier on the jax.distributed client; Orbax restores the checkpoint in an
  N-process run with target shardings and in one process without (as host
  numpy arrays: with no target at all Orbax rebuilds the saved shardings from
  `_sharding`, whose device ids 2048+ of the other processes do not exist in
  one process, and refuses, for its own checkpoints as for cairn's), bit-exactly;
  every process wrote its own ``ocdbt.process_<i>`` and
  ``array_metadatas/process_<i>``, holding exactly the chunks of its shards.

The workers are tests/python/mp_workers/worker.py; values come from
mp_workers/mp_tree.py (random bit patterns), computed again here.
"""

from __future__ import annotations

import json

import pytest

import cairn
from mp_workers import launch, mp_tree
from mp_workers.checks import assert_restored_shards_bit_exact, assert_tree_bit_exact

PROCESS_COUNTS = [2, 4]
# (api, use_ocdbt, use_zarr3) for Orbax saves.
# "cairn_handler_manager": Orbax's CheckpointManager driving cairn's handler
# (cairn.orbax.PyTreeCheckpointHandler) in every process.
ORBAX_SAVES = [("manager", True, True), ("pytree", True, False), ("pytree", False, True),
               ("standard_async", False, False), ("cairn_handler_manager", True, False)]
ORBAX_IDS = ["manager-ocdbt-zarr3", "pytree-ocdbt-zarr2", "pytree-dir-zarr3", "standard-dir-zarr2",
             "cairn-handler-manager-ocdbt-zarr2"]
VARIANTS = [(True, True), (True, False), (False, True), (False, False)]
VARIANT_IDS = ["ocdbt-zarr3", "ocdbt-zarr2", "dir-zarr3", "dir-zarr2"]
STEP = 3


def _vname(use_ocdbt, use_zarr3):
    return f"{'ocdbt' if use_ocdbt else 'dir'}-{'zarr3' if use_zarr3 else 'zarr2'}"


# ---------------------------------------------------------------- Orbax saves

@pytest.fixture(scope="module", params=PROCESS_COUNTS, ids=lambda n: f"{n}proc")
def nproc(request):
    return request.param


@pytest.fixture(scope="module")
def orbax_saved(nproc, tmp_path_factory):
    n = nproc
    root = tmp_path_factory.mktemp(f"orbax_saved_{n}proc")
    jobs = []
    for api, use_ocdbt, use_zarr3 in ORBAX_SAVES:
        job = {"kind": "orbax_save", "api": api, "use_ocdbt": use_ocdbt, "use_zarr3": use_zarr3,
               "dir": str(root / f"{api}-{_vname(use_ocdbt, use_zarr3)}")}
        if api in ("manager", "cairn_handler_manager"):
            job["step"] = STEP
        jobs.append(job)
    # The same processes restore what cairn's handler saved with Orbax's own.
    jobs.append({"kind": "orbax_restore", "dir": str(root / "cairn_handler_manager-ocdbt-zarr2"), "step": STEP,
                 "item_name": "state", "target": "sharding", "out": str(root / "orbax-restored-cairn-handler")})
    launch.run(root / "logs", n, jobs, timeout=300)
    return n, root


def test_orbax_restores_what_cairns_handler_saved_in_every_process(orbax_saved):
    n, root = orbax_saved
    assert_restored_shards_bit_exact(root / "orbax-restored-cairn-handler", n,
                                     f"{n} processes: Orbax's manager with cairn's handler, Orbax's restore",
                                     "sharding")


@pytest.mark.parametrize("api,use_ocdbt,use_zarr3", ORBAX_SAVES, ids=ORBAX_IDS)
def test_cairn_restores_orbax_multiprocess_save(orbax_saved, api, use_ocdbt, use_zarr3):
    n, root = orbax_saved
    top = root / f"{api}-{_vname(use_ocdbt, use_zarr3)}"
    manager = api in ("manager", "cairn_handler_manager")
    item = top / str(STEP) / "state" if manager else top
    # What Orbax 0.12.8 wrote for N processes (with cairn's handler: the same).
    assert (item / "commit_success.txt").exists()
    if manager:
        assert (top / str(STEP) / "commit_success.txt").exists()
        assert cairn.orbax.all_steps(top) == [STEP]
    meta = json.loads((item / "_METADATA").read_text())
    assert meta["use_ocdbt"] is use_ocdbt and meta.get("use_zarr3", False) is use_zarr3
    for i in range(n):
        assert (item / "array_metadatas" / f"process_{i}").exists()
        assert (item / f"ocdbt.process_{i}" / "manifest.ocdbt").exists() == use_ocdbt
    # cairn reads every array bit-exactly, from the item, step and root paths.
    assert_tree_bit_exact(cairn.restore(item), f"{n} processes, {api} {_vname(use_ocdbt, use_zarr3)}")
    if manager:
        assert_tree_bit_exact(cairn.restore(top), "checkpoint root, latest step")
        assert_tree_bit_exact(cairn.restore(top / str(STEP)), "step directory")


@pytest.fixture(scope="module")
def cairn_restored_elsewhere(orbax_saved, tmp_path_factory):
    """Orbax saved with N processes; cairn restores each checkpoint with
    M != N processes (2 -> 4, 4 -> 2) onto the target shardings of mesh
    "m", which differ from every saved one."""
    n, root = orbax_saved
    m = {2: 4, 4: 2}[n]
    out = tmp_path_factory.mktemp(f"cairn_restored_{n}to{m}")
    jobs = []
    for api, use_ocdbt, use_zarr3 in ORBAX_SAVES:
        name = f"{api}-{_vname(use_ocdbt, use_zarr3)}"
        item = root / name / str(STEP) / "state" if api in ("manager", "cairn_handler_manager") else root / name
        jobs.append({"kind": "cairn_restore", "dir": str(item), "out": str(out / name)})
    launch.run(out / "logs", m, jobs, timeout=300)
    return n, m, out


@pytest.mark.parametrize("api,use_ocdbt,use_zarr3", ORBAX_SAVES, ids=ORBAX_IDS)
def test_cairn_restores_orbax_multiprocess_save_onto_other_processes(cairn_restored_elsewhere, api,
                                                                      use_ocdbt, use_zarr3):
    n, m, out = cairn_restored_elsewhere
    name = f"{api}-{_vname(use_ocdbt, use_zarr3)}"
    assert_restored_shards_bit_exact(out / name, m, f"Orbax {n}-process save of {name}, cairn restore "
                                     f"onto {m} processes", "sharding")


# ---------------------------------------------------------------- cairn saves

@pytest.fixture(scope="module")
def cairn_saved(nproc, tmp_path_factory):
    """N processes save with cairn, then the same N processes restore each
    checkpoint with Orbax and target shardings; then one process with 8
    devices restores each with Orbax without a target."""
    n = nproc
    root = tmp_path_factory.mktemp(f"cairn_saved_{n}proc")
    saves, restores, single = [], [], []
    for use_ocdbt, use_zarr3 in VARIANTS:
        v = _vname(use_ocdbt, use_zarr3)
        job = {"kind": "cairn_save", "use_ocdbt": use_ocdbt, "use_zarr3": use_zarr3,
               "dir": str(root / v)}
        item = root / v
        if v == "ocdbt-zarr2":  # one in the CheckpointManager step layout
            job["step"], job["item_name"] = STEP, "state"
            item = root / v / str(STEP) / "state"
            restores.append({"kind": "orbax_restore", "dir": str(root / v), "step": STEP,
                             "item_name": "state", "target": "sharding",
                             "out": str(root / "restored-manager")})
        saves.append(job)
        restores.append({"kind": "orbax_restore", "dir": str(item), "target": "sharding",
                         "out": str(root / f"restored-target-{v}")})
        single.append({"kind": "orbax_restore", "dir": str(item), "target": "numpy",
                       "out": str(root / f"restored-single-{v}")})
    launch.run(root / "logs", n, saves + restores, timeout=300)
    launch.run(root / "logs", 1, single, timeout=240)
    return n, root


def _cairn_item(root, v):
    return root / v / str(STEP) / "state" if v == "ocdbt-zarr2" else root / v


@pytest.mark.parametrize("use_ocdbt,use_zarr3", VARIANTS, ids=VARIANT_IDS)
def test_orbax_restores_cairn_multiprocess_save_with_target(cairn_saved, use_ocdbt, use_zarr3):
    n, root = cairn_saved
    v = _vname(use_ocdbt, use_zarr3)
    assert_restored_shards_bit_exact(root / f"restored-target-{v}", n, f"{n}-process Orbax restore of {v}",
                                     target="sharding")


def test_checkpoint_manager_restores_cairn_multiprocess_step(cairn_saved):
    n, root = cairn_saved
    assert_restored_shards_bit_exact(root / "restored-manager", n,
                                     f"{n}-process CheckpointManager restore", target="sharding")


@pytest.mark.parametrize("use_ocdbt,use_zarr3", VARIANTS, ids=VARIANT_IDS)
def test_orbax_restores_cairn_multiprocess_save_in_one_process(cairn_saved, use_ocdbt, use_zarr3):
    n, root = cairn_saved
    v = _vname(use_ocdbt, use_zarr3)
    assert_restored_shards_bit_exact(root / f"restored-single-{v}", 1, f"1-process Orbax restore of {v}",
                                     target="numpy")
    # cairn reads it back too.
    assert_tree_bit_exact(cairn.restore(_cairn_item(root, v)), f"cairn restore of {v}")


@pytest.mark.parametrize("use_ocdbt,use_zarr3", VARIANTS, ids=VARIANT_IDS)
def test_each_process_wrote_its_own_shards(cairn_saved, use_ocdbt, use_zarr3):
    n, root = cairn_saved
    v = _vname(use_ocdbt, use_zarr3)
    item = _cairn_item(root, v)
    assert (item / "commit_success.txt").exists()
    assert not list(item.parent.glob("*.orbax-checkpoint-tmp*"))
    params = {".".join(p) for p in mp_tree.LEAVES} | {".".join(p) for p in mp_tree.NUMPY_LEAVES}
    for i in range(n):
        entries = json.loads((item / "array_metadatas" / f"process_{i}").read_text())["array_metadatas"]
        reported = {e["array_metadata"]["param_name"] for e in entries}
        # Every process reports the jax arrays (Orbax validates the same set on every process).
        assert {".".join(p) for p in mp_tree.LEAVES} <= reported <= params, (i, reported)
    if not use_ocdbt:
        assert not list(item.glob("ocdbt.process_*"))
        return
    dbs = sorted(p.name for p in item.glob("ocdbt.process_*"))
    assert dbs == sorted(f"ocdbt.process_{i}" for i in range(n))
    keys = {i: set(cairn.kvstore.open(f"file://{item}/ocdbt.process_{i}/|ocdbt:").keys()) for i in range(n)}
    root_keys = set(cairn.kvstore.open(f"file://{item}/|ocdbt:").keys())
    assert root_keys == set().union(*keys.values())
    for path in mp_tree.LEAVES:
        name = ".".join(path)
        for index, owner in mp_tree.replica0_chunks(path, n).items():
            key = mp_tree.chunk_key(name, index, use_zarr3)
            holders = [i for i in range(n) if key in keys[i]]
            assert holders == [owner], f"{v}: chunk {key} is in processes {holders}, expected {owner}"
        chunk_keys = {k for i in range(n) for k in keys[i]
                      if k.startswith(name + "/") and not k.endswith(("zarr.json", ".zarray", ".zattrs"))}
        assert len(chunk_keys) == len(mp_tree.replica0_chunks(path, n)), (name, sorted(chunk_keys))


def test_cairn_sharding_file_matches_orbax(orbax_saved, cairn_saved):
    """For the same tree saved by the same N processes, cairn's `_sharding`
    and `_METADATA` say what Orbax's say (the device ids of every process
    included), so Orbax can rebuild the shardings from either. (The write
    shapes differ by design: Orbax splits replicated shards among the
    replicas, cairn writes each shard once, whole, from replica 0.)"""
    n, orbax_root = orbax_saved
    n2, cairn_root = cairn_saved
    assert n == n2
    theirs = json.loads((orbax_root / "pytree-ocdbt-zarr2" / "_sharding").read_text())
    ours = json.loads((cairn_root / "ocdbt-zarr3" / "_sharding").read_text())
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert json.loads(ours[key]) == json.loads(theirs[key]), key
    meta_theirs = json.loads((orbax_root / "pytree-ocdbt-zarr2" / "_METADATA").read_text())["tree_metadata"]
    meta_ours = json.loads((cairn_root / "ocdbt-zarr3" / "_METADATA").read_text())["tree_metadata"]
    for entries in (meta_theirs, meta_ours):
        for entry in entries.values():
            entry["value_metadata"].pop("write_shape", None)
    assert meta_ours == meta_theirs
