"""Checkpoints on object stores: everything above the KvStore (cairn.save and
restore, cairn.CheckpointManager, cairn.convert, the `cairn` CLI) run on
s3:// (moto's S3 server) and gs:// (fake-gcs-server) URLs, both emulators
started by the tests on free localhost ports.

Peers: TensorStore's own s3 and gcs drivers read the arrays cairn saved
there bit-exactly; a checkpoint orbax-checkpoint wrote locally, uploaded
object by object, restores with cairn. Commits on these stores have no
rename: `commit_success.txt` written last marks a finished step, so an
interrupted save (connections dropped until the retries run out, or the
process killed before the commit) never shows as a step.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import urllib.parse

import numpy as np
import pytest
import tensorstore as ts

import cairn
from s3_helpers import FakeGcsServer, FaultProxy, MotoServer, gcs_environment, s3_environment
from test_cli import run_cli

S3_BUCKET = "cairn-ckpt-s3"
GCS_BUCKET = "cairn-ckpt-gcs"


@pytest.fixture(scope="module")
def moto():
    server = MotoServer()
    server.create_bucket(S3_BUCKET)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fake_gcs():
    server = FakeGcsServer.shared()
    server.create_bucket(GCS_BUCKET)
    return server


_counter = [0]


class ObjectStore:
    """One emulator as the tests see it: cairn's URLs, TensorStore's specs,
    and where cairn's driver is pointed (the emulator or a proxy)."""

    def __init__(self, scheme, bucket, server, monkeypatch, tmp_path):
        self.scheme, self.bucket, self.server = scheme, bucket, server
        self.monkeypatch, self.tmp_path = monkeypatch, tmp_path
        self.point_cairn_at(server.endpoint)

    def point_cairn_at(self, endpoint):
        if self.scheme == "s3":
            s3_environment(self.monkeypatch, endpoint, self.tmp_path)
        else:
            gcs_environment(self.monkeypatch, self.server.endpoint)  # TensorStore: the emulator
            self.monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)

    def fresh(self, name):
        """A prefix (no trailing '/') no other test uses."""
        _counter[0] += 1
        return f"{name}-{os.getpid()}-{_counter[0]}"

    def url(self, path):
        return f"{self.scheme}://{self.bucket}/{path}"

    def ts_kv(self, path):
        if not path.endswith("/"):
            path += "/"
        if self.scheme == "s3":
            return {"driver": "s3", "bucket": self.bucket, "path": path,
                    "endpoint": self.server.endpoint, "aws_region": "us-east-1"}
        return {"driver": "gcs", "bucket": self.bucket, "path": path}

    def keys(self, path):
        """Every object under `path/`, by TensorStore's driver (relative keys)."""
        kv = ts.KvStore.open(self.ts_kv(path)).result()
        return sorted(k.decode() for k in kv.list().result())

    def upload(self, local_dir, path):
        """Copies every file under `local_dir` to an object under `path/`."""
        kv = ts.KvStore.open(self.ts_kv(path)).result()
        count = 0
        for dirpath, _, files in os.walk(local_dir):
            for f in files:
                full = os.path.join(dirpath, f)
                with open(full, "rb") as fh:
                    kv.write(os.path.relpath(full, local_dir), fh.read()).result()
                count += 1
        return count


@pytest.fixture(params=["s3", "gs"])
def store(request, monkeypatch, tmp_path):
    if request.param == "s3":
        return ObjectStore("s3", S3_BUCKET, request.getfixturevalue("moto"), monkeypatch, tmp_path)
    return ObjectStore("gs", GCS_BUCKET, request.getfixturevalue("fake_gcs"), monkeypatch, tmp_path)


def step_tree(step):
    rng = np.random.default_rng(step)
    return {"w": rng.standard_normal((16, 8)).astype(np.float32),
            "b": {"c": np.arange(7, dtype=np.int64) * (step + 1),
                  "h": rng.standard_normal((3, 5)).astype(np.float16)}}


def assert_tree_equal(expected, actual):
    assert sorted(expected) == sorted(actual)
    for k, v in expected.items():
        if isinstance(v, dict):
            assert_tree_equal(v, actual[k])
        else:
            a = np.asarray(actual[k])
            assert a.dtype == v.dtype and a.shape == v.shape and a.tobytes() == v.tobytes(), k






