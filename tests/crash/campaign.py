"""cairn's randomized crash campaign: the harness, its registries and its CLI.

    python3 tests/crash/campaign.py --seed 1 --faults 200 [--paths manager_sync,ocdbt_single]
                                    [--kinds kill,torn,fail,powerloss] [--orbax-sample 0.2]
    python3 tests/crash/campaign.py --every --kinds kill,powerloss   (every operation)

For each fault the campaign picks (seeded) a workload (a "path") and a fault
kind, counts the workload's file operations once with a dry run (cached), picks
an operation N, runs the workload in a forked worker with the crashfs shim
preloaded (tests/crash/crashfs.cc) so that operation N is killed, torn, failed
or cut by a power loss, rebuilds the tree after a power loss, and runs the
oracle:

  loss          every step the workload recorded as committed (its save
                returned) restores bit-exactly, with cairn and (a sample) with
                the peer (Orbax, TensorStore, safetensors);
  half_written  whatever cairn or the peer lists restores bit-exactly;
  next_save     the workload's "resume" phase (no fault) succeeds and its
                result restores;
  leftover      (per workload) no temporary file or shared-memory window
                outlives its owner after the resume;
  harness       the harness itself failed (a workload that hangs, a tree it
                cannot build...).

Public API (other workload modules register themselves on import):
  register_workload(name, run_fn, check_fn, ...)   see Workload
  register_fault_kind(FaultKind(...))               see FaultKind
  FAULT_KINDS                                       the registered kinds' names
  Campaign(...).run(faults) -> Report               Report.table(), Report.failures
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import random
import shutil
import sys
import tempfile
import time
from typing import Callable, Optional

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import crash_shim  # noqa: E402
from crash_worker import WorkerClient  # noqa: E402

# Modules whose import registers workloads (the worker imports them too).
WORKLOAD_MODULES = ["crash_workloads", "crash_emergency", "crash_object_store"]

CLAUSES = ("loss", "half_written", "next_save", "leftover", "harness")


@dataclasses.dataclass
class Finding:
    """One failed oracle clause: `clause` (CLAUSES) and what was seen."""
    clause: str
    detail: str


@dataclasses.dataclass
class Context:
    """What a workload's functions get. `root` is the tree under test (only
    operations below it are numbered and faulted); `side` a directory outside
    it for the workload's own records; `rng` is seeded per fault."""
    workload: str
    root: pathlib.Path
    side: pathlib.Path
    seed: int
    orbax_sample: bool = False  # check with the (slow) peer this time

    @property
    def rng(self) -> random.Random:
        return random.Random(self.seed)

    def commit(self, phase: str = "run", **record) -> None:
        """Records that something is committed (the save call returned): one
        JSON line in the side directory, written before anything else."""
        line = json.dumps(record, sort_keys=True) + "\n"
        fd = os.open(self.side / f"committed.{phase}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def committed(self, phase: str = "run") -> list:
        path = self.side / f"committed.{phase}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclasses.dataclass
class Workload:
    """A path of the campaign.

    prepare_fn(template: Path)  builds the start state once (harness process);
                                each run gets a copy as its root.
    run_fn(ctx)                 the faulted phase (a forked worker with the
                                shim); records commits with ctx.commit(...).
    check_fn(ctx) -> [Finding]  the oracle after the fault (harness process):
                                loss and half_written clauses.
    resume_fn(ctx)              the next save, without faults (worker);
                                records with ctx.commit("resume", ...).
    check_resumed_fn(ctx)       its check: next_save findings.
    leftovers_fn(ctx)           the leftover clause after the resume (None:
                                switched off for this workload).
    kinds                       the fault kinds it takes; weight: how often
                                it is picked.
    """
    name: str
    run_fn: Callable
    check_fn: Callable
    prepare_fn: Optional[Callable] = None
    resume_fn: Optional[Callable] = None
    check_resumed_fn: Optional[Callable] = None
    leftovers_fn: Optional[Callable] = None
    kinds: tuple = ()
    weight: float = 1.0
    timeout_s: float = 60.0
    default: bool = True  # drawn when no paths are named


@dataclasses.dataclass
class FaultKind:
    """A kind of fault. `shim` is the crashfs fault name (CRASHFS_FAULT);
    `pick(trace, rng)` chooses operation N from the dry run's trace (list of
    (op, path, path2)); `after_run(ws)` runs after the faulted phase (e.g.
    the power-loss rebuild); `env(ws, n)` adds environment for the run (for
    kinds outside the shim, e.g. an HTTP fault proxy); `fired(ws)` says
    whether such a kind's fault happened (shim kinds: the shim's log says).
    `ws` is the run's workspace: base, root, side, shadow, log, counter."""
    name: str
    shim: Optional[str]
    pick: Callable
    after_run: Optional[Callable] = None
    env: Optional[Callable] = None
    fired: Optional[Callable] = None  # fired(ws) -> what was done, '' if nothing (kinds outside the shim)


WORKLOADS: dict[str, Workload] = {}
KINDS: dict[str, FaultKind] = {}
WRITE_OPS = ("write", "pwrite", "writev", "pwritev")


def register_workload(name, run_fn, check_fn, **kwargs) -> Workload:
    """Registers a path (see Workload for the keyword arguments)."""
    w = Workload(name=name, run_fn=run_fn, check_fn=check_fn, **kwargs)
    if not w.kinds:  # default: the file faults of the shim
        w.kinds = tuple(k for k, v in KINDS.items() if v.shim)
    WORKLOADS[name] = w
    return w


def register_fault_kind(kind: FaultKind) -> FaultKind:
    KINDS[kind.name] = kind
    return kind


def _pick_any(trace, rng):
    return rng.randint(1, len(trace)) if trace else None


def _pick_write(trace, rng):
    writes = [i + 1 for i, (op, _, _) in enumerate(trace) if op in WRITE_OPS]
    return rng.choice(writes) if writes else None


def _pick_powerloss(trace, rng):
    # One more than the count: the power goes after the workload finished,
    # so everything it was told is committed must have been synced.
    return rng.randint(1, len(trace) + 1)


register_fault_kind(FaultKind("kill", "kill", _pick_any))
register_fault_kind(FaultKind("torn", "torn", _pick_write))
register_fault_kind(FaultKind("fail", "fail", _pick_any))
register_fault_kind(FaultKind("powerloss", "powerloss", _pick_powerloss,
                              after_run=lambda ws: crash_shim.power_loss(ws["shadow"], ws["root"])))
FAULT_KINDS = tuple(KINDS)


@dataclasses.dataclass
class Outcome:
    workload: str
    kind: str
    n: Optional[int]
    seed: int
    injected: bool
    fault: str
    status: str
    findings: list

    def repro(self) -> str:
        return (f"python3 tests/crash/campaign.py --one {self.workload}:{self.kind}:{self.n}"
                f" --seed {self.seed}")


class Report:
    def __init__(self, seed: int):
        self.seed = seed
        self.outcomes: list[Outcome] = []
        self.op_counts: dict[str, int] = {}  # path -> operations of its dry run

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.findings]

    def _row(self, outs) -> list:
        # Faults with at least one finding of the clause.
        count = lambda c: sum(1 for o in outs if any(f.clause == c for f in o.findings))  # noqa: E731
        return [len(outs), sum(o.injected for o in outs)] + [count(c) for c in CLAUSES]

    def table(self) -> str:
        head = ["runs", "injected", "losses", "half-written", "next-save", "leftovers", "harness"]
        lines = [f"crash campaign, seed {self.seed}, {len(self.outcomes)} faults"]
        for title, key in (("kind", lambda o: o.kind), ("path", lambda o: o.workload)):
            lines.append(f"{'by ' + title:<22}" + "".join(f"{h:>13}" for h in head))
            for name in sorted({key(o) for o in self.outcomes}):
                row = self._row([o for o in self.outcomes if key(o) == name])
                lines.append(f"{name:<22}" + "".join(f"{v:>13}" for v in row))
        lines.append(f"{'total':<22}" + "".join(f"{v:>13}" for v in self._row(self.outcomes)))
        # How many of each path's operations were a kill or power-loss point.
        points = []
        for name, count in sorted(self.op_counts.items()):
            hit = {o.n for o in self.outcomes if o.workload == name and o.kind in ("kill", "powerloss")}
            points.append(f"{name} {len(hit & set(range(1, count + 1)))}/{count}")
        if points:
            lines.append("operations killed at (kill or power loss), of the dry run's: " + ", ".join(points))
        serious = [o for o in self.failures if any(f.clause != "leftover" for f in o.findings)]
        rest = [o for o in self.failures if o not in serious]
        for o in (serious + rest)[:20]:
            label = "FAILED" if o in serious else "LEFTOVER"
            lines.append(f"{label} {o.workload} {o.kind}@{o.n} ({o.fault or 'no fault fired'}; {o.status}):"
                         f" reproduce with {o.repro()}")
            for f in o.findings[:5]:
                lines.append(f"    {f.clause}: {f.detail[:600]}")
        return "\n".join(lines)


