"""Runs inside the isolated transformers + torch venv (test_hf_export.py):
loads a converted checkpoint directory with transformers'
from_pretrained of ARCHITECTURE (GPT2LMHeadModel, LlamaForCausalLM, ...),
offline, and writes its logits for the given token ids and what the loader
reported.

    python hf_client_job.py MODEL_DIR IDS.npy OUT_DIR ARCHITECTURE
"""

import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # no hub: everything comes from MODEL_DIR
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np
import torch
import transformers
from safetensors import safe_open


def main(model_dir, ids_file, out_dir, architecture):
    model, info = getattr(transformers, architecture).from_pretrained(
        model_dir, output_loading_info=True, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    ids = torch.from_numpy(np.load(ids_file))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    np.save(os.path.join(out_dir, "logits.npy"), logits.numpy())
    with safe_open(os.path.join(model_dir, "model.safetensors"), framework="pt") as f:
        metadata = f.metadata()
    report = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "missing_keys": sorted(info["missing_keys"]),
        "unexpected_keys": sorted(info["unexpected_keys"]),
        "mismatched_keys": [list(map(str, k)) for k in info.get("mismatched_keys", [])],
        "metadata": metadata,
        "dtype": str(next(model.parameters()).dtype),
    }
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(*sys.argv[1:5])
