"""Shared set-up for the Orbax interop tests: 8 simulated CPU devices, a rich
test tree (sharded jax arrays, bfloat16, scalars, strings, nested containers
with empty ones and None, awkward names, a PRNG key) and bit-exact tree
comparison.

Importing this module sets XLA_FLAGS before jax initializes its backend.
Orbax and jax are required: an ImportError here fails the tests."""

import os

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

VARIANTS = [(True, True), (True, False), (False, True), (False, False)]
VARIANT_IDS = ["ocdbt-zarr3", "ocdbt-zarr2", "dir-zarr3", "dir-zarr2"]


def mesh():
    assert jax.device_count() == 8, (
        f"expected 8 simulated CPU devices, got {jax.device_count()}: jax was initialized "
        "before XLA_FLAGS was set")
    return Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))


def sharded(values, m, spec):
    return jax.device_put(values, NamedSharding(m, spec))


def rich_tree(m, rng_seed=0):
    """A tree with every kind of leaf the tests exercise."""
    rng = np.random.default_rng(rng_seed)
    f32 = rng.standard_normal((8, 6)).astype(np.float32)
    bf16 = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    return {
        "params": {
            "dense": {"kernel": sharded(f32, m, P("data", None)),
                      "bias": sharded(np.arange(6, dtype=np.float32), m, P())},
            "both": sharded(rng.integers(-100, 100, (8, 4)).astype(np.int32), m, P("data", "model")),
            "cols": sharded(bf16, m, P(None, "model")),
            "w.with.dots": np.arange(12, dtype=np.int16).reshape(3, 4),
            "with space": np.array([1.5, -2.25], dtype=np.float64),
            "ünïcødé ключ": np.array([True, False, True]),
        },
        "opt_state": [
            {"count": 7, "mu": np.full((2, 3), 0.5, np.float32), "none": None},
            [],
            {},
            3.25,
            np.float32(-1.5),
        ],
        "step_name": "step-ünï",
        "nested": {"empty_dict": {}, "empty_list": [], "nothing": None,
                   "deep": {"deeper": {"leaf": np.arange(5, dtype=np.uint8)}}},
        "rng": jax.random.key(42),
    }


def numpy_tree(rng_seed=1):
    """A tree without jax arrays (what cairn.save takes from numpy users)."""
    rng = np.random.default_rng(rng_seed)
    return {
        "a": rng.standard_normal((6, 4)).astype(np.float32),
        "b": {"c.d": np.arange(10, dtype=np.int32), "bf": rng.standard_normal((3, 5)).astype(ml_dtypes.bfloat16)},
        "l": [np.uint8(3), 2.5, 11, "text ✓", None, [], {}],
        "ä b.c": np.zeros((0, 3), np.float32),
        "scalar_arr": np.array(9.0, np.float32),
    }


def to_host(x):
    """Comparable host value: numpy arrays (PRNG keys as their key data)."""
    if isinstance(x, jax.Array):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return ("key", str(jax.random.key_impl(x)), np.asarray(jax.random.key_data(x)))
        return np.asarray(x)
    return x


def _scalar_kind(x):
    """'b', 'i' (signed or unsigned integers), 'f' or 'c' for a scalar."""
    kind = np.asarray(x).dtype.kind
    return "i" if kind == "u" else kind


def assert_bit_equal(expected, actual, path=(), scalars_loose=True):
    """Same structure; arrays (0-d ones included) with the same dtype, shape
    and bytes; scalars of the same dtype and bits. With `scalars_loose`, a
    numpy scalar may come back as a Python scalar of the same kind (Orbax
    restores np.uint8(3) as 3), but not as another kind (3.0) or value."""
    expected, actual = to_host(expected), to_host(actual)
    if isinstance(expected, dict):
        assert isinstance(actual, dict), (path, type(actual))
        assert sorted(expected) == sorted(actual), (path, sorted(expected), sorted(actual))
        for k in expected:
            assert_bit_equal(expected[k], actual[k], path + (k,), scalars_loose)
    elif isinstance(expected, list) or (isinstance(expected, tuple) and not (expected and isinstance(expected[0], str) and expected[0] == "key")):
        assert isinstance(actual, (list, tuple)), (path, type(actual))
        assert len(expected) == len(actual), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_bit_equal(e, a, path + (i,), scalars_loose)
    elif isinstance(expected, tuple):  # a PRNG key
        assert isinstance(actual, tuple) and actual[0] == "key", (path, actual)
        assert expected[1] == actual[1], path
        assert np.array_equal(expected[2], actual[2]), path
    elif isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
        # Arrays of any rank, 0-d included: a 0-d array stays an array.
        assert isinstance(expected, np.ndarray) and isinstance(actual, np.ndarray), (
            path, type(expected), type(actual))
        assert actual.dtype == expected.dtype, (path, actual.dtype, expected.dtype)
        assert actual.shape == expected.shape, (path, actual.shape, expected.shape)
        assert actual.tobytes() == expected.tobytes(), path
    elif expected is None or isinstance(expected, str):
        assert actual == expected and type(actual) is type(expected), (path, actual, expected)
    else:  # scalars: numpy scalars, Python bool/int/float
        assert isinstance(actual, (np.generic, bool, int, float, complex)), (path, type(actual))
        e = np.asarray(expected)
        a = np.asarray(actual)
        both_numpy = isinstance(expected, np.generic) and isinstance(actual, np.generic)
        if both_numpy or not scalars_loose or not isinstance(expected, np.generic):
            # Same dtype: np.float32 vs np.float32, int vs int, float vs float.
            assert a.dtype == e.dtype and type(actual) is type(expected), (
                path, type(actual), a.dtype, type(expected), e.dtype)
        else:
            assert _scalar_kind(actual) == _scalar_kind(expected), (
                path, type(actual), a.dtype, e.dtype)
        assert a.astype(e.dtype).tobytes() == e.tobytes(), (path, a, e)


def wide_tree(n=1000):
    """`n` leaves in nested dicts and lists, with dotted and spaced names."""
    tree = {}
    for i in range(n):
        group = tree.setdefault(f"layer {i // 100}", {})
        group.setdefault("w.x", []).append(np.full((2,), i, dtype=np.int32))
    return tree


def epath(path):
    """An etils Path, which Orbax's lower-level handlers take."""
    from etils import epath as _epath
    return _epath.Path(path)
