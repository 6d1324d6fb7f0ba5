"""The campaign's file paths: cairn.CheckpointManager save + retention, convert
to every format, OCDBT commits with one writer and with two. Each registers
itself with campaign.register_workload (see campaign.Workload for the
functions' roles)."""

from __future__ import annotations

import os
import pathlib

import numpy as np

import crash_trees as trees
from campaign import Finding, register_workload

KEEP = 2  # max_to_keep of the manager path
BASE_STEPS = (1, 2)  # committed in the template
RUN_STEPS = (3, 4)
RESUME_STEP = 5


def warm_up() -> None:
    """In the worker, before it forks: imports and the trees."""
    import cairn  # noqa: F401
    trees.base(os.environ.get("CAIRN_CRASH_TREES"))


def _temporaries(top: pathlib.Path) -> list:
    """Names below `top` that only an unfinished write leaves."""
    marks = (".orbax-checkpoint-tmp", "__cairn_tmp", ".cairn-deleting-", ".__lock", ".tmp")
    return sorted(str(p.relative_to(top)) for p in top.rglob("*") if any(m in p.name for m in marks))


def leftovers(ctx) -> list:
    """The leftover clause: temporaries below the root after the resume (the
    outermost of each)."""
    names = _temporaries(ctx.root)
    outer = [n for n in names if not any(n.startswith(o + "/") for o in names)]
    return [Finding("leftover", f"{name} (below {ctx.root}) after the resume") for name in outer]


# ---- CheckpointManager: save + retention ----

def _manager(root, **kw):
    import cairn
    return cairn.CheckpointManager(str(root / "ckpt"), max_to_keep=KEEP, **kw)


def manager_prepare(template: pathlib.Path) -> None:
    with _manager(template) as m:
        for s in BASE_STEPS:
            m.save(s, trees.at(s))
            m.wait_until_finished()


def _manager_run(ctx, enable_async: bool) -> None:
    with _manager(ctx.root, enable_async=enable_async) as m:
        for s in RUN_STEPS:
            m.save(s, trees.at(s))
            m.wait_until_finished()
            ctx.commit(step=s)


def manager_resume(ctx) -> None:
    with _manager(ctx.root) as m:
        m.save(RESUME_STEP, trees.at(RESUME_STEP))
        m.wait_until_finished()
    ctx.commit("resume", step=RESUME_STEP)


def _check_steps(ctx, must: list, who: str, listed: list, restore) -> list:
    out = []
    for s in must:
        # Retention may remove a committed step once KEEP newer ones are whole.
        if s not in listed and sum(1 for t in listed if t > s) < KEEP:
            out.append(Finding("loss", f"{who}: committed step {s} is not listed (lists {listed})"))
    for s in listed:
        try:
            why = trees.same(restore(s), trees.at(s))
        except Exception as e:  # noqa: BLE001 - a listed step that does not restore
            why = f"{type(e).__name__}: {e}"
        if why:
            clause = "loss" if s in must else "half_written"
            out.append(Finding(clause, f"{who}: listed step {s} does not restore bit-exactly: {why}"))
    return out


def _orbax_check(ctx, must: list) -> list:
    import orbax.checkpoint as ocp
    with ocp.CheckpointManager(str(ctx.root / "ckpt")) as o:
        listed = sorted(o.all_steps())
        return _check_steps(ctx, must, "Orbax", listed,
                            lambda s: o.restore(s, args=ocp.args.PyTreeRestore(trees.at(s))))


def manager_check(ctx) -> list:
    must = sorted(set(BASE_STEPS) | {r["step"] for r in ctx.committed()})
    m = _manager(ctx.root)
    try:
        out = _check_steps(ctx, must, "cairn", m.all_steps(), lambda s: m.restore(s, target=trees.at(s)))
    finally:
        m.close()
    if ctx.orbax_sample:
        out += _orbax_check(ctx, must)
    return out


def manager_check_resumed(ctx) -> list:
    m = _manager(ctx.root)
    try:
        steps = m.all_steps()
        out = _check_steps(ctx, [RESUME_STEP], "cairn after the resume", steps,
                           lambda s: m.restore(s, target=trees.at(s)))
    finally:
        m.close()
    if len(steps) > KEEP:
        out.append(Finding("next_save", f"retention kept {steps} after the resume (max_to_keep={KEEP})"))
    return out


