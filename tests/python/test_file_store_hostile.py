"""file:// stores holding symbolic links, FIFOs and devices, through
cairn.kvstore.open: nothing below the root is followed, only regular files
are values, and nothing blocks. Every refused case has a control beside it."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

import cairn


@pytest.fixture
def tree(tmp_path):
    """root/real/secret, outside/secret, root/link -> ../outside."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"outside bytes")
    (root / "real" / "secret").write_bytes(b"inside bytes")
    os.symlink("../outside", root / "link")
    store = cairn.kvstore.open(f"file://{root}/")
    return store, root, outside


def outside_untouched(outside):
    return sorted(os.listdir(outside)) == ["secret"] and (
        (outside / "secret").read_bytes() == b"outside bytes"
    )


def check_refused(info, store, key, what):
    msg = str(info.value)
    assert f"key `{key}` of {store.url}" in msg, msg
    assert what in msg, msg


def test_linked_directory_is_not_followed(tree):
    store, root, outside = tree
    assert store.get("real/secret") == b"inside bytes"  # control
    with pytest.raises(RuntimeError) as info:
        store.get("link/secret")
    check_refused(info, store, "link/secret", "symbolic link")
    store.put("real/new", b"v")  # control
    with pytest.raises(RuntimeError) as info:
        store.put("link/new", b"v")
    check_refused(info, store, "link/new", "symbolic link")
    with pytest.raises(RuntimeError) as info:
        store.put("link/secret", b"overwritten")
    check_refused(info, store, "link/secret", "symbolic link")
    with pytest.raises(RuntimeError) as info:
        store.delete("link/secret")
    check_refused(info, store, "link/secret", "symbolic link")
    assert outside_untouched(outside)


def test_list_and_delete_prefix_stay_inside(tree):
    store, root, outside = tree
    os.symlink(outside / "secret", root / "real" / "file_link")
    os.symlink(".", root / "real" / "loop")
    assert store.keys() == ["real/secret"]
    assert store.keys("link/") == []
    store.delete_prefix("link/")
    assert not os.path.lexists(root / "link")  # the link itself is removed
    assert outside_untouched(outside)
    store.put("real/x", b"1")
    store.delete_prefix("")
    assert os.listdir(root) == []
    assert outside_untouched(outside)


def test_delete_prefix_removes_whole_trees(tmp_path):
    store = cairn.kvstore.open(f"file://{tmp_path}/s/")
    store.put("x.orbax-checkpoint-tmp-123/a/b", b"1")
    store.put("x.orbax-checkpoint-tmp-1234/c", b"2")
    (tmp_path / "s" / "x.orbax-checkpoint-tmp-123" / "empty" / "sub").mkdir(parents=True)
    store.delete_prefix("x.orbax-checkpoint-tmp-123/")
    assert not (tmp_path / "s" / "x.orbax-checkpoint-tmp-123").exists()
    assert store.keys() == ["x.orbax-checkpoint-tmp-1234/c"]  # control


def run_with_timeout(code, timeout=20):
    """Runs `code` in a fresh interpreter: a hang fails the test, not the suite."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "make,what",
    [
        ("fifo", "a FIFO"),
        ("dev_zero_link", "symbolic link"),
        ("char_device", "a character device"),
        ("socket", "a socket"),
    ],
)
def test_special_file_at_a_key_fails_promptly(tmp_path, make, what):
    root = tmp_path / "root"
    root.mkdir()
    (root / "regular").write_bytes(b"ok")
    path = root / "special"
    sock = None
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dev_zero_link":
        os.symlink("/dev/zero", path)
    elif make == "char_device":
        os.mknod(path, 0o644 | 0o020000, os.makedev(1, 5))  # tests run as root here
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    try:
        proc = run_with_timeout(
            f"""
            import cairn
            store = cairn.kvstore.open("file://{root}/")
            assert store.get("regular") == b"ok"
            try:
                store.get("special")
            except RuntimeError as e:
                print("ERROR:", e)
            else:
                print("NO ERROR")
            print("KEYS:", store.keys())
            """
        )
    finally:
        if sock is not None:
            sock.close()
    assert proc.returncode == 0, proc.stderr
    assert f"ERROR: reading key `special` of file://{root}/" in proc.stdout, proc.stdout
    assert what in proc.stdout, proc.stdout
    assert "KEYS: ['regular']" in proc.stdout, proc.stdout
