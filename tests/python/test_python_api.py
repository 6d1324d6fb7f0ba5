"""The Python package as a user meets it (issue 29): sizes given as strings,
Python's own exception types, explicit signatures with type hints, py.typed
and a complete __all__, events logged to logging.getLogger("cairn"),
progress callbacks on save and restore, and restore without a target
returning jax.Arrays as Orbax does."""

from __future__ import annotations

import errno
import importlib.resources
import inspect
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest
from safetensors.numpy import save_file

import cairn
import cairn.emergency
from convert_kill import convert_killed_after_arrays

UNITS = "B, KiB, MiB, GiB"


def small_tree():
    return {"w": np.arange(64 * 64, dtype=np.float32).reshape(64, 64), "b": np.ones(7, np.int32)}


def stored_chunks(item_dir, param):
    with open(os.path.join(item_dir, param, "zarr.json")) as f:
        meta = json.load(f)
    grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
    inner = [c for c in meta["codecs"] if c["name"] == "sharding_indexed"]
    return inner[0]["configuration"]["chunk_shape"] if inner else grid


# ---------------------------------------------------------------- 1. sizes


def test_sizes_as_strings_are_read_by_the_clis_parser():
    assert cairn._core._byte_size("memory_budget", "1GiB") == 1 << 30
    assert cairn._core._byte_size("memory_budget", "512MiB") == 512 << 20
    assert cairn._core._byte_size("memory_budget", "4096") == 4096
    assert cairn._core._byte_size("memory_budget", "1.5G") == 3 << 29
    assert cairn._core._byte_size("memory_budget", "2MB") == 2_000_000
    assert cairn._core._byte_size("memory_budget", 12345) == 12345


def test_save_takes_sizes_as_strings_and_they_take_effect(tmp_path):
    tree = small_tree()
    plain = cairn.save(tmp_path / "plain", tree, use_ocdbt=False, memory_budget="1GiB")
    small = cairn.save(tmp_path / "small", tree, use_ocdbt=False, chunk_byte_size="4KiB",
                       memory_budget="64MiB", ocdbt_target_data_file_size="1GiB")
    same = cairn.save(tmp_path / "same", tree, use_ocdbt=False, chunk_byte_size=4096)
    assert stored_chunks(plain, "w") == [64, 64]
    # 4 KiB of float32 is 1024 elements: the chunks shrink as with the int.
    assert stored_chunks(small, "w") == stored_chunks(same, "w")
    assert int(np.prod(stored_chunks(small, "w"))) * 4 <= 4096
    np.testing.assert_array_equal(cairn.restore(small)["w"], tree["w"])


def test_managers_and_convert_take_sizes_as_strings(tmp_path):
    tree = small_tree()
    with cairn.CheckpointManager(tmp_path / "run", memory_budget="512MiB", chunk_byte_size="8KiB",
                                 enable_async=False) as mngr:
        mngr.save(1, tree)
        np.testing.assert_array_equal(mngr.restore(1)["w"], tree["w"])
    with cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                           memory_budget="64MiB", chunk_byte_size="16KiB",
                                           ocdbt_target_data_file_size="1GiB") as mngr:
        assert mngr.save(1, tree, force=True)
        mngr.wait_until_finished()
    save_file({"a": np.arange(10, dtype=np.float32)}, str(tmp_path / "m.safetensors"))
    out = cairn.convert(tmp_path / "m.safetensors", tmp_path / "conv", to="orbax", memory_budget="1MiB")
    assert out["arrays"] == 1


@pytest.mark.parametrize("bad, why", [("1 gigabyte", "unknown size unit"), ("lots", "is not a size"),
                                      ("-5MiB", "negative size")])
def test_a_bad_size_names_the_parameter_and_the_units(tmp_path, bad, why):
    with pytest.raises(ValueError, match=f"memory_budget: .*{why}") as e:
        cairn.save(tmp_path / "x", small_tree(), memory_budget=bad)
    assert UNITS in str(e.value)
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="chunk_byte_size: .*is not a size") as e:
        cairn.CheckpointManager(tmp_path / "m", chunk_byte_size="big")
    assert UNITS in str(e.value)
    with pytest.raises(ValueError, match="max_file_size: expected an int or a string, got float"):
        cairn.convert(tmp_path / "a", tmp_path / "b", to="safetensors", max_file_size=1.5)


# --------------------------------------------------------------- 2. errors

