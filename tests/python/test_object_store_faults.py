"""Faults between cairn and the object store that are not error answers: a
request that gets no answer (a stall), an upload cut off halfway, an answer
cut off halfway (its headers promise more than arrives), and an answer
shorter than the range it claims. A proxy (s3_helpers.FaultProxy) sits
between cairn and each emulator (moto's S3 server, fake-gcs-server).

Checkpoint saves, restores and conversions go through every fault that can
be retried and come out bit-exact; a short answer is never taken as the
data. A conditional write whose answer never comes is sent once and settled
by reading the key back. The stall timeout is CAIRN_HTTP_STALL_TIMEOUT_S (30 s by default),
read once per process, so the stall test runs its save and restore in a
child process with 1 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cairn
from s3_helpers import FaultProxy
from test_cli import run_cli
from test_object_store_checkpoints import assert_tree_equal, fake_gcs, moto, step_tree, store  # noqa: F401


def upload_method(store):
    return "PUT" if store.scheme == "s3" else "POST"


@pytest.fixture
def proxy(store):
    p = FaultProxy(f"127.0.0.1:{store.server.port}")
    store.point_cairn_at(p.endpoint)
    yield p
    p.stop()


def test_stalled_requests_time_out_and_are_retried(store, proxy):
    root = store.fresh("stall")
    # The first upload of the save and the first two reads of the restore
    # get no answer for a minute; each attempt gives up after 1 s without a
    # byte and is sent again. With the default stall timeout (30 s) the
    # three stalls would take 90 s: the child is stopped after 45 s.
    proxy.stall_seconds = 60.0
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {repr(sys.path[0])})
        import numpy as np, cairn
        from test_object_store_checkpoints import step_tree, assert_tree_equal
        cairn.save({store.url(root)!r}, step_tree(3), step=3)
        print("saved", flush=True)
        sys.stdin.readline()  # the parent arms the read faults
        assert_tree_equal(step_tree(3), cairn.restore({store.url(root)!r}))
        print("restored", flush=True)
    """)
    proxy.only_method = upload_method(store)
    proxy.faults = ["stall"]
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "CAIRN_HTTP_STALL_TIMEOUT_S": "1"})
    watchdog = threading.Timer(45, child.kill)
    watchdog.start()
    try:
        assert child.stdout.readline().strip() == "saved", child.stderr.read()
        assert proxy.served_faults == 1
        proxy.only_method = "GET"
        proxy.faults = ["stall", "stall"]
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "restored", child.stderr.read()
        assert child.wait(timeout=120) == 0
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
    assert proxy.served_faults == 3
    # The checkpoint is whole for every reader, TensorStore's drivers included.
    assert "3/commit_success.txt" in store.keys(root)
    proxy.faults = []
    assert_tree_equal(step_tree(3), cairn.restore(store.url(root)))


def test_cut_uploads_and_truncated_answers_are_retried(store, proxy, tmp_path):
    root = store.fresh("truncate")
    tree = step_tree(5)
    # Two uploads lose their connection halfway through the body.
    proxy.only_method = upload_method(store)
    proxy.faults = ["cut_upload", "cut_upload"]
    cairn.save(store.url(root), tree, step=5)
    assert proxy.served_faults == 2
    # Reads whose answers stop halfway, the headers having promised the whole body.
    proxy.only_method = "GET"
    proxy.faults = ["truncate"] * 3
    assert_tree_equal(tree, cairn.restore(store.url(root)))
    assert proxy.served_faults == 5
    # A conversion reading through the same faults.
    proxy.faults = ["truncate"] * 3
    cairn.convert(store.url(root), str(tmp_path / "ax"), to="axlearn")
    assert proxy.served_faults == 8
    proxy.faults = []
    r = run_cli("diff", store.url(root), str(tmp_path / "ax"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_short_answer_is_never_taken_as_the_data(store, proxy):
    root = store.fresh("short")
    values = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    url = store.url(root) + "/|zarr3:"
    cairn.create(url, shape=[64, 64], dtype="float32", chunks=[32, 64]).write(values)
    array = cairn.open(url)
    # Every read of a chunk gets half its bytes, with a Content-Length that
    # says so: the read fails or is retried, it never hands back half a chunk.
    proxy.only_method = "GET"
    proxy.always = None
    proxy.faults = ["short"] * 12
    try:
        got = array.read()
    except (OSError, ValueError) as e:  # an error that names the chunk
        assert "c/" in str(e) and root in str(e), str(e)
        assert str(e).count(root) == 1, f"the read is named more than once: {e}"
    else:
        np.testing.assert_array_equal(got, values)
    assert proxy.served_faults >= 1
    proxy.faults = []  # control
    np.testing.assert_array_equal(cairn.open(url).read(), values)


@pytest.mark.parametrize("fault", ["drop", "cut_upload"])
def test_a_conditional_write_that_never_arrived_is_sent_again(store, proxy, fault):
    """Found by the crash campaign (tests/crash, objstore paths): the
    connection of a conditional write (the OCDBT manifest's) closes before
    the request reaches the store. Reading the key back shows it still as
    the condition requires (absent, or the expected version), so the write
    never applied and is sent again; before, the save failed with "Empty
    reply from server after 1 attempt"."""
    root = store.fresh("never-arrived")
    kv = cairn.kvstore.open(store.url(root) + "/|ocdbt:")
    kv.put("first", b"1")
    before = proxy.conditional_requests
    proxy.only_conditional = True
    proxy.faults = [fault]
    kv.put("second", b"2")
    assert proxy.served_faults == 1
    assert proxy.conditional_requests - before == 2, "the write was not sent again"
    fresh = cairn.kvstore.open(store.url(root) + "/|ocdbt:")
    assert fresh.get("first") == b"1" and fresh.get("second") == b"2"
    # Control: a write that never arrives however often it is sent fails,
    # naming the key, after a bounded number of attempts.
    proxy.faults = [fault] * 10
    with pytest.raises(OSError, match=r"conditionally writing key `.*manifest\.ocdbt`"):
        kv.put("third", b"3")
    assert 2 <= proxy.served_faults - 1 <= 6


def test_a_conditional_write_without_an_answer_is_sent_once_and_settled(store, proxy):
    """The request of a conditional write (the OCDBT manifest's) reaches the
    store, and the connection closes before a byte of the answer. libcurl
    would send it again by itself on a reused connection; that copy fails
    its precondition, so a write that was applied looked lost, and OCDBT
    committed the same change a second time. cairn sends such writes on a
    connection of their own and settles the outcome by reading the key back."""
    root = store.fresh("unanswered")
    kv = cairn.kvstore.open(store.url(root) + "/|ocdbt:")
    kv.put("first", b"1")  # the database exists; the proxy's connections are kept alive
    kv.put("warm", b"w")
    before = proxy.conditional_requests
    proxy.only_conditional = True
    proxy.faults = ["forward_then_hang_up"]
    kv.put("second", b"2")
    assert proxy.served_faults == 1
    assert proxy.conditional_requests - before == 1, "the conditional write was sent again"
    fresh = cairn.kvstore.open(store.url(root) + "/|ocdbt:")
    assert fresh.get("first") == b"1" and fresh.get("second") == b"2"
    # Control: a conditional write the store refused (412, as when another
    # writer committed first) is not taken as applied: OCDBT commits again.
    before = proxy.conditional_requests
    proxy.faults = [412]
    kv.put("third", b"3")
    assert proxy.served_faults == 2
    assert proxy.conditional_requests - before == 2
    assert cairn.kvstore.open(store.url(root) + "/|ocdbt:").get("third") == b"3"
