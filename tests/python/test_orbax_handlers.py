"""cairn's Orbax checkpoint handlers driven by orbax-checkpoint 0.12.8
itself: ``ocp.CheckpointManager`` (Composite args beside Orbax's JSON
handler, async saves, retention), ``ocp.Checkpointer`` /
``AsyncCheckpointer``, the args registry, and Orbax v1's
``training.Checkpointer`` (MaxText 0.2.5's seam). Whatever cairn's handler
writes, Orbax's own handler restores bit for bit, and the other way round;
importing cairn changes nothing in Orbax.

Every test checks that cairn's engine did the work (a spy on the native
save and restore calls), so a silent fall-back to Orbax's own code fails."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from train_state_helpers import abstract_of, assert_same_tree, train_state_tree

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from flax.training import train_state  # noqa: E402

import cairn  # noqa: E402
import cairn.orbax  # noqa: E402
from cairn import _core, _orbax_restore  # noqa: E402


@pytest.fixture
def engine_calls(monkeypatch):
    """Counts the native saves (with caller_commits) and the restores."""
    calls = {"save": 0, "restore": 0}
    real_save, real_restore = _core._engine_save, _orbax_restore.restore_item

    def save(*args, **kwargs):
        calls["save"] += 1
        assert kwargs.get("caller_commits"), "a handler's save must leave the commit to Orbax"
        return real_save(*args, **kwargs)

    def restore(*args, **kwargs):
        calls["restore"] += 1
        return real_restore(*args, **kwargs)

    monkeypatch.setattr(_core, "_engine_save", save)
    monkeypatch.setattr(_orbax_restore, "restore_item", restore)
    return calls


def composite_manager(directory, handler, **options):
    return ocp.CheckpointManager(
        directory, item_names=("items", "config"),
        item_handlers={"items": handler, "config": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(**options))


@pytest.mark.parametrize("use_zarr3", [True, False], ids=["zarr3", "zarr2"])
def test_orbax_manager_drives_cairns_handler_beside_a_json_item(tmp_path, engine_calls, use_zarr3):
    states = [train_state_tree(steps=s) for s in (1, 2, 3)]
    with composite_manager(tmp_path, cairn.orbax.PyTreeCheckpointHandler(use_zarr3=use_zarr3),
                           max_to_keep=2, enable_async_checkpointing=True) as mngr:
        for step, state in enumerate(states):
            assert mngr.save(step, args=ocp.args.Composite(items=ocp.args.PyTreeSave(state),
                                                           config=ocp.args.JsonSave({"step": step})))
        mngr.wait_until_finished()
        assert mngr.all_steps() == [1, 2]  # Orbax's retention
        back = mngr.restore(2, args=ocp.args.Composite(items=ocp.args.PyTreeRestore(abstract_of(states[2])),
                                                       config=ocp.args.JsonRestore()))
    assert engine_calls == {"save": 3, "restore": 1}
    assert isinstance(back["items"], train_state.TrainState)
    assert_same_tree(back["items"], states[2])
    assert back["config"] == {"step": 2}
    md = json.loads((tmp_path / "2" / "_CHECKPOINT_METADATA").read_text())
    assert md["item_handlers"]["items"] == ocp.PyTreeCheckpointHandler.typestr()
    assert json.loads((tmp_path / "2" / "items" / "_METADATA").read_text())["use_zarr3"] is use_zarr3
    # Orbax's own handlers restore it, without being told which handler wrote it.
    with ocp.CheckpointManager(tmp_path, item_names=("items", "config")) as theirs:
        got = theirs.restore(2, args=ocp.args.Composite(items=ocp.args.PyTreeRestore(abstract_of(states[2])),
                                                        config=ocp.args.JsonRestore()))
    assert_same_tree(got["items"], states[2])


def test_cairns_handler_restores_what_orbaxs_manager_saved(tmp_path, engine_calls):
    state = train_state_tree(steps=2)
    with composite_manager(tmp_path, ocp.PyTreeCheckpointHandler(use_zarr3=True)) as theirs:
        theirs.save(5, args=ocp.args.Composite(items=ocp.args.PyTreeSave(state),
                                               config=ocp.args.JsonSave({"lr": 0.5})))
    assert engine_calls["save"] == 0
    with composite_manager(tmp_path, cairn.orbax.PyTreeCheckpointHandler()) as ours:
        assert ours.latest_step() == 5
        back = ours.restore(5, args=ocp.args.Composite(items=ocp.args.PyTreeRestore(abstract_of(state)),
                                                       config=ocp.args.JsonRestore()))
    assert engine_calls["restore"] == 1
    assert_same_tree(back["items"], state)
    assert back["config"] == {"lr": 0.5}


def test_standard_handler_in_a_manager_both_ways(tmp_path, engine_calls):
    state = train_state_tree(steps=1)
    handler = cairn.orbax.StandardCheckpointHandler()
    assert isinstance(handler, ocp.StandardCheckpointHandler)
    with ocp.CheckpointManager(tmp_path, item_names=("state",), item_handlers={"state": handler}) as mngr:
        mngr.save(1, args=ocp.args.Composite(state=ocp.args.StandardSave(state)))
        mngr.wait_until_finished()
        back = mngr.restore(1, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_of(state))))
    assert engine_calls == {"save": 1, "restore": 1}
    assert_same_tree(back["state"], state)
    got = ocp.StandardCheckpointer().restore(tmp_path / "1" / "state", abstract_of(state))
    assert_same_tree(got, state)


def test_checkpointers_with_cairns_handler_and_save_args(tmp_path, engine_calls):
    state = train_state_tree()
    tree = {"w": np.arange(64, dtype=np.float32).reshape(8, 8), "s": state.params}
    save_args = jax.tree.map(lambda _: ocp.SaveArgs(dtype=ml_dtypes.bfloat16, chunk_byte_size=64), tree)
    ckptr = ocp.AsyncCheckpointer(cairn.orbax.PyTreeCheckpointHandler())
    ckptr.save(tmp_path / "a", args=ocp.args.PyTreeSave(tree, save_args=save_args))
    tree["w"][:] = -1  # after async save returns: the saved values are the ones handed over
    ckptr.wait_until_finished()
    back = ocp.PyTreeCheckpointer().restore(tmp_path / "a")
    assert back["w"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(back["w"].astype(np.float32), np.arange(64, dtype=np.float32).reshape(8, 8))
    zarray = json.loads((tmp_path / "a" / "_METADATA").read_text())
    assert zarray["use_zarr3"] is False
    sync = ocp.Checkpointer(cairn.orbax.PyTreeCheckpointHandler(use_ocdbt=False))
    sync.save(tmp_path / "b", args=ocp.args.PyTreeSave(state))
    assert (tmp_path / "b" / "params.params.Dense_0.kernel").is_dir()  # one directory per array
    assert_same_tree(sync.restore(tmp_path / "b", args=ocp.args.PyTreeRestore(abstract_of(state))), state)
    assert engine_calls == {"save": 2, "restore": 1}


def test_importing_cairn_changes_nothing_in_orbax(tmp_path, engine_calls):
    cairn.orbax.PyTreeCheckpointHandler()  # loads cairn's handler module
    assert ocp.args.get_registered_handler_cls(ocp.args.PyTreeSave) is ocp.PyTreeCheckpointHandler
    assert ocp.args.get_registered_handler_cls(ocp.args.StandardRestore) is ocp.StandardCheckpointHandler
    state = train_state_tree()
    with ocp.CheckpointManager(tmp_path) as plain:
        plain.save(1, args=ocp.args.StandardSave(state))
        plain.wait_until_finished()
        plain.restore(1, args=ocp.args.StandardRestore(abstract_of(state)))
    assert engine_calls == {"save": 0, "restore": 0}


def test_register_handlers_is_an_explicit_opt_in_and_undone(tmp_path, engine_calls):
    state = train_state_tree()
    cairn.orbax.register_handlers()
    try:
        with ocp.CheckpointManager(tmp_path / "ours") as mngr:
            mngr.save(1, args=ocp.args.StandardSave(state))
            mngr.wait_until_finished()
            assert_same_tree(mngr.restore(1, args=ocp.args.StandardRestore(abstract_of(state))), state)
        # Named handlers still work while registered.
        with composite_manager(tmp_path / "named", cairn.orbax.PyTreeCheckpointHandler()) as mngr:
            mngr.save(1, args=ocp.args.Composite(items=ocp.args.PyTreeSave(state), config=ocp.args.JsonSave({})))
        assert engine_calls == {"save": 2, "restore": 1}
    finally:
        cairn.orbax.unregister_handlers()
    assert ocp.args.get_registered_handler_cls(ocp.args.PyTreeSave) is ocp.PyTreeCheckpointHandler
    with ocp.CheckpointManager(tmp_path / "theirs") as mngr:
        mngr.save(1, args=ocp.args.StandardSave(state))
    assert engine_calls["save"] == 2


def test_handler_refuses_what_it_cannot_do(tmp_path):
    with pytest.raises(NotImplementedError, match="type_handler_registry"):
        cairn.orbax.PyTreeCheckpointHandler(
            type_handler_registry=ocp.type_handlers.create_type_handler_registry())
    ckptr = ocp.Checkpointer(cairn.orbax.PyTreeCheckpointHandler())
    with pytest.raises(ValueError, match="empty item"):
        ckptr.save(tmp_path / "e", args=ocp.args.PyTreeSave({}))
    state = train_state_tree()
    ckptr.save(tmp_path / "s", args=ocp.args.PyTreeSave(state))
    with pytest.raises(ValueError, match=r"\('params', 'params', 'Dense_1', 'bias'\)"):
        ckptr.restore(tmp_path / "s", args=ocp.args.PyTreeRestore(
            {"step": 0, "params": {"params": {"Dense_0": abstract_of(state.params["params"]["Dense_0"])}},
             "opt_state": abstract_of(state.opt_state)}))


V1_SCRIPT = """
import os, sys, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
sys.path.insert(0, {tests!r})
from train_state_helpers import train_state_tree, abstract_of, assert_same_tree
import jax, numpy as np, orbax.checkpoint as ocp
import cairn, cairn.orbax
from cairn import _core
calls = []
real = _core._engine_save
_core._engine_save = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
state = train_state_tree(steps=2)
tree = {{"params": state.params, "opt_state": state.opt_state, "step": np.array(7, dtype=np.int32)}}
root = {root!r}
if {ours}:
    ocp.v1.handlers.register_handler(cairn.orbax.PyTreeHandler, checkpointable_name="items")
