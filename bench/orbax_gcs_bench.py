#!/usr/bin/env python3
"""A whole checkpoint on gs://: cairn against orbax-checkpoint, where the user stands.

The same jax state: `--mib` MiB of float32 in `--arrays` arrays (random
values), sharded by rows over 8 CPU devices. Both save it to fake-gcs-server
in Orbax's default format (OCDBT + zarr3) and restore it onto the same
sharding. Orbax writes through etils.epath -> gcsfs (metadata, markers) and
TensorStore's gcs driver (arrays); cairn through its own gs:// driver.

Every operation runs in a fresh process, with the two sides alternating who
goes first. The timed region is the call itself:
- cairn.save / ocp.PyTreeCheckpointer().save;
- cairn.restore / .restore with restore args for the target sharding.

In the same run, the emulator's own ceiling is measured: plain HTTP PUT, then
GET, of the state's bytes in 2 MiB objects over 64 connections (the "device"
here). Prints per-round times, medians, Orbax/cairn ratios and the load
average (the machines are shared).

    python bench/orbax_gcs_bench.py [--mib 256] [--arrays 16] [--repeat 4]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table, results  # noqa: E402
from objstore_bench import BUCKET, environment, load, raw_http, start_emulators  # noqa: E402

WORKER = r'''
import json, os, sys, time, logging
op, who, url, mib, narrays = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
logging.getLogger("gcsfs").setLevel(logging.ERROR)
import numpy as np
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("d",))
sharding = NamedSharding(mesh, P("d", None))
rows = int(mib * 2**20 / 4 / narrays / 1024) // 8 * 8
shape = (rows, 1024)
if op == "save":
    rng = np.random.default_rng(0)
    state = {f"layer{i:03d}": jax.device_put(rng.standard_normal(shape, dtype=np.float32), sharding)
             for i in range(narrays)}
    jax.block_until_ready(state)
    if who == "cairn":
        import cairn
        t0 = time.perf_counter(); cairn.save(url, state)
    else:
        import orbax.checkpoint as ocp
        t0 = time.perf_counter(); ocp.PyTreeCheckpointer().save(url, state)
    seconds = time.perf_counter() - t0
else:
    abstract = {f"layer{i:03d}": jax.ShapeDtypeStruct(shape, np.float32, sharding=sharding) for i in range(narrays)}
    if who == "cairn":
        import cairn
        t0 = time.perf_counter(); state = cairn.restore(url, abstract); jax.block_until_ready(state)
    else:
        import orbax.checkpoint as ocp
        args = ocp.checkpoint_utils.construct_restore_args(abstract)
        t0 = time.perf_counter()
        state = ocp.PyTreeCheckpointer().restore(url, args=ocp.args.PyTreeRestore(item=abstract, restore_args=args))
        jax.block_until_ready(state)
    seconds = time.perf_counter() - t0
    first = np.asarray(state["layer000"])
    expected = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    assert first.tobytes() == expected.tobytes(), "restored bytes differ"
print(json.dumps({"seconds": seconds, "bytes": rows * 1024 * 4 * narrays}))
'''


def run(op: str, who: str, url: str, args, env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKER, op, who, url, str(args.mib), str(args.arrays)],
                       env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"{who} {op} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=256)
    ap.add_argument("--arrays", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=4, help="rounds (even: each side goes first equally often)")
    args = ap.parse_args()
    logdir = tempfile.mkdtemp(prefix="orbax-gcs-bench-")
    procs, ends = start_emulators(logdir)
    try:
        env = environment(ends, 64)
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        env["JAX_PLATFORMS"] = "cpu"
        print(f"cairn vs orbax-checkpoint {args.mib:.0f} MiB in {args.arrays} float32 arrays over 8 CPU devices, "
              f"to and from fake-gcs-server; {args.repeat} rounds; at start: {load()}")
        chunk = 2 << 20
        n = int(args.mib * 2**20) // chunk
        data = [os.urandom(chunk) for _ in range(n)]
        put_s, get_s = raw_http("gcs", ends, data, 64, "raw/")
        ceiling = {"save": n * chunk / put_s / 1e6, "restore": n * chunk / get_s / 1e6}
        times = {(op, who): [] for op in ("save", "restore") for who in ("cairn", "orbax")}
        nbytes = 0
        for r in range(args.repeat):
            order = ("cairn", "orbax") if r % 2 == 0 else ("orbax", "cairn")
            for op in ("save", "restore"):
                for who in order:
                    out = run(op, who, f"gs://{BUCKET}/round{r}/{who}", args, env)
                    times[(op, who)].append(out["seconds"])
                    nbytes = out.get("bytes", nbytes)
            print(f"  round {r}: " + ", ".join(f"{who} {op} {times[(op, who)][-1]:.2f} s"
                                             for op in ("save", "restore") for who in order)
                  + f"; {load()}")
        rows = []
        for op in ("save", "restore"):
            c, o = times[(op, "cairn")], times[(op, "orbax")]
            per_round = [oo / cc for cc, oo in zip(c, o)]
            mc, mo = statistics.median(c), statistics.median(o)
            rows.append([op, f"{mc:.2f}", f"{mo:.2f}", f"{nbytes / mc / 1e6:.0f}", f"{nbytes / mo / 1e6:.0f}",
                         f"{mo / mc:.2f}", f"{statistics.median(per_round):.2f}",
                         f"{sum(x > 1 for x in per_round)}/{len(per_round)}", f"{ceiling[op]:.0f}",
                         f"{nbytes / mc / 1e6 / ceiling[op]:.2f}"])
        print_table(["op", "cairn s", "orbax s", "cairn MB/s", "orbax MB/s", "orbax/cairn time", "per-round",
                     "cairn ahead", "raw HTTP MB/s", "cairn/raw"], rows)
        print(f"raw HTTP: PUT then GET of {n} x 2 MiB objects over 64 connections, the emulator's own ceiling; "
              f"at end: {load()}")
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    with results("orbax_gcs_bench"):
        main()
