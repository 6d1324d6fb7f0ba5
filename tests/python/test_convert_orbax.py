"""`cairn convert --to orbax / orbax-zarr2` against the real peers, and resuming
an interrupted conversion.

The `safetensors` package and orbax-checkpoint write the sources; orbax-checkpoint
(0.12.8, installed) restores what cairn wrote, with and without restore
arguments, and TensorStore opens its arrays. Bit for bit. Conversions killed
half-way (SIGKILL from a `progress` callback of cairn.convert in a child
process: convert_kill.py) leave no committed checkpoint, and the same command run again resumes and finishes.
"""

import json
import os
import signal
import subprocess

import jax
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from safetensors.numpy import save_file

import cairn
from conftest import same_bits
from convert_kill import convert_killed_after_arrays
from test_cli import cairn_cli, run_cli




def st_arrays():
    rng = np.random.default_rng(1)
    return {
        "model.embed.weight": rng.standard_normal((40, 16)).astype(ml_dtypes.bfloat16),
        "model.layers.0.w": rng.standard_normal((32, 24), dtype=np.float32),
        "model.layers.1.w": rng.standard_normal((32, 24), dtype=np.float32),
        "model.norm": rng.integers(-100, 100, 7, dtype=np.int64),
        "scale": np.asarray(rng.standard_normal(), dtype=np.float16),
    }


def nest(flat):
    tree = {}
    for name, value in flat.items():
        node = tree
        keys = name.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return tree


def assert_tree_bits(got, want, where=""):
    assert isinstance(got, dict) and sorted(got) == sorted(want), (where, sorted(got), sorted(want))
    for k in want:
        if isinstance(want[k], dict):
            assert_tree_bits(got[k], want[k], f"{where}.{k}")
        else:
            assert same_bits(got[k], want[k]), f"{where}.{k}"


def abstract_on_cpu(tree):
    sharding = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype,
                                                       sharding=sharding), tree)