# ---- cairn.save / restore ----------------------------------------------------

def test_save_is_read_by_tensorstore_and_restored(store):
    p = store.fresh("save")
    tree = step_tree(1)
    path = cairn.save(store.url(p), tree)
    assert path == store.url(p)
    keys = store.keys(p)
    assert keys[-1] == "commit_success.txt" or "commit_success.txt" in keys
    assert "_METADATA" in keys and "manifest.ocdbt" in keys
    assert not any(".orbax-checkpoint-tmp" in k for k in keys)  # written in place: no rename
    # TensorStore's own s3/gcs driver opens the arrays through the item's OCDBT database.
    for param, expected in (("w", tree["w"]), ("b.c", tree["b"]["c"]), ("b.h", tree["b"]["h"])):
        t = ts.open({"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": store.ts_kv(p),
                                                    "path": param + "/"}}).result()
        got = t.read().result()
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes(), param
    assert_tree_equal(tree, cairn.restore(store.url(p)))
    # Control: the same save again is refused, the committed one stays.
    with pytest.raises(FileExistsError,
                       match=f"checkpoint directory {re.escape(store.url(p).rstrip('/'))} already exists"):
        cairn.save(store.url(p), step_tree(2))
    assert_tree_equal(tree, cairn.restore(store.url(p)))


def test_save_async_with_steps_and_restore_latest(store):
    root = store.fresh("async")
    pending = cairn.save_async(store.url(root), step_tree(3), step=3)
    assert pending.wait_until_finished() == store.url(f"{root}/3/default")
    cairn.save(store.url(root), step_tree(8), step=8)
    assert cairn.orbax.all_steps(store.url(root)) == [3, 8]
    assert_tree_equal(step_tree(8), cairn.restore(store.url(root)))
    assert_tree_equal(step_tree(3), cairn.restore(store.url(root), step=3))
    assert {"3/commit_success.txt", "3/default/commit_success.txt"} <= set(store.keys(root))


def test_restores_checkpoint_written_by_orbax_and_uploaded(store, tmp_path):
    import orbax.checkpoint as ocp
    local = tmp_path / "orbax-root"
    tree = step_tree(4)
    with ocp.CheckpointManager(local) as mngr:
        mngr.save(4, args=ocp.args.StandardSave(tree))
        mngr.wait_until_finished()
    marker = local / "4" / "commit_success.txt"
    if marker.exists():  # Orbax writes it only where it cannot rename
        marker.unlink()
    root = store.fresh("orbax-upload")
    assert store.upload(local, root) > 5
    assert_tree_equal(tree, cairn.restore(store.url(f"{root}/4/default")))
    # Without a commit marker, nothing on an object store counts as a step
    # (Orbax's rule on GCS); the same files on local disk do (control).
    assert cairn.orbax.all_steps(local) == [4]
    assert cairn.orbax.all_steps(store.url(root)) == []
    ts.KvStore.open(store.ts_kv(root)).result().write("4/commit_success.txt", b"committed").result()
    assert cairn.orbax.all_steps(store.url(root)) == [4]
    assert_tree_equal(tree, cairn.restore(store.url(root)))


# ---- CheckpointManager -------------------------------------------------------

def test_manager_saves_lists_restores_and_prunes(store):
    root = store.fresh("manager")
    mngr = cairn.CheckpointManager(store.url(root), max_to_keep=2)
    for step in (1, 2, 3):
        assert mngr.save(step, step_tree(step))
    mngr.wait_until_finished()
    assert mngr.all_steps() == [2, 3] and mngr.latest_step() == 3
    assert_tree_equal(step_tree(3), mngr.restore())
    assert_tree_equal(step_tree(2), mngr.restore(2))
    mngr.close()
    keys = store.keys(root)
    assert not any(k.startswith("1/") for k in keys), keys  # retention deleted every object of step 1
    assert "2/commit_success.txt" in keys and "3/commit_success.txt" in keys
    again = cairn.CheckpointManager(store.url(root), max_to_keep=2)
    assert again.all_steps() == [2, 3]
    again.delete(2)
    assert again.all_steps() == [3]
    assert not any(k.startswith("2/") for k in store.keys(root))
    again.close()


