"""Chunks copied as stored (not decoded and encoded again) where their stored
bytes are valid in the destination: Orbax's zarr v3 zstd chunks become
AXLearn's zarr v2 chunks with a zstd compressor. TensorStore, reading the
destination as AXLearn does, gets the source's bits.
"""
import json

import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import tensorstore as ts

from test_cli import run_cli


def read_zarr2(path):
    return ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}}
                   ).result().read().result()


def test_orbax_zstd_chunks_pass_to_axlearn_as_tensorstore_reads_them(tmp_path):
    # An AXLearn step as TensorStore writes it (8 zstd chunks), converted by
    # cairn to Orbax (OCDBT + zarr3, zstd), then back to AXLearn: the second
    # conversion passes the chunks along as stored.
    w = np.random.default_rng(5).standard_normal((512, 1024), dtype=np.float32)
    step = tmp_path / "axl" / "step_00000002"
    t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(step / "gda" / "w")},
                 "metadata": {"compressor": {"id": "zstd", "level": 1}, "shape": [512, 1024],
                              "chunks": [64, 1024], "dtype": "<f4"},
                 "create": True}).result()
    t.write(w).result()
    (step / "index").write_text(json.dumps([["step", 2], ["w", {"dtype": "float32",
                                                                "shape": "(512, 1024)"}]]))
    r = run_cli("convert", str(tmp_path / "axl"), str(tmp_path / "orbax"), "--to", "orbax")
    assert r.returncode == 0, r.stderr
    r = run_cli("convert", str(tmp_path / "orbax"), str(tmp_path / "back"), "--to", "axlearn",
                "--memory-budget", "512KiB", "--json")
    assert r.returncode == 0, r.stderr
    got = read_zarr2(tmp_path / "back" / "step_00000002" / "gda" / "w")
    assert got.dtype == np.float32 and got.tobytes() == w.tobytes()
    # Every chunk file is one zstd frame (magic 28 b5 2f fd) as TensorStore's
    # zarr driver reads it.
    chunks = [p for p in (tmp_path / "back" / "step_00000002" / "gda" / "w").iterdir()
              if p.name != ".zarray"]
    assert len(chunks) == 8
    assert all(p.read_bytes()[:4] == b"\x28\xb5\x2f\xfd" for p in chunks)


def test_orbax_checkpoint_source_to_axlearn_is_bit_exact(tmp_path):
    rng = np.random.default_rng(6)
    state = {"w": rng.standard_normal((256, 384), dtype=np.float32),
             "e": rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16),
             "i": np.arange(1000, dtype=np.int32)}
    ocp.PyTreeCheckpointer().save(tmp_path / "ckpt" / "3" / "default", state)
    r = run_cli("convert", str(tmp_path / "ckpt"), str(tmp_path / "axl"), "--to", "axlearn",
                "--json")
    assert r.returncode == 0, r.stderr
    gda = tmp_path / "axl" / "step_00000003" / "gda"
    for name, value in state.items():
        got = read_zarr2(gda / name)
        assert got.dtype == value.dtype, name
        assert got.tobytes() == value.tobytes(), name
