"""The MaxText 0.2.5 environment the MaxText tests run in: an ISOLATED
virtual environment under build/ with a Python 3.12 interpreter (MaxText
0.2.5 requires >= 3.12), `pip install maxtext==0.2.5` plus the packages its
checkpointing module and its training loop import, pinned by
maxtext_constraints.txt (the wheel declares every dependency under an
extra; its "tpu"/"cuda12" extras pull hundreds of packages, so the venv
installs only what is imported, a few minutes once). A marker file records
a complete venv; it is reused while the marker matches the requirements.
No Python 3.12, or a pip failure, FAILS the tests.

`maxtext_python` is the venv's interpreter (session fixture);
`maxtext_python_with_cairn` the same venv with this checkout's cairn
installed into it (built for 3.12 in build/py312), for MaxText's own
training loop checkpointing through cairn."""

from __future__ import annotations

import glob
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from client_venv import ensure_venv

MAXTEXT = "0.2.5"
REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
# `pip freeze` of a working venv, so every run installs the same versions.
CONSTRAINTS = HERE / "maxtext_constraints.txt"
# maxtext 0.2.5 plus what `import maxtext.common.checkpointing` imports
# (found by importing it until nothing was missing): jax on CPU, flax, optax,
# orbax-checkpoint, tensorstore; huggingface-hub and transformers
# (checkpoint_conversion), grain, omegaconf, pathwaysutils, jinja2, drjax,
# jaxtyping, qwix, aqtp (input pipeline, configs, quantization, DiLoCo);
# and what its training loop imports at start-up even for a synthetic run:
# tokamax, pillow, sentencepiece, tiktoken, sympy, ml_collections.
REQUIREMENTS = [
    f"maxtext=={MAXTEXT}", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "tensorstore", "numpy",
    "ml-dtypes", "huggingface-hub", "transformers", "grain", "omegaconf", "pathwaysutils", "jinja2", "drjax",
    "jaxtyping", "qwix", "aqtp", "tokamax", "pillow", "sentencepiece", "tiktoken", "sympy", "ml_collections",
]

def _is_python312(exe) -> bool:
    try:
        r = subprocess.run([str(exe), "-c", "import sys, venv, ensurepip; print(sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return r.returncode == 0 and r.stdout.strip() == "(3, 12)"


def _python312():
    """A CPython 3.12 that can make venvs: this interpreter, `python3.12` on
    PATH, or pyenv's installs; the test fails if there is none."""
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = [sys.executable if sys.version_info[:2] == (3, 12) else None, shutil.which("python3.12"),
                  *sorted(glob.glob(os.path.join(pyenv_root, "versions", "3.12*", "bin", "python3.12")), reverse=True),
                  "/usr/bin/python3.12", "/usr/local/bin/python3.12"]
    tried = []
    for exe in dict.fromkeys(c for c in candidates if c):
        tried.append(exe)
        if os.path.exists(exe) and _is_python312(exe):
            return exe
    pytest.fail(f"no Python 3.12 to build the MaxText {MAXTEXT} environment (maxtext {MAXTEXT} requires "
                f">= 3.12; this is {sys.version.split()[0]}); tried {tried}. Install it with pyenv "
                f"(`pyenv install 3.12`) or put `python3.12` on PATH.", pytrace=False)


def _requirements_tag(base) -> str:
    h = hashlib.sha256()
    h.update("\n".join(REQUIREMENTS).encode())
    h.update(CONSTRAINTS.read_bytes())
    h.update(os.path.realpath(base).encode())
    return h.hexdigest()


@pytest.fixture(scope="session")
def maxtext_python():
    """The python of an isolated venv with maxtext==0.2.5 and its
    checkpointing module's imports; created once, reused while its marker
    matches REQUIREMENTS, the constraints file and the base interpreter.
    No --system-site-packages: this machine's jax/orbax are for another Python."""
    base = _python312()
    venv = pathlib.Path(os.environ.get("CAIRN_MAXTEXT_VENV", REPO / "build" / f"venv-maxtext-{MAXTEXT}-py312"))
    tag = _requirements_tag(base)

    def ready(v):
        marker = v / "cairn-venv-complete"
        return marker.exists() and marker.read_text() == tag and (v / "bin" / "python").exists()

    return ensure_venv(venv, base, REQUIREMENTS, what=f"MaxText {MAXTEXT}", is_ready=ready,
                       constraints=CONSTRAINTS,
                       after_build=lambda v: (v / "cairn-venv-complete").write_text(tag))




@pytest.fixture(scope="session")
def maxtext_python_with_cairn(maxtext_python):
    """`maxtext_python` with this checkout's cairn installed into the venv
    (built for Python 3.12 in build/py312, once per test session)."""
    cmd = [maxtext_python, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps",
           "--force-reinstall", "-q", str(REPO), "-C", f"build-dir={REPO / 'build' / 'py312'}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                       env={**os.environ, "CCACHE_DIR": os.environ.get(
                           "CCACHE_DIR", os.path.expanduser("~/.cache/cairn-ccache")),
                            "CCACHE_BASEDIR": str(REPO), "CCACHE_NOHASHDIR": "1"})
    if r.returncode != 0:
        pytest.fail(f"could not install cairn into the MaxText environment: {' '.join(cmd)} exited "
                    f"{r.returncode}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-6000:]}", pytrace=False)
    return maxtext_python