def test_interrupted_save_leaves_latest_step_at_the_previous_one(store):
    root = store.fresh("dropped")
    proxy = FaultProxy(f"127.0.0.1:{store.server.port}")
    try:
        store.point_cairn_at(proxy.endpoint)
        store.monkeypatch.setenv("CAIRN_HTTP_MAX_ATTEMPTS", "2")
        mngr = cairn.CheckpointManager(store.url(root), max_to_keep=3, enable_async=False)
        assert mngr.save(1, step_tree(1))
        # Step 2: a few uploads get through, then every upload's connection
        # is dropped (reads and listings still pass).
        proxy.only_method = "PUT" if store.scheme == "s3" else "POST"
        proxy.fail_after = 3
        saving_2 = len(proxy.log)
        with pytest.raises(OSError, match="attempts"):
            mngr.save(2, step_tree(2))
        proxy.fail_after = None
        assert proxy.served_faults >= 2
        assert mngr.latest_step() == 1
        # Part of step 2 was written (the first writes got through) ...
        writes = [urllib.parse.unquote(p) for m, p, _ in proxy.log[saving_2:] if m == proxy.only_method]
        forwarded = writes[:3]
        assert any(f"{root}/2/" in w and ".cairn-save-owner.json" not in w for w in forwarded), writes
        # ... never committed, and the failed save removed it and its claim
        # (step 5 of the commit protocol, step.h: AbandonCommit).
        left = store.keys(root)
        assert not any(k.startswith("2/") for k in left), left
        mngr.close()
        fresh_view = cairn.CheckpointManager(store.url(root))
        assert fresh_view.all_steps() == [1] and fresh_view.latest_step() == 1
        assert cairn.orbax.all_steps(store.url(root)) == [1]
        assert_tree_equal(step_tree(1), fresh_view.restore())
        # Control: with the connections back, step 2 is saved.
        assert fresh_view.save(2, step_tree(2))
        fresh_view.wait_until_finished()
        assert fresh_view.all_steps() == [1, 2]
        assert_tree_equal(step_tree(2), fresh_view.restore(2))
        fresh_view.close()
    finally:
        proxy.stop()


def test_a_save_lists_its_step_once_before_writing(store):
    """Every listing on a bucket is a request (tens of ms on a real one). A
    save claims its step (a write of its owner record only if absent; step
    2b' in step.h) and then checks that the step is free with one listing
    of that step: the root (which grows with the steps kept), the step again
    and the item below it are not listed."""
    root = store.fresh("requests")
    cairn.save(store.url(root), step_tree(1), step=1)
    proxy = FaultProxy(f"127.0.0.1:{store.server.port}")
    try:
        store.point_cairn_at(proxy.endpoint)
        cairn.save(store.url(root), step_tree(2), step=2)
        log = [(m, p) for m, p, _ in proxy.log]
    finally:
        proxy.stop()
    store.point_cairn_at(store.server.endpoint)
    assert_tree_equal(step_tree(2), cairn.restore(store.url(root), step=2))

    def listed_prefix(method, path):
        if method != "GET" or "?" not in path:
            return None
        where, query = path.split("?", 1)
        q = urllib.parse.parse_qs(query)
        is_list = "list-type" in q if store.scheme == "s3" else where.endswith("/o")
        return q.get("prefix", [""])[0] if is_list else None

    def is_write(method, path):
        return method in ("PUT", "POST") and (store.scheme == "s3" or "/upload/" in path)

    def is_claim(path):
        # S3 names the key in the path; GCS's conditional create (the claim,
        # and the commit marker written last) carries ifGenerationMatch=0.
        if store.scheme == "s3":
            return urllib.parse.unquote(path).endswith(f"{root}/2/.cairn-save-owner.json")
        return "ifGenerationMatch=0" in path

    writes = [i for i, (m, p) in enumerate(log) if is_write(m, p)]
    assert is_claim(log[writes[0]][1]), [log[i] for i in writes[:3]]
    first_write = next(i for i in writes if not is_claim(log[i][1]))
    before = [listed_prefix(m, p) for m, p in log[:first_write]]
    before = [p for p in before if p is not None]
    assert before == [f"{root}/2/"], before


