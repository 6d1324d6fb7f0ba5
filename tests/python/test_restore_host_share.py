"""Real jax.distributed processes on one host restoring onto another
sharding decode each shared compressed chunk once between them
(src/cairn/engine/restore_host_share.h): 4 processes save one array by
rows, restore it by columns (each needs a quarter of every stored chunk),
bit-exactly, with every chunk decoded by exactly one process and the other
parts copied out of the host's shared file; restoring onto the saved rows
shares nothing."""

from __future__ import annotations

import json

import pytest

from mp_workers import launch

WORKER = launch.HERE / "host_share_worker.py"
CHUNKS = 8  # the worker's array, saved by rows over 8 devices


@pytest.mark.parametrize("nproc", [2, 4])
def test_processes_of_one_host_decode_each_shared_chunk_once(tmp_path, nproc):
    out = tmp_path / "out"
    out.mkdir()
    launch.run(tmp_path / "logs", nproc, [], worker=WORKER, timeout=240,
               extra_config={"dir": str(tmp_path / "ckpt"), "out": str(out)})
    results = [json.loads((out / f"process_{i}.json").read_text()) for i in range(nproc)]
    decoded = 0
    for i, r in enumerate(results):
        cols, rows = r["cols"], r["rows"]
        assert cols["exact"] and rows["exact"], f"process {i}: {r}"
        s = cols["stats"]
        # Each process owns its share of the 8 chunks and copies the rest.
        assert s["chunks_decoded_for_host"] == CHUNKS // nproc, f"process {i}: {s}"
        assert s["chunks_from_host"] == CHUNKS - CHUNKS // nproc, f"process {i}: {s}"
        assert s["chunks_read"] == 0 and s["chunks_fallen_back"] == 0, f"process {i}: {s}"
        decoded += s["chunks_decoded_for_host"]
        # Onto the saved rows each process reads its own chunks only.
        assert rows["stats"]["chunks_from_host"] == 0 and rows["stats"]["chunks_decoded_for_host"] == 0
        assert rows["stats"]["chunks_read"] == CHUNKS // nproc, f"process {i}: {rows}"
    assert decoded == CHUNKS
