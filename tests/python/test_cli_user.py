"""The `cairn` command as a new user meets it (issue 29): one exit-status
scheme (0 ok, 1 problems or differences, 2 usage or input errors, 130
interrupted) written in every --help; unknown commands named with a
suggestion, --version, help; missing paths and non-checkpoints named; `ls`
with a header, human-readable sizes, the step it lists and the right sizes
for every format; a leftover temporary step as a warning; dtype aliases;
the re-run refusal naming each front end's flag; diff with tolerances,
--include and --rename."""

import json
import re
import shutil
import subprocess

import numpy as np
import orbax.checkpoint as ocp
import pytest
from safetensors.numpy import load_file, save_file

import cairn
from test_cli import cairn_cli

EXIT_HELP = ("Exit status: 0 ok; 1 problems found (verify), differences (diff), or a failure "
             "while working")
COMMANDS = ["demo", "ls", "info", "verify", "diff", "convert"]


def run(*args, timeout=120):
    return subprocess.run([cairn_cli(), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def arrays():
    rng = np.random.default_rng(29)
    return {"params.w": rng.standard_normal((256, 64), dtype=np.float32),
            "params.b": rng.standard_normal(64, dtype=np.float32),
            "opt.mu": rng.standard_normal((256, 64), dtype=np.float32)}


def tree():
    a = arrays()
    return {"params": {"w": a["params.w"], "b": a["params.b"]}, "opt": {"mu": a["opt.mu"]}}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """An Orbax root (3 steps) per storage variant, a safetensors file, an AXLearn root."""
    root = tmp_path_factory.mktemp("user")
    out = {}
    for name, (ocdbt, zarr3) in {"ocdbt+zarr3": (True, True), "ocdbt+zarr2": (True, False),
                                 "dir+zarr2": (False, False)}.items():
        handler = ocp.PyTreeCheckpointHandler(use_ocdbt=ocdbt, use_zarr3=zarr3)
        with ocp.CheckpointManager(root / name, item_names=("state",),
                                   item_handlers={"state": handler}) as mgr:
            for step in (100, 200, 1200):
                mgr.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave(tree())))
            mgr.wait_until_finished()
        out[name] = root / name
    save_file(arrays(), str(root / "model.safetensors"))
    out["safetensors"] = root / "model.safetensors"
    for step in (5, 7):
        cairn.convert(out["safetensors"], root / "axl", to="axlearn", step=step)
    out["axlearn"] = root / "axl"
    return out


# ---- 1. one exit-status scheme ---------------------------------------------

def test_every_help_states_the_exit_statuses():
    r = run("--help")
    assert r.returncode == 0 and EXIT_HELP in r.stdout and "130 interrupted" in r.stdout, r.stdout
    for command in COMMANDS:
        r = run(command, "--help")
        assert r.returncode == 0 and EXIT_HELP in r.stdout, (command, r.stdout)


@pytest.mark.parametrize("args", [
    ["ls", "--no-such-flag", "x"],   # CLI11: 109 before
    ["convert", "a", "b"],           # --to missing: 106 before
    ["ls"],                          # url missing: 106 before
    ["diff", "--atol", "-1", "a", "b"],  # a failed check: 105 before
    ["ls", "a", "b"],                # an extra argument: 109 before
])
def test_usage_errors_exit_2(args):
    r = run(*args)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert r.stderr.strip(), args


# ---- 2. unknown commands, --version, help ------------------------------------

