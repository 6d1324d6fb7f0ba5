"""Worker for test_concurrent_saves.py: one of two processes that each save
step STEP of the same checkpoint root, round after round, with its own
values (tree_for), as a preempted job's async save still finishing and its
restarted job's save do.

Usage: concurrent_save_worker.py <config.json>; the config names this
worker ("a" or "b"), the other worker, the number of rounds, the root URL
of each round (`roots`), and a local directory for the barrier files.

Per round: writes `<barrier>/ready-<round>-<me>` and waits until the other
worker's file exists (both then call cairn.save within a millisecond or
so), saves, and records the CLOCK_MONOTONIC time (shared by all processes
on the machine) just before and just after the call, and the outcome: ok,
or the exception's type and message. Writes all rounds as JSON to
`<out>`. Imports only cairn and numpy (no jax): cheap to start.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

STEP = 7
BARRIER_TIMEOUT_S = 60.0


def tree_for(worker: str, round_index: int) -> dict:
    """The tree `worker` saves in round `round_index`: distinct between the
    workers and the rounds; ~1.3 MiB in four arrays of three dtypes."""
    rng = np.random.default_rng([ord(worker), round_index])
    return {
        "params": {
            "w": rng.standard_normal((256, 512), dtype=np.float32),
            "b": rng.integers(-2**31, 2**31, size=(4096,), dtype=np.int32),
        },
        "opt": {"mu": rng.standard_normal((128, 1024), dtype=np.float64)},
        "step": np.asarray(round_index * 1000 + ord(worker), dtype=np.int64),
    }


def _now() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def _barrier(directory: str, round_index: int, me: str, other: str) -> None:
    with open(os.path.join(directory, f"ready-{round_index}-{me}"), "x"):
        pass
    theirs = os.path.join(directory, f"ready-{round_index}-{other}")
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while not os.path.exists(theirs):
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {other} did not reach round {round_index} within {BARRIER_TIMEOUT_S} s")
        time.sleep(0.0002)


def main() -> None:
    import cairn

    config = json.load(open(sys.argv[1]))
    me, other = config["me"], config["other"]
    results = []
    for r, root in enumerate(config["roots"]):
        tree = tree_for(me, r)
        _barrier(config["barrier"], r, me, other)
        start = _now()
        try:
            path = cairn.save(root, tree, step=STEP)
            outcome = {"ok": True, "path": path}
        except Exception as e:  # noqa: BLE001 - the test checks what it was
            outcome = {"ok": False, "type": type(e).__name__, "message": str(e)}
        outcome.update(start_ns=start, end_ns=_now())
        results.append(outcome)
    with open(config["out"], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
