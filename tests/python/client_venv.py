"""Isolated virtual environments for the real clients the tests run against
(AXLearn's pinned release, MaxText on Python 3.12, an older orbax-checkpoint),
and running a client's job script inside one.

A venv is built once under build/ and reused while `is_ready(venv)` says it
still works. It is built in a temporary sibling directory and moved into
place only when every install step succeeded, so an interrupted build never
leaves a half-installed venv that looks usable. Any failure FAILS the test
(pytest.fail with the command and its output): a missing peer is never a skip.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from typing import Callable, Sequence

import json

import ml_dtypes
import numpy as np
import pytest


def ensure_venv(venv: pathlib.Path, base_python: str, packages: Sequence[str], *, what: str,
                is_ready: Callable[[pathlib.Path], bool], constraints: pathlib.Path | None = None,
                system_site_packages: bool = False, timeout: float = 3600,
                after_build: Callable[[pathlib.Path], None] | None = None) -> str:
    """The python of `venv`, building it first when `is_ready(venv)` is false:
    `base_python -m venv` then `pip install [-c constraints] packages`.

    With `system_site_packages`, the venv also sees this interpreter's
    environment (when pytest itself runs in a venv, --system-site-packages
    reaches only the base interpreter's, so a .pth adds this one's).
    `after_build(venv)` runs once the venv is in place (e.g. to write a
    marker); `what` names the environment in errors."""
    venv = pathlib.Path(venv)
    if is_ready(venv):
        return str(venv / "bin" / "python")
    tmp = venv.with_name(venv.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    create = [base_python, "-m", "venv", *(["--system-site-packages"] if system_site_packages else []), str(tmp)]
    install = [str(tmp / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
               *(["-c", str(constraints)] if constraints else []), *packages]
    for cmd in (create, install):
        if cmd is install and system_site_packages and sys.prefix != sys.base_prefix:
            (site_dir,) = (tmp / "lib").glob("python*/site-packages")
            (site_dir / "cairn-parent-env.pth").write_text(
                "\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.fail(f"could not build the {what} environment: {' '.join(cmd)} exited {r.returncode}\n"
                        f"stdout:\n{r.stdout[-6000:]}\nstderr:\n{r.stderr[-6000:]}", pytrace=False)
    shutil.rmtree(venv, ignore_errors=True)
    os.replace(tmp, venv)  # bin/python and `python -m pip` work from the moved directory
    if after_build is not None:
        after_build(venv)
    if not is_ready(venv):
        pytest.fail(f"{what} was installed in {venv} but does not import as expected", pytrace=False)
    return str(venv / "bin" / "python")


def client_environment() -> dict:
    """This process's environment for another venv's python, on CPU: without
    PYTHONPATH (nothing of this interpreter's leaks in) and without XLA_FLAGS
    (the tests' flags may be unknown to the client's older jaxlib, which
    then aborts: AXLearn's 0.4.21 has no collective timeouts); the jobs set
    their own device count."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "XLA_FLAGS")}
    env["JAX_PLATFORMS"] = "cpu"
    return env


def run_client_job(python: str, job: pathlib.Path, what: str, *args, timeout: float = 600) -> None:
    """Runs `python job args...` in client_environment(); fails with the
    job's output."""
    r = subprocess.run([python, str(job), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       env=client_environment())
    assert r.returncode == 0, f"{what} job {args[0] if args else ''} failed:\n{r.stdout[-4000:]}\n{r.stderr[-8000:]}"


def probe(python, dist: str, module: str, *also_print: str) -> subprocess.CompletedProcess:
    """Runs `python` on CPU to print the installed version of `dist`, the file
    `module` imports from, then each expression of `also_print` (after
    importing jax and numpy), one per line."""
    code = (f"import importlib.metadata as m, importlib, jax, numpy; print(m.version({dist!r})); "
            f"print(importlib.import_module({module!r}).__file__)" +
            "".join(f"; print({e})" for e in also_print))
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300,
                          env=client_environment())


def venv_has(venv: pathlib.Path, dist: str, version: str, module: str) -> bool:
    """Whether `venv`'s python imports `module` from inside the venv, with
    `dist` at exactly `version` (an `is_ready` for ensure_venv)."""
    python = pathlib.Path(venv) / "bin" / "python"
    if not python.exists():
        return False
    r = probe(python, dist, module)
    lines = r.stdout.split()
    return r.returncode == 0 and len(lines) >= 2 and lines[0] == version and lines[1].startswith(str(venv))


def load_npy_dump(directory):
    """({path: array}, manifest) from a manifest.json + .npy dump written by
    a client job (axlearn_client_job.py, maxtext_client_job.py); bfloat16
    arrays are stored as their bits and viewed back."""
    manifest = json.loads((pathlib.Path(directory) / "manifest.json").read_text())
    out = {}
    for path, entry in manifest.items():
        a = np.load(pathlib.Path(directory) / entry["file"])
        if entry["dtype"] == "bfloat16":
            a = a.view(ml_dtypes.bfloat16)
        assert str(a.dtype) == entry["dtype"] and list(a.shape) == entry["shape"], (path, entry)
        out[path] = a
    return out, manifest
