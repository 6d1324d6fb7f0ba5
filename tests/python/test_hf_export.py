"""Hugging Face export: a flax training state saved with cairn, converted
with `cairn convert --to safetensors --params-only --rename-preset gpt2`
(or `llama`), is loaded by the real `transformers` GPT2LMHeadModel (or
LlamaForCausalLM, whose Linear weights the preset transposes from flax's
Dense kernels), which gives the same logits as the source parameters run
through the model in numpy.

transformers and torch live in an ISOLATED venv built once under build/
(torch 2.13.0's CPU build, pinned transformers; tests/python/
hf_client_constraints.txt pins the rest) and reused while it works; if it
cannot be built the tests FAIL with pip's output. hf_client_job.py runs in it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import optax
import pytest
from flax.training import train_state
from safetensors import safe_open
from safetensors.numpy import load_file

import cairn
from client_venv import ensure_venv, run_client_job
from test_cli import run_cli

TRANSFORMERS = "5.25.0"
TORCH = "2.13.0"  # the CPU build on this machine's disk: `pip install torch==2.13.0` takes it
REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "hf_client_job.py"
CONSTRAINTS = HERE / "hf_client_constraints.txt"
STEP = 1200

# A tiny GPT-2.
VOCAB, POSITIONS, EMBED, LAYERS, HEADS = 64, 16, 32, 2, 4
CONFIG = {
    "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": VOCAB,
    "n_positions": POSITIONS, "n_embd": EMBED, "n_layer": LAYERS, "n_head": HEADS, "n_inner": None,
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0,
    "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": True, "scale_attn_weights": True,
    "bos_token_id": 0, "eos_token_id": 0,
}


@pytest.fixture(scope="session")
def hf_python():
    """The python of a venv with torch 2.13.0 (CPU) and transformers, built
    once (first build a few minutes) and reused. Python 3.11: the torch file
    on disk is for 3.11."""
    if sys.version_info[:2] != (3, 11):
        pytest.fail(f"the transformers environment needs Python 3.11 (torch {TORCH}'s CPU wheel); "
                    f"this is {sys.version.split()[0]}", pytrace=False)
    venv = pathlib.Path(os.environ.get(
        "CAIRN_HF_VENV", REPO / "build" / f"venv-transformers-{TRANSFORMERS}-torch-{TORCH}-py311"))
    return ensure_venv(venv, sys.executable, [f"torch=={TORCH}", f"transformers=={TRANSFORMERS}"],
                       what=f"transformers {TRANSFORMERS} + torch {TORCH}", constraints=CONSTRAINTS,
                       is_ready=_has_transformers_and_torch)


def _has_transformers_and_torch(venv: pathlib.Path) -> bool:
    """Whether `venv` imports the pinned transformers and torch from inside
    itself (client_venv.venv_has also imports jax, which this venv has not)."""
    python = pathlib.Path(venv) / "bin" / "python"
    if not python.exists():
        return False
    r = subprocess.run([str(python), "-c", "import torch, transformers; print(transformers.__version__, "
                        "torch.__version__, transformers.__file__, torch.__file__)"],
                       capture_output=True, text=True, timeout=300)
    got = r.stdout.split()
    return (r.returncode == 0 and len(got) == 4 and got[0] == TRANSFORMERS and got[1].startswith(TORCH)
            and all(p.startswith(str(venv)) for p in got[2:]))


def flax_gpt2_params(seed=0):
    """GPT-2's parameters under the names of transformers' Flax GPT-2, with
    nn.Dense's [in, out] kernels, random."""
    rng = np.random.default_rng(seed)

    def r(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ln():
        return {"scale": 1 + r(EMBED, scale=0.1), "bias": r(EMBED, scale=0.1)}

    blocks = {}
    for i in range(LAYERS):
        blocks[str(i)] = {
            "ln_1": ln(),
            "attn": {"c_attn": {"kernel": r(EMBED, 3 * EMBED), "bias": r(3 * EMBED)},
                     "c_proj": {"kernel": r(EMBED, EMBED), "bias": r(EMBED)}},
            "ln_2": ln(),
            "mlp": {"c_fc": {"kernel": r(EMBED, 4 * EMBED), "bias": r(4 * EMBED)},
                    "c_proj": {"kernel": r(4 * EMBED, EMBED), "bias": r(EMBED)}},
        }
    return {"transformer": {"wte": {"embedding": r(VOCAB, EMBED, scale=0.5)},
                            "wpe": {"embedding": r(POSITIONS, EMBED, scale=0.5)},
                            "h": blocks, "ln_f": ln()}}


def numpy_gpt2_logits(p, ids):
    """GPT-2's forward pass in float64 numpy: embeddings, pre-norm blocks of
    causal self-attention and a gelu_new MLP, final norm, tied head."""
    p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), p)["transformer"]

    def norm(x, w):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w["scale"] + w["bias"]

    def dense(x, w):
        return x @ w["kernel"] + w["bias"]

    def gelu_new(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    batch, length = ids.shape
    head = EMBED // HEADS
    x = p["wte"]["embedding"][ids] + p["wpe"]["embedding"][np.arange(length)]
    causal = np.tril(np.ones((length, length), bool))
    for i in range(LAYERS):
        b = p["h"][str(i)]
        q, k, v = np.split(dense(norm(x, b["ln_1"]), b["attn"]["c_attn"]), 3, axis=-1)
        q, k, v = (t.reshape(batch, length, HEADS, head).transpose(0, 2, 1, 3) for t in (q, k, v))
        scores = np.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(head), -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        attended = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, length, EMBED)
        x = x + dense(attended, b["attn"]["c_proj"])
        x = x + dense(gelu_new(dense(norm(x, b["ln_2"]), b["mlp"]["c_fc"])), b["mlp"]["c_proj"])
    return norm(x, p["ln_f"]) @ p["wte"]["embedding"].T