for _async in (True, False):
    register_workload("manager_async" if _async else "manager_sync",
                      lambda ctx, a=_async: _manager_run(ctx, a), manager_check,
                      prepare_fn=manager_prepare, resume_fn=manager_resume,
                      check_resumed_fn=manager_check_resumed, leftovers_fn=leftovers)


# ---- convert to every format ----

CONVERT_STEP = 7
FORMATS = ("orbax", "orbax-zarr2", "axlearn", "safetensors")


def _view(fmt: str, dest: pathlib.Path, orbax_too: bool = False) -> dict:
    """What a reader gets from a converted checkpoint: {name: (dtype, shape,
    bytes)}; raises when there is nothing readable."""
    if fmt.startswith("orbax"):
        import cairn
        got = trees.flat(cairn.restore(str(dest / str(CONVERT_STEP) / "default")))
        if orbax_too:
            import orbax.checkpoint as ocp
            with ocp.PyTreeCheckpointer() as pc:
                theirs = trees.flat(pc.restore(str(dest / str(CONVERT_STEP) / "default")))
            why = trees.diff(theirs, got)
            if why:
                raise AssertionError(f"Orbax reads differently from cairn: {why}")
        return got
    if fmt == "safetensors":
        from safetensors.numpy import load_file
        return {k: (str(v.dtype), v.shape, v.tobytes()) for k, v in load_file(str(dest / "model.safetensors")).items()}
    import json
    import tensorstore as ts
    step = dest / f"step_{CONVERT_STEP:08d}"
    index = json.loads((step / "index").read_text())
    out = {"step": index[0][1]}
    for path, _ in index[1:]:
        if isinstance(_, dict) and "dtype" in _:
            t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(step / "gda" / path)}}).result()
            a = t.read().result()
            out[path] = (str(a.dtype), a.shape, a.tobytes())
    return out


def _looks_committed(fmt: str, dest: pathlib.Path) -> bool:
    if fmt.startswith("orbax"):
        import cairn
        return (dest / str(CONVERT_STEP)).exists() or bool(cairn.orbax.all_steps(str(dest)) if dest.exists() else [])
    if fmt == "safetensors":
        return (dest / "model.safetensors").exists()
    return (dest / f"step_{CONVERT_STEP:08d}" / "index").exists()


def _convert_fns(fmt: str):
    def prepare(template: pathlib.Path) -> None:
        import cairn
        with cairn.CheckpointManager(str(template / "src")) as m:
            m.save(CONVERT_STEP, trees.at(CONVERT_STEP))
            m.wait_until_finished()
        ref = template.parent / f"{template.name}.ref"
        import shutil
        shutil.rmtree(ref, ignore_errors=True)
        cairn.convert(str(template / "src"), str(ref), to=fmt, threads=1)

    def run(ctx) -> None:
        import cairn
        cairn.convert(str(ctx.root / "src"), str(ctx.root / "dst"), to=fmt, threads=1)
        ctx.commit(dest="dst")

    def resume(ctx) -> None:
        import cairn
        try:
            cairn.convert(str(ctx.root / "src"), str(ctx.root / "dst"), to=fmt, threads=1)
        except FileExistsError as e:
            # By design a committed destination is kept (overwrite=False):
            # the answer when the faulted run had committed; its check reads it.
            if "committed checkpoint" not in str(e):
                raise
        ctx.commit("resume", dest="dst")

    def ref_view(ctx) -> dict:
        return _view(fmt, ctx.root.parent.parent.parent / "templates" / f"convert_{fmt}.ref")

    def check(ctx) -> list:
        dest = ctx.root / "dst"
        committed = bool(ctx.committed())
        if not committed and not _looks_committed(fmt, dest):
            return []
        try:
            why = trees.diff(_view(fmt, dest, ctx.orbax_sample), ref_view(ctx))
        except Exception as e:  # noqa: BLE001
            why = f"{type(e).__name__}: {e}"
        if not why:
            return []
        return [Finding("loss" if committed else "half_written",
                        f"{fmt} destination {'committed' if committed else 'that looks committed'}"
                        f" does not read back: {why}")]

    def check_resumed(ctx) -> list:
        why = trees.diff(_view(fmt, ctx.root / "dst", ctx.orbax_sample), ref_view(ctx))
        return [Finding("next_save", f"{fmt} after the resume: {why}")] if why else []

    return prepare, run, resume, check, check_resumed


