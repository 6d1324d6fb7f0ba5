"""Hugging Face export of a flax Llama's parameters: `cairn convert --to
safetensors --params-only --rename-preset llama` (renames, transposes every
Dense kernel to a Linear weight, streams within its memory budget) against
the naive way a user writes it (orbax-checkpoint restores the training
state, numpy transposes, safetensors' save_file writes), in the same run,
against the device's read+write bound measured in that run.

The source: a flax TrainState-like tree {"params": ..., "opt_state": (mu,
nu), "step"} of a Llama (transformers' Flax names) of about --gib GiB of
parameters, float32, saved by cairn as an Orbax checkpoint (OCDBT + zarr3).
Both tools export the parameters only; the outputs are compared tensor by
tensor.

    python3 bench/hf_export_bench.py [--gib 1] [--dir /path/on/device] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, print_table, results  # noqa: E402
from convert_bench import cairn_exe, measured  # noqa: E402

# Writes the source checkpoint: argv = item directory, GiB of parameters.
MAKE_SOURCE = r"""
import sys
import numpy as np
import cairn

item, gib = sys.argv[1], float(sys.argv[2])
E, F, V = 2048, 5632, 32000
per_layer = (4 * E * E + 3 * E * F + 2 * E) * 4
layers = max(1, int((gib * 2**30 - 2 * V * E * 4) // per_layer))
rng = np.random.default_rng(0)
w = lambda *s: (rng.standard_normal(s, dtype=np.float32) * 0.02)
params = {"model": {"embed_tokens": {"embedding": w(V, E)}, "norm": {"weight": np.ones(E, np.float32)},
                    "layers": {}},
          "lm_head": {"kernel": w(E, V)}}
for i in range(layers):
    params["model"]["layers"][str(i)] = {
        "input_layernorm": {"weight": np.ones(E, np.float32)},
        "post_attention_layernorm": {"weight": np.ones(E, np.float32)},
        "self_attn": {n: {"kernel": w(E, E)} for n in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "mlp": {"gate_proj": {"kernel": w(E, F)}, "up_proj": {"kernel": w(E, F)}, "down_proj": {"kernel": w(F, E)}},
    }
# adam's state mirrors the parameters (zeros: small on disk); the export leaves it out.
zeros = lambda t: {k: zeros(v) if isinstance(v, dict) else np.zeros_like(v) for k, v in t.items()}
cairn.save(item, {"params": params, "opt_state": {"mu": zeros(params), "nu": zeros(params)},
                  "step": np.int64(1000)})
print(layers)
"""

# The naive export: argv = item directory, output file.
NAIVE = r"""
import sys
import numpy as np
import orbax.checkpoint as ocp
from safetensors.numpy import save_file

item, out = sys.argv[1], sys.argv[2]
state = ocp.PyTreeCheckpointer().restore(item)
flat = {}
def walk(prefix, t):
    for k, v in t.items():
        if isinstance(v, dict):
            walk(prefix + k + ".", v)
        else:
            a = np.asarray(v)
            if k == "kernel":
                flat[prefix + "weight"] = np.ascontiguousarray(a.T)
            elif k in ("embedding", "scale"):
                flat[prefix + "weight"] = a
            else:
                flat[prefix + k] = a
walk("", state["params"])
save_file(flat, out, metadata={"format": "pt"})
"""

COMPARE = r"""
import sys
import numpy as np
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a)[:5], sorted(b)[:5])
for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)
print(len(a))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="GiB of parameters (default 1)")
    parser.add_argument("--dir", default=None, help="a directory on the device to measure")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="cairn-hf-bench-", dir=args.dir)
    try:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the start")
        item = os.path.join(work, "run", "1000", "state")
        layers = subprocess.run([sys.executable, "-c", MAKE_SOURCE, item, str(args.gib)], check=True,
                                capture_output=True, text=True).stdout.strip()
        write_bw, read_bw, tool = device_bandwidth(work)
        bound = 1 / (1 / read_bw + 1 / write_bw)
        print(f"device: read {read_bw:.2f} GB/s, write {write_bw:.2f} GB/s ({tool}); "
              f"read+write bound {bound:.2f} GB/s")
        cairn_out, naive_out = os.path.join(work, "cairn"), os.path.join(work, "naive.safetensors")
        runs = {"cairn convert --params-only --rename-preset llama": [], "naive (orbax restore + numpy .T + "
                "safetensors save_file)": []}
        for _ in range(args.repeat):
            shutil.rmtree(cairn_out, ignore_errors=True)
            runs["cairn convert --params-only --rename-preset llama"].append(measured(
                [cairn_exe(), "convert", item, cairn_out, "--to", "safetensors", "--params-only",
                 "--rename-preset", "llama"], [item])[:2])
            if os.path.exists(naive_out):
                os.remove(naive_out)
            runs["naive (orbax restore + numpy .T + safetensors save_file)"].append(measured(
                [sys.executable, "-c", NAIVE, item, naive_out], [item])[:2])
        params_bytes = os.path.getsize(os.path.join(cairn_out, "model.safetensors"))
        tensors = subprocess.run([sys.executable, "-c", COMPARE, os.path.join(cairn_out, "model.safetensors"),
                                  naive_out], check=True, capture_output=True, text=True).stdout.strip()
        print(f"source: a Llama of {layers} layers (transformers' Flax names), {params_bytes / 2**30:.2f} GiB of "
              f"float32 parameters plus adam's state, saved by cairn (Orbax OCDBT + zarr3); both exports hold "
              f"the same {tensors} tensors, bit for bit")
        naive_s = statistics.median(s for s, _ in runs["naive (orbax restore + numpy .T + safetensors save_file)"])
        rows = []
        for name, values in runs.items():
            s = statistics.median(v for v, _ in values)
            rss = statistics.median(r for _, r in values)
            rows.append([name, f"{s:.2f}", f"{params_bytes / s / GB:.2f}", f"{rss:.0f}", f"{naive_s / s:.2f}x",
                         f"{params_bytes / s / GB / bound:.0%}"])
        print()
        print_table(["tool", "seconds (median)", "GB/s", "peak RSS MiB", "speed vs naive", "of device r+w bound"],
                    rows)
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    with results("hf_export_bench"):
        code = main()
    sys.exit(code)
