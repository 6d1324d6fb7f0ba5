"""MaxText 0.2.5's own training loop on CPU with its checkpoints through
cairn and through Orbax (the same loop, the same model, the same run):
train-step time around save steps, the whole run's wall time, and the
checkpoint's size against the device's write bandwidth measured in this run.

    python3 bench/maxtext_bench.py [--steps 20] [--period 5] [--repeat 2]

Needs the MaxText venv the tests build (tests/python/maxtext_venv.py:
build/venv-maxtext-0.2.5-py312 with this checkout's cairn installed; run
`python3 -m pytest tests/python/test_maxtext_training.py` once first).
Runs tests/python/maxtext_train_job.py with a larger decoder than the
tests' (emb 512, mlp 2048, 4 layers, vocab 32000: ~0.4 GB of state per
checkpoint), alternating the engines.

A save is started after step s (s a multiple of the period); MaxText's
"seconds" of step s+1 then include what the save took from training (the
stall: copying what the caller may change, starting the writes). The table
gives the median over the run's steps that follow a save against the median
of the other steps.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import device_bandwidth, print_table, results  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
JOB = REPO / "tests" / "python" / "maxtext_train_job.py"
STEP_LINE = re.compile(r"completed step: (\d+), seconds: ([\d.]+)")
MODEL = ["base_emb_dim=512", "base_mlp_dim=2048", "base_num_decoder_layers=4", "base_num_query_heads=8",
         "base_num_kv_heads=8", "head_dim=64", "vocab_size=32000", "max_target_length=128"]


def run(python, engine, directory, steps, period):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS", "JAX_PLATFORMS")}
    start = time.perf_counter()
    r = subprocess.run([python, str(JOB), engine, str(directory / "run"), str(steps), str(directory / "report"),
                        *MODEL, f"checkpoint_period={period}"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"{engine} run failed:\n{(r.stdout + r.stderr)[-4000:]}")
    seconds = {int(m.group(1)): float(m.group(2)) for m in STEP_LINE.finditer(r.stdout + r.stderr)}
    ckpt = directory / "run" / "tiny" / "checkpoints"
    size = sum(f.stat().st_size for f in (ckpt / "0").rglob("*") if f.is_file())
    return seconds, wall, size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=str(REPO / "build" / "venv-maxtext-0.2.5-py312" / "bin" / "python"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--period", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--directory", default=tempfile.gettempdir())
    args = ap.parse_args()
    after_save = {"orbax": [], "cairn": []}
    other = {"orbax": [], "cairn": []}
    walls = {"orbax": [], "cairn": []}
    size = 0
    for i in range(args.repeat):
        for engine in (("orbax", "cairn") if i % 2 == 0 else ("cairn", "orbax")):
            d = pathlib.Path(tempfile.mkdtemp(prefix=f"maxtext-{engine}-", dir=args.directory))
            try:
                seconds, wall, size = run(args.python, engine, d, args.steps, args.period)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            saves = {s for s in seconds if s % args.period == 0}
            for s, t in seconds.items():
                if s == 0 or s == 1:
                    continue  # compilation
                (after_save if s - 1 in saves else other)[engine].append(t)
            walls[engine].append(wall)
    write_bw, _, tool = device_bandwidth(args.directory, size_bytes=512 << 20)
    rows = []
    for engine in ("orbax", "cairn"):
        rows.append([engine, f"{statistics.median(after_save[engine]):.3f}", f"{statistics.median(other[engine]):.3f}",
                     f"{statistics.median(walls[engine]):.1f}"])
    print(f"MaxText 0.2.5, {args.steps} steps, a save every {args.period}, {args.repeat} runs each; "
          f"checkpoint {size / 1e9:.2f} GB; device write {write_bw:.2f} GB/s ({tool}): "
          f"the checkpoint's write floor is {size / 1e9 / write_bw:.2f} s")
    print_table(["engine", "step after a save (s, median)", "other steps (s, median)", "run wall (s, median)"], rows)
    o, c = (statistics.median(after_save[e]) for e in ("orbax", "cairn"))
    print(f"step after a save: cairn {o / c:.2f}x faster than Orbax; "
          f"run wall: cairn {statistics.median(walls['orbax']) / statistics.median(walls['cairn']):.2f}x")


if __name__ == "__main__":
    with results("maxtext_bench"):
        main()
