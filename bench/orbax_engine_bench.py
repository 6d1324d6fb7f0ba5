"""cairn.save / cairn.restore against orbax-checkpoint on the same state.

A 1 GiB state of 177 float32 arrays (random values, as trained weights: they
barely compress) saved durably by both, alternating who goes first, page
cache dropped before every restore; the device's own O_DIRECT bandwidth is
measured in the same run. Prints medians and cairn/orbax throughput ratios.

    python bench/orbax_engine_bench.py --dir /path/on/the/disk [--repeat 3]
        [--bytes 1073741824] [--arrays 177] [--compression default|none|auto]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, drop_caches, interleaved_medians, print_table  # noqa: E402


def make_state(total_bytes: int, count: int, seed: int = 0):
    """`count` float32 arrays of varied 2-D shapes adding up to ~total_bytes."""
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.2, 1.8, size=count)
    weights /= weights.sum()
    tree = {}
    for i, w in enumerate(weights):
        elems = max(1024, int(total_bytes * w) // 4)
        cols = 1024 if elems >= 1024 * 16 else 128
        rows = max(1, elems // cols)
        tree[f"layer_{i:03d}"] = {"w": rng.standard_normal((rows, cols), dtype=np.float32)}
    return tree


def state_bytes(tree):
    return sum(v["w"].nbytes for v in tree.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory on the device to measure (default: a temp dir)")
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--arrays", type=int, default=177)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compression", default="default", choices=["default", "none", "auto"])
    args = ap.parse_args()

    import cairn
    import orbax.checkpoint as ocp

    base = tempfile.mkdtemp(prefix="cairn-orbax-bench-", dir=args.dir)
    try:
        tree = make_state(args.bytes, args.arrays)
        nbytes = state_bytes(tree)
        counter = [0]

        def fresh(name):
            counter[0] += 1
            return os.path.join(base, f"{name}-{counter[0]}")

        paths = {}

        def clean(name):
            def setup():
                old = paths.get(name)
                if old:
                    shutil.rmtree(old, ignore_errors=True)
                paths[name] = fresh(name)
            return setup

        def cairn_save():
            cairn.save(paths["cairn"], tree, compression=args.compression)
            os.sync()  # both sides pay for the same durability

        ckptr = ocp.PyTreeCheckpointer()

        def orbax_save():
            ckptr.save(paths["orbax"], tree)
            os.sync()

        saves = interleaved_medians({"cairn": (cairn_save, clean("cairn")),
                                     "orbax": (orbax_save, clean("orbax"))}, args.repeat)
        # The last saves stay on disk for the restores.
        cairn_dir, orbax_dir = paths["cairn"], paths["orbax"]
        check = {}

        def cairn_restore():
            check["cairn"] = cairn.restore(cairn_dir)

        def orbax_restore():
            check["orbax"] = ckptr.restore(orbax_dir)

        restores = interleaved_medians(
            {"cairn": (cairn_restore, lambda: drop_caches([cairn_dir, orbax_dir])),
             "orbax": (orbax_restore, lambda: drop_caches([cairn_dir, orbax_dir]))}, args.repeat)
        for k in ("layer_000", f"layer_{args.arrays - 1:03d}"):
            assert np.array_equal(check["cairn"][k]["w"], tree[k]["w"]), k
            assert np.array_equal(check["orbax"][k]["w"], tree[k]["w"]), k
        write_bw, read_bw, tool = device_bandwidth(base, size_bytes=1 << 30, repeat=args.repeat)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    def row(op, c, o, dev):
        return [op, f"{c:.2f}", f"{o:.2f}", f"{nbytes / c / GB:.2f}", f"{nbytes / o / GB:.2f}",
                f"{o / c:.2f}x", f"{dev:.2f}", f"{nbytes / c / GB / dev:.0%}"]

    print(f"state: {nbytes / 2**30:.2f} GiB in {args.arrays} float32 arrays; compression={args.compression}; "
          f"median of {args.repeat}, alternating who goes first; device: {tool}")
    print_table(["op", "cairn s", "orbax s", "cairn GB/s", "orbax GB/s", "cairn/orbax", "device GB/s", "cairn/device"],
                [row("save (durable)", saves["cairn"], saves["orbax"], write_bw),
                 row("restore (cold)", restores["cairn"], restores["orbax"], read_bw)])


if __name__ == "__main__":
    main()
