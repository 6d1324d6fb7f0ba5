"""The campaign's object-store paths: cairn.CheckpointManager saving and
retiring steps on s3:// (moto's server) and gs:// (fake-gcs-server), with an
HTTP fault at request N of the run instead of a file fault.

Between cairn and each emulator sits the fault proxy of the s3:// tests
(tests/python/s3_helpers.FaultProxy). The HTTP fault kinds (registered here,
taken only by these paths) act on request N, counted from the run's start:

  http_kill     the run is killed (SIGKILL) when request N arrives; the
                request is not forwarded;
  http_drop     request N's connection is closed without an answer;
  http_cut_upload   half of request N's body arrives, then the connection
                closes;
  http_applied_no_answer  request N is applied, its answer never comes
                ("forward_then_hang_up");
  http_truncate request N's answer promises more bytes than arrive;
  http_503      request N is answered 503 SlowDown;
  http_outage   every request from N on is dropped (the run's retries run out).

Oracle, as for the file paths: every step whose save returned restores
bit-exactly with cairn (and, for gs://, with Orbax through gcsfs on a sample),
every step cairn (or Orbax) lists restores, the next save succeeds and
retention holds. A single fault that can be retried must not fail the run: a
run that ends in an error under one is a `next_save` finding ("a transient
fault failed the save").
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import tempfile
import threading

from campaign import FaultKind, Finding, register_fault_kind, register_workload
from crash_shim import REPO
from crash_workloads import KEEP, _check_steps

sys.path.insert(0, str(REPO / "tests" / "python"))
import crash_trees as trees  # noqa: E402

BUCKET = "cairn-crash-campaign"
RUN_STEPS = (1, 2, 3)
RESUME_STEP = 4
TRANSIENT = ("http_drop", "http_cut_upload", "http_applied_no_answer", "http_truncate", "http_503")
HTTP_KINDS = ("http_kill", "http_outage") + TRANSIENT
_PROXY_FAULT = {"http_drop": "drop", "http_cut_upload": "cut_upload",
                "http_applied_no_answer": "forward_then_hang_up", "http_truncate": "truncate", "http_503": 503}


class _Emulator:
    """One emulator, its bucket, and a proxy whose faults are set per run."""

    def __init__(self, scheme: str):
        import s3_helpers as h
        self.scheme = scheme
        if scheme == "s3":
            import atexit
            self.server = h.MotoServer()
            atexit.register(self.server.stop)
        else:
            self.server = h.FakeGcsServer.shared()
        self.server.create_bucket(BUCKET)
        self.proxy = _CountingProxy(f"127.0.0.1:{self.server.port}")
        # A killed run resets its connections: expected, not worth a traceback.
        self.proxy.server.handle_error = lambda request, client_address: None
        self.requests_per_run = None

    def env(self, endpoint: str) -> dict:
        """What cairn's driver reads for this emulator behind `endpoint`."""
        if self.scheme == "s3":
            empty = pathlib.Path(tempfile.gettempdir()) / "cairn-crash-empty-aws"
            empty.write_text("")
            return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                    "AWS_SHARED_CREDENTIALS_FILE": str(empty), "AWS_CONFIG_FILE": str(empty),
                    "AWS_EC2_METADATA_DISABLED": "true", "CAIRN_HTTP_INITIAL_BACKOFF_MS": "5"}
        return {"STORAGE_EMULATOR_HOST": endpoint, "CAIRN_HTTP_INITIAL_BACKOFF_MS": "5",
                "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test-token"}


def _counting_proxy_class():
    import s3_helpers as h

    class CountingProxy(h.FaultProxy):
        """FaultProxy with one fault at request `at` of the run (or from it
        on, for an outage), and a kill of the run's process there."""

        def arm(self, kind: str | None, at: int | None, pid_file: pathlib.Path | None) -> None:
            with self.lock:
                self.requests = 0
                self.kind, self.at, self.pid_file, self.fired = kind, at, pid_file, ""

        def _next_fault(self, method, headers, path=""):
            with self.lock:
                self.requests += 1
                n, kind, at = self.requests, getattr(self, "kind", None), getattr(self, "at", None)
                if kind is None or at is None or n < at or (n > at and kind != "http_outage"):
                    return None
                if n == at:
                    self.fired = f"request {n} ({method} {path.split('?')[0]}) got {kind}"
            if kind == "http_kill":
                pid = int(self.pid_file.read_text())
                os.kill(pid, signal.SIGKILL)
                return "drop"
            if kind == "http_outage":
                return "drop"
            return _PROXY_FAULT[kind]

    return CountingProxy


def _CountingProxy(target):  # noqa: N802 - a class made once s3_helpers is importable
    return _counting_proxy_class()(target)


_emulators: dict[str, _Emulator] = {}
_lock = threading.Lock()


def _emulator(scheme: str) -> _Emulator:
    with _lock:
        if scheme not in _emulators:
            _emulators[scheme] = _Emulator(scheme)
        return _emulators[scheme]


def _url(scheme: str, ctx_root: pathlib.Path) -> str:
    # The run's own prefix: the workspace's name is unique in the campaign,
    # the campaign's scratch directory in the machine.
    return f"{scheme}://{BUCKET}/{ctx_root.parent.parent.name}-{ctx_root.parent.name}/ckpt"


def _manager(url: str):
    import cairn
    return cairn.CheckpointManager(url, max_to_keep=KEEP)


def _set_env(env: dict) -> None:
    os.environ.update(env)