@pytest.fixture(scope="module")
def saved_state(tmp_path_factory):
    """A flax TrainState (params, adamw's state, step) of the tiny GPT-2,
    saved by cairn as an Orbax checkpoint at `<root>/1200/state`."""
    params = flax_gpt2_params()
    state = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adamw(1e-3))
    state = state.replace(step=STEP)
    item = tmp_path_factory.mktemp("run") / str(STEP) / "state"
    cairn.save(str(item), state)
    return item, params


def test_params_only_and_preset_name_only_the_models_parameters(saved_state, tmp_path):
    item, params = saved_state
    out = tmp_path / "hf"
    summary = cairn.convert(str(item), str(out), to="safetensors", params_only=True,
                            rename_preset="gpt2")
    tensors = load_file(str(out / "model.safetensors"))
    want = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
            "transformer.ln_f.bias"}
    for i in range(LAYERS):
        for leaf in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                     "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"):
            want.add(f"transformer.h.{i}.{leaf}")
    assert sorted(tensors) == sorted(want)  # no optimizer state, no step
    assert summary["arrays"] == len(want)
    np.testing.assert_array_equal(tensors["transformer.h.1.attn.c_attn.weight"],
                                  params["transformer"]["h"]["1"]["attn"]["c_attn"]["kernel"])
    np.testing.assert_array_equal(tensors["transformer.ln_f.weight"], params["transformer"]["ln_f"]["scale"])
    # safetensors' own reader sees the metadata transformers looks for.
    with safe_open(str(out / "model.safetensors"), framework="numpy") as f:
        assert f.metadata() == {"format": "pt", "cairn.source_format": "orbax",
                                "cairn.source_step": str(STEP)}


def test_every_safetensors_file_has_metadata(saved_state, tmp_path):
    item, _ = saved_state
    out = tmp_path / "sharded"
    r = run_cli("convert", str(item), str(out), "--to", "safetensors", "--max-file-size", "16KiB")
    assert r.returncode == 0, r.stderr
    files = sorted(out.glob("model-*.safetensors"))
    assert len(files) > 1, sorted(out.iterdir())
    for path in files:
        with safe_open(str(path), framework="numpy") as f:
            assert f.metadata()["format"] == "pt", path
            assert f.metadata()["cairn.source_step"] == str(STEP), path
    # Without --params-only everything is exported, optimizer state included.
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert "step" in index["weight_map"]
    assert any(k.startswith("opt_state.") for k in index["weight_map"])


def test_cli_names_an_unknown_preset(saved_state, tmp_path):
    item, _ = saved_state
    r = run_cli("convert", str(item), str(tmp_path / "x"), "--to", "safetensors", "--rename-preset", "gtp2")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "unknown rename preset `gtp2` (presets: gpt2, llama)" in r.stderr
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())
    with pytest.raises(ValueError, match=r"unknown rename preset `gtp2` \(presets: gpt2, llama\)"):
        cairn.convert(str(item), str(tmp_path / "y"), to="safetensors", rename_preset="gtp2")


