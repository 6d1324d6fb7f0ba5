"""The real AXLearn client (PyPI axlearn 0.0.1.post20240213000026) against
`cairn convert`, both ways, bit for bit.

A session fixture builds an ISOLATED virtual environment (AXLearn pins jax and
jaxlib 0.4.21, tensorstore 0.1.45, numpy 1.23.5 and tensorflow 2.14, which must
not mix with this interpreter's packages), `pip install`s the pinned AXLearn
into it and caches it under build/ (first build several minutes, ~2.8 GB). If pip
cannot build it the tests FAIL with pip's output. axlearn_client_job.py runs
inside that environment:

* AXLearn's Checkpointer saves a nested state (float32, bfloat16, int32
  scalars, a list, arrays sharded on a 2x2 CPU mesh so they have several
  chunks) -> `cairn convert --to safetensors` (CLI and Python) -> the
  `safetensors` package reads exactly the arrays AXLearn saved;
* orbax-checkpoint (this interpreter) and the `safetensors` package write
  sources -> `cairn convert --to axlearn` -> AXLearn's own read_state_spec and
  Checkpointer.restore (inside a Mesh) read exactly the source arrays back;
* AXLearn's checkpoint copied by `cairn convert --from axlearn --to axlearn`
  is restored by AXLearn again.
"""

from __future__ import annotations

import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import pytest

from client_venv import ensure_venv, load_npy_dump, probe, run_client_job, venv_has
from safetensors.numpy import load_file, save_file

import cairn
from test_cli import cairn_cli

AXLEARN = "0.0.1.post20240213000026"
REPO = pathlib.Path(__file__).resolve().parents[2]
JOB = pathlib.Path(__file__).resolve().parent / "axlearn_client_job.py"
# `pip freeze` of a working install: without it pip backtracks through dozens
# of releases of AXLearn's unpinned dependencies (~20 minutes).
CONSTRAINTS = pathlib.Path(__file__).resolve().parent / "axlearn_client_constraints.txt"
STEP = 42


def _base_python():
    """An interpreter AXLearn's pins have wheels for (CPython 3.9-3.11)."""
    if (3, 9) <= sys.version_info[:2] <= (3, 11):
        return sys.executable
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for name in ("python3.11", "python3.10"):
        found = shutil.which(name) or next(
            iter(sorted(glob.glob(os.path.join(pyenv_root, "versions", f"{name[6:]}*", "bin", "python")))), None)
        if found:
            return found
    pytest.fail(f"no Python 3.9-3.11 to build the AXLearn {AXLEARN} environment (this is "
                f"{sys.version.split()[0]}; tensorflow 2.14 and numpy 1.23.5 need <= 3.11)", pytrace=False)


@pytest.fixture(scope="session")
def axlearn_python():
    """The python of an isolated venv with axlearn==0.0.1.post20240213000026;
    created on first use, reused while it still works. No
    --system-site-packages: the system's jax/numpy/tensorstore are far newer
    than what this AXLearn pins and would shadow them."""
    base = _base_python()
    tag = subprocess.run([base, "-c", "import sys; print(f'py{sys.version_info[0]}{sys.version_info[1]}')"],
                         capture_output=True, text=True, check=True).stdout.strip()
    venv = pathlib.Path(os.environ.get("CAIRN_AXLEARN_VENV", REPO / "build" / f"venv-axlearn-{AXLEARN}-{tag}"))
    return ensure_venv(venv, base, [f"axlearn=={AXLEARN}"], what=f"AXLearn {AXLEARN}", is_ready=lambda v: venv_has(v, "axlearn", AXLEARN, "axlearn.common.checkpointer"),
                       constraints=CONSTRAINTS)


def run_job(python, *args):
    run_client_job(python, JOB, "AXLearn", *args)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_arrays(got: dict, want: dict, what: str):
    assert sorted(got) == sorted(want), what
    for name in want:
        assert same_bits(got[name], want[name]), (
            f"{what}: {name}: got {got[name].dtype}{got[name].shape}, want {want[name].dtype}{want[name].shape}")


def test_environment_has_the_pinned_axlearn(axlearn_python):
    r = probe(axlearn_python, "axlearn", "axlearn.common.checkpointer", "jax.__version__", "numpy.__version__")
    assert r.returncode == 0, r.stderr[-4000:]
    version, location, jax_version, numpy_version = r.stdout.split()[:4]
    assert version == AXLEARN
    assert location.startswith(str(pathlib.Path(axlearn_python).parent.parent))
    assert (jax_version, numpy_version) == ("0.4.21", "1.23.5")


# ---------------------------------------------------------------- AXLearn -> cairn

@pytest.fixture(scope="module")
def axlearn_saved(axlearn_python, tmp_path_factory):
    root = tmp_path_factory.mktemp("axlearn_saved")
    run_job(axlearn_python, "save", root / "ckpt", STEP, root / "expected")
    expected, _ = load_npy_dump(root / "expected")
    return root / "ckpt", expected


def test_axlearn_wrote_what_the_test_expects(axlearn_saved):
    base, expected = axlearn_saved
    step_dir = base / f"step_{STEP:08d}"
    index = json.loads((step_dir / "index").read_text())
    assert index[0] == ["step", STEP]
    entries = dict(index[1:])
    assert entries["model/emb"] == {"dtype": "bfloat16", "shape": "(16, 8)"}
    assert entries["learner/optimizer/0/count"] == {"dtype": "int32", "shape": "()"}
    # sharded on the 2x2 mesh: one chunk per shard
    zarray = json.loads((step_dir / "gda/model/layer/w/.zarray").read_text())
    assert zarray["chunks"] == [4, 2] and zarray["shape"] == [8, 4]
    assert sorted(p.name for p in (step_dir / "gda/model/layer/w").iterdir() if p.name != ".zarray") == \
        ["0.0", "0.1", "1.0", "1.1"]
    assert sorted(expected) == sorted(p for p, _ in index[1:])


