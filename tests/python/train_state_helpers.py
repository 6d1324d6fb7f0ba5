"""The trees users save: a flax ``TrainState`` of a small MLP with an
``optax.chain(clip_by_global_norm, adamw)`` state (NamedTuples and
``EmptyState()``), its parameters sharded over 8 CPU devices; a flax
``struct.dataclass`` with a static field; a NamedTuple tree. Plus the
comparisons the tests make: same node types, every leaf bit for bit.

flax and optax are required: an ImportError fails the tests."""

from __future__ import annotations

from typing import NamedTuple

from orbax_helpers import mesh  # sets XLA_FLAGS before jax starts

import flax.linen as nn  # noqa: E402
import flax.struct  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax.training import train_state  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(32)(x)
        x = nn.relu(x)
        return nn.Dense(16)(x)


def _place(x, m, spec2d):
    if not hasattr(x, "ndim"):
        return x
    if x.ndim == 2:
        return jax.device_put(x, NamedSharding(m, spec2d))
    return jax.device_put(x, NamedSharding(m, P()))


def train_state_tree(seed: int = 0, steps: int = 1, spec2d=P("data", "model"), step_as_array=False):
    """A flax TrainState after `steps` optimizer steps (so Adam's moments and
    count are not zeros), its arrays placed on the 4x2 mesh (matrices with
    `spec2d`, vectors replicated); `step_as_array`: its step a replicated
    jax.Array (Orbax's emergency manager takes jax.Arrays only)."""
    m = mesh()
    model = MLP()
    params = model.init(jax.random.PRNGKey(seed), jnp.ones((1, 64)))
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    x = jax.random.normal(jax.random.PRNGKey(seed + 1), (8, 64))
    for _ in range(steps):
        grads = jax.grad(lambda p: jnp.sum(model.apply(p, x) ** 2))(state.params)
        state = state.apply_gradients(grads=grads)
    if step_as_array:
        state = state.replace(step=jnp.asarray(state.step, jnp.int32))
    return jax.tree.map(lambda v: _place(v, m, spec2d), state)


def abstract_of(tree):
    """The tree with every jax.Array replaced by a ShapeDtypeStruct carrying
    its sharding (what MaxText and Orbax users restore into)."""
    return jax.tree.map(
        lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding)
        if isinstance(v, jax.Array) else v, tree)


@flax.struct.dataclass
class Stats:
    mean: jax.Array
    count: int
    name: str = flax.struct.field(pytree_node=False, default="stats")


class Pair(NamedTuple):
    first: np.ndarray
    second: dict


def assorted_tree():
    """A flax struct dataclass (with a static field), a NamedTuple, empty
    nodes, and a tuple."""
    return {
        "stats": Stats(mean=jnp.arange(6, dtype=jnp.float32), count=3),
        "pair": Pair(first=np.arange(4, dtype=np.int16), second={"z": np.ones(2, np.float64)}),
        "empty": optax.EmptyState(),
        "none": None,
        "tup": (np.float32(2.5), np.arange(3, dtype=np.uint8)),
    }


def assert_same_tree(got, want):
    """Same treedef (node types included) and every leaf equal bit for bit
    (dtype, shape, bytes; shardings where `want` has them)."""
    got_leaves, got_def = jax.tree_util.tree_flatten(got)
    want_leaves, want_def = jax.tree_util.tree_flatten(want)
    assert got_def == want_def, f"tree structure differs:\n got  {got_def}\n want {want_def}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if isinstance(w, (int, float, str, bool)):
            assert type(g) is type(w) and g == w, f"leaf {i}: {g!r} != {w!r}"
            continue
        gn, wn = np.asarray(g), np.asarray(w)
        assert gn.dtype == wn.dtype and gn.shape == wn.shape, f"leaf {i}: {gn.dtype}{gn.shape} vs {wn.dtype}{wn.shape}"
        assert gn.tobytes() == wn.tobytes(), f"leaf {i}: values differ"
        if isinstance(w, jax.Array) and isinstance(g, jax.Array):
            assert g.sharding.is_equivalent_to(w.sharding, w.ndim), f"leaf {i}: sharding differs"