with ocp.v1.training.Checkpointer(root) as ckptr:
    ckptr.save_checkpointables(3, {{"items": tree}})
    ckptr.wait()
    back = ckptr.load_checkpointables(3, {{"items": abstract_of(tree)}})["items"]
assert_same_tree(back, tree)
print(json.dumps({{"saves": len(calls)}}))
"""


def run_v1(root, ours: bool) -> dict:
    import pathlib
    code = V1_SCRIPT.format(tests=str(pathlib.Path(__file__).parent), root=str(root), ours=ours)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_orbax_v1_checkpointer_with_cairns_pytree_handler_both_ways(tmp_path):
    # Orbax v1's training.Checkpointer (what MaxText 0.2.5 builds), with
    # cairn's handler registered for the checkpointable "items" in a fresh
    # process (Orbax's v1 registry is process-wide and has no removal).
    assert run_v1(tmp_path / "ours", ours=True) == {"saves": 1}
    assert run_v1(tmp_path / "theirs", ours=False) == {"saves": 0}
    state = train_state_tree(steps=2)
    want = {"params": state.params, "opt_state": state.opt_state, "step": np.array(7, dtype=np.int32)}
    # Each side's checkpoint is read by the other's handler.
    for root in (tmp_path / "ours", tmp_path / "theirs"):
        got = cairn.restore(root / "3" / "items", target=abstract_of(want))
        assert_same_tree(got, want)
        got = ocp.PyTreeCheckpointer().restore(root / "3" / "items", item=abstract_of(want))
        assert_same_tree(got, want)