def test_unknown_command_is_named_with_a_suggestion():
    r = run("lst", ".")
    assert r.returncode == 2
    assert "cairn: unknown command 'lst' (did you mean 'ls'?)" in r.stderr, r.stderr
    r = run("verfiy")
    assert r.returncode == 2 and "did you mean 'verify'?" in r.stderr, r.stderr
    r = run("frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
    assert "did you mean" not in r.stderr, r.stderr


def test_version_help_and_bare_command():
    from importlib.metadata import version
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"cairn {version('cairn')}", r.stdout
    assert cairn.__version__ == version("cairn")
    r = run("help")
    assert r.returncode == 0 and "Subcommands:" in r.stdout and EXIT_HELP in r.stdout, r.stdout
    r = run("help", "verify")
    assert r.returncode == 0 and "checkpoint" in r.stdout and "--json" in r.stdout, r.stdout
    r = run("help", "lst")
    assert r.returncode == 2 and "did you mean 'ls'?" in r.stderr
    r = run()
    assert r.returncode == 2 and "Usage: cairn" in r.stderr, (r.stdout, r.stderr)


# ---- 3. missing paths -------------------------------------------------------

def test_missing_paths_are_errors_naming_them(tmp_path, ckpts):
    missing = tmp_path / "does" / "not" / "exist"
    for args in (["ls", missing], ["info", missing], ["verify", missing],
                 ["diff", ckpts["safetensors"], missing], ["diff", missing, ckpts["safetensors"]],
                 ["ls", f"file://{missing}/"]):
        r = run(*args)
        assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
        assert str(missing) in r.stderr and "no such file or directory" in r.stderr, r.stderr
        assert r.stdout == ""
    r = run("convert", missing, tmp_path / "out", "--to", "safetensors")
    assert r.returncode == 2 and str(missing) in r.stderr, r.stderr


def test_a_plain_file_is_reported_once(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    for command in ("ls", "info", "verify"):
        r = run(command, f)
        assert r.returncode == 2, (command, r.stderr)
        assert r.stderr.count(str(f)) == 1, r.stderr
        assert "not a checkpoint" in r.stderr and "is a file" in r.stderr, r.stderr


# ---- 4. ls: header, sizes, step ----------------------------------------------

def test_ls_has_a_header_human_sizes_and_the_step(ckpts):
    r = run("ls", ckpts["dir+zarr2"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"step 1200 of {ckpts['dir+zarr2']} (latest committed; 3 steps)", lines
    assert lines[1].split() == ["PATH", "DTYPE", "SHAPE", "CHUNKS", "SIZE"], lines
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {"params.w", "params.b", "opt.mu"}
    assert re.search(r"\d+\.\d KiB$", rows["params.w"]), rows["params.w"]
    # --json keeps exact bytes.
    js = json.loads(run("ls", "--json", ckpts["dir+zarr2"]).stdout)
    assert all(isinstance(row["bytes"], int) and row["bytes"] > 0 for row in js), js
    # A step: no step line.
    r = run("ls", ckpts["dir+zarr2"] / "200")
    assert r.stdout.splitlines()[0].split() == ["PATH", "DTYPE", "SHAPE", "CHUNKS", "SIZE"], r.stdout
    # AXLearn roots say it too.
    r = run("ls", ckpts["axlearn"])
    assert r.stdout.splitlines()[0] == f"step 7 of {ckpts['axlearn']} (latest committed; 2 steps)"


def test_ls_keys_has_a_header_and_human_sizes(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * (3 * 1024 * 1024 + 512 * 1024))
    (tmp_path / "small").write_bytes(b"y" * 100)
    r = run("ls", tmp_path)
    assert r.returncode == 0, r.stderr
    assert [line.split() for line in r.stdout.splitlines()] == [
        ["SIZE", "KEY"], ["3.5", "MiB", "big"], ["100", "B", "small"]], r.stdout


@pytest.mark.parametrize("fmt", ["ocdbt+zarr3", "ocdbt+zarr2", "dir+zarr2", "axlearn",
                                 "safetensors"])
def test_ls_sizes_agree_with_info(ckpts, fmt):
    rows = json.loads(run("ls", "--json", ckpts[fmt]).stdout)
    assert len(rows) == 3 and all(row["bytes"] > 0 for row in rows), rows
    info = json.loads(run("info", "--json", ckpts[fmt]).stdout)
    if fmt in ("axlearn", "safetensors"):
        stored = info["stored_bytes"]
    else:
        (item,) = info["items"]
        stored = item["total_bytes"]
        assert {a["path"]: a["bytes"] for a in item["arrays"]} == {r["path"]: r["bytes"] for r in rows}
    assert sum(row["bytes"] for row in rows) == stored, (rows, info)
    if fmt == "safetensors":
        assert stored == info["bytes"] == sum(a.nbytes for a in arrays().values())


# ---- 5. what a directory looked like -------------------------------------------

def test_non_checkpoint_and_partial_axlearn_are_named(tmp_path, ckpts):
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "readme.txt").write_text("not a checkpoint")
    for command in ("info", "verify"):
        r = run(command, junk)
        assert r.returncode == 2, r.stderr
        assert f"not a checkpoint: no Orbax, AXLearn or safetensors files in" in r.stderr, r.stderr
        assert str(junk) in r.stderr and "no Orbax checkpoint" not in r.stderr, r.stderr
    partial = tmp_path / "partial"
    shutil.copytree(ckpts["axlearn"], partial)
    for index in partial.glob("step_*/index"):
        index.unlink()  # as an AXLearn save killed before its commit
    for command in ("info", "verify"):
        r = run(command, partial)
        assert r.returncode == 2, r.stderr
        assert "looks like an AXLearn checkpoint but its index is missing" in r.stderr, r.stderr
        assert "no Orbax checkpoint" not in r.stderr, r.stderr
    r = run("info", partial / "step_00000007")
    assert "looks like an AXLearn checkpoint" in r.stderr, r.stderr


# ---- 6. a leftover temporary step ----------------------------------------------

def test_verify_warns_about_a_step_left_by_an_interrupted_save(tmp_path, ckpts):
    root = tmp_path / "run"
    shutil.copytree(ckpts["ocdbt+zarr3"], root)
    # What a save killed before its rename leaves (Orbax's tmp name).
    shutil.copytree(root / "1200", root / "1300.orbax-checkpoint-tmp-1733461234567890")
    r = run("verify", root)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.startswith("OK:"), r.stdout
    assert "warning" in r.stderr and "step 1300 was never committed (left by an interrupted save)" \
        in r.stderr and "ignores it and deletes it" in r.stderr, r.stderr
    report = json.loads(run("verify", "--json", root).stdout)
    assert report["ok"] and report["problems"] == []
    (w,) = report["warnings"]
    assert w["kind"] == "uncommitted" and w["file"].endswith("1300.orbax-checkpoint-tmp-1733461234567890")
    # Damage in a committed step still fails.
    (root / "1200" / "state" / "_METADATA").unlink()
    assert run("verify", root).returncode == 1


# ---- 7. dtype aliases, --overwrite ------------------------------------------

def test_dtype_aliases_and_the_valid_names(tmp_path, ckpts):
    r = run("convert", ckpts["safetensors"], tmp_path / "bf", "--to", "safetensors", "--dtype", "*=bf16")
    assert r.returncode == 0, r.stderr
    (out,) = (tmp_path / "bf").glob("*.safetensors")
    with open(out, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"BF16"}
    cairn.convert(ckpts["safetensors"], tmp_path / "half", to="safetensors", dtype={"*": "fp16"})
    assert {a.dtype for a in load_file(str(next((tmp_path / "half").glob("*.safetensors")))).values()} \
        == {np.dtype(np.float16)}
    r = run("convert", ckpts["safetensors"], tmp_path / "x", "--to", "safetensors", "--dtype", "*=bf61")
    assert r.returncode == 2
    for name in ("`bf61`", "bfloat16", "float32", "float16", "bf16", "fp32"):
        assert name in r.stderr, r.stderr


def test_rerun_refusal_names_each_front_ends_flag(tmp_path, ckpts):
    dst = tmp_path / "out"
    assert run("convert", ckpts["safetensors"], dst, "--to", "axlearn").returncode == 0
    r = run("convert", ckpts["safetensors"], dst, "--to", "axlearn")
    assert r.returncode == 2, r.stderr
    assert "pass --overwrite to replace it" in r.stderr and "overwrite=True" not in r.stderr, r.stderr
    with pytest.raises(FileExistsError, match=r"committed checkpoint \(pass overwrite=True to replace it\)"):
        cairn.convert(ckpts["safetensors"], dst, to="axlearn")


# ---- 9. diff: tolerances, --include, --rename ---------------------------------

def test_diff_a_cast_within_tolerance_is_not_identical(tmp_path, ckpts):
    cairn.convert(ckpts["safetensors"], tmp_path / "bf16", to="safetensors", dtype={"params.*": "bfloat16"})
    r = run("diff", ckpts["safetensors"], tmp_path / "bf16", "--rtol", "1e-2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical" not in r.stdout, r.stdout
    assert "params.w: dtype float32 vs bfloat16, values equal within tolerance" in r.stdout, r.stdout
    assert r.stdout.splitlines()[-1].startswith("equal within tolerance: 3 arrays compared"), r.stdout
    report = json.loads(run("diff", "--json", ckpts["safetensors"], tmp_path / "bf16", "--rtol", "1e-2").stdout)
    assert report["identical"] is False and report["equal_within_tolerance"] is True, report
    w = next(a for a in report["arrays"] if a["path"] == "params.w")
    assert w["same"] and w["max_abs"] > 0, w
    # Control: a copy is identical, with or without a tolerance.
    r = run("diff", ckpts["safetensors"], ckpts["safetensors"], "--atol", "1e-3")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("identical"), r.stdout


def test_diff_include_and_rename_as_convert_has_them(tmp_path, ckpts):
    renamed = tmp_path / "renamed"
    r = run("convert", ckpts["safetensors"], renamed, "--to", "safetensors", "--rename", "params.=model.")
    assert r.returncode == 0, r.stderr
    r = run("diff", ckpts["safetensors"], renamed)
    assert r.returncode == 1 and "only in A: params.w" in r.stdout and "only in B: model.w" in r.stdout
    r = run("diff", ckpts["safetensors"], renamed, "--rename", "params.=model.")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("identical: 3 arrays"), r.stdout
    r = run("diff", "--json", ckpts["safetensors"], renamed, "--rename", "params.=model.",
            "--include", "params.w")
    report = json.loads(r.stdout)
    assert r.returncode == 0 and [a["path"] for a in report["arrays"]] == ["model.w"], report
    assert report["only_in_a"] == [] and report["only_in_b"] == [], report
    r = run("diff", ckpts["safetensors"], renamed, "--rename", "params")
    assert r.returncode == 2 and "--rename `params` is not of the form" in r.stderr, r.stderr


# ---- 8. a memory budget that makes the conversion slow ------------------------

def test_a_tiny_memory_budget_is_warned_about_before_the_work(tmp_path, ckpts):
    # Today's behaviour first: 4KiB still converts (it is only slow), but says
    # so before it starts, naming the recommended budget.
    r = run("convert", ckpts["safetensors"], tmp_path / "slow", "--to", "orbax",
            "--memory-budget", "4KiB")
    assert r.returncode == 0, r.stderr
    assert "cairn convert: warning: memory budget of 4KiB cuts array `" in r.stderr, r.stderr
    assert "a budget of 1MiB or more is recommended (--memory-budget 1MiB, memory_budget=1048576)" \
        in r.stderr, r.stderr
    # Control: a workable budget converts without a word.
    r = run("convert", ckpts["safetensors"], tmp_path / "fast", "--to", "orbax", "--memory-budget", "1MiB")
    assert r.returncode == 0 and r.stderr == "", r.stderr


SAVER_KILLED_AFTER_ITS_DATA = """
import os, signal, sys
import numpy as np
import cairn

def at_point(point):
    if point == "data_written":
        os.kill(os.getpid(), signal.SIGKILL)

cairn.CheckpointManager(sys.argv[1], enable_async=False, at_point=at_point).save(
    3, {"w": np.ones(16, np.float32)})
"""


def test_the_librarys_events_are_printed(tmp_path):
    """What cairn decides on its own reaches the user: a warning always (a
    killed save's temporary step dropped by the next commit into the root),
    the rest with --verbose (arrays a conversion resumed)."""
    import signal
    import sys

    root = tmp_path / "run"
    with cairn.CheckpointManager(root, enable_async=False) as mngr:
        mngr.save(1, tree())
    killed = subprocess.run([sys.executable, "-c", SAVER_KILLED_AFTER_ITS_DATA, str(root)],
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = [p.name for p in root.iterdir() if ".orbax-checkpoint-tmp" in p.name]
    assert left, sorted(root.iterdir())
    save_file(arrays(), str(tmp_path / "m.safetensors"))
    r = run("convert", tmp_path / "m.safetensors", root, "--to", "orbax", "--step", "5")
    assert r.returncode == 0, r.stderr
    assert (f"cairn convert: warning: dropped {root / left[0]}, left by an interrupted save that never "
            "committed") in r.stderr, r.stderr
    assert sorted(p.name for p in root.iterdir()) == ["1", "5"]

    # A resumed conversion: the summary line says so; --verbose adds the event.
    from convert_kill import convert_killed_after_arrays

    rng = np.random.default_rng(5)
    many = {f"layers.{i:02d}.w": rng.standard_normal((128, 128), dtype=np.float32) for i in range(12)}
    save_file(many, str(tmp_path / "many.safetensors"))
    for verbose in (False, True):
        out = tmp_path / f"out{verbose}"
        killed = convert_killed_after_arrays(tmp_path / "many.safetensors", out, 8, to="orbax",
                                             memory_budget=256 << 10, threads=2)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        r = run("convert", tmp_path / "many.safetensors", out, "--to", "orbax", "--memory-budget", "256KiB",
                "--threads", "2", *(["-v"] if verbose else []))
        assert r.returncode == 0, r.stderr
        assert "resumed: " in r.stdout, r.stdout
        event = re.search(r"cairn convert: resuming an interrupted conversion: \d+ of 12 arrays", r.stderr)
        assert bool(event) == verbose, r.stderr
