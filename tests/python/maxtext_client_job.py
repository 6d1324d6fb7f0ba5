"""Runs INSIDE the MaxText 0.2.5 venv (Python 3.12, its own jax, flax,
orbax-checkpoint), driven by test_maxtext_client.py. Everything it calls
on checkpoints is MaxText's own code, `maxtext.common.checkpointing`.

    python maxtext_client_job.py save ROOT STEP EXPECTED_DIR PARAMS_DIR
    python maxtext_client_job.py load SPEC_DIR STEP ROOT OUT_DIR [ROOT OUT_DIR ...]
    python maxtext_client_job.py save ... + load ...   (both in one process)

`save`: a Flax TrainState (MaxText's Linen training state: step, params
{"params": {"decoder": ..., "token_embedder": ...}}, Adam's opt_state with
non-zero moments) on a 2x2 CPU mesh is saved by MaxText's
create_orbax_checkpoint_manager + save_checkpoint (async) to ROOT at STEP;
its params alone by save_params_to_path(PARAMS_DIR). Every leaf goes to
EXPECTED_DIR as `<n>.npy` (bfloat16 viewed as uint16) + manifest.json
{path: {"file", "dtype", "shape"}}.

`load`: SPEC_DIR is such a dump of the tree the checkpoints under each ROOT
hold (written by cairn). The job builds the abstract params from it
(shardings on the 2x2 mesh) and, for each ROOT, restores with
  * load_params_from_path(ROOT/STEP/items)      -> OUT_DIR/params_items
  * the same into an NNX params state            -> OUT_DIR/params_nnx
  * load_state_if_possible(load_parameters_from_path=ROOT/STEP)
                                                 -> OUT_DIR/params_step_root
  * create_orbax_checkpoint_manager(ROOT) + load_state_if_possible
    (the resume of a run: the whole TrainState)  -> OUT_DIR/resume
and writes OUT_DIR/result.json: the latest step the manager sees, the
restored shardings, and the error MaxText raises for a model whose
embedding shape differs from the checkpoint's.
"""
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402
from flax.training import train_state  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from maxtext.common import checkpointing  # noqa: E402

CONCURRENT_GB = 1


def mesh():
    return Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))


def key_name(k):
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    raise TypeError(f"unexpected key {k!r}")


