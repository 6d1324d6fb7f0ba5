"""``cairn.emergency.CheckpointManager`` built with orbax-checkpoint's
emergency signature, as MaxText's ``create_orbax_emergency_checkpoint_manager``
builds Orbax's: ``(local_directory, persistent_directory, global_mesh,
abstract_state, options=emergency.CheckpointManagerOptions(...))``,
``save(step, args=Composite(state=PyTreeSave(state)))``,
``restore(step)`` -> ``Composite(state=...)``. One process here (the
multi-process local-tier interop is test_emergency_orbax_interop.py): the
steps cairn writes to the persistent tier are restored by Orbax's own
emergency manager and the other way round, bit for bit, with a flax
TrainState (its step a jax.Array: Orbax's emergency manager takes
jax.Arrays only) replicated along the replica axis."""

from __future__ import annotations

import pytest

from train_state_helpers import P, abstract_of, assert_same_tree, mesh, train_state_tree

import jax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from flax.training import train_state  # noqa: E402
from orbax.checkpoint.experimental.emergency import checkpoint_manager as em  # noqa: E402

import cairn.emergency  # noqa: E402

# ZeroMQ and MPI are required, not optional (conftest.peer_transports).
pytestmark = pytest.mark.usefixtures("peer_transports")


def options():
    return em.CheckpointManagerOptions(
        local=em.LocalCheckpointOptions(save_interval_steps=2, max_to_keep=2),
        persistent=em.PersistentCheckpointOptions(save_interval_steps=3, max_to_keep=2))


def composite(state):
    return ocp.args.Composite(state=ocp.args.PyTreeSave(state))


def test_orbax_emergency_signature_both_ways(tmp_path):
    state = train_state_tree(steps=2, spec2d=P(None, "model"), step_as_array=True)
    m = mesh()
    for d in ("local", "local_orbax"):
        (tmp_path / d).mkdir()
    mngr = cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent", m,
                                             abstract_of(state), options=options())
    saved = [s for s in range(7) if mngr.save(s, args=composite(state))]
    mngr.wait_until_finished()
    assert saved == [0, 2, 3, 4, 6]  # local every 2, persistent every 3
    assert mngr.all_steps() == [3, 4, 6]  # local keeps 2 (4, 6); persistent keeps 2 (3, 6)
    back = mngr.restore(None)
    assert isinstance(back, ocp.args.Composite) and isinstance(back.state, train_state.TrainState)
    assert mngr.last_restore["step"] == 6  # in both tiers: read from the persistent one
    assert_same_tree(back.state, state)
    back = mngr.restore(4)
    assert mngr.last_restore["tier"] == "local"
    assert_same_tree(back.state, state)
    mngr.close()
    # Orbax's own emergency manager restores the persistent step cairn wrote
    # (one process holds every replica: Orbax then reads the persistent tier).
    theirs = em.CheckpointManager(tmp_path / "local_orbax", tmp_path / "persistent", m, abstract_of(state),
                                  options=options())
    assert theirs.latest_step() == 6
    assert_same_tree(theirs.restore(6).state, state)
    later = state.replace(step=state.step + 5, params=jax.tree.map(lambda x: x * 2 + 1, state.params))
    assert theirs.save(9, args=composite(later))
    theirs.wait_until_finished()
    theirs.close()
    # ... and cairn restores Orbax's step 9 (newer than any local step).
    mngr = cairn.emergency.CheckpointManager(tmp_path / "local", tmp_path / "persistent", m,
                                             abstract_of(state), options=options())
    got = mngr.restore(None)
    assert mngr.last_restore["tier"] == "persistent" and mngr.last_restore["step"] == 9
    assert_same_tree(got.state, later)
    mngr.close()


def test_options_the_emergency_manager_would_not_honour_are_refused(tmp_path):
    m = mesh()
    bad = em.CheckpointManagerOptions(persistent=em.PersistentCheckpointOptions(keep_period=5))
    with pytest.raises(NotImplementedError, match=r"options.persistent.keep_period=5"):
        cairn.emergency.CheckpointManager(tmp_path / "l", tmp_path / "p", m, {}, options=bad)
    with pytest.raises(NotImplementedError, match="item_handlers"):
        cairn.emergency.CheckpointManager(tmp_path / "l", tmp_path / "p", m, {},
                                          item_handlers=ocp.PyTreeCheckpointHandler())