@pytest.mark.parametrize("to,driver", [("orbax", "zarr3"), ("orbax-zarr2", "zarr")])
def test_safetensors_to_orbax_is_restored_by_orbax_checkpoint(tmp_path, to, driver):
    arrays = st_arrays()
    save_file(arrays, str(tmp_path / "model.safetensors"))
    r = run_cli("convert", str(tmp_path / "model.safetensors"), str(tmp_path / "ckpt"), "--to", to,
                "--step", "3", "--verify", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["arrays"] == 5 and summary["dest"] == str(tmp_path / "ckpt" / "3" / "default")
    item = tmp_path / "ckpt" / "3" / "default"
    metadata = json.loads((item / "_METADATA").read_text())
    assert metadata["use_zarr3"] is (to == "orbax")
    # Without arguments: NumPy arrays, the tree as the names say.
    assert_tree_bits(ocp.PyTreeCheckpointer().restore(item), nest(arrays))
    # Through CheckpointManager, onto jax.Arrays of a target.
    want = nest(arrays)
    with ocp.CheckpointManager(tmp_path / "ckpt") as mngr:
        assert mngr.all_steps() == [3]
        restored = mngr.restore(3, args=ocp.args.StandardRestore(abstract_on_cpu(want)))
    assert isinstance(restored["model"]["layers"]["0"]["w"], jax.Array)
    # JAX without x64 holds int64 as int32 (the values fit).
    canonical = jax.tree.map(lambda a: a.astype(jax.dtypes.canonicalize_dtype(a.dtype)), want)
    assert_tree_bits(jax.tree.map(np.asarray, restored), canonical)
    # TensorStore opens the arrays through the item's OCDBT database.
    t = ts.open({"driver": driver, "kvstore": {"driver": "ocdbt", "base": f"file://{item}/"},
                 "path": "model.embed.weight"}).result()
    assert same_bits(t.read().result(), arrays["model.embed.weight"])


def test_axlearn_to_orbax_keeps_axlearn_step_layout_and_iterator_state(tmp_path):
    # The AXLearn source: cairn's AXLearn output of an Orbax checkpoint
    # (test_convert.py and test_axlearn_client.py prove it is AXLearn's), with
    # input-iterator state beside it.
    rng = np.random.default_rng(2)
    state = {"params": {"w": rng.standard_normal((64, 48), dtype=np.float32),
                        "emb": rng.standard_normal((16, 8)).astype(ml_dtypes.bfloat16)},
             "count": np.int32(7)}
    ocp.PyTreeCheckpointer().save(tmp_path / "orbax" / "12" / "default", state)
    cairn.convert(tmp_path / "orbax", tmp_path / "axl", to="axlearn")
    step = tmp_path / "axl" / "step_00000012"
    (step / "tf_0").mkdir()
    (step / "tf_0" / "iter.index").write_bytes(b"tf iterator \x00\x01")
    (step / "python_0").mkdir()
    (step / "python_0" / "state.json").write_text('{"epoch": 3}')

    r = run_cli("convert", str(tmp_path / "axl"), str(tmp_path / "back"), "--to", "orbax", "--verify")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "back" / "step_00000012"
    assert (out / "tfds" / "tf_0" / "iter.index").read_bytes() == b"tf iterator \x00\x01"
    assert (out / "python" / "python_0" / "state.json").read_text() == '{"epoch": 3}'
    index = json.loads((out / "index" / "index").read_text())
    assert index[0] == ["step", 12]
    assert_tree_bits(ocp.PyTreeCheckpointer().restore(out / "state"),
                     {"params": state["params"], "count": np.asarray(state["count"])})
    # cairn reads it back as an AXLearn Orbax step, iterator state included:
    # converting it to AXLearn again gives the same files.
    r = run_cli("convert", str(tmp_path / "back"), str(tmp_path / "axl2"), "--to", "axlearn")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "axl2/step_00000012/tf_0/iter.index").read_bytes() == b"tf iterator \x00\x01"
    assert (tmp_path / "axl2/step_00000012/index").read_text() == (step / "index").read_text()


def test_an_orbax_destination_that_exists_is_refused_unless_overwrite(tmp_path):
    save_file(st_arrays(), str(tmp_path / "model.safetensors"))
    args = ["convert", str(tmp_path / "model.safetensors"), str(tmp_path / "ckpt"), "--to", "orbax"]
    assert run_cli(*args).returncode == 0
    r = run_cli(*args)
    assert r.returncode == 2 and "exists" in r.stderr  # an input error (issue 29)
    assert "pass --overwrite to replace it" in r.stderr and str(tmp_path / "ckpt" / "0") in r.stderr
    r = run_cli(*args, "--overwrite")
    assert r.returncode == 0, r.stderr
    assert_tree_bits(ocp.PyTreeCheckpointer().restore(tmp_path / "ckpt/0/default"), nest(st_arrays()))


