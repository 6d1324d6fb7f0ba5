"""Ctrl-C and SIGTERM stop a conversion promptly, before its commit.

`cairn convert` in a real terminal (a pty, its screen read back by the pyte
terminal emulator): Ctrl-C clears the progress bar, says how far the
conversion got and that a re-run resumes, exits 130; the re-run says how
many arrays it kept. SIGTERM exits 143. `cairn.convert` in Python raises
KeyboardInterrupt within a second, with what was kept as a note, and
nothing is committed.
"""
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyte
import pytest

import cairn

ARRAYS = 64
ELEMENTS = 2 << 20  # 8 MiB of float32 per array: 512 MiB in all


@pytest.fixture(autouse=True)
def sigint_raises_keyboard_interrupt():
    """Ctrl-C as an interactive Python has it. A process started in the
    background by a non-interactive shell (`cmd &`) inherits SIGINT ignored,
    and Python then leaves it ignored (as POSIX wants for background jobs):
    these tests must not depend on how the test run was started."""
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, saved)


@pytest.fixture(scope="module")
def big_source(tmp_path_factory):
    """An Orbax checkpoint big enough that a cast and compression of it takes
    seconds on one thread."""
    root = tmp_path_factory.mktemp("interrupts")
    rng = np.random.default_rng(5)
    tree = {f"layer{i:02d}": rng.standard_normal(ELEMENTS, dtype=np.float32) for i in range(ARRAYS)}
    cairn.save(str(root / "src"), tree)
    return root


def slow_convert_args(src, dst):
    # One thread, a cast and a small budget: slow enough to be interrupted.
    return ["convert", src, dst, "--to", "orbax", "--dtype", "*=bfloat16", "--threads", "1",
            "--memory-budget", "16MiB"]


def committed(dst: Path) -> bool:
    """A committed step under `dst` (a conversion to Orbax writes step 0)."""
    return any(".orbax-checkpoint-tmp" not in p.parent.name
               for p in dst.glob("*/_CHECKPOINT_METADATA"))


def run_in_terminal(args, interrupt_with, env_extra=None, columns=400, rows=10):
    """Runs `cairn args` on a pty; once its progress bar shows, sends
    `interrupt_with` (b"\\x03": Ctrl-C typed on the terminal, or a signal
    number). Returns (exit code, the screen's lines, seconds from the
    interrupt to the exit, the raw output)."""
    env = dict(os.environ, CAIRN_PROGRESS_DELAY_MS="0", TERM="xterm", COLUMNS=str(columns),
               **(env_extra or {}))
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose terminal is the pty
        os.execvpe("cairn", ["cairn", *args], env)
    screen = pyte.Screen(columns, rows)
    stream = pyte.ByteStream(screen)
    raw = b""
    sent_at = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            raw += data
            stream.feed(data)
        if sent_at is None and b"MiB/s" in raw:
            sent_at = time.monotonic()
            if isinstance(interrupt_with, bytes):
                os.write(fd, interrupt_with)
            else:
                os.kill(pid, interrupt_with)
    _, status = os.waitpid(pid, 0)
    ended = time.monotonic()
    os.close(fd)
    code = os.waitstatus_to_exitcode(status)
    assert sent_at is not None, ("the progress bar never showed", raw[-2000:])
    return code, [line.rstrip() for line in screen.display], ended - sent_at, raw