class Campaign:
    """Runs faults. `paths`/`kinds`: names to draw from (default: all);
    `work`: a scratch directory (default: a new temporary one, removed
    unless `keep`); `orbax_sample`: the share of faults checked with the peer."""

    def __init__(self, seed: int, paths=None, kinds=None, work=None, keep=False,
                 orbax_sample: float = 0.2, log=None, modules=()):
        self.modules = list(dict.fromkeys([*WORKLOAD_MODULES, *modules]))
        for module in self.modules:
            __import__(module)  # registers its paths
        self.seed = seed
        self.paths = list(paths or [n for n, w in WORKLOADS.items() if w.default])
        self.kinds = list(kinds or KINDS)
        for p in self.paths:
            if p not in WORKLOADS:
                raise ValueError(f"unknown path {p!r}; registered: {sorted(WORKLOADS)}")
        for k in self.kinds:
            if k not in KINDS:
                raise ValueError(f"unknown fault kind {k!r}; registered: {sorted(KINDS)}")
        self.keep = keep or work is not None
        self.work = pathlib.Path(work or tempfile.mkdtemp(prefix="cairn-crash-")).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.orbax_sample = orbax_sample
        self.log = log or (lambda s: None)
        self.templates: dict[str, pathlib.Path] = {}
        self.traces: dict[str, list] = {}
        import crash_trees
        trees_npz = str(self.work / "trees.npz")
        crash_trees.base(trees_npz)  # the harness computes the leaves; the worker loads them
        self.worker = WorkerClient(crash_shim.shim_path(), self.work / "worker.log",
                                   {"CAIRN_CRASH_TREES": trees_npz,
                                    "CAIRN_CRASH_MODULES": ",".join(self.modules)})
        self.counter = 0
        self.failed = False  # a failed fault keeps the scratch directory

    def close(self) -> None:
        self.worker.close()
        if not self.keep and not self.failed:
            shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- one run ---

    def _template(self, w: Workload) -> pathlib.Path:
        if w.name not in self.templates:
            t = self.work / "templates" / w.name
            shutil.rmtree(t, ignore_errors=True)
            t.mkdir(parents=True)
            if w.prepare_fn:
                w.prepare_fn(t)
            self.templates[w.name] = t
        return self.templates[w.name]

    def _workspace(self, w: Workload, tag: str) -> dict:
        self.counter += 1
        base = self.work / "runs" / f"{self.counter:06d}-{w.name}-{tag}"
        shutil.rmtree(base, ignore_errors=True)
        (base / "side").mkdir(parents=True)
        shutil.copytree(self._template(w), base / "root", symlinks=True)
        (base / "counter").write_bytes(b"\0" * 16)
        return {"workload": w.name, "base": base, "root": base / "root", "side": base / "side",
                "shadow": base / "shadow", "log": base / "crashfs.log", "counter": base / "counter"}

    def _phase(self, w: Workload, ws: dict, phase: str, seed: int, fault: str = "", trace=False,
               extra_env=None) -> str:
        # The durable shadow only costs: kept for power-loss runs alone.
        shadow = str(ws["shadow"]) if fault.startswith("powerloss") else ""
        env = {"CRASHFS_ROOT": str(ws["root"]), "CRASHFS_SHADOW": shadow,
               "CRASHFS_LOG": str(ws["log"]), "CRASHFS_COUNTER": str(ws["counter"]),
               "CRASHFS_SEED": str(seed), "CRASHFS_FAULT": fault, "CRASHFS_TRACE": "1" if trace else ""}
        if phase == "resume":
            env["CRASHFS_ROOT"] = ""  # no faults, nothing numbered
        env.update(extra_env or {})
        return self.worker.run(w.name, phase, str(ws["root"]), str(ws["side"]), seed, env,
                               w.timeout_s, str(ws["side"] / f"{phase}.out"))

    def trace(self, w: Workload) -> list:
        """The workload's operations without faults: [(op, path, path2)]."""
        if w.name not in self.traces:
            ws = self._workspace(w, "dry")
            status = self._phase(w, ws, "run", seed=0, trace=True)
            if status != "exit 0":
                out = (ws["side"] / "run.out").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"dry run of {w.name} failed ({status}):\n{out}")
            ops = []
            for line in ws["log"].read_text().splitlines() if ws["log"].exists() else []:
                parts = line.split("\t")
                if len(parts) >= 5 and parts[0].isdigit():
                    ops.append((int(parts[0]), parts[2], parts[3], parts[4]))
            self.traces[w.name] = [o[1:] for o in sorted(ops)]
            if not self.keep:
                shutil.rmtree(ws["base"], ignore_errors=True)
        return self.traces[w.name]

    def run_one(self, w: Workload, kind: FaultKind, n: Optional[int], seed: int) -> Outcome:
        """One fault: `kind` at operation `n` of workload `w`, then the oracle."""
        ws = self._workspace(w, f"{kind.name}-{n}")
        rng = random.Random(seed)
        ctx = Context(w.name, ws["root"], ws["side"], seed,
                      orbax_sample=rng.random() < self.orbax_sample)
        findings: list[Finding] = []
        fault_text, status, injected = "", "", False
        try:
            if kind.shim == "powerloss":
                crash_shim.snapshot(ws["shadow"], ws["root"])
            fault = f"{kind.shim}@{n}" if kind.shim and n else ""
            extra = kind.env(ws, n) if kind.env else None
            status = self._phase(w, ws, "run", seed, fault, extra_env=extra)
            fault_text = kind.fired(ws) if kind.fired else _fault_line(ws["log"])
            injected = bool(fault_text) or (kind.shim == "powerloss" and n is not None)
            if status.startswith("timeout"):
                findings.append(Finding("harness", f"the faulted run hung ({status})"))
            if kind.after_run:
                kind.after_run(ws)
            findings += w.check_fn(ctx)
            if w.resume_fn:
                rstatus = self._phase(w, ws, "resume", seed)
                if rstatus != "exit 0":
                    out = (ws["side"] / "resume.out").read_text(errors="replace")[-1500:]
                    findings.append(Finding("next_save", f"resume {rstatus}: {out}"))
                elif w.check_resumed_fn:
                    findings += w.check_resumed_fn(ctx)
            if w.leftovers_fn:
                findings += w.leftovers_fn(ctx)
        except Exception as e:  # noqa: BLE001 - a harness error is a result
            import traceback
            findings.append(Finding("harness", "".join(traceback.format_exception(e))[-2000:]))
        out = Outcome(w.name, kind.name, n, seed, injected, fault_text, status, findings)
        # Kept for a look: the directories of faults with a finding (leftovers
        # alone only with `keep`, they are many until the sweeping lands).
        serious = any(f.clause != "leftover" for f in findings)
        if serious or (findings and self.keep):
            self.failed = self.failed or serious
            out.status += f"; kept in {ws['base']}"
        elif not self.keep:
            shutil.rmtree(ws["base"], ignore_errors=True)
        return out

    def every(self) -> Report:
        """Every point: each selected kind at each operation of each selected
        path's dry run (power loss also after the last), in order, seeded."""
        rng = random.Random(self.seed)
        report = Report(self.seed)
        for name in self.paths:
            w = WORKLOADS[name]
            count = len(self.trace(w))
            report.op_counts[name] = count
            for kind in [KINDS[k] for k in self.kinds if k in w.kinds]:
                last = count + 1 if kind.name == "powerloss" else count
                for n in range(1, last + 1):
                    o = self.run_one(w, kind, n, rng.getrandbits(48))
                    report.outcomes.append(o)
                    self.log(f"{name} {kind.name}@{n}/{count} {o.status}"
                             f"{' FAILED ' + str([f.clause for f in o.findings]) if o.findings else ''}")
        return report

    def run(self, faults: int) -> Report:
        rng = random.Random(self.seed)
        report = Report(self.seed)
        weights = [WORKLOADS[p].weight for p in self.paths]
        for i in range(faults):
            w = WORKLOADS[rng.choices(self.paths, weights)[0]]
            kinds = [k for k in self.kinds if k in w.kinds]
            kind = KINDS[rng.choice(kinds)]
            fault_seed = rng.getrandbits(48)
            n = kind.pick(self.trace(w), random.Random(fault_seed))
            o = self.run_one(w, kind, n, fault_seed)
            report.outcomes.append(o)
            report.op_counts[w.name] = len(self.trace(w))
            self.log(f"[{i + 1}/{faults}] {w.name} {kind.name}@{n} {o.status}"
                     f"{' FAILED ' + str([f.clause for f in o.findings]) if o.findings else ''}")
        return report