CRASHING_CHILD = textwrap.dedent("""
    import os
    import signal
    import sys
    import numpy as np
    import cairn
    {step_tree}

    def at_point(point):
        if point == sys.argv[2]:
            os.kill(os.getpid(), signal.SIGKILL)

    mngr = cairn.CheckpointManager(sys.argv[1], enable_async=False, at_point=at_point)
    assert mngr.save(5, step_tree(5))
    mngr.close()
    print("finished")
""").format(step_tree=textwrap.indent(inspect.getsource(step_tree), "    ").strip())


def test_process_killed_before_the_commit_leaves_no_step(store):
    root = store.fresh("killed")
    cairn.CheckpointManager(store.url(root), enable_async=False).save(4, step_tree(4))
    r = subprocess.run([sys.executable, "-c", CRASHING_CHILD, store.url(root), "before_step_commit"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    keys = store.keys(root)
    assert "5/default/_METADATA" in keys and "5/commit_success.txt" not in keys
    mngr = cairn.CheckpointManager(store.url(root))
    assert mngr.all_steps() == [4] and mngr.latest_step() == 4
    mngr.close()
    # Control: the same child, not killed, commits step 5.
    r = subprocess.run([sys.executable, "-c", CRASHING_CHILD, store.url(root), ""],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "finished" in r.stdout, r.stderr
    mngr = cairn.CheckpointManager(store.url(root))
    assert mngr.all_steps() == [4, 5]
    assert_tree_equal(step_tree(5), mngr.restore())
    mngr.close()


# ---- CLI and conversion ------------------------------------------------------

def test_cli_ls_info_verify_on_urls(store):
    root = store.fresh("cli")
    cairn.save(store.url(root), step_tree(6), step=6)
    r = run_cli("ls", "--json", store.url(root))
    assert r.returncode == 0, r.stderr
    rows = {row["path"]: row for row in json.loads(r.stdout)}
    assert sorted(rows) == ["b.c", "b.h", "w"]
    assert rows["w"]["dtype"] == "float32" and rows["w"]["shape"] == [16, 8]
    r = run_cli("info", "--json", store.url(root))
    assert r.returncode == 0, r.stderr
    assert store.url(f"{root}/6") in r.stdout
    r = run_cli("verify", store.url(root))
    assert r.returncode == 0, r.stdout + r.stderr
    # Must fail: a URL where nothing is stored is no checkpoint.
    r = run_cli("verify", store.url(store.fresh("nothing")))
    assert r.returncode != 0 and store.scheme + "://" in r.stderr + r.stdout


def test_convert_to_axlearn_locally_and_back_to_the_store(store, tmp_path):
    root = store.fresh("convert")
    tree = step_tree(7)
    cairn.save(store.url(root), tree, step=7)
    ax = tmp_path / "axlearn"
    r = run_cli("convert", store.url(root), str(ax), "--to", "axlearn", "--json")
    assert r.returncode == 0, r.stderr
    assert (ax / "step_00000007" / "index").is_file()
    r = run_cli("diff", store.url(root), str(ax))
    assert r.returncode == 0, r.stdout + r.stderr
    back = store.fresh("convert-back")
    result = cairn.convert(str(ax), store.url(back), to="orbax")
    assert result["dest"] == store.url(f"{back}/step_00000007/state")
    keys = store.keys(back)
    assert "step_00000007/state/commit_success.txt" in keys and "step_00000007/index/index" in keys
    assert_tree_equal(tree, cairn.restore(store.url(f"{back}/step_00000007/state")))
    # Local -> object store in AXLearn's layout: `index` is its commit.
    ax_back = store.fresh("convert-ax")
    cairn.convert(str(ax), store.url(ax_back), to="axlearn")
    assert "step_00000007/index" in store.keys(ax_back)
    r = run_cli("diff", store.url(ax_back), str(ax))
    assert r.returncode == 0, r.stdout + r.stderr
    # Control: converting onto a committed destination is refused.
    with pytest.raises(FileExistsError, match=re.escape(f"{store.url(back).rstrip('/')}/step_00000007 exists: "
                                                        "the destination holds a committed checkpoint")):
        cairn.convert(str(ax), store.url(back), to="orbax")
