"""``cairn.CheckpointManager`` built with orbax-checkpoint's own signature
(`options=CheckpointManagerOptions(...)`, `item_names`, `item_handlers`,
``Composite`` args with a PyTree item beside JSON items), interchanging
steps with Orbax's own ``CheckpointManager`` both ways, bit for bit, on a
flax TrainState; options cairn would not honour are refused by name."""

from __future__ import annotations

import json

import pytest

from train_state_helpers import abstract_of, assert_same_tree, train_state_tree

import orbax.checkpoint as ocp  # noqa: E402
from flax.training import train_state  # noqa: E402
from orbax.checkpoint import checkpoint_managers as ocm  # noqa: E402

import cairn  # noqa: E402


def composite_save(state, step):
    return ocp.args.Composite(items=ocp.args.PyTreeSave(state), config=ocp.args.JsonSave({"step": step}))


def composite_restore(state):
    return ocp.args.Composite(items=ocp.args.PyTreeRestore(abstract_of(state)), config=ocp.args.JsonRestore())


def test_orbax_signature_with_composite_items_both_ways(tmp_path):
    options = ocp.CheckpointManagerOptions(max_to_keep=2, save_interval_steps=2, step_prefix="step",
                                           step_format_fixed_length=4)
    states = {s: train_state_tree(steps=s + 1) for s in range(7)}
    with cairn.CheckpointManager(tmp_path, options=options, item_names=("items", "config")) as mngr:
        saved = [s for s in range(7) if mngr.save(s, args=composite_save(states[s], s))]
        mngr.wait_until_finished()
        assert saved == [0, 2, 4, 6] and mngr.all_steps() == [4, 6]
        back = mngr.restore(6, args=composite_restore(states[6]))
    assert isinstance(back, ocp.args.Composite)
    assert isinstance(back["items"], train_state.TrainState) and back.config == {"step": 6}
    assert_same_tree(back["items"], states[6])
    md = json.loads((tmp_path / "step_0006" / "_CHECKPOINT_METADATA").read_text())
    assert md["item_handlers"] == {"config": ocp.JsonCheckpointHandler.typestr(),
                                   "items": ocp.PyTreeCheckpointHandler.typestr()}
    # Orbax's own manager resumes the run: lists, restores, continues numbering and retention.
    with ocp.CheckpointManager(tmp_path, options=options, item_names=("items", "config")) as theirs:
        assert theirs.all_steps() == [4, 6]
        got = theirs.restore(6, args=composite_restore(states[6]))
        assert_same_tree(got["items"], states[6])
        assert got["config"] == {"step": 6}
        assert theirs.save(8, args=composite_save(states[0], 8))
        theirs.wait_until_finished()
    # ... and cairn's reads Orbax's step back.
    with cairn.CheckpointManager(tmp_path, options=options, item_names=("items", "config")) as mngr:
        assert mngr.all_steps() == [6, 8]
        got = mngr.restore(8, args=composite_restore(states[0]))
        assert_same_tree(got["items"], states[0])
        assert got["config"] == {"step": 8}


def test_item_handlers_and_policies(tmp_path):
    options = ocp.CheckpointManagerOptions(
        save_decision_policy=ocm.save_decision_policy.FixedIntervalPolicy(3),
        preservation_policy=ocm.preservation_policy.AnyPreservationPolicy([
            ocm.preservation_policy.LatestN(1), ocm.preservation_policy.EveryNSteps(6)]),
        enable_async_checkpointing=False)
    state = train_state_tree()
    handlers = {"items": ocp.PyTreeCheckpointHandler(), "config": ocp.JsonCheckpointHandler()}
    with cairn.CheckpointManager(tmp_path, options=options, item_handlers=handlers) as mngr:
        saved = [s for s in range(10) if mngr.save(s, args=composite_save(state, s))]
        assert saved == [0, 3, 6, 9]
        assert mngr.all_steps() == [0, 6, 9]  # the latest, and multiples of 6
        assert_same_tree(mngr.restore(9, args=composite_restore(state))["items"], state)


def test_default_item_with_standard_args_and_force(tmp_path):
    state = train_state_tree(steps=2)
    with cairn.CheckpointManager(tmp_path, item_handlers=ocp.StandardCheckpointHandler(),
                                 options=ocp.CheckpointManagerOptions(save_on_steps=[5])) as mngr:
        assert mngr.save(1, args=ocp.args.StandardSave(state))
        assert not mngr.save(1, args=ocp.args.StandardSave(state))  # not above the latest step
        assert mngr.save(5, args=ocp.args.StandardSave(state))  # save_on_steps
        mngr.wait_until_finished()
        with pytest.raises(FileExistsError, match=f"saving step 5: {tmp_path / '5'} is already committed"):
            mngr.save(5, args=ocp.args.StandardSave(state), force=True)
        back = mngr.restore(5, args=ocp.args.StandardRestore(abstract_of(state)))
    assert_same_tree(back, state)
    assert (tmp_path / "5" / "default" / "_METADATA").exists()
    with ocp.CheckpointManager(tmp_path) as theirs:
        assert_same_tree(theirs.restore(5, args=ocp.args.StandardRestore(abstract_of(state))), state)


