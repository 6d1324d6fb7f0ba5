"""OCDBT benchmark: cairn against TensorStore, same work, same run.

1 GiB of values in 1,000 keys (1 MiB each) and in 100,000 keys (~10.7 KB
each), written as ONE commit (cairn: put_many; TensorStore: one transaction)
and read back in full (cairn: get_many; TensorStore: all reads in flight,
then wait), with the page cache dropped before every read. Both use Orbax's
config (max_inline_value_bytes 1024, max_decoded_node_bytes 100000000, 2 GiB
data files). Prints GB/s, keys/s, the ratio cairn/TensorStore and the
device's own O_DIRECT bandwidth measured in the same run.

    python3 bench/ocdbt_bench.py [--dir /path/on/device] [--repeat 3] [--total-mib 1024]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import tensorstore as ts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GB, device_bandwidth, drop_caches, interleaved_medians, print_table, results  # noqa: E402

import cairn  # noqa: E402

CONFIG = {"max_inline_value_bytes": 1024, "max_decoded_node_bytes": 100000000}


def make_values(total: int, n_keys: int) -> dict[str, bytes]:
    size = total // n_keys
    block = os.urandom(size + n_keys)
    return {f"params.layer{i % 97}/c/{i}": block[i % n_keys:i % n_keys + size]
            for i in range(n_keys)}


def cairn_write(path, items):
    store = cairn.kvstore.open({"driver": "ocdbt", "base": f"file://{path}/", "config": CONFIG,
                                "target_data_file_size": 2 << 30})
    store.put_many(items)


def cairn_read(path, keys):
    store = cairn.kvstore.open({"driver": "ocdbt", "base": f"file://{path}/"})
    values = store._core.get_many(keys)
    assert all(v is not None for v in values)
    return values


def ts_write(path, items):
    store = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{path}/", "config": CONFIG,
                             "target_data_file_size": 2 << 30}).result()
    txn = ts.Transaction()
    t = store.with_transaction(txn)
    futures = [t.write(k, v) for k, v in items.items()]
    for f in futures:
        f.result()
    txn.commit_async().result()


def ts_read(path, keys):
    store = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{path}/"}).result()
    futures = [store.read(k) for k in keys]
    values = [f.result().value for f in futures]
    assert all(len(v) > 0 for v in values)
    return values


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--total-mib", type=int, default=1024)
    args = ap.parse_args()
    total = args.total_mib << 20
    work = tempfile.mkdtemp(prefix="ocdbt-bench-", dir=args.dir)
    try:
        wbw, rbw, tool = device_bandwidth(work)
        print(f"device ({tool}, O_DIRECT): write {wbw:.2f} GB/s, read {rbw:.2f} GB/s")
        rows = []
        for n_keys in (1000, 100000):
            items = make_values(total, n_keys)
            keys = list(items)
            nbytes = sum(len(v) for v in items.values())
            impls = {"cairn": (cairn_write, cairn_read), "tensorstore": (ts_write, ts_read)}
            paths = {name: os.path.join(work, f"{name}-{n_keys}") for name in impls}

            def writer(name):
                return (lambda: impls[name][0](paths[name], items),
                        lambda: shutil.rmtree(paths[name], ignore_errors=True))

            def reader(name):
                return (lambda: impls[name][1](paths[name], keys),
                        lambda: drop_caches([paths[name]]))

            # cairn and TensorStore take turns to go first (interleaved_medians).
            w = interleaved_medians({n: writer(n) for n in impls}, args.repeat)
            for name, (_, read) in impls.items():
                got = read(paths[name], keys[:50])
                assert got == [items[k] for k in keys[:50]], name
            r = interleaved_medians({n: reader(n) for n in impls}, args.repeat)
            results = {n: (w[n], r[n]) for n in impls}
            for op, idx in (("write", 0), ("read", 1)):
                c, t = results["cairn"][idx], results["tensorstore"][idx]
                dev = wbw if op == "write" else rbw
                rows.append([f"{n_keys} keys", op,
                             f"{nbytes / c / GB:.2f}", f"{nbytes / t / GB:.2f}",
                             f"{n_keys / c:,.0f}", f"{n_keys / t:,.0f}",
                             f"{t / c:.2f}x", f"{nbytes / c / GB / dev:.0%}"])
            del items
        print_table(["case", "op", "cairn GB/s", "TS GB/s", "cairn keys/s", "TS keys/s",
                     "cairn/TS", "cairn/device"], rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    with results("ocdbt_bench"):
        main()
