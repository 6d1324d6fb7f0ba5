"""The campaign's worker: a fork server started with the crashfs shim
preloaded (inactive until a run configures it), so that a run costs a fork,
not a Python start with jax, flax and cairn imported.

Each request (one JSON line on stdin) forks a child that starts a session of
its own (so a power loss kills exactly the run's processes), sets the run's
CRASHFS_* environment, has the shim read it (crashfs_reload), and calls the
workload's run or resume function. The server is a child subreaper: it reaps
the run's grandchildren too, and answers (one JSON line) once the whole
session is gone: "exit <code>", "signal <n>" or "timeout".
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


class WorkerClient:
    """The harness's side: starts the server (again, if it died) and sends runs."""

    def __init__(self, shim: str, log_path, env=None):
        self.shim = shim
        self.env = dict(env or {})
        self.log_path = log_path
        self.proc = None

    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHFS_")}
        env["LD_PRELOAD"] = self.shim + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.update(self.env)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the crash worker did not start (see {self.log_path})")

    def run(self, workload, phase, root, side, seed, env, timeout, out) -> str:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        req = {"workload": workload, "phase": phase, "root": root, "side": side, "seed": seed,
               "env": env, "timeout": timeout, "out": out}
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the crash worker died (see {self.log_path})")
        return json.loads(line)["status"]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.proc.stdout.close()
            self.log.close()
        self.proc = None


def _child(req, shim) -> None:
    from campaign import WORKLOADS, Context
    os.setsid()
    fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.update(req["env"])
    shim.crashfs_reload()
    w = WORKLOADS[req["workload"]]
    ctx = Context(w.name, __import__("pathlib").Path(req["root"]), __import__("pathlib").Path(req["side"]),
                  req["seed"])
    (w.run_fn if req["phase"] == "run" else w.resume_fn)(ctx)


def _wait_session(pid: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    status, timed_out = None, False
    while True:
        while True:  # reap the run's child and any orphaned grandchildren
            try:
                p, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if p == 0:
                break
            if p == pid:
                status = (f"exit {os.WEXITSTATUS(st)}" if os.WIFEXITED(st)
                          else f"signal {os.WTERMSIG(st)}")
        if status is not None:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return f"timeout ({status})" if timed_out else status
        if not timed_out and time.monotonic() > deadline:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.003)


def serve() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    shim = ctypes.CDLL(None)  # the preloaded shim's symbols
    import campaign
    for module in os.environ.get("CAIRN_CRASH_MODULES", ",".join(campaign.WORKLOAD_MODULES)).split(","):
        m = __import__(module)
        if hasattr(m, "warm_up"):
            m.warm_up()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints of workloads go to the log, not the protocol
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _child(req, shim)
            except BaseException:  # noqa: BLE001 - reported in the run's output
                import traceback
                traceback.print_exc()
                code = 3
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        out.write(json.dumps({"status": _wait_session(pid, req["timeout"])}) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
