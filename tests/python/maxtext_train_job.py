"""Runs MaxText 0.2.5's own training loop (maxtext.trainers.pre_train.train)
on CPU inside the MaxText venv, with its checkpoints going through cairn or
through Orbax: a tiny decoder, synthetic data, async checkpoints every
`checkpoint_period` steps.

    python maxtext_train_job.py ENGINE OUTPUT_DIR STEPS REPORT_DIR [key=value ...]

ENGINE:
  orbax            MaxText as it ships (Orbax v1 training.Checkpointer, Orbax's PyTreeHandler)
  cairn            the one-line change for MaxText's standard checkpoints (docs/MAXTEXT.md):
                   ocp.v1.handlers.register_handler(cairn.orbax.PyTreeHandler, checkpointable_name="items")
  orbax-emergency  enable_emergency_checkpoint=true with Orbax's emergency manager
  cairn-emergency  the same with the one-line change for it (docs/MAXTEXT.md):
                   orbax...emergency.checkpoint_manager.CheckpointManager = cairn.emergency.CheckpointManager

CAIRN_TEST_KILL_AT_SAVE=N kills the process (SIGKILL) as cairn's engine
starts its N-th save. REPORT_DIR gets calls.json (how many saves and restores cairn's engine ran)
and restored/ (every array cairn's restore handed to MaxText, as .npy with
a manifest, so the test can compare it with the checkpoint on disk).
"""

import atexit
import json
import os
import runpy
import sys

ENGINE, OUTPUT, STEPS, REPORT = sys.argv[1:5]
EXTRA = sys.argv[5:]
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
os.makedirs(REPORT, exist_ok=True)

import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402

calls = {"save": 0, "restore": 0}


def _dump_restored(tree):
    import jax
    out = os.path.join(REPORT, "restored")
    os.makedirs(out, exist_ok=True)
    manifest = {}
    for n, (path, leaf) in enumerate(jax.tree_util.tree_flatten_with_path(tree)[0]):
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        a = np.asarray(leaf)
        np.save(os.path.join(out, f"{n}.npy"), a.view(np.uint16) if a.dtype.name == "bfloat16" else a)
        manifest[jax.tree_util.keystr(path)] = {"file": f"{n}.npy", "dtype": a.dtype.name}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f)


if ENGINE.startswith("cairn"):
    import cairn.emergency
    import cairn.orbax
    from cairn import _core, _orbax_restore

    if ENGINE == "cairn":
        # The one line (docs/MAXTEXT.md).
        ocp.v1.handlers.register_handler(cairn.orbax.PyTreeHandler, checkpointable_name="items")
    else:
        # The one line for the emergency manager (docs/MAXTEXT.md).
        import orbax.checkpoint.experimental.emergency.checkpoint_manager as emergency
        emergency.CheckpointManager = cairn.emergency.CheckpointManager

    real_save, real_restore = _core._engine_save, _orbax_restore.restore_item

    kill_at = int(os.environ.get("CAIRN_TEST_KILL_AT_SAVE", "0"))

    def counting_save(*args, **kwargs):
        calls["save"] += 1
        if calls["save"] == kill_at:  # the test's crash: killed as a preempted host is
            os.kill(os.getpid(), 9)
        return real_save(*args, **kwargs)

    def dumping_restore(*args, **kwargs):
        calls["restore"] += 1
        tree = real_restore(*args, **kwargs)
        _dump_restored(tree)
        return tree

    _core._engine_save = counting_save
    _orbax_restore.restore_item = dumping_restore
    if ENGINE == "cairn-emergency":
        # The emergency manager saves through its own native tiers.
        real_emergency_save = cairn.emergency.CheckpointManager.save

        def counting_emergency_save(self, *args, **kwargs):
            saved = real_emergency_save(self, *args, **kwargs)
            calls["save"] += int(bool(saved))
            return saved

        cairn.emergency.CheckpointManager.save = counting_emergency_save
    atexit.register(lambda: json.dump(calls, open(os.path.join(REPORT, "calls.json"), "w")))

import maxtext  # noqa: E402

config = os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml")
emergency_flags = []
if ENGINE.endswith("emergency"):
    emergency_flags = ["enable_emergency_checkpoint=true", f"local_checkpoint_directory={OUTPUT}/local",
                       "local_checkpoint_period=2"]
    os.makedirs(f"{OUTPUT}/local", exist_ok=True)
sys.argv = ["train", config, "run_name=tiny", f"base_output_directory={OUTPUT}", "dataset_type=synthetic",
            "hardware=cpu", f"steps={STEPS}", "per_device_batch_size=1", "max_target_length=64",
            "base_emb_dim=64", "base_num_query_heads=2", "base_num_kv_heads=2", "base_mlp_dim=128",
            "base_num_decoder_layers=2", "head_dim=32", "vocab_size=256", "enable_checkpointing=true",
            "async_checkpointing=true", "checkpoint_period=2", "skip_jax_distributed_system=true",
            "attention=dot_product", "enable_goodput_recording=false", "monitor_goodput=false",
            *emergency_flags, *EXTRA]
runpy.run_module("maxtext.trainers.pre_train.train", run_name="__main__", alter_sys=True)