def test_gpt2_preset_transposes_transformers_flax_conv1d_layout(saved_state, tmp_path):
    """transformers' FlaxConv1D keeps kernels [out, in], PyTorch's Conv1D
    [in, out]: the preset transposes them, so both flax layouts of one model
    export the same file contents."""
    _, params = saved_state
    conv = jax.tree_util.tree_map(np.array, params)
    for block in conv["transformer"]["h"].values():
        for layer in (block["attn"]["c_attn"], block["attn"]["c_proj"], block["mlp"]["c_fc"],
                      block["mlp"]["c_proj"]):
            layer["kernel"] = np.ascontiguousarray(layer["kernel"].T)
    item = tmp_path / "conv1d" / "7" / "state"
    cairn.save(str(item), {"params": conv, "step": np.int64(7)})
    cairn.convert(str(item), str(tmp_path / "conv"), to="safetensors", params_only=True,
                  rename_preset="gpt2", verify=True)
    dense_item = tmp_path / "dense" / "7" / "state"
    cairn.save(str(dense_item), {"params": params, "step": np.int64(7)})
    cairn.convert(str(dense_item), str(tmp_path / "dense_out"), to="safetensors", params_only=True,
                  rename_preset="gpt2")
    got = load_file(str(tmp_path / "conv" / "model.safetensors"))
    want = load_file(str(tmp_path / "dense_out" / "model.safetensors"))
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # A c_attn kernel of neither layout is refused, naming it.
    odd = jax.tree_util.tree_map(np.array, params)
    odd["transformer"]["h"]["0"]["attn"]["c_attn"]["kernel"] = np.zeros((EMBED, 2 * EMBED), np.float32)
    odd_item = tmp_path / "odd" / "7" / "state"
    cairn.save(str(odd_item), {"params": odd})
    with pytest.raises(ValueError, match=r"array `params\.transformer\.h\.0\.attn\.c_attn\.kernel` "
                                         r"has shape \[32, 64\], neither"):
        cairn.convert(str(odd_item), str(tmp_path / "odd_out"), to="safetensors", params_only=True,
                      rename_preset="gpt2")


def test_transformers_loads_the_export_with_the_same_logits(saved_state, tmp_path, hf_python):
    item, params = saved_state
    out = tmp_path / "gpt2"
    r = run_cli("convert", str(item), str(out), "--to", "safetensors", "--params-only",
                "--rename-preset", "gpt2", "--verify")
    assert r.returncode == 0, r.stderr
    (out / "config.json").write_text(json.dumps(CONFIG))
    ids = np.random.default_rng(1).integers(0, VOCAB, size=(2, POSITIONS)).astype(np.int64)
    np.save(tmp_path / "ids.npy", ids)
    run_client_job(hf_python, JOB, "transformers", out, tmp_path / "ids.npy", tmp_path, "GPT2LMHeadModel")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["transformers"] == TRANSFORMERS and report["torch"].startswith(TORCH), report
    assert report["missing_keys"] == [] and report["unexpected_keys"] == [], report
    assert report["mismatched_keys"] == [], report
    assert report["dtype"] == "torch.float32"
    assert report["metadata"]["format"] == "pt"
    logits = np.load(tmp_path / "logits.npy")
    want = numpy_gpt2_logits(params, ids)
    assert logits.shape == (2, POSITIONS, VOCAB)
    assert np.abs(want).max() > 1  # not a degenerate model
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


# A tiny Llama with grouped-query attention (4 query heads, 2 key/value heads).
L_VOCAB, L_EMBED, L_FFN, L_LAYERS, L_HEADS, L_KV_HEADS, L_HEAD_DIM, L_LENGTH = 64, 32, 48, 2, 4, 2, 8, 12
LLAMA_CONFIG = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": L_VOCAB,
    "hidden_size": L_EMBED, "intermediate_size": L_FFN, "num_hidden_layers": L_LAYERS,
    "num_attention_heads": L_HEADS, "num_key_value_heads": L_KV_HEADS, "head_dim": L_HEAD_DIM,
    "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
    "bos_token_id": 0, "eos_token_id": 0,
}