def test_mpirun_writes_one_orbax_checkpoint(tmp_path, peer_transports):
    rng = np.random.default_rng(3)
    arrays = {f"layers.{i}.w": rng.standard_normal((256, 128), dtype=np.float32) for i in range(6)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    r = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", "--allow-run-as-root", cairn_cli(),
                        "convert", str(tmp_path / "model.safetensors"), str(tmp_path / "ckpt"),
                        "--to", "orbax", "--memory-budget", "256KiB", "--json", "--verify"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1 and lines[0]["processes"] == 2
    item = tmp_path / "ckpt" / "0" / "default"
    # Both processes wrote chunks into their own databases.
    assert (item / "ocdbt.process_0" / "manifest.ocdbt").exists()
    assert (item / "ocdbt.process_1" / "manifest.ocdbt").exists()
    assert_tree_bits(ocp.PyTreeCheckpointer().restore(item), nest(arrays))


def many_arrays():
    rng = np.random.default_rng(4)
    return {f"layers.{i:02d}.w": rng.standard_normal((128, 128), dtype=np.float32) for i in range(12)}


@pytest.mark.parametrize("to", ["orbax", "axlearn"])
def test_a_killed_conversion_resumes_from_complete_arrays(tmp_path, to):
    arrays = many_arrays()
    save_file(arrays, str(tmp_path / "model.safetensors"))
    # 64 KiB arrays and a 256 KiB budget: Orbax commits its chunks every
    # 256 KiB, so the arrays done before the kill are durable.
    args = ["convert", str(tmp_path / "model.safetensors"), str(tmp_path / "out"), "--to", to,
            "--memory-budget", "256KiB", "--threads", "2", "--json"]
    killed = convert_killed_after_arrays(tmp_path / "model.safetensors", tmp_path / "out", 8, to=to,
                                         memory_budget=256 << 10, threads=2)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    # Nothing looks committed.
    if to == "orbax":
        assert not (tmp_path / "out" / "0").exists()
        assert any(".orbax-checkpoint-tmp" in p.name for p in (tmp_path / "out").iterdir())
    else:
        assert not (tmp_path / "out" / "step_00000000" / "index").exists()
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    # At least the arrays committed before the kill (Orbax: every 256 KiB of
    # chunks, so 4 or 8), never all of them; another worker may have
    # finished one more array while the 8th was being reported.
    assert 4 <= summary["arrays_resumed"] < 12, summary
    assert summary["bytes_written"] == (12 - summary["arrays_resumed"]) * 128 * 128 * 4
    # Control: the result is complete and exact.
    if to == "orbax":
        assert_tree_bits(ocp.PyTreeCheckpointer().restore(tmp_path / "out/0/default"), nest(arrays))
        assert not any(".orbax-checkpoint-tmp" in p.name for p in (tmp_path / "out").iterdir())
    else:
        step = tmp_path / "out" / "step_00000000"
        assert not (step / "cairn_convert_resume").exists()
        for name, value in arrays.items():
            got = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(
                step / "gda" / name.replace(".", "/"))}}).result().read().result()
            assert same_bits(got, value), name


def test_another_conversion_into_an_interrupted_destination_starts_afresh(tmp_path):
    arrays = many_arrays()
    save_file(arrays, str(tmp_path / "a.safetensors"))
    other = {k: v + 1 for k, v in arrays.items()}
    save_file(other, str(tmp_path / "b.safetensors"))
    common = ["--to", "axlearn", "--memory-budget", "256KiB", "--threads", "2", "--json"]
    kill = dict(to="axlearn", memory_budget=256 << 10, threads=2)
    killed = convert_killed_after_arrays(tmp_path / "a.safetensors", tmp_path / "out", 8, **kill)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    r = run_cli("convert", str(tmp_path / "b.safetensors"), str(tmp_path / "out"), *common)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["arrays_resumed"] == 0
    step = tmp_path / "out" / "step_00000000"
    for name, value in other.items():
        got = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(
            step / "gda" / name.replace(".", "/"))}}).result().read().result()
        assert same_bits(got, value), name
    # --no-resume writes everything again even for the same conversion.
    killed = convert_killed_after_arrays(tmp_path / "a.safetensors", tmp_path / "out2", 8, **kill)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    r = run_cli("convert", str(tmp_path / "a.safetensors"), str(tmp_path / "out2"), *common, "--no-resume")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["arrays_resumed"] == 0


def test_the_environment_kills_no_conversion(tmp_path):
    """The converter reads no test hook from the environment: the variable
    that once made it kill itself after N arrays changes nothing."""
    arrays = many_arrays()
    save_file(arrays, str(tmp_path / "model.safetensors"))
    r = run_cli("convert", str(tmp_path / "model.safetensors"), str(tmp_path / "out"), "--to", "axlearn",
                "--memory-budget", "256KiB", "--threads", "2", "--json",
                env=dict(os.environ, CAIRN_CONVERT_TEST_KILL_AFTER_ARRAYS="1"))
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert json.loads(r.stdout)["arrays"] == 12
