"""orbax-checkpoint 0.11.33 (the release the MaxText colocated-Python change
needs) against cairn, next to the installed latest (0.12.8).

A session fixture builds a virtual environment with
``python -m venv --system-site-packages`` and ``pip install
orbax-checkpoint==0.11.33`` (jax, tensorstore and cairn come from the system
site-packages), cached under build/ by version; if pip cannot install it the
tests FAIL with pip's output. Scripts run in that environment through
subprocess (mp_workers/worker.py, 2 processes joined by jax.distributed, or 1):

* Orbax 0.11.33 saves in all four storage variants (and with its defaults)
  -> cairn restores bit-exactly;
* cairn saves from 2 processes -> Orbax 0.11.33 restores in 2 processes with
  target shardings, through a CheckpointManager, and in one process as host
  arrays; cairn saves from 1 process -> Orbax 0.11.33 restores with no target
  (shardings from `_sharding`);
* the same jobs under 0.12.8 and 0.11.33 give the same files except
  `commit_success.txt`, which 0.11.33 never writes for local paths.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from importlib import metadata

import pytest

from client_venv import ensure_venv, probe, venv_has

import cairn
from mp_workers import launch
from mp_workers.checks import assert_restored_shards_bit_exact, assert_tree_bit_exact

OLD = "0.11.33"
REPO = pathlib.Path(__file__).resolve().parents[2]
STEP = 3
ORBAX_SAVES = [("manager", True, True), ("pytree", True, False), ("pytree", False, True),
               ("standard_async", False, False)]
ORBAX_IDS = ["manager-ocdbt-zarr3", "pytree-ocdbt-zarr2", "pytree-dir-zarr3", "standard-dir-zarr2"]
VARIANTS = [(True, True), (True, False), (False, True), (False, False)]
VARIANT_IDS = ["ocdbt-zarr3", "ocdbt-zarr2", "dir-zarr3", "dir-zarr2"]
CHECKPOINT_METADATA_FIELDS = {"item_handlers", "metrics", "performance_metrics", "init_timestamp_nsecs",
                              "commit_timestamp_nsecs", "custom_metadata"}


def _vname(use_ocdbt, use_zarr3):
    return f"{'ocdbt' if use_ocdbt else 'dir'}-{'zarr3' if use_zarr3 else 'zarr2'}"


@pytest.fixture(scope="session")
def old_orbax_python():
    """The python of a venv with orbax-checkpoint 0.11.33 over the system
    site-packages; created on first use, reused while it still works."""
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    venv = pathlib.Path(os.environ.get("CAIRN_ORBAX_OLD_VENV",
                                       REPO / "build" / f"venv-orbax-checkpoint-{OLD}-{tag}"))
    return ensure_venv(venv, sys.executable, [f"orbax-checkpoint=={OLD}"], what=f"orbax-checkpoint {OLD}",
                       is_ready=lambda v: venv_has(v, "orbax-checkpoint", OLD, "orbax.checkpoint"), system_site_packages=True, timeout=900)


def test_environment_has_orbax_0_11_33(old_orbax_python):
    r = probe(old_orbax_python, "orbax-checkpoint", "orbax.checkpoint", "__import__('cairn').__name__")
    assert r.returncode == 0, r.stderr[-4000:]
    version, location = r.stdout.split()[:2]
    assert version == OLD
    assert location.startswith(str(pathlib.Path(old_orbax_python).parent.parent))
    # and this process has the other one
    assert metadata.version("orbax-checkpoint") != OLD


def _orbax_save_jobs(root):
    jobs = []
    for api, use_ocdbt, use_zarr3 in ORBAX_SAVES:
        job = {"kind": "orbax_save", "api": api, "use_ocdbt": use_ocdbt, "use_zarr3": use_zarr3,
               "dir": str(root / f"{api}-{_vname(use_ocdbt, use_zarr3)}")}
        if api == "manager":
            job["step"] = STEP
        jobs.append(job)
    jobs.append({"kind": "orbax_save", "api": "pytree_defaults", "dir": str(root / "defaults")})
    return jobs


@pytest.fixture(scope="module")
def orbax_saved(old_orbax_python, tmp_path_factory):
    """The same 2-process save jobs under Orbax 0.11.33 and under 0.12.8."""
    out = {}
    for version, python in ((OLD, old_orbax_python), (metadata.version("orbax-checkpoint"), sys.executable)):
        root = tmp_path_factory.mktemp(f"orbax_{version}_saved")
        launch.run(root / "logs", 2, _orbax_save_jobs(root), python=python, orbax_version=version,
                   timeout=300)
        out[version] = root
    return out


@pytest.mark.parametrize("api,use_ocdbt,use_zarr3", ORBAX_SAVES, ids=ORBAX_IDS)
def test_cairn_restores_orbax_0_11_save(orbax_saved, api, use_ocdbt, use_zarr3):
    top = orbax_saved[OLD] / f"{api}-{_vname(use_ocdbt, use_zarr3)}"
    item = top / str(STEP) / "state" if api == "manager" else top
    meta = json.loads((item / "_METADATA").read_text())
    assert meta["use_ocdbt"] is use_ocdbt and meta.get("use_zarr3", False) is use_zarr3
    for i in range(2):
        assert (item / f"ocdbt.process_{i}" / "manifest.ocdbt").exists() == use_ocdbt
    # 0.11.33 marks nothing with commit_success.txt; cairn still finds the step.
    assert not list(top.rglob("commit_success.txt"))
    assert_tree_bit_exact(cairn.restore(item), f"Orbax {OLD} {api} {_vname(use_ocdbt, use_zarr3)}")
    if api == "manager":
        assert cairn.orbax.all_steps(top) == [STEP]
        assert_tree_bit_exact(cairn.restore(top), f"Orbax {OLD} checkpoint root")


def test_orbax_0_11_defaults(orbax_saved):
    """PyTreeCheckpointHandler() in 0.11.33 defaults to OCDBT + zarr v2 (as 0.12.8)."""
    for version, root in orbax_saved.items():
        item = root / "defaults"
        meta = json.loads((item / "_METADATA").read_text())
        assert (meta["use_ocdbt"], meta.get("use_zarr3")) == (True, False), version
        ckpt = json.loads((item / "_CHECKPOINT_METADATA").read_text())
        assert set(ckpt) == CHECKPOINT_METADATA_FIELDS, (version, sorted(ckpt))
        assert ckpt["item_handlers"] == cairn.orbax.PYTREE_HANDLER, version
        assert ckpt["commit_timestamp_nsecs"] >= ckpt["init_timestamp_nsecs"] > 0, version
        assert_tree_bit_exact(cairn.restore(item), f"Orbax {version} defaults")


def _listing(root):
    """Relative file paths, with OCDBT data file names (random) as `d/*`."""
    out = set()
    for p in root.rglob("*"):
        rel = p.relative_to(root).parts
        if p.is_file() and rel[0] != "logs":
            if len(rel) > 1 and rel[-2] == "d":
                rel = rel[:-1] + ("*",)
            out.add("/".join(rel))
    return out


def test_on_disk_differences_0_11_33_vs_latest(orbax_saved):
    """Same tree, same 2 processes, same options: the files differ only by the
    commit_success.txt markers 0.12.x adds (at the step and at every item);
    _CHECKPOINT_METADATA has the same fields, _METADATA, _sharding and
    array_metadatas are identical."""
    latest = next(v for v in orbax_saved if v != OLD)
    old_root, new_root = orbax_saved[OLD], orbax_saved[latest]
    old_files, new_files = _listing(old_root), _listing(new_root)
    assert old_files < new_files
    added = new_files - old_files
    assert {pathlib.PurePath(f).name for f in added} == {"commit_success.txt"}, sorted(added)
    # one per directory Orbax committed: 5 items + the manager's step
    assert len(added) == len(ORBAX_SAVES) + 1 + 1, sorted(added)
    for rel in sorted(f for f in old_files if not f.endswith("/d/*")):
        name = pathlib.PurePath(rel).name
        a, b = old_root / rel, new_root / rel
        if name == "_CHECKPOINT_METADATA":
            ja, jb = json.loads(a.read_text()), json.loads(b.read_text())
            assert set(ja) == set(jb) == CHECKPOINT_METADATA_FIELDS, rel
            assert ja["item_handlers"] == jb["item_handlers"], rel
        elif name in ("_METADATA", "_sharding") or "array_metadatas" in rel or name in (".zarray", "zarr.json"):
            assert json.loads(a.read_text()) == json.loads(b.read_text()), rel


@pytest.fixture(scope="module")
def cairn_saved(old_orbax_python, tmp_path_factory):
    """cairn saves from 2 processes; Orbax 0.11.33 restores in 2 processes
    (target shardings; and via a CheckpointManager) and in 1 process (host
    arrays). cairn saves from 1 process (8 devices); Orbax 0.11.33 restores
    with no target at all."""
    root = tmp_path_factory.mktemp("cairn_saved_for_0_11")
    saves, restores, single = [], [], []
    for use_ocdbt, use_zarr3 in VARIANTS:
        v = _vname(use_ocdbt, use_zarr3)
        job = {"kind": "cairn_save", "use_ocdbt": use_ocdbt, "use_zarr3": use_zarr3, "dir": str(root / v)}
        item = root / v
        if v == "ocdbt-zarr3":  # MaxText's layout: CheckpointManager steps, item "items"
            job["step"], job["item_name"] = STEP, "items"
            item = root / v / str(STEP) / "items"
            restores.append({"kind": "orbax_restore", "dir": str(root / v), "step": STEP,
                             "item_name": "items", "target": "sharding", "out": str(root / "restored-manager")})
        saves.append(job)
        restores.append({"kind": "orbax_restore", "dir": str(item), "target": "sharding",
                         "out": str(root / f"restored-target-{v}")})
        single.append({"kind": "orbax_restore", "dir": str(item), "target": "numpy",
                       "out": str(root / f"restored-host-{v}")})
        single.append({"kind": "cairn_save", "use_ocdbt": use_ocdbt, "use_zarr3": use_zarr3,
                       "dir": str(root / f"one-process-{v}")})
        single.append({"kind": "orbax_restore", "dir": str(root / f"one-process-{v}"), "target": "none",
                       "out": str(root / f"restored-none-{v}")})
    launch.run(root / "logs", 2, saves + restores, python=old_orbax_python, orbax_version=OLD, timeout=300)
    launch.run(root / "logs", 1, single, python=old_orbax_python, orbax_version=OLD, timeout=300)
    return root


@pytest.mark.parametrize("use_ocdbt,use_zarr3", VARIANTS, ids=VARIANT_IDS)
def test_orbax_0_11_restores_cairn_save(cairn_saved, use_ocdbt, use_zarr3):
    v = _vname(use_ocdbt, use_zarr3)
    assert_restored_shards_bit_exact(cairn_saved / f"restored-target-{v}", 2,
                                     f"Orbax {OLD}, 2 processes, target shardings, {v}", target="sharding")
    assert_restored_shards_bit_exact(cairn_saved / f"restored-host-{v}", 1,
                                     f"Orbax {OLD}, 1 process, host arrays, {v}", target="numpy")
    assert_restored_shards_bit_exact(cairn_saved / f"restored-none-{v}", 1,
                                     f"Orbax {OLD}, 1 process, no target, {v}", target="none")


def test_orbax_0_11_checkpoint_manager_restores_cairn_steps(cairn_saved):
    assert_restored_shards_bit_exact(cairn_saved / "restored-manager", 2,
                                     f"Orbax {OLD} CheckpointManager", target="sharding")