def safetensors_as_paths(path):
    """The safetensors file's tensors keyed by AXLearn path ('.' -> '/')."""
    return {name.replace(".", "/"): a for name, a in load_file(str(path)).items()}


def test_cli_converts_an_axlearn_checkpoint_to_safetensors(axlearn_saved, tmp_path):
    base, expected = axlearn_saved
    r = subprocess.run([cairn_cli(), "convert", str(base), str(tmp_path / "st"), "--to", "safetensors",
                        "--verify", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["source_format"] == "axlearn" and summary["arrays"] == len(expected)
    assert_same_arrays(safetensors_as_paths(tmp_path / "st" / "model.safetensors"), expected,
                       "AXLearn -> cairn CLI -> safetensors")


def test_python_converts_an_axlearn_step_dir_to_safetensors(axlearn_saved, tmp_path):
    base, expected = axlearn_saved
    summary = cairn.convert(base / f"step_{STEP:08d}", tmp_path / "st", to="safetensors", verify=True)
    assert summary["source_format"] == "axlearn"
    assert_same_arrays(safetensors_as_paths(tmp_path / "st" / "model.safetensors"), expected,
                       "AXLearn step dir -> cairn.convert -> safetensors")


def test_a_step_without_index_is_not_converted(axlearn_saved, tmp_path):
    base, _ = axlearn_saved
    copy = tmp_path / "ckpt"
    shutil.copytree(base, copy)
    assert cairn.convert(copy, tmp_path / "ok", to="safetensors")["arrays"] > 0  # control
    (copy / f"step_{STEP:08d}" / "index").unlink()  # AXLearn's "incomplete" step
    with pytest.raises(FileNotFoundError) as err:
        cairn.convert(copy, tmp_path / "st", to="safetensors")
    assert f"no checkpoint at key `` of file://{copy}/" in str(err.value), str(err.value)
    assert "no AXLearn index" in str(err.value), str(err.value)


def test_axlearn_restores_cairns_axlearn_to_axlearn_copy(axlearn_python, axlearn_saved, tmp_path):
    base, expected = axlearn_saved
    cairn.convert(base, tmp_path / "copy", to="axlearn", verify=True)
    run_job(axlearn_python, "restore", tmp_path / "copy" / f"step_{STEP:08d}", tmp_path / "restored")
    restored, _ = load_npy_dump(tmp_path / "restored")
    assert_same_arrays(restored, expected, "AXLearn -> cairn axlearn copy -> AXLearn restore")


# ---------------------------------------------------------------- cairn -> AXLearn

def orbax_state():
    rng = np.random.default_rng(3)
    return {
        "params": {
            "w": rng.standard_normal((64, 48), dtype=np.float32),
            "b": rng.standard_normal(48, dtype=np.float32),
            "emb": rng.standard_normal((16, 8)).astype(ml_dtypes.bfloat16),
        },
        "opt": [{"mu": rng.standard_normal((64, 48), dtype=np.float32)}, {"count": np.int32(7)}],
        "scalar": np.float32(-0.5),
    }


def test_axlearn_restores_cairns_conversion_of_orbax(axlearn_python, tmp_path):
    ocp.PyTreeCheckpointer().save(tmp_path / "orbax" / "12" / "default", orbax_state())
    summary = cairn.convert(tmp_path / "orbax", tmp_path / "axl", to="axlearn", verify=True)
    assert summary["source_format"] == "orbax"
    step_dir = tmp_path / "axl" / "step_00000012"
    run_job(axlearn_python, "restore", step_dir, tmp_path / "restored")
    restored, manifest = load_npy_dump(tmp_path / "restored")
    s = orbax_state()
    want = {"params/w": s["params"]["w"], "params/b": s["params"]["b"], "params/emb": s["params"]["emb"],
            "opt/0/mu": s["opt"][0]["mu"], "opt/1/count": np.asarray(s["opt"][1]["count"]),
            "scalar": np.asarray(s["scalar"])}
    assert_same_arrays(restored, want, "orbax -> cairn -> AXLearn restore")
    # read_state_spec saw the same dtype and shape as the index says
    assert manifest["params/emb"]["spec"] == {"dtype": "bfloat16", "shape": [16, 8]}
    assert manifest["opt/1/count"]["spec"] == {"dtype": "int32", "shape": []}


def test_axlearn_restores_cairns_conversion_of_safetensors(axlearn_python, tmp_path):
    rng = np.random.default_rng(4)
    arrays = {"layers.0.w": rng.standard_normal((32, 16), dtype=np.float32),
              "layers.1.w": rng.standard_normal((32, 16)).astype(ml_dtypes.bfloat16),
              "norm": rng.standard_normal(16).astype(np.float16),
              "steps": rng.integers(-100, 100, (5,), dtype=np.int64)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    r = subprocess.run([cairn_cli(), "convert", str(tmp_path / "model.safetensors"), str(tmp_path / "axl"),
                        "--to", "axlearn", "--step", "3", "--verify"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    run_job(axlearn_python, "restore", tmp_path / "axl" / "step_00000003", tmp_path / "restored")
    restored, manifest = load_npy_dump(tmp_path / "restored")
    # The index keeps int64; JAX without x64 (AXLearn's default) restores it as int32.
    assert manifest["steps"]["spec"] == {"dtype": "int64", "shape": [5]}
    want = {k.replace(".", "/"): v for k, v in arrays.items()}
    want["steps"] = want["steps"].astype(np.int32)
    assert_same_arrays(restored, want, "safetensors -> cairn -> AXLearn restore")