for _fmt in FORMATS:
    _p, _r, _res, _c, _cr = _convert_fns(_fmt)
    register_workload(f"convert_{_fmt}", _r, _c, prepare_fn=_p, resume_fn=_res, check_resumed_fn=_cr,
                      leftovers_fn=leftovers)


# ---- OCDBT commits: one writer, two writers ----

SIZES = (0, 50, 1025, 5000, 70000, 300)


def value(key: str, size: int) -> bytes:
    import hashlib
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def expected(key: str) -> bytes:
    return value(key, SIZES[int(key.rsplit("k", 1)[1]) % len(SIZES)])


def _store(root: pathlib.Path):
    import cairn
    return cairn.kvstore.open(f"file://{root / 'db'}/|ocdbt:")


def ocdbt_prepare(template: pathlib.Path) -> None:
    _store(template).put_many({f"base/k{i}": expected(f"base/k{i}") for i in range(3)})


def _writer(ctx, name: str, keys: int) -> None:
    store = _store(ctx.root)
    for i in range(keys):
        key = f"{name}/k{i}"
        store.put(key, expected(key))
        ctx.commit(key=key)


def ocdbt_single_run(ctx) -> None:
    _writer(ctx, "w0", 6)


def ocdbt_multi_run(ctx) -> None:
    pids = []
    for j in range(2):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _writer(ctx, f"w{j}", 4)
            except BaseException:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                code = 3
            os._exit(code)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)


def ocdbt_resume(ctx) -> None:
    store = _store(ctx.root)
    store.put("resume/k2", expected("resume/k2"))
    if store.get("resume/k2") != expected("resume/k2"):
        raise AssertionError("resume/k2 reads back differently")
    ctx.commit("resume", key="resume/k2")


def _check_db(ctx, who: str, listed: dict, must: list) -> list:
    out = [Finding("loss", f"{who}: committed key {k} is missing") for k in must if k not in listed]
    for k, v in listed.items():
        if v != expected(k):
            out.append(Finding("loss" if k in must else "half_written",
                               f"{who}: key {k} holds {len(v)} bytes that are not what was written"))
    return out


def _read_all(ctx) -> dict:
    store = _store(ctx.root)
    return {k: store.get(k) for k in store.keys()}


def _ts_read_all(ctx) -> dict:
    import tensorstore as ts
    kv = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{ctx.root / 'db'}/"}).result()
    return {k.decode(): kv.read(k).result().value for k in kv.list().result()}


def ocdbt_check(ctx) -> list:
    must = [f"base/k{i}" for i in range(3)] + [r["key"] for r in ctx.committed()]
    out = []
    for who, read in (("cairn", _read_all), ("TensorStore", _ts_read_all)):
        if who == "TensorStore" and not ctx.orbax_sample:
            continue
        try:
            out += _check_db(ctx, who, read(ctx), must)
        except Exception as e:  # noqa: BLE001
            out.append(Finding("loss", f"{who} cannot read the database: {type(e).__name__}: {e}"))
    return out


def ocdbt_check_resumed(ctx) -> list:
    listed = _read_all(ctx)
    if listed.get("resume/k2") != expected("resume/k2"):
        return [Finding("next_save", "the resumed commit resume/k2 does not read back")]
    return []


register_workload("ocdbt_single", ocdbt_single_run, ocdbt_check, prepare_fn=ocdbt_prepare,
                  resume_fn=ocdbt_resume, check_resumed_fn=ocdbt_check_resumed, leftovers_fn=leftovers)
register_workload("ocdbt_multi", ocdbt_multi_run, ocdbt_check, prepare_fn=ocdbt_prepare,
                  resume_fn=ocdbt_resume, check_resumed_fn=ocdbt_check_resumed, leftovers_fn=leftovers)