def _fault_line(log: pathlib.Path) -> str:
    if not log.exists():
        return ""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("FAULT\t"):
            parts = line.split("\t")
            what = " ".join(p for p in parts[4:] if p)
            return f"op {parts[2]} ({parts[1]}) was {what}"
    return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults", type=int, default=100)
    ap.add_argument("--paths", default="", help="comma-separated workloads (default: all)")
    ap.add_argument("--kinds", default="", help="comma-separated fault kinds (default: all)")
    ap.add_argument("--orbax-sample", type=float, default=0.2)
    ap.add_argument("--work", default=None, help="scratch directory (kept)")
    ap.add_argument("--every", action="store_true",
                    help="instead of --faults: each kind at every operation of each path")
    ap.add_argument("--one", default=None, help="workload:kind:N, one fault (with --seed as its seed)")
    ap.add_argument("--list", action="store_true", help="list paths and kinds")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    split = lambda s: [x for x in s.split(",") if x] or None  # noqa: E731
    log = (lambda s: print(s, flush=True)) if a.verbose else None
    start = time.monotonic()
    with Campaign(a.seed, split(a.paths), split(a.kinds), a.work, orbax_sample=a.orbax_sample, log=log) as c:
        if a.list:
            print("paths:", " ".join(WORKLOADS), "\nkinds:", " ".join(KINDS))
            return 0
        if a.one:
            name, kind, n = a.one.split(":")
            report = Report(a.seed)
            c.orbax_sample = 1.0
            report.outcomes.append(c.run_one(WORKLOADS[name], KINDS[kind], int(n) if n != "None" else None, a.seed))
        elif a.every:
            report = c.every()
        else:
            report = c.run(a.faults)
    print(report.table())
    print(f"{time.monotonic() - start:.0f} s")
    return 1 if report.failures else 0


if __name__ == "__main__":
    import campaign  # one module, whichever way it was started (the workloads import it)
    sys.exit(campaign.main())