def _run_fns(scheme: str):
    def run(ctx) -> None:
        if not (ctx.side / "scheme").exists():
            return  # the harness's dry run counts file operations: these paths make none
        (ctx.side / "pid").write_text(str(os.getpid()))
        _set_env(_emulator_env(ctx, via_proxy=True))
        with _manager(_url(scheme, ctx.root)) as m:
            for s in RUN_STEPS:
                m.save(s, trees.at(s))
                m.wait_until_finished()
                ctx.commit(step=s)

    def check(ctx) -> list:
        em = _emulator(scheme)
        fired = em.proxy.fired
        em.proxy.arm(None, None, None)
        (ctx.side / "http_fault").write_text(fired)
        _set_env(em.env(em.server.endpoint))
        must = sorted(r["step"] for r in ctx.committed())
        m = _manager(_url(scheme, ctx.root))
        try:
            out = _check_steps(ctx, must, f"cairn on {scheme}:// ({fired or 'no fault fired'})", m.all_steps(),
                               lambda s: m.restore(s, target=trees.at(s)))
        finally:
            m.close()
        kind = (ctx.side / "kind").read_text() if (ctx.side / "kind").exists() else ""
        if kind in TRANSIENT and fired and len(must) < len(RUN_STEPS):
            out.append(Finding("next_save", f"a transient fault failed the run ({fired}); saved only {must}"))
        return out

    def resume(ctx) -> None:
        _set_env(_emulator_env(ctx, via_proxy=False))
        with _manager(_url(scheme, ctx.root)) as m:
            m.save(RESUME_STEP, trees.at(RESUME_STEP))
            m.wait_until_finished()
        ctx.commit("resume", step=RESUME_STEP)

    def check_resumed(ctx) -> list:
        em = _emulator(scheme)
        _set_env(em.env(em.server.endpoint))
        m = _manager(_url(scheme, ctx.root))
        try:
            steps = m.all_steps()
            if RESUME_STEP not in steps:
                return [Finding("next_save", f"step {RESUME_STEP} is not listed after the next save: {steps}")]
            why = trees.diff(trees.flat(m.restore(RESUME_STEP, target=trees.at(RESUME_STEP))),
                             trees.flat(trees.at(RESUME_STEP)))
            out = [Finding("next_save", f"step {RESUME_STEP}: {why}")] if why else []
            if len(steps) > KEEP:
                out.append(Finding("next_save", f"retention kept {steps} (max_to_keep={KEEP})"))
            return out
        finally:
            m.close()

    return run, check, resume, check_resumed


def _emulator_env(ctx, via_proxy: bool) -> dict:
    scheme = (ctx.side / "scheme").read_text()
    em_env = (ctx.side / ("env.proxy" if via_proxy else "env.direct")).read_text().splitlines()
    env = dict(line.split("=", 1) for line in em_env if "=" in line)
    assert scheme in ("s3", "gs")
    return env


def _prepare_side(ws: dict, scheme: str, kind: str) -> None:
    em = _emulator(scheme)
    side = ws["side"]
    (side / "scheme").write_text(scheme)
    (side / "kind").write_text(kind)
    for name, endpoint in (("env.proxy", em.proxy.endpoint), ("env.direct", em.server.endpoint)):
        (side / name).write_text("".join(f"{k}={v}\n" for k, v in em.env(endpoint).items()))


def _request_count(scheme: str, ws: dict) -> int:
    """Requests of one fault-free run (counted once, by the proxy)."""
    em = _emulator(scheme)
    if em.requests_per_run is None:
        import subprocess
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-crash-http-"))
        em.proxy.arm(None, None, None)
        env = {**os.environ, **em.env(em.proxy.endpoint)}
        env.pop("LD_PRELOAD", None)
        code = ("import sys; sys.path[:0] = %r\n"
                "import cairn, crash_trees as trees\n"
                "with cairn.CheckpointManager(%r, max_to_keep=%d) as m:\n"
                "    for s in %r:\n"
                "        m.save(s, trees.at(s)); m.wait_until_finished()\n"
                % ([str(REPO / "tests" / "crash"), str(REPO / "tests" / "python")],
                   f"{scheme}://{BUCKET}/{scratch.name}/ckpt", KEEP, RUN_STEPS))
        subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300,
                       capture_output=True)
        em.requests_per_run = em.proxy.requests
    return em.requests_per_run


def _pick_request(trace, rng):
    # The request is chosen in `env`, once the path's request count is
    # known: a fraction of the run, drawn here.
    return rng.randint(1, 1 << 30)


def _fired(ws: dict) -> str:
    """What the proxy did to the run (empty: the run ended before request N)."""
    scheme = "s3" if ws["workload"] == "objstore_s3" else "gs"
    return _emulator(scheme).proxy.fired


def _kind_env(name: str):
    def env(ws: dict, n) -> dict:
        scheme = "s3" if ws["workload"] == "objstore_s3" else "gs"
        _prepare_side(ws, scheme, name)
        count = _request_count(scheme, ws)
        at = 1 + (n - 1) % count
        _emulator(scheme).proxy.arm(name, at, ws["side"] / "pid")
        return {"CAIRN_HTTP_STALL_TIMEOUT_S": "2"}
    return env


for _kind in HTTP_KINDS:
    register_fault_kind(FaultKind(_kind, None, _pick_request, env=_kind_env(_kind), fired=_fired))

for _scheme, _name in (("s3", "objstore_s3"), ("gs", "objstore_gcs")):
    _run, _check, _resume, _resumed = _run_fns(_scheme)
    register_workload(_name, _run, _check, resume_fn=_resume, check_resumed_fn=_resumed, kinds=HTTP_KINDS,
                      timeout_s=120.0)