def test_ctrl_c_in_a_terminal_clears_the_bar_and_a_rerun_resumes(big_source):
    src, dst = big_source / "src", big_source / "dst-ctrl-c"
    code, lines, seconds, raw = run_in_terminal(slow_convert_args(str(src), str(dst)), b"\x03")
    text = "\n".join(lines)
    assert code == 130, text
    assert seconds < 5, (seconds, text)
    # The bar is gone from the screen; the message is there, once.
    assert "[#" not in text and "MiB/s" not in text and "ETA" not in text, text
    match = re.search(r"cairn convert: interrupted: the conversion was interrupted after "
                      r"(\d+) of 64 arrays \([0-9.]+ of [0-9.]+ MiB\); nothing was committed at "
                      r"\S*dst-ctrl-c\. Run the same conversion again to resume: it keeps the "
                      r"arrays this one completed\.", text.replace("\n", ""))
    assert match, text
    kept = int(match.group(1))
    assert kept < ARRAYS
    assert not committed(dst)
    assert "Traceback" not in raw.decode(errors="replace")
    # The re-run resumes and says how much it kept.
    r = subprocess.run(["cairn", *slow_convert_args(str(src), str(dst))],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    resumed = re.search(r"resumed: (\d+) of the 64 arrays were kept from an interrupted run, "
                        r"(\d+) copied now", r.stdout)
    assert resumed, r.stdout
    assert int(resumed.group(1)) >= kept and int(resumed.group(1)) + int(resumed.group(2)) == 64
    assert committed(dst)
    back = cairn.restore(str(dst))
    want = cairn.restore(str(src))
    import ml_dtypes
    for name in want:
        np.testing.assert_array_equal(np.asarray(back[name]),
                                      np.asarray(want[name]).astype(ml_dtypes.bfloat16))


def test_sigterm_stops_the_conversion_with_143(big_source):
    src, dst = big_source / "src", big_source / "dst-term"
    code, lines, seconds, _ = run_in_terminal(slow_convert_args(str(src), str(dst)),
                                              signal.SIGTERM)
    text = "\n".join(lines)
    assert code == 143, text
    assert seconds < 5, (seconds, text)
    assert "cairn convert: interrupted: the conversion was interrupted after" in text.replace(
        "\n", ""), text
    assert not committed(dst)


PYTHON_CHILD = r"""
import os, signal, sys, time, cairn
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in an interactive Python
src, dst = sys.argv[1], sys.argv[2]
started = []
def progress(done, total, arrays_done, arrays_total):
    if not started:
        started.append(1)
        print("started", flush=True)
try:
    cairn.convert(src, dst, to="orbax", dtype={"*": "bfloat16"}, threads=1,
                  memory_budget=16 << 20, progress=progress)
    print("finished", flush=True)
except KeyboardInterrupt as e:
    print("interrupted " + repr(getattr(e, "__notes__", [])), flush=True)
"""


def test_python_convert_raises_keyboard_interrupt_within_a_second(big_source):
    src, dst = big_source / "src", big_source / "dst-python"
    child = subprocess.Popen([sys.executable, "-c", PYTHON_CHILD, str(src), str(dst)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "started", child.stderr.read()
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline()
        seconds = time.monotonic() - sent
        child.wait(timeout=60)
    finally:
        child.kill()
    assert line.startswith("interrupted "), (line, child.stderr.read())
    assert seconds < 1.0, seconds
    assert "the conversion was interrupted after" in line and "nothing was committed" in line, line
    assert "resume" in line, line
    assert not committed(dst)


def test_python_convert_interrupted_in_process_keeps_nothing_committed(big_source):
    src, dst = big_source / "src", big_source / "dst-in-process"
    sent = []

    def progress(*_):
        if not sent:
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt) as raised:
        cairn.convert(str(src), str(dst), to="orbax", dtype={"*": "bfloat16"}, threads=1,
                      memory_budget=16 << 20, progress=progress)
    assert time.monotonic() - sent[0] < 1.0
    notes = getattr(raised.value, "__notes__", [])
    assert any("nothing was committed at" in n and "dst-in-process" in n for n in notes), notes
    assert not committed(dst)
    # Not interrupted, the same call completes (and resumes).
    summary = cairn.convert(str(src), str(dst), to="orbax", dtype={"*": "bfloat16"}, threads=1,
                            memory_budget=16 << 20)
    assert summary["arrays"] == ARRAYS
    assert committed(dst)


@pytest.mark.parametrize("command", ["verify", "diff"])
def test_ctrl_c_ends_a_command_that_only_reads_at_once(big_source, command):
    src = str(big_source / "src")
    args = [command, src] + ([src] if command == "diff" else [])
    code, lines, seconds, _ = run_in_terminal(args, b"\x03")
    text = "\n".join(lines)
    assert code == 130, text
    assert seconds < 5, (seconds, text)
    assert f"cairn {command}: interrupted" in text, text
    assert "[#" not in text and "MiB/s" not in text, text


def interrupt_at_first_progress(sent):
    def progress(*_):
        if not sent:
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
    return progress


def test_python_save_interrupted_commits_and_leaves_nothing(big_source, tmp_path):
    tree = cairn.restore(str(big_source / "src"))
    sent = []
    with pytest.raises(KeyboardInterrupt):
        cairn.save(str(tmp_path / "ckpt"), tree, progress=interrupt_at_first_progress(sent))
    assert time.monotonic() - sent[0] < 1.0
    # Nothing committed, no temporary directory left behind.
    left = sorted(p.name for p in tmp_path.iterdir()) if tmp_path.exists() else []
    assert not (tmp_path / "ckpt" / "_CHECKPOINT_METADATA").exists(), left
    assert not any(".orbax-checkpoint-tmp" in name for name in left), left
    # The same save, not interrupted, commits.
    cairn.save(str(tmp_path / "ckpt"), tree)
    back = cairn.restore(str(tmp_path / "ckpt"))
    np.testing.assert_array_equal(np.asarray(back["layer07"]), np.asarray(tree["layer07"]))


def test_python_restore_raises_keyboard_interrupt_within_a_second(big_source):
    sent = []
    with pytest.raises(KeyboardInterrupt):
        cairn.restore(str(big_source / "src"), progress=interrupt_at_first_progress(sent))
    assert time.monotonic() - sent[0] < 1.0


def test_ctrl_c_in_the_demo_removes_its_scratch_directory(tmp_path):
    # The demo's scratch directory holds the state twice over (the device's
    # test file, then the checkpoint); Ctrl-C once it is made (the state is
    # built, the timed phases follow for seconds) must not leave it behind.
    proc = subprocess.Popen(["cairn", "demo", "--size", "512MiB"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        for line in proc.stdout:
            if "Checkpoint:" in line:
                break
        made = list(tmp_path.glob("cairn-demo-*"))
        assert len(made) == 1, (made, line)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert re.search(r"cairn demo: interrupted while (measuring the device|saving|restoring) .*; removed "
                     + re.escape(str(made[0])), err), err
    assert not made[0].exists()
    assert "Traceback" not in err
