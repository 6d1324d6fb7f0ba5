"""The trees the campaign saves: a flax TrainState of a small MLP with an
optax.chain(clip_by_global_norm, adamw) state (NamedTuples, EmptyState), as
tests/python/train_state_helpers.py builds it, its leaves numpy arrays (the
worker forks: its children must not run jax computations), one per step.

The harness computes the leaves once and writes them to an .npz; the worker
builds the same structure and takes the leaves from that file, so both sides
hold the same bits."""

from __future__ import annotations

import numpy as np

_BASE = None


def _compute():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(16)(nn.relu(nn.Dense(32)(x)))

    model = MLP()
    params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 64)))
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    x = jax.random.normal(jax.random.PRNGKey(1), (8, 64))
    grads = jax.grad(lambda p: jnp.sum(model.apply(p, x) ** 2))(state.params)
    return jax.tree.map(lambda v: np.array(v), state.apply_gradients(grads=grads))


def base(npz_path=None):
    """The TrainState (numpy leaves). With `npz_path`: leaves from that file
    when it exists, else computed and written there."""
    global _BASE
    if _BASE is None:
        import jax
        import os
        state = _compute()
        leaves, treedef = jax.tree.flatten(state)
        if npz_path and os.path.exists(npz_path):
            with np.load(npz_path) as z:
                loaded = [z[f"a{i}"] for i in range(len(leaves))]
            assert all(a.dtype == b.dtype and a.shape == b.shape for a, b in zip(leaves, loaded))
            state = jax.tree.unflatten(treedef, loaded)
        elif npz_path:
            np.savez(npz_path + ".tmp.npz", **{f"a{i}": v for i, v in enumerate(leaves)})
            os.replace(npz_path + ".tmp.npz", npz_path)
        _BASE = state
    return _BASE


def at(step: int):
    """The state saved as `step`: every leaf changed by the step number."""
    import jax

    def bump(v):
        v = np.asarray(v)
        if v.dtype.kind == "f":
            return np.asarray(v + v.dtype.type(step) * v.dtype.type(0.5), v.dtype)
        if v.dtype.kind in "iu":
            return np.asarray(v + v.dtype.type(step), v.dtype)
        return v
    return jax.tree.map(bump, base())


def flat(tree) -> dict:
    """{key path: (dtype, shape, bytes)} of a tree (nested dicts after a
    restore without target, or the TrainState)."""
    import jax
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        key = "/".join(str(getattr(p, "key", getattr(p, "name", getattr(p, "idx", p)))) for p in path)
        a = np.asarray(leaf)
        out[key] = (str(a.dtype), a.shape, a.tobytes())
    return out


def diff(got: dict, want: dict) -> str:
    """'' when equal, else what differs first."""
    if got.keys() != want.keys():
        return f"keys differ: missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}"
    for k in want:
        if got[k] != want[k]:
            g, w = got[k], want[k]
            return f"{k}: got {g[0]}{list(g[1])}, want {w[0]}{list(w[1])}" + (
                ", bytes differ" if g[:2] == w[:2] else "")
    return ""


def same(got_tree, want_tree) -> str:
    """'' when two trees of one structure hold the same bits, else why not."""
    import jax
    g, w = jax.tree.leaves(got_tree), jax.tree.leaves(want_tree)
    if len(g) != len(w):
        return f"{len(g)} leaves, want {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            return f"leaf {i}: got {a.dtype}{list(a.shape)}, want {b.dtype}{list(b.shape)}" + (
                ", bytes differ" if (a.dtype, a.shape) == (b.dtype, b.shape) else "")
    return ""
