"""Offline conversion (`cairn convert`, `cairn.convert`) against the real peers.

orbax-checkpoint and the `safetensors` package write the sources; TensorStore's
zarr driver (how JAX and AXLearn read the regular layout) and `safetensors`
read what cairn wrote. Everything is compared bit for bit.
"""

import json
import os
import struct
import subprocess
import sys

import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from safetensors.numpy import load_file, save_file

import cairn
from test_cli import cairn_cli


def run_cli(*args, timeout=300):
    return subprocess.run([cairn_cli(), *args], capture_output=True, text=True, timeout=timeout)


def orbax_state():
    rng = np.random.default_rng(0)
    return {
        "params": {
            "w": rng.standard_normal((64, 48), dtype=np.float32),
            "b": rng.standard_normal(48, dtype=np.float32),
            "emb": rng.standard_normal((16, 8)).astype(ml_dtypes.bfloat16),
        },
        "opt": [{"mu": rng.standard_normal((64, 48), dtype=np.float32)}],
        "count": np.int32(7),
    }


@pytest.fixture(scope="module")
def orbax_ckpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("orbax")
    ckptr = ocp.PyTreeCheckpointer()
    ckptr.save(root / "12" / "default", orbax_state())
    return root


def read_zarr2(path):
    return ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}}).result().read().result()


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_orbax_to_axlearn_is_read_back_by_tensorstore(orbax_ckpt, tmp_path):
    summary = cairn.convert(orbax_ckpt, tmp_path / "axl", to="axlearn", verify=True)
    assert summary["source_format"] == "orbax"
    assert summary["arrays"] == 5
    step = tmp_path / "axl" / "step_00000012"
    index = json.loads((step / "index").read_text())
    assert index[0] == ["step", 12]
    entries = dict((p, v) for p, v in index[1:])
    assert entries["params/emb"] == {"dtype": "bfloat16", "shape": "(16, 8)"}
    assert entries["count"] == {"dtype": "int32", "shape": "()"}
    assert [p for p, _ in index[1:]] == sorted(p for p, _ in index[1:])
    zarray = json.loads((step / "gda" / "params" / "w" / ".zarray").read_text())
    assert zarray["compressor"] == {"id": "zstd", "level": 1}
    assert zarray["dtype"] == "<f4" and zarray["shape"] == [64, 48]
    state = orbax_state()
    assert same_bits(read_zarr2(step / "gda/params/w"), state["params"]["w"])
    assert same_bits(read_zarr2(step / "gda/params/emb"), state["params"]["emb"])
    assert same_bits(read_zarr2(step / "gda/opt/0/mu"), state["opt"][0]["mu"])
    assert same_bits(read_zarr2(step / "gda/count"), np.asarray(state["count"]))


def test_orbax_to_safetensors_with_a_cast_is_read_by_the_safetensors_package(orbax_ckpt, tmp_path):
    cairn.convert(orbax_ckpt / "12", tmp_path / "st", to="safetensors",
                  include=["params.*"], dtype={"params.w": "bfloat16"},
                  rename={"params.": "model."}, verify=True)
    tensors = load_file(str(tmp_path / "st" / "model.safetensors"))
    assert sorted(tensors) == ["model.b", "model.emb", "model.w"]
    state = orbax_state()
    assert same_bits(tensors["model.w"], state["params"]["w"].astype(ml_dtypes.bfloat16))
    assert same_bits(tensors["model.b"], state["params"]["b"])
    assert same_bits(tensors["model.emb"], state["params"]["emb"])


def test_safetensors_bytes_match_the_package(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {"b": rng.standard_normal((3, 5), dtype=np.float32),
              "a": rng.integers(0, 100, (7,), dtype=np.int64),
              "c": rng.standard_normal((2, 2)).astype(ml_dtypes.bfloat16)}
    save_file(arrays, str(tmp_path / "model.safetensors"), metadata={"author": "me", "format": "np"})
    cairn.convert(tmp_path / "model.safetensors", tmp_path / "copy", to="safetensors")
    # The source's own metadata is kept; "format" is "pt", as transformers
    # expects, and cairn says where the arrays came from.
    metadata = {"author": "me", "format": "pt", "cairn.source_format": "safetensors"}
    save_file(arrays, str(tmp_path / "package.safetensors"), metadata=metadata)
    # cairn lays the file out as the package does: the same header (with the
    # same __metadata__; the package orders its keys as its hash map does)
    # and the same data bytes.
    def split(path):
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        return json.loads(raw[8:8 + n]), raw[8 + n:], n

    got_header, got_data, got_n = split(tmp_path / "copy" / "model.safetensors")
    want_header, want_data, want_n = split(tmp_path / "package.safetensors")
    assert got_header == want_header and got_header["__metadata__"] == metadata
    assert got_data == want_data
    assert got_n == want_n and got_n % 8 == 0


def test_sharded_safetensors_to_axlearn(tmp_path):
    rng = np.random.default_rng(2)
    shards = [{"layers.0.w": rng.standard_normal((32, 16), dtype=np.float32)},
              {"layers.1.w": rng.standard_normal((32, 16), dtype=np.float32),
               "norm": rng.standard_normal(16).astype(np.float16)}]
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file(shard, str(tmp_path / name))
        weight_map.update({k: name for k in shard})
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    r = run_cli("convert", str(tmp_path), str(tmp_path / "axl"), "--to", "axlearn", "--step", "3",
                "--json", "--verify", "--memory-budget", "8KiB")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["source_format"] == "safetensors" and summary["arrays"] == 3
    assert summary["peak_slab_bytes"] <= 8192
    step = tmp_path / "axl" / "step_00000003"
    assert same_bits(read_zarr2(step / "gda/layers/1/w"), shards[1]["layers.1.w"])
    assert same_bits(read_zarr2(step / "gda/norm"), shards[1]["norm"])
    # The copy back to safetensors (one file) equals the sources.
    cairn.convert(tmp_path / "axl", tmp_path / "back", to="safetensors")
    back = load_file(str(tmp_path / "back" / "model.safetensors"))
    assert same_bits(back["layers.0.w"], shards[0]["layers.0.w"])


def test_a_committed_destination_is_refused_unless_overwrite(orbax_ckpt, tmp_path):
    args = ("convert", str(orbax_ckpt), str(tmp_path / "axl"), "--to", "axlearn")
    assert run_cli(*args).returncode == 0  # control
    r = run_cli(*args)
    assert r.returncode == 2  # an input error (issue 29's exit statuses)
    assert "step_00000012/index" in r.stderr and "exists" in r.stderr
    assert run_cli(*args, "--overwrite").returncode == 0


def test_a_failed_conversion_commits_nothing(orbax_ckpt, tmp_path):
    step = tmp_path / "axl" / "step_00000012"
    step.mkdir(parents=True)
    (step / "gda").write_text("a file where the arrays' directory must go")
    r = run_cli("convert", str(orbax_ckpt), str(tmp_path / "axl"), "--to", "axlearn")
    assert r.returncode == 1
    assert "gda" in r.stderr
    assert not (step / "index").exists()


def write_raw_safetensors(path, header, data):
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)