def flax_llama_params(seed=3):
    """Llama's parameters under the names of transformers' Flax Llama
    (nn.Dense kernels [in, out], nn.Embed, RMS norms' `weight`), random."""
    rng = np.random.default_rng(seed)

    def r(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    layers = {}
    for i in range(L_LAYERS):
        layers[str(i)] = {
            "input_layernorm": {"weight": 1 + r(L_EMBED, scale=0.1)},
            "self_attn": {"q_proj": {"kernel": r(L_EMBED, L_HEADS * L_HEAD_DIM)},
                          "k_proj": {"kernel": r(L_EMBED, L_KV_HEADS * L_HEAD_DIM)},
                          "v_proj": {"kernel": r(L_EMBED, L_KV_HEADS * L_HEAD_DIM)},
                          "o_proj": {"kernel": r(L_HEADS * L_HEAD_DIM, L_EMBED)}},
            "post_attention_layernorm": {"weight": 1 + r(L_EMBED, scale=0.1)},
            "mlp": {"gate_proj": {"kernel": r(L_EMBED, L_FFN)}, "up_proj": {"kernel": r(L_EMBED, L_FFN)},
                    "down_proj": {"kernel": r(L_FFN, L_EMBED)}},
        }
    return {"model": {"embed_tokens": {"embedding": r(L_VOCAB, L_EMBED, scale=0.5)}, "layers": layers,
                      "norm": {"weight": 1 + r(L_EMBED, scale=0.1)}},
            "lm_head": {"kernel": r(L_EMBED, L_VOCAB)}}


def numpy_llama_logits(p, ids):
    """Llama's forward pass in float64 numpy, on flax's [in, out] kernels:
    RMS norms, rotary embeddings (rotating halves), grouped-query causal
    attention, a SwiGLU MLP, an untied head."""
    p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), p)

    def rms(x, w):
        return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5) * w["weight"]

    def rotate(x, cos, sin):  # x: [batch, heads, length, head_dim]
        half = x.shape[-1] // 2
        return x * cos + np.concatenate([-x[..., half:], x[..., :half]], -1) * sin

    batch, length = ids.shape
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, L_HEAD_DIM, 2) / L_HEAD_DIM))
    angles = np.arange(length)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(np.concatenate([angles] * 2, -1)), np.sin(np.concatenate([angles] * 2, -1))
    causal = np.tril(np.ones((length, length), bool))
    x = p["model"]["embed_tokens"]["embedding"][ids]
    for i in range(L_LAYERS):
        b = p["model"]["layers"][str(i)]
        a = b["self_attn"]
        h = rms(x, b["input_layernorm"])

        def heads(t, n):
            return t.reshape(batch, length, n, L_HEAD_DIM).transpose(0, 2, 1, 3)

        q = rotate(heads(h @ a["q_proj"]["kernel"], L_HEADS), cos, sin)
        k = rotate(heads(h @ a["k_proj"]["kernel"], L_KV_HEADS), cos, sin)
        v = heads(h @ a["v_proj"]["kernel"], L_KV_HEADS)
        group = L_HEADS // L_KV_HEADS
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(L_HEAD_DIM), -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        x = x + (weights @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1) @ a["o_proj"]["kernel"]
        m = b["mlp"]
        h = rms(x, b["post_attention_layernorm"])
        gate = h @ m["gate_proj"]["kernel"]
        x = x + (gate / (1 + np.exp(-gate)) * (h @ m["up_proj"]["kernel"])) @ m["down_proj"]["kernel"]
    return rms(x, p["model"]["norm"]) @ p["lm_head"]["kernel"]


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_transformers_loads_a_llama_export_with_transposed_weights(tmp_path, hf_python, family):
    """A flax TrainState of a tiny Llama (adamw), saved by cairn, exported
    with --rename-preset llama: every Dense kernel becomes a PyTorch Linear
    weight ([out, in]), and transformers' LlamaForCausalLM (and
    MistralForCausalLM, whose names and layouts are Llama's) gives the numpy
    model's logits."""
    params = flax_llama_params()
    state = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adamw(1e-3))
    item = tmp_path / "run" / "300" / "state"
    cairn.save(str(item), state.replace(step=300))
    out = tmp_path / "llama"
    # A small budget: the transposed kernels are copied in several slabs.
    r = run_cli("convert", str(item), str(out), "--to", "safetensors", "--params-only",
                "--rename-preset", "llama", "--verify", "--memory-budget", "1MiB")
    assert r.returncode == 0, r.stderr
    tensors = load_file(str(out / "model.safetensors"))
    q = params["model"]["layers"]["1"]["self_attn"]["q_proj"]["kernel"]
    np.testing.assert_array_equal(tensors["model.layers.1.self_attn.q_proj.weight"], q.T)
    np.testing.assert_array_equal(tensors["lm_head.weight"], params["lm_head"]["kernel"].T)
    np.testing.assert_array_equal(tensors["model.embed_tokens.weight"],
                                  params["model"]["embed_tokens"]["embedding"])
    assert not any(k.startswith("opt_state") or k == "step" for k in tensors)
    architecture = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM"}[family]
    config = dict(LLAMA_CONFIG, model_type=family, architectures=[architecture])
    if family == "mistral":
        config["sliding_window"] = None  # full causal attention, as the numpy model
    (out / "config.json").write_text(json.dumps(config))
    ids = np.random.default_rng(2).integers(0, L_VOCAB, size=(2, L_LENGTH)).astype(np.int64)
    np.save(tmp_path / "ids.npy", ids)
    run_client_job(hf_python, JOB, "transformers", out, tmp_path / "ids.npy", tmp_path, architecture)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["missing_keys"] == [] and report["unexpected_keys"] == [], report
    assert report["mismatched_keys"] == [], report
    logits = np.load(tmp_path / "logits.npy")
    want = numpy_llama_logits(params, ids)
    assert logits.shape == (2, L_LENGTH, L_VOCAB)
    assert np.abs(want).max() > 1  # not a degenerate model
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
