"""`cairn ls / info / verify / diff` on every format: Orbax (the four
variants, written by orbax-checkpoint), AXLearn's regular layout and
safetensors (written by the `safetensors` package).

verify checks chunks with the zarr layer's check: a damaged chunk is found
and named by key and URL, next to the intact control. diff compares any two
formats array by array, with exit status 0 (same), 1 (different), 2 (error).
"""

import json
import subprocess

import numpy as np
import orbax.checkpoint as ocp
import pytest
from safetensors.numpy import save_file

import cairn
from test_cli import cairn_cli


def run_cli(*args):
    return subprocess.run([cairn_cli(), *args], capture_output=True, text=True, timeout=120)


def flat_arrays():
    rng = np.random.default_rng(5)
    return {
        "params.w": rng.standard_normal((64, 32), dtype=np.float32),
        "params.b": rng.standard_normal(32, dtype=np.float32),
        "step": np.asarray(11, dtype=np.int64),
    }


def tree():
    a = flat_arrays()
    return {"params": {"w": a["params.w"], "b": a["params.b"]}, "step": a["step"]}


VARIANTS = {"ocdbt+zarr3": (True, True), "ocdbt+zarr2": (True, False),
            "dir+zarr3": (False, True), "dir+zarr2": (False, False)}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One checkpoint of each format, all holding the same arrays."""
    root = tmp_path_factory.mktemp("formats")
    out = {}
    for name, (use_ocdbt, use_zarr3) in VARIANTS.items():
        path = root / name / "5" / "default"
        ckptr = ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=use_ocdbt, use_zarr3=use_zarr3))
        ckptr.save(path, tree())
        out[name] = path
    save_file(flat_arrays(), str(root / "model.safetensors"))
    out["safetensors"] = root / "model.safetensors"
    cairn.convert(root / "model.safetensors", root / "axl", to="axlearn", step=5)
    out["axlearn"] = root / "axl"
    return out


FORMATS = list(VARIANTS) + ["axlearn", "safetensors"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_ls_info_verify_on_every_format(checkpoints, fmt):
    path = str(checkpoints[fmt])
    r = run_cli("ls", path, "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 3
    by_shape = sorted(tuple(row["shape"]) for row in rows)
    assert by_shape == [(), (32,), (64, 32)]
    r = run_cli("info", path, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == fmt
    r = run_cli("verify", path, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["arrays"] == 3 and not report["problems"]


@pytest.mark.parametrize("a", FORMATS)
def test_diff_any_two_formats_is_identical(checkpoints, a):
    for b in ["axlearn", "safetensors", "ocdbt+zarr3"]:
        r = run_cli("diff", str(checkpoints[a]), str(checkpoints[b]), "--json")
        assert r.returncode == 0, (a, b, r.stdout, r.stderr)
        report = json.loads(r.stdout)
        assert report["identical"] and len(report["arrays"]) == 3, (a, b)
        assert sorted(d["path"] for d in report["arrays"]) == ["params.b", "params.w", "step"]


def test_diff_reports_values_with_a_tolerance_option(checkpoints, tmp_path):
    changed = flat_arrays()
    changed["params.w"] = changed["params.w"].copy()
    changed["params.w"][3, 4] += 1e-3
    save_file(changed, str(tmp_path / "changed.safetensors"))
    r = run_cli("diff", str(checkpoints["axlearn"]), str(tmp_path / "changed.safetensors"), "--json")
    assert r.returncode == 1, r.stderr
    d = {x["path"]: x for x in json.loads(r.stdout)["arrays"]}
    assert d["params.w"]["num_different"] == 1 and d["params.b"]["same"]
    assert abs(d["params.w"]["max_abs"] - 1e-3) < 1e-6
    r = run_cli("diff", str(checkpoints["axlearn"]), str(tmp_path / "changed.safetensors"), "--atol", "1e-2")
    assert r.returncode == 0, r.stdout + r.stderr
    # A cast (float32 -> bfloat16) differs in dtype; with a tolerance its values agree.
    cairn.convert(checkpoints["safetensors"], tmp_path / "bf16", to="safetensors", dtype={"params.*": "bfloat16"})
    r = run_cli("diff", str(checkpoints["safetensors"]), str(tmp_path / "bf16"))
    assert r.returncode == 1 and "dtype float32 vs bfloat16" in r.stdout
    r = run_cli("diff", str(checkpoints["safetensors"]), str(tmp_path / "bf16"), "--rtol", "1e-2")
    assert r.returncode == 0, r.stdout
    # Errors: 2.
    r = run_cli("diff", str(checkpoints["axlearn"]), str(tmp_path / "nothing-here"))
    assert r.returncode == 2 and "nothing-here" in r.stderr


def test_verify_names_a_corrupt_axlearn_chunk(checkpoints, tmp_path):
    import shutil
    axl = tmp_path / "axl"
    shutil.copytree(checkpoints["axlearn"], axl)
    chunk = axl / "step_00000005" / "gda" / "params" / "w" / "0.0"
    # Random floats barely compress and AXLearn's zstd frames carry no
    # checksum: a cut frame is the damage every reader notices.
    chunk.write_bytes(chunk.read_bytes()[:-16])
    r = run_cli("verify", str(axl), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads(r.stdout)
    (p,) = report["problems"]
    assert p["kind"] == "corrupt_chunk" and p["array"] == "params/w"
    assert p["key"] == "step_00000005/gda/params/w/0.0"
    assert p["file"] == f"file://{axl}/step_00000005/gda/params/w/0.0"
    # A missing chunk is damage too (JAX stores every chunk).
    chunk.unlink()
    report = json.loads(run_cli("verify", str(axl), "--json").stdout)
    assert [p["kind"] for p in report["problems"]] == ["missing_chunk"]
    # Control: the untouched copy verifies.
    assert run_cli("verify", str(checkpoints["axlearn"])).returncode == 0


def test_verify_names_a_corrupt_orbax_chunk(checkpoints, tmp_path):
    import shutil
    item = tmp_path / "item"
    shutil.copytree(checkpoints["dir+zarr3"], item)
    chunk = item / "params.w" / "c" / "0" / "0"
    # A cut shard: its index (crc32c) is no longer at the end.
    chunk.write_bytes(chunk.read_bytes()[:-7])
    r = run_cli("verify", str(item), "--json")
    assert r.returncode == 1
    problems = json.loads(r.stdout)["problems"]
    assert [(p["kind"], p["array"], p["key"]) for p in problems] == [
        ("corrupt_chunk", "params.w", "params.w/c/0/0")]
    assert problems[0]["file"] == f"{item}/params.w/c/0/0"
    assert run_cli("verify", str(checkpoints["dir+zarr3"])).returncode == 0


def test_verify_finds_a_truncated_safetensors_file(checkpoints, tmp_path):
    data = checkpoints["safetensors"].read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-100])
    r = run_cli("verify", str(tmp_path / "cut.safetensors"))
    assert r.returncode in (1, 2), r.stdout
    assert "cut.safetensors" in r.stdout + r.stderr
    assert run_cli("verify", str(checkpoints["safetensors"])).returncode == 0


def test_verify_reports_a_broken_or_duplicated_axlearn_index_as_convert_refuses_it(checkpoints, tmp_path):
    """`verify` recognises the AXLearn layout even when its index is broken,
    and names the index and what is wrong; an entry given twice is refused
    by verify, convert and ls alike (one parser for all)."""
    import shutil
    axl = tmp_path / "axl"
    shutil.copytree(checkpoints["axlearn"], axl)
    index = axl / "step_00000005" / "index"
    entries = json.loads(index.read_text())
    tensor = next(e for e in entries if e[0] != "step")
    index.write_text(json.dumps(entries + [tensor]))
    where = f"key `step_00000005/index` of file://{axl}/"
    duplicated = f"entry {len(entries)}: path `{tensor[0]}` is already entry {entries.index(tensor)}"
    r = run_cli("verify", str(axl), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    (p,) = json.loads(r.stdout)["problems"]
    assert p["kind"] == "unreadable_checkpoint" and where in p["message"] and duplicated in p["message"], p
    r = run_cli("convert", str(axl), str(tmp_path / "out.safetensors"), "--to", "safetensors")
    assert r.returncode == 1 and where in r.stderr and duplicated in r.stderr, r.stderr
    r = run_cli("ls", str(axl))
    assert r.returncode == 1 and where in r.stderr and duplicated in r.stderr, r.stderr
    index.write_text(json.dumps(entries)[:-3])  # cut short: not JSON
    r = run_cli("verify", str(axl))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no Orbax checkpoint" not in r.stdout + r.stderr
    assert where in r.stdout and "not valid JSON" in r.stdout, r.stdout
    index.write_text(json.dumps(entries))  # control: the index as written
    assert run_cli("verify", str(axl)).returncode == 0