@pytest.mark.parametrize("case,header,data,message", [
    ("control", {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None),
    ("claims more than the file", {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
     b"\0" * 8, "data buffer holds 8"),
    ("overlapping offsets", {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                             "v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}},
     b"\0" * 8, "overlaps"),
    ("size mismatch", {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
     b"\0" * 8, "make 12 bytes"),
])
def test_hostile_safetensors_are_refused_with_their_name(tmp_path, case, header, data, message):
    src = tmp_path / "bad.safetensors"
    write_raw_safetensors(src, header, data)
    if message is None:
        cairn.convert(src, tmp_path / "out", to="axlearn")
        return
    with pytest.raises(cairn.CorruptDataError) as err:
        cairn.convert(src, tmp_path / "out", to="axlearn")
    assert message in str(err.value) and "bad.safetensors" in str(err.value)


def test_truncated_safetensors_header(tmp_path):
    src = tmp_path / "cut.safetensors"
    src.write_bytes(struct.pack("<Q", 10_000) + b'{"w": ')
    r = run_cli("convert", str(src), str(tmp_path / "out"), "--to", "axlearn")
    assert r.returncode == 1
    assert "past the end" in r.stderr and "cut.safetensors" in r.stderr


def test_peak_memory_stays_near_the_budget(tmp_path):
    # 256 MiB in one array, converted with a 16 MiB budget: the process never
    # holds the array (checked on the child's peak RSS).
    big = np.arange(64 << 20, dtype=np.int32).reshape(8192, 8192)
    save_file({"big": big}, str(tmp_path / "big.safetensors"))
    del big
    # A fresh parent that runs only the conversion, so RUSAGE_CHILDREN is its.
    measure = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    r = subprocess.run([sys.executable, "-c", measure, cairn_cli(), "convert",
                        str(tmp_path / "big.safetensors"), str(tmp_path / "axl"), "--to", "axlearn",
                        "--memory-budget", "16MiB"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    peak_mib = int(r.stdout.strip().splitlines()[-1]) / 1024
    assert peak_mib < 128, f"peak RSS {peak_mib:.0f} MiB for a 256 MiB array and a 16 MiB budget"
    got = ts.open({"driver": "zarr", "kvstore": {"driver": "file",
                   "path": str(tmp_path / "axl/step_00000000/gda/big")}}).result()
    assert got[8191, 8190:].read().result().tolist() == [8192 * 8192 - 2, 8192 * 8192 - 1]


def test_mpirun_splits_the_work_and_commits_once(tmp_path, peer_transports):
    rng = np.random.default_rng(3)
    arrays = {f"layers.{i}.w": rng.standard_normal((256, 128), dtype=np.float32) for i in range(6)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    r = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", "--allow-run-as-root", cairn_cli(),
                        "convert", str(tmp_path / "model.safetensors"), str(tmp_path / "axl"),
                        "--to", "axlearn", "--step", "4", "--memory-budget", "256KiB", "--json",
                        "--verify"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, "only rank 0 prints the summary"
    assert lines[0]["processes"] == 2 and lines[0]["bytes_written"] == 6 * 256 * 128 * 4
    step = tmp_path / "axl" / "step_00000004"
    for name, value in arrays.items():
        assert same_bits(read_zarr2(step / "gda" / name.replace(".", "/")), value), name


def test_cairn_ls_lists_axlearn_and_safetensors_checkpoints(orbax_ckpt, tmp_path):
    cairn.convert(orbax_ckpt, tmp_path / "axl", to="axlearn")
    cairn.convert(orbax_ckpt, tmp_path / "st", to="safetensors")
    for where, fmt, name in [(tmp_path / "axl", "axlearn", "params/w"),
                             (tmp_path / "st", "safetensors", "params.w"),
                             (tmp_path / "st" / "model.safetensors", "safetensors", "params.w")]:
        r = run_cli("ls", str(where), "--json")
        assert r.returncode == 0, r.stderr
        rows = {row["path"]: row for row in json.loads(r.stdout)}
        assert len(rows) == 5 and all(row["format"] == fmt for row in rows.values())
        assert rows[name]["dtype"] == "float32" and rows[name]["shape"] == [64, 48]
    # Control: a directory with no checkpoint lists its keys.
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x").write_text("hi")
    r = run_cli("ls", str(tmp_path / "plain"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [{"key": "x", "bytes": 2}]
