"""MaxText 0.2.5's checkpoint code (`maxtext.common.checkpointing`, PyPI
maxtext==0.2.5, Python 3.12) against cairn, both ways, bit for bit.

A session fixture builds an ISOLATED virtual environment under build/ with a
Python 3.12 interpreter (MaxText 0.2.5 requires >= 3.12; this interpreter is
older): `pip install maxtext==0.2.5` plus the packages its checkpointing
module imports, pinned by maxtext_constraints.txt (the wheel declares every
dependency under an extra; its "tpu"/"cuda12" extras pull hundreds of
packages, TPU and CUDA runtimes included, so the venv installs only what
`import maxtext.common.checkpointing` needs, ~1 GB, ~2 minutes once). A
marker file records a complete venv; it is reused while the marker matches
the requirements. No Python 3.12, or a pip failure, FAILS the tests.
maxtext_client_job.py runs inside that venv:

* cairn -> MaxText: cairn.save writes MaxText's on-disk training state (the
  Linen TrainState's fields: step, params {"params": {"decoder": ...,
  "token_embedder": ...}}, Adam's opt_state) to <root>/<step>/items, in all
  four storage variants (OCDBT or not, zarr3 or zarr v2) and with arrays
  split into several chunks; MaxText's load_params_from_path (into Linen
  params and into an NNX state), load_state_if_possible (params-only, and
  the resume of a run through create_orbax_checkpoint_manager) restore it
  on a 2x2 CPU mesh, and every value is the one cairn wrote.
* MaxText -> cairn: MaxText's create_orbax_checkpoint_manager +
  save_checkpoint (async) and save_params_to_path write a sharded state;
  cairn.restore and `cairn verify` / `cairn ls` read exactly it.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from client_venv import load_npy_dump, run_client_job
from maxtext_venv import MAXTEXT, maxtext_python  # noqa: F401  (the session fixture)

import cairn
import cairn.orbax
from test_cli import cairn_cli

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "maxtext_client_job.py"
STEP = 5
# cairn.save keyword arguments: the four storage variants, and MaxText's default
# one with arrays split into several chunks (chunk_byte_size, as Orbax's option).
VARIANTS = {
    "ocdbt-zarr3": dict(use_ocdbt=True, use_zarr3=True),
    "ocdbt-zarr2": dict(use_ocdbt=True, use_zarr3=False),
    "zarr3": dict(use_ocdbt=False, use_zarr3=True),
    "zarr2": dict(use_ocdbt=False, use_zarr3=False),
    "ocdbt-zarr3-small-chunks": dict(use_ocdbt=True, use_zarr3=True, chunk_byte_size=256),
}



def run_job(python, *args):
    run_client_job(python, JOB, "MaxText", *args)


def test_environment_has_maxtext_0_2_5_on_python_3_12(maxtext_python):
    code = ("import importlib.metadata as m, importlib.util as u, sys; "
            "print(sys.version_info[:2] == (3, 12)); print(m.version('maxtext')); "
            "print(u.find_spec('maxtext.common.checkpointing').origin); print(m.version('orbax-checkpoint'))")
    r = subprocess.run([maxtext_python, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    is312, version, origin, orbax_version = r.stdout.split()
    assert is312 == "True" and version == MAXTEXT
    assert origin.startswith(str(pathlib.Path(maxtext_python).parent.parent)), origin
    assert tuple(int(x) for x in orbax_version.split(".")[:2]) >= (0, 12), orbax_version  # Orbax v1 API


# ---------------------------------------------------------------- helpers

def write_dump(flat, directory):
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True)
    manifest = {}
    for n, (path, a) in enumerate(flat.items()):
        a = np.asarray(a)
        np.save(directory / f"{n}.npy", a.view(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a)
        manifest[path] = {"file": f"{n}.npy", "dtype": str(a.dtype), "shape": list(a.shape)}
    (directory / "manifest.json").write_text(json.dumps(manifest))


def flatten(tree, prefix=""):
    """{'a/b/0/c': array} of a restored tree (None leaves dropped)."""
    out = {}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else None
    if items is None:
        if tree is not None:
            out[prefix] = np.asarray(tree)
        return out
    for k, v in items:
        out.update(flatten(v, f"{prefix}/{k}" if prefix else str(k)))
    return out


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_arrays(got: dict, want: dict, what: str):
    assert sorted(got) == sorted(want), what
    for name in want:
        assert same_bits(got[name], want[name]), (
            f"{what}: {name}: got {got[name].dtype}{got[name].shape}, want {want[name].dtype}{want[name].shape}")


# ---------------------------------------------------------------- cairn -> MaxText

def maxtext_state():
    """MaxText's on-disk training state (a Linen TrainState's fields) as
    numpy: scanned decoder layers, bfloat16 and float32 weights."""
    rng = np.random.default_rng(21)
    bf16 = lambda *s: rng.standard_normal(s).astype(ml_dtypes.bfloat16)  # noqa: E731
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    params = {"params": {
        "token_embedder": {"embedding": bf16(64, 16)},
        "decoder": {
            "decoder_norm": {"scale": f32(16)},
            "layers": {
                "pre_self_attention_layer_norm": {"scale": f32(16, 2)},
                "self_attention": {"query": {"kernel": bf16(16, 2, 4, 8)}, "out": {"kernel": bf16(4, 2, 8, 16)}},
                "mlp": {"wi_0": {"kernel": bf16(16, 2, 32)}, "wo": {"kernel": bf16(32, 2, 16)}},
            },
            "logits_dense": {"kernel": f32(16, 64)},
        },
    }}

    def moment(tree):
        return {k: moment(v) for k, v in tree.items()} if isinstance(tree, dict) else \
            rng.standard_normal(tree.shape).astype(tree.dtype)

    # optax.adam: (ScaleByAdamState(count, mu, nu), EmptyState()); the empty one is None on disk.
    opt_state = [{"count": np.int32(STEP), "mu": moment(params), "nu": moment(params)}, None]
    return {"step": np.int32(STEP), "params": params, "opt_state": opt_state}


@pytest.fixture(scope="module")
def maxtext_job(maxtext_python, tmp_path_factory):
    """cairn writes the state in every variant; ONE MaxText process loads them
    all and saves its own checkpoint (for the MaxText -> cairn tests)."""
    root = tmp_path_factory.mktemp("maxtext")
    state = maxtext_state()
    expected = flatten(state)
    write_dump(expected, root / "spec")
    load_args = []
    for name, kwargs in VARIANTS.items():
        item = cairn.save(root / "cairn" / name, state, step=STEP, item_name="items", **kwargs)
        assert item == str(root / "cairn" / name / str(STEP) / "items")
        load_args += [root / "cairn" / name, root / "out" / name]
    run_job(maxtext_python, "load", root / "spec", STEP, *load_args,
            "+", "save", root / "ckpt", STEP, root / "expected", root / "params_only")
    return root, expected


@pytest.fixture(scope="module")
def cairn_written(maxtext_job):
    return maxtext_job


def params_of(expected):
    return {k[len("params/"):]: v for k, v in expected.items() if k.startswith("params/")}


@pytest.mark.parametrize("variant", VARIANTS)
def test_maxtext_load_params_from_path_reads_cairns_checkpoint(cairn_written, variant):
    root, expected = cairn_written
    out = root / "out" / variant
    assert_same_arrays(load_npy_dump(out / "params_items")[0], params_of(expected),
                       f"cairn ({variant}) -> MaxText load_params_from_path(<step>/items)")
    assert_same_arrays(load_npy_dump(out / "params_step_root")[0], params_of(expected),
                       f"cairn ({variant}) -> MaxText load_state_if_possible(load_parameters_from_path=<step>)")
    assert_same_arrays(load_npy_dump(out / "params_nnx")[0], {k[len("params/"):]: v for k, v in params_of(expected).items()},
                       f"cairn ({variant}) -> MaxText load_params_from_path(<step>/items) into an NNX state")
    # Restored onto the model's shardings, not as one replicated copy.
    specs = json.loads((out / "result.json").read_text())["params_items_shardings"]
    assert "data" in specs["params/token_embedder/embedding"], specs


def test_cairn_wrote_several_chunks_per_array_in_the_small_chunks_variant(cairn_written):
    root, _ = cairn_written
    r = subprocess.run([cairn_cli(), "ls", str(root / "cairn" / "ocdbt-zarr3-small-chunks" / str(STEP) / "items")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # path dtype [shape] [chunks] bytes
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.strip()}
    row = rows["params.params.token_embedder.embedding"]
    assert row[2] == "[64,16]" and row[3] != "[64,16]", row  # MaxText read it from several chunks


@pytest.mark.parametrize("variant", VARIANTS)
def test_maxtext_resumes_a_run_from_cairns_checkpoint(cairn_written, variant):
    root, expected = cairn_written
    out = root / "out" / variant
    result = json.loads((out / "result.json").read_text())
    assert result["latest_step"] == STEP  # MaxText's manager sees cairn's step as committed
    assert_same_arrays(load_npy_dump(out / "resume")[0], expected,
                       f"cairn ({variant}) -> MaxText checkpoint manager resume (whole TrainState)")


def test_maxtext_names_the_weight_whose_shape_differs_from_cairns_checkpoint(cairn_written):
    root, expected = cairn_written
    result = json.loads((root / "out" / "ocdbt-zarr3" / "result.json").read_text())
    # control: the same load with the right shapes succeeded (the tests above)
    assert (root / "out" / "ocdbt-zarr3" / "params_items" / "manifest.json").exists()
    err = result["mismatch_error"]
    assert err is not None, "MaxText loaded a checkpoint whose embedding shape is not the model's"
    assert err.startswith("ValueError") and "token_embedder/embedding" in err, err
    assert "(64, 16)" in err and "(32, 16)" in err, err  # cairn's shape, read from its metadata, and the model's


# ---------------------------------------------------------------- MaxText -> cairn

@pytest.fixture(scope="module")
def maxtext_saved(maxtext_job):
    root, _ = maxtext_job
    return root, load_npy_dump(root / "expected")[0]


def test_maxtext_wrote_what_the_test_expects(maxtext_saved):
    root, expected = maxtext_saved
    step_dir = root / "ckpt" / str(STEP)
    assert (step_dir / "_CHECKPOINT_METADATA").exists() and (step_dir / "items" / "_METADATA").exists()
    meta = json.loads((step_dir / "items" / "_METADATA").read_text())
    assert meta["use_ocdbt"] is True and meta["use_zarr3"] is True  # MaxText's defaults
    assert "('params', 'params', 'token_embedder', 'embedding')" in meta["tree_metadata"]
    assert expected["params/params/token_embedder/embedding"].dtype == ml_dtypes.bfloat16
    assert int(expected["step"]) == STEP and int(expected["opt_state/0/count"]) == STEP
    assert expected["opt_state/0/mu/params/decoder/logits_dense/kernel"].any()


def test_cairn_restores_maxtexts_checkpoint(maxtext_saved):
    root, expected = maxtext_saved
    assert cairn.orbax.all_steps(root / "ckpt") == [STEP]
    restored = cairn.restore(root / "ckpt", step=STEP, item_name="items")
    assert restored["opt_state"][1] is None  # optax's EmptyState
    assert_same_arrays(flatten(restored), expected, "MaxText save_checkpoint -> cairn.restore(root, step)")
    # the item directory itself, and only the params (a partial read)
    item = cairn.restore(root / "ckpt" / str(STEP) / "items")
    assert_same_arrays(flatten(item), expected, "MaxText save_checkpoint -> cairn.restore(item dir)")
    target = {"params": restored["params"]}
    with pytest.raises(ValueError, match=r"\('opt_state', '0', 'count'\).*partial_restore=True"):
        cairn.restore(root / "ckpt" / str(STEP) / "items", target=target)
    partial = cairn.restore(root / "ckpt" / str(STEP) / "items", target=target, partial_restore=True)
    assert_same_arrays(flatten(partial), {k: v for k, v in expected.items() if k.startswith("params/")},
                       "MaxText save_checkpoint -> cairn.restore(target=params)")


def test_cairn_restores_maxtexts_params_only_checkpoint(maxtext_saved):
    root, expected = maxtext_saved
    restored = cairn.restore(root / "params_only", item_name="items")
    assert list(restored) == ["params"]
    assert_same_arrays(flatten(restored), {k: v for k, v in expected.items() if k.startswith("params/")},
                       "MaxText save_params_to_path -> cairn.restore")


def test_cairn_cli_verifies_and_lists_maxtexts_checkpoint(maxtext_saved):
    root, expected = maxtext_saved
    r = subprocess.run([cairn_cli(), "verify", str(root / "ckpt")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(expected)} arrays" in r.stdout, r.stdout
    r = subprocess.run([cairn_cli(), "ls", str(root / "ckpt" / str(STEP) / "items")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    listed = {line.split()[0]: line.split()[1:3] for line in r.stdout.splitlines() if line.strip()}
    for path, a in expected.items():
        assert listed[path.replace("/", ".")] == [str(a.dtype), json.dumps(list(a.shape)).replace(" ", "")], path


def test_cairn_verify_finds_a_damaged_maxtext_checkpoint(maxtext_saved, tmp_path):
    root, _ = maxtext_saved
    copy_dir = tmp_path / "ckpt"
    shutil.copytree(root / "ckpt", copy_dir)
    r = subprocess.run([cairn_cli(), "verify", str(copy_dir)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr  # control: the intact copy
    # The item's own d/ holds the B+tree Orbax wrote when it merged the
    # per-process databases (the per-process d/ files mix nodes and chunk
    # data in an order that varies from run to run).
    (data,) = (copy_dir / str(STEP) / "items" / "d").iterdir()
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    r = subprocess.run([cairn_cli(), "verify", str(copy_dir)], capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert data.name in out and "crc32c mismatch" in out, out  # names the damaged file and why