def flatten(tree):
    """[(path 'a/b/0/c', leaf)] in jax's key-path order; None leaves dropped."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [("/".join(key_name(k) for k in path), leaf) for path, leaf in leaves]


def dump(tree, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    manifest = {}
    for n, (path, value) in enumerate(flatten(tree)):
        a = np.asarray(jax.device_get(value))
        dtype = str(a.dtype)
        np.save(os.path.join(out_dir, f"{n}.npy"), a.view(np.uint16) if dtype == "bfloat16" else a)
        manifest[path] = {"file": f"{n}.npy", "dtype": dtype, "shape": list(a.shape)}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f)


def unflatten(flat):
    """{'a/b': leaf} -> nested dicts."""
    out = {}
    for path, leaf in flat.items():
        node = out
        parts = path.split("/")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = leaf
    return out


def spec_for(shape):
    """Shards the first dimension on 'data' and the last on 'model' where they divide."""
    if not shape:
        return PartitionSpec()
    first = "data" if shape[0] % 2 == 0 else None
    last = "model" if len(shape) > 1 and shape[-1] % 2 == 0 else None
    return PartitionSpec(first, *([None] * (len(shape) - 2)), last) if len(shape) > 1 else PartitionSpec(first)


def model_params(m):
    """A small decoder's params collection with the names MaxText's Linen model uses."""
    rng = np.random.default_rng(11)

    def put(a, dtype=jnp.float32):
        a = jnp.asarray(a, dtype=dtype)
        return jax.device_put(a, NamedSharding(m, spec_for(a.shape)))

    f = lambda *s: rng.standard_normal(s)  # noqa: E731
    return {"params": {
        "token_embedder": {"embedding": put(f(64, 16), jnp.bfloat16)},
        "decoder": {
            "decoder_norm": {"scale": put(f(16))},
            "layers": {  # scanned layers: leading layer axis of 2
                "pre_self_attention_layer_norm": {"scale": put(f(16, 2))},
                "self_attention": {"query": {"kernel": put(f(16, 2, 4, 8), jnp.bfloat16)},
                                   "out": {"kernel": put(f(4, 2, 8, 16), jnp.bfloat16)}},
                "mlp": {"wi_0": {"kernel": put(f(16, 2, 32), jnp.bfloat16)},
                        "wo": {"kernel": put(f(32, 2, 16), jnp.bfloat16)}},
            },
            "logits_dense": {"kernel": put(f(16, 64))},
        },
    }}


def save(root, step, expected_dir, params_dir):
    m = mesh()
    params = model_params(m)
    state = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(1e-2))
    # As after some training: Adam's moments and the step counters non-zero
    # (set directly; apply_gradients would dispatch op by op, seconds on CPU).
    adam, rest = state.opt_state[0], state.opt_state[1:]
    rng = np.random.default_rng(12)

    def moment(p):
        return jax.device_put(jnp.asarray(rng.standard_normal(p.shape), p.dtype), p.sharding)

    adam = adam._replace(count=jnp.int32(step), mu=jax.tree.map(moment, params), nu=jax.tree.map(moment, params))
    state = state.replace(step=jnp.int32(step), opt_state=(adam, *rest))
    manager = checkpointing.create_orbax_checkpoint_manager(root, True, True, 1)
    assert checkpointing.save_checkpoint(manager, step, state), "MaxText declined to save"
    checkpointing.wait_until_finished(manager)
    assert checkpointing.latest_step(manager) == step, checkpointing.all_steps(manager)
    checkpointing.save_params_to_path(params_dir, state.params)
    # The tree as it is on disk: TrainState's fields (apply_fn and tx are static).
    dump({"step": state.step, "params": state.params, "opt_state": state.opt_state}, expected_dir)


def abstract_from(spec_dir, m, prefix):
    manifest = json.load(open(os.path.join(spec_dir, "manifest.json")))
    flat = {}
    for path, e in manifest.items():
        if path.startswith(prefix):
            dtype = jnp.bfloat16 if e["dtype"] == "bfloat16" else np.dtype(e["dtype"])
            flat[path[len(prefix):]] = jax.ShapeDtypeStruct(tuple(e["shape"]), dtype,
                                                            sharding=NamedSharding(m, spec_for(e["shape"])))
    return unflatten(flat)


def shardings(tree):
    return {path: str(leaf.sharding.spec) for path, leaf in flatten(tree)}


def load(root, step, spec_dir, out_dir):
    m = mesh()
    os.makedirs(out_dir, exist_ok=True)
    result = {}
    abstract_params = abstract_from(spec_dir, m, "params/")  # {"params": {"decoder": ...}}

    params = checkpointing.load_params_from_path(os.path.join(root, str(step), "items"), abstract_params,
                                                 CONCURRENT_GB)
    dump(params, os.path.join(out_dir, "params_items"))
    result["params_items_shardings"] = shardings(params)

    # An NNX model's params (bare weights as nnx.Param): MaxText reads the Linen
    # layout on disk and fills the NNX state.
    nnx_params = nnx.State(jax.tree.map(nnx.Param, abstract_params["params"]))
    restored = checkpointing.load_params_from_path(os.path.join(root, str(step), "items"), nnx_params,
                                                   CONCURRENT_GB)
    assert isinstance(restored, nnx.State), type(restored)
    dump(restored.to_pure_dict(), os.path.join(out_dir, "params_nnx"))

    none_state, params = checkpointing.load_state_if_possible(
        None, None, os.path.join(root, str(step)), "", CONCURRENT_GB,
        train_state.TrainState(step=0, apply_fn=None, params=abstract_params, tx=None, opt_state=None))
    assert none_state is None
    dump(params, os.path.join(out_dir, "params_step_root"))

    # Resuming a run: MaxText's manager on the root cairn wrote, the full TrainState.
    def make_state():
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), abstract_params)
        return train_state.TrainState.create(apply_fn=None, params=zeros, tx=optax.adam(1e-2))

    abstract_state = jax.eval_shape(make_state)
    abstract_state = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(m, spec_for(s.shape))),
        abstract_state)
    manager = checkpointing.create_orbax_checkpoint_manager(root, True, False, 1)
    result["latest_step"] = checkpointing.latest_step(manager)
    restored, no_params = checkpointing.load_state_if_possible(manager, None, "", "", CONCURRENT_GB, abstract_state)
    assert no_params is None
    s = restored["items"]
    assert isinstance(s, train_state.TrainState), type(s)
    dump({"step": s.step, "params": s.params, "opt_state": s.opt_state}, os.path.join(out_dir, "resume"))
    result["resume_shardings"] = shardings(s.params)

    # A model whose embedding is not the checkpoint's: MaxText's own check reads
    # the shape from the checkpoint's metadata and names the weight.
    wrong = jax.tree.map(lambda x: x, abstract_params)
    emb = wrong["params"]["token_embedder"]["embedding"]
    wrong["params"]["token_embedder"]["embedding"] = jax.ShapeDtypeStruct(
        (emb.shape[0] // 2,) + emb.shape[1:], emb.dtype, sharding=emb.sharding)
    try:
        checkpointing.load_params_from_path(os.path.join(root, str(step), "items"), wrong, CONCURRENT_GB)
        result["mismatch_error"] = None
    except Exception as e:  # noqa: BLE001 -- the message is what the test checks
        result["mismatch_error"] = f"{type(e).__name__}: {e}"
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump(result, f)


def main(argv):
    # Commands separated by "+" run in this one process (MaxText's import takes seconds).
    commands, current = [], []
    for a in argv:
        if a == "+":
            commands.append(current)
            current = []
        else:
            current.append(a)
    commands.append(current)
    for cmd, *args in commands:
        if cmd == "save":
            save(args[0], int(args[1]), args[2], args[3])
        elif cmd == "load":
            for root, out_dir in zip(args[2::2], args[3::2]):
                load(root, int(args[1]), args[0], out_dir)
        else:
            sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv[1:])