# Root writes through any permission bits: the save runs in a child that
# has given up the capabilities that let it (setpriv, util-linux), as any
# other user would.
DROP = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
        "--inh-caps", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []

SAVE_INTO = textwrap.dedent("""
    import errno, sys
    import numpy as np
    import cairn
    try:
        cairn.save(sys.argv[1], {"w": np.ones(4, np.float32)})
    except BaseException as e:
        print(type(e).__name__, errno.errorcode.get(getattr(e, "errno", None) or 0, ""), str(e), sep="|")
""")


def test_a_read_only_directory_is_a_permission_error_naming_the_path(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        r = subprocess.run(DROP + [sys.executable, "-c", SAVE_INTO, str(ro / "ckpt")],
                           capture_output=True, text=True, timeout=120)
    finally:
        ro.chmod(0o755)
    assert r.returncode == 0, r.stderr
    kind, code, message = r.stdout.strip().split("|", 2)
    assert (kind, code) == ("PermissionError", "EACCES"), r.stdout
    assert str(ro) in message, message
    for jargon in ("pending", "process 0 of 1"):
        assert jargon not in message, message
    assert not (ro / "ckpt").exists()


def test_a_file_in_the_way_is_not_a_directory_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(NotADirectoryError, match=str(tmp_path / "file")) as e:
        cairn.save(tmp_path / "file" / "ckpt", small_tree())
    assert e.value.errno == errno.ENOTDIR
    assert "process 0 of 1" not in str(e.value)


def test_a_directory_where_a_file_belongs_is_an_is_a_directory_error(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    kv = cairn.kvstore.open(f"file://{tmp_path}/")
    with pytest.raises(IsADirectoryError, match=f"writing key `a` of file://{tmp_path}/") as e:
        kv.put("a", b"x")
    assert e.value.errno == errno.EISDIR


def test_missing_checkpoint_is_file_not_found_and_bad_argument_value_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nothing")):
        cairn.restore(tmp_path / "nothing")
    with pytest.raises(ValueError, match="compression `lz4` is not one of") as e:
        cairn.save(tmp_path / "c", small_tree(), compression="lz4")
    assert "process 0 of 1" not in str(e.value)


# ----------------------------------------------------------- 3. signatures

PUBLIC_CALLABLES = [
    cairn.save, cairn.save_async, cairn.restore, cairn.convert, cairn.open, cairn.create,
    cairn.CheckpointManager.__init__, cairn.CheckpointManager.save, cairn.CheckpointManager.restore,
    cairn.CheckpointManager.all_steps, cairn.CheckpointManager.latest_step,
    cairn.CheckpointManager.wait_until_finished, cairn.CheckpointManager.should_save,
    cairn.CheckpointManager.delete, cairn.CheckpointManager.close,
    cairn.emergency.CheckpointManager.__init__, cairn.emergency.CheckpointManager.save,
    cairn.emergency.CheckpointManager.restore, cairn.emergency.CheckpointManager.all_steps,
    cairn.emergency.CheckpointManager.latest_step, cairn.orbax.PendingSave.wait_until_finished,
    cairn.orbax.all_steps, cairn.orbax.latest_step,
]


@pytest.mark.parametrize("f", PUBLIC_CALLABLES, ids=lambda f: f.__qualname__)
def test_public_signatures_are_explicit_annotated_and_documented(f):
    sig = inspect.signature(f)
    kinds = [p.kind for p in sig.parameters.values()]
    assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{f.__qualname__}{sig} hides options in **kwargs"
    unannotated = [p.name for p in sig.parameters.values()
                   if p.name != "self" and p.annotation is inspect.Parameter.empty]
    assert unannotated == [], f"{f.__qualname__}: no type hint on {unannotated}"
    assert sig.return_annotation is not inspect.Signature.empty, f"{f.__qualname__}: no return type"
    assert [p.name for p in sig.parameters.values() if p.name.startswith("_")] == []
    owner = f if not f.__name__ == "__init__" else getattr(sys.modules[f.__module__], f.__qualname__.split(".")[0])
    assert inspect.getdoc(owner), f"{f.__qualname__} has no docstring"


def test_save_shows_its_options_and_restore_and_managers_no_private_ones():
    save = inspect.signature(cairn.save).parameters
    for name in ("memory_budget", "chunk_byte_size", "step", "use_ocdbt", "compression", "progress"):
        assert name in save, name
    shown = "".join(str(inspect.signature(f)) for f in (cairn.restore, cairn.CheckpointManager.__init__,
                                                         cairn.emergency.CheckpointManager.__init__))
    for private in ("_read_boxes", "_maps", "read_boxes", "maps", "_crash_at"):
        assert private not in shown, private


def test_all_names_every_public_entry_and_the_docstring_too():
    for name in ("save", "save_async", "restore", "CheckpointManager", "convert", "emergency"):
        assert name in cairn.__all__, name
        assert f"``{name}``" in cairn.__doc__ or f"cairn.{name}" in cairn.__doc__, name
        assert hasattr(cairn, name)
    assert all(hasattr(cairn, n) for n in cairn.__all__)


def test_py_typed_is_in_the_installed_package():
    marker = importlib.resources.files("cairn") / "py.typed"
    assert marker.is_file(), f"no py.typed next to {cairn.__file__}"


# ---------------------------------------------------------------- 4. logging

SAVER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import cairn

    def at_point(point):
        if point == "data_written":
            os.kill(os.getpid(), signal.SIGKILL)

    mngr = cairn.CheckpointManager(sys.argv[1], enable_async=False, at_point=at_point)
    mngr.save(3, {"w": np.ones(16, np.float32)})
""")


def cairn_records(caplog, level):
    return [r.getMessage() for r in caplog.records if r.name == "cairn" and r.levelno == level]


def test_a_manager_logs_the_interrupted_step_it_drops(tmp_path, caplog):
    root = tmp_path / "run"
    with cairn.CheckpointManager(root, enable_async=False) as mngr:
        mngr.save(1, small_tree())
    killed = subprocess.run([sys.executable, "-c", SAVER, str(root)], capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = [n for n in os.listdir(root) if ".orbax-checkpoint-tmp" in n]
    assert left, os.listdir(root)
    caplog.set_level(logging.INFO, logger="cairn")
    with cairn.CheckpointManager(root) as mngr:
        assert mngr.all_steps() == [1]
    warnings = cairn_records(caplog, logging.WARNING)
    assert any(str(root / left[0]) in m and "interrupted save" in m for m in warnings), warnings
    assert not any(".orbax-checkpoint-tmp" in n for n in os.listdir(root))


def test_retention_deletions_are_logged(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="cairn")
    with cairn.CheckpointManager(tmp_path / "run", max_to_keep=1, enable_async=False) as mngr:
        mngr.save(1, small_tree())
        mngr.save(2, small_tree())
    infos = cairn_records(caplog, logging.INFO)
    assert any(str(tmp_path / "run" / "1") in m and "retention" in m for m in infos), infos


def test_an_emergency_restore_that_falls_back_logs_a_warning(tmp_path, caplog):
    tree = small_tree()
    with cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                           persistent_save_interval_steps=5) as mngr:
        for step in (5, 6):
            mngr.save(step, tree)
        mngr.wait_until_finished()
    # Local step 6 loses its data files (a disk that failed): reading them
    # fails, and every process restores persistent step 5 instead.
    chunks = [os.path.join(d, f) for d, _, files in os.walk(tmp_path / "local" / "6") for f in files
              if "/ocdbt.process_" in d and d.endswith("/d")]
    assert chunks, list(os.walk(tmp_path / "local"))
    for path in chunks:
        os.remove(path)
    caplog.set_level(logging.INFO, logger="cairn")
    with cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent",
                                           persistent_save_interval_steps=5) as mngr:
        restored = mngr.restore()
        assert (mngr.last_restore["tier"], mngr.last_restore["step"]) == ("persistent", 5)
    np.testing.assert_array_equal(np.asarray(restored["w"]), tree["w"])
    warnings = cairn_records(caplog, logging.WARNING)
    assert any("local step 6" in m and "falling back to the newest persistent step 5" in m
               for m in warnings), warnings


def test_a_resumed_conversion_is_logged(tmp_path, caplog):
    rng = np.random.default_rng(4)
    arrays = {f"layers.{i:02d}.w": rng.standard_normal((128, 128), dtype=np.float32) for i in range(12)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    killed = convert_killed_after_arrays(tmp_path / "model.safetensors", tmp_path / "out", 8, to="orbax",
                                         memory_budget=256 << 10, threads=2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    caplog.set_level(logging.INFO, logger="cairn")
    out = cairn.convert(tmp_path / "model.safetensors", tmp_path / "out", to="orbax", memory_budget="256KiB",
                        threads=2)
    assert out["arrays_resumed"] >= 4
    infos = cairn_records(caplog, logging.INFO)
    assert f"resuming an interrupted conversion: {out['arrays_resumed']} of 12 arrays" in " ".join(infos), infos


# --------------------------------------------------------------- 5. progress


def test_save_and_restore_report_progress(tmp_path):
    tree = {"w": np.arange(256 * 256, dtype=np.float32).reshape(256, 256), "b": np.ones(100, np.int64)}
    total = 256 * 256 * 4 + 100 * 8
    calls = []
    item = cairn.save(tmp_path / "c", tree, chunk_byte_size="16KiB",
                      progress=lambda done, of: calls.append((done, of)))
    assert calls and calls[-1] == (total, total), calls[-3:]
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and {t for _, t in calls} == {total}
    assert len(calls) > 2  # reported along the way, not only at the end
    read = []
    restored = cairn.restore(item, progress=lambda done, of: read.append((done, of)))
    np.testing.assert_array_equal(np.asarray(restored["w"]), tree["w"])
    assert read and read[-1] == (total, total), read[-3:]
    assert [d for d, _ in read] == sorted(d for d, _ in read)


def test_a_managers_save_and_restore_report_progress(tmp_path):
    """CheckpointManager.save (in the background) and restore take
    `progress` as cairn.save and cairn.restore do, for a flax TrainState."""
    import optax
    from flax.training import train_state

    params = {"dense": {"kernel": np.arange(128 * 64, dtype=np.float32).reshape(128, 64),
                        "bias": np.zeros(64, np.float32)}}
    state = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(1e-3))
    total = sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(state))
    saved, read = [], []
    with cairn.CheckpointManager(tmp_path / "run", chunk_byte_size="4KiB") as mngr:
        assert mngr.save(5, state, progress=lambda done, of: saved.append((done, of)))
        mngr.wait_until_finished()
        assert saved and saved[-1] == (total, total), saved[-3:]
        assert [d for d, _ in saved] == sorted(d for d, _ in saved) and len(saved) > 2
        # The next save without a callback reports nothing to the old one.
        n = len(saved)
        assert mngr.save(6, state, force=True)
        mngr.wait_until_finished()
        assert len(saved) == n
        restored = mngr.restore(5, state, progress=lambda done, of: read.append((done, of)))
    np.testing.assert_array_equal(np.asarray(restored.params["dense"]["kernel"]), params["dense"]["kernel"])
    assert read and read[-1][0] == read[-1][1] and read[-1][1] >= params["dense"]["kernel"].nbytes, read[-3:]
    assert [d for d, _ in read] == sorted(d for d, _ in read)


def test_a_failing_progress_callback_does_not_fail_the_save(tmp_path):
    seen = []

    def boom(done, of):
        seen.append(done)
        raise RuntimeError("callback broke")

    item = cairn.save(tmp_path / "c", small_tree(), progress=boom)
    assert seen
    np.testing.assert_array_equal(cairn.restore(item)["b"], small_tree()["b"])


# ----------------------------------------------- 6. restore without a target


def test_restore_without_target_gives_jax_arrays_for_jax_leaves_with_jax_imported(tmp_path):
    tree = {"j": jax.numpy.arange(12, dtype=jax.numpy.float32).reshape(3, 4), "n": np.arange(5),
            "s": 3}
    item = cairn.save(tmp_path / "c", tree)
    plain = cairn.restore(item)
    assert isinstance(plain["j"], jax.Array), type(plain["j"])
    np.testing.assert_array_equal(np.asarray(plain["j"]), np.asarray(tree["j"]))
    assert isinstance(plain["n"], np.ndarray) and not isinstance(plain["n"], jax.Array)
    assert plain["s"] == 3


NO_JAX = textwrap.dedent("""
    import sys
    import numpy as np
    import cairn
    plain = cairn.restore(sys.argv[1])
    assert "jax" not in sys.modules
    print(type(plain["j"]).__module__, type(plain["j"]).__name__)
""")


def test_restore_without_jax_imported_gives_numpy(tmp_path):
    item = cairn.save(tmp_path / "c", {"j": jax.numpy.ones((2, 2))})
    r = subprocess.run([sys.executable, "-c", NO_JAX, item], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["numpy", "ndarray"]