def test_custom_metadata_of_a_step_is_orbaxs(tmp_path):
    state = train_state_tree()
    with cairn.CheckpointManager(tmp_path) as mngr:
        mngr.save(1, args=ocp.args.StandardSave(state), custom_metadata={"run": "r7", "tokens": 123})
        mngr.save(2, args=ocp.args.StandardSave(state))
    md = json.loads((tmp_path / "1" / "_CHECKPOINT_METADATA").read_text())
    assert md["custom_metadata"] == {"run": "r7", "tokens": 123}
    assert json.loads((tmp_path / "2" / "_CHECKPOINT_METADATA").read_text())["custom_metadata"] == {}
    with ocp.CheckpointManager(tmp_path) as theirs:
        assert theirs.metadata(1).custom_metadata == {"run": "r7", "tokens": 123}


def test_should_save_fn_and_read_only(tmp_path):
    state = train_state_tree()
    options = ocp.CheckpointManagerOptions(should_save_fn=lambda step, last: step % 4 == 1)
    with cairn.CheckpointManager(tmp_path, options=options) as mngr:
        assert [s for s in range(10) if mngr.save(s, args=ocp.args.StandardSave(state))] == [1, 5, 9]
    with cairn.CheckpointManager(tmp_path, options=ocp.CheckpointManagerOptions(read_only=True)) as mngr:
        assert not mngr.save(12, args=ocp.args.StandardSave(state))
        assert mngr.all_steps() == [1, 5, 9]


@pytest.mark.parametrize("option,value", [
    ("keep_time_interval", __import__("datetime").timedelta(hours=1)),
    ("single_host_load_and_broadcast", True)])
def test_options_cairn_would_not_honour_are_refused_by_name(tmp_path, option, value):
    with pytest.raises(NotImplementedError, match=f"CheckpointManagerOptions.{option}="):
        cairn.CheckpointManager(tmp_path, options=ocp.CheckpointManagerOptions(**{option: value}))


def test_best_fn_keeps_the_best_steps_as_orbax_does(tmp_path):
    state = train_state_tree()
    options = ocp.CheckpointManagerOptions(max_to_keep=2, best_fn=lambda m: m["loss"], best_mode="min",
                                           keep_checkpoints_without_metrics=False)
    losses = {1: 0.9, 2: 0.3, 3: 0.5, 4: 0.7, 5: 0.3}
    with cairn.CheckpointManager(tmp_path, options=options) as mngr:
        for step in (1, 2, 3):
            assert mngr.save(step, args=ocp.args.StandardSave(state), metrics={"loss": losses[step]})
        mngr.wait_until_finished()
        assert mngr.all_steps() == [2, 3] and mngr.best_step() == 2
    assert json.loads((tmp_path / "2" / "metrics" / "metrics").read_text()) == {"loss": 0.3}
    # Orbax's manager reads the metrics and agrees.
    with ocp.CheckpointManager(tmp_path, options=options) as theirs:
        assert theirs.all_steps() == [2, 3] and theirs.best_step() == 2
    # Reopened, cairn ranks the steps on disk by their metrics (ties: the later step wins).
    with cairn.CheckpointManager(tmp_path, options=options) as mngr:
        for step in (4, 5):
            mngr.save(step, args=ocp.args.StandardSave(state), metrics={"loss": losses[step]})
        mngr.wait_until_finished()
        assert mngr.all_steps() == [2, 5] and mngr.best_step() == 5
        assert_same_tree(mngr.restore(mngr.best_step(), args=ocp.args.StandardRestore(abstract_of(state))),
                         state)


def test_wrong_items_are_refused(tmp_path):
    state = train_state_tree()
    with cairn.CheckpointManager(tmp_path, item_names=("items",)) as mngr:
        with pytest.raises(ValueError, match="`other` is not among item_names"):
            mngr.save(1, args=ocp.args.Composite(other=ocp.args.PyTreeSave(state)))
        with pytest.raises(NotImplementedError, match="ArraySave"):
            mngr.save(1, args=ocp.args.Composite(items=ocp.args.ArraySave(state.step)))
        with pytest.raises(ValueError, match="no PyTree item"):
            mngr.save(1, args=ocp.args.Composite())
    with pytest.raises(NotImplementedError, match="ProtoCheckpointHandler"):
        cairn.CheckpointManager(tmp_path, item_handlers={"p": ocp.ProtoCheckpointHandler(filename="x")})
