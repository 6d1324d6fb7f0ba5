"""Every code block of docs/GUIDE.md runs, and asserts its own results.

How the guide is read:

- Sections are the `## ` headings. Each section runs in a fresh, empty
  directory of its own, its blocks in the order they appear (a block may use
  the files the blocks above it in its section wrote).
- Only ```python and ```sh fences are allowed in the guide (any other fence
  fails `test_guide_has_only_runnable_blocks`): every code block runs.
- A ```python block runs as a script with the test's own Python (the venv
  cairn is installed in), in the section's directory, which is first on
  sys.path (as for `python script.py` there).
- A ```sh block runs with `bash -e -o pipefail`, in the section's directory,
  with the test's Python's bin directories first on PATH, so `python` and
  `cairn` are the installed package's.
- A directive, an HTML comment on the last non-blank line before a fence,
  changes how its block runs (GitHub does not show the comment):
  - `<!-- guide: continue -->`: the python block continues the python block
    before it (in the same section): the two run as one script, once.
  - `<!-- guide: file NAME -->`: the block is not run but written to NAME in
    the section's directory (a python file is compiled, so a syntax error
    fails here); a later block runs it, e.g. a ```sh block that starts it as
    several processes (`python NAME 0 & python NAME 1; wait $!`).
  Any other `<!-- guide: ... -->` is an error.
- Each block must exit 0 within its timeout; the test also checks that the
  block ran to its end (a marker echoed after it), and counts the blocks run
  against the fences in the file, so a block that the extraction missed, or
  that returned early, fails.

The environment the blocks get (what a user sets, as the guide says):
- `JAX_COORDINATOR_ADDRESS`: 127.0.0.1 and a free port, new for each block
  (the guide's jax.distributed scripts read it, with a default for users);
- S3 on a moto server (`AWS_ENDPOINT_URL`, static `AWS_ACCESS_KEY_ID` /
  `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, no ~/.aws, no instance metadata)
  and GCS on fake-gcs-server (`STORAGE_EMULATOR_HOST`), both with the bucket
  `BUCKET` the guide uses, as tests/python/s3_helpers.py starts them;
- `OMPI_ALLOW_RUN_AS_ROOT*` so that the guide's `mpirun` runs in a root
  container; no `JAX_PLATFORMS` or MPI rank variables from the test's own
  environment;
- `XLA_FLAGS` with longer timeouts for XLA's CPU collectives, which the
  blocks extend with their device count: XLA ends a process whose
  collective has not gathered its simulated devices' threads within 40 s,
  and at load 5 on 2 cores (two suites side by side) a training step of
  8 devices once took longer (GUIDE.md's resume block, killed with
  SIGABRT).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import signal
import subprocess
import sys
import sysconfig
import time

import pytest

from conftest import XLA_COLLECTIVE_TIMEOUTS
from s3_helpers import FakeGcsServer, MotoServer, free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "GUIDE.md"
BUCKET = "my-bucket"  # the bucket the guide's object-store section uses
DONE = "@@guide-block-ran-to-its-end@@"
BLOCK_TIMEOUT_S = 300

_FENCE = re.compile(r"^```(\S*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*guide:\s*(.*?)\s*-->$")


@dataclasses.dataclass
class Block:
    section: str
    line: int          # of the opening fence, 1-based
    lang: str          # "python" or "sh"
    code: str
    directive: str     # "", "continue" or "file NAME"


@dataclasses.dataclass
class Unit:
    """What runs once: one block, or a python block and its continuations."""
    blocks: list

    @property
    def first(self) -> Block:
        return self.blocks[0]


def parse_guide(text: str):
    """(sections in order, {section: [Block]}, fences seen): every fenced
    block with its section and directive. ValueError for an unclosed fence or
    an unknown directive."""
    sections, blocks = [], {}
    section = None
    lines = text.splitlines()
    fences = 0
    i = 0
    last_nonblank = ""
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m and m.group(1):
            fences += 1
            lang, start = m.group(1), i
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ValueError(f"GUIDE.md:{start + 1}: the ```{lang} fence is never closed")
            d = _DIRECTIVE.match(last_nonblank.strip())
            directive = d.group(1) if d else ""
            if directive and not (directive == "continue" or re.fullmatch(r"file [\w.-]+", directive)):
                raise ValueError(f"GUIDE.md:{start}: unknown directive {directive!r}")
            if section is None:
                raise ValueError(f"GUIDE.md:{start + 1}: a code block before the first ## section")
            blocks[section].append(Block(section, start + 1, lang, "\n".join(body) + "\n", directive))
            last_nonblank = line
        elif line.startswith("## "):
            section = line[3:].strip()
            sections.append(section)
            blocks[section] = []
        if line.strip():
            last_nonblank = line
        i += 1
    return sections, blocks, fences


def units_of(blocks):
    """The runs of a section: each block alone, except that a `continue`
    block joins the unit of the python block before it."""
    units = []
    for b in blocks:
        if b.directive == "continue":
            if not units or units[-1].first.lang != "python" or b.lang != "python" or \
                    units[-1].first.directive.startswith("file"):
                raise ValueError(f"GUIDE.md:{b.line}: `continue` must follow a python block that runs")
            units[-1].blocks.append(b)
        else:
            units.append(Unit([b]))
    return units


SECTIONS, BLOCKS, FENCES = parse_guide(GUIDE.read_text(encoding="utf-8"))


def _bin_dirs():
    dirs = []
    for d in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        if d and d not in dirs:
            dirs.append(d)
    return dirs


@pytest.fixture(scope="module")
def emulators():
    moto = MotoServer()
    moto.create_bucket(BUCKET)
    gcs = FakeGcsServer.shared()
    gcs.create_bucket(BUCKET)
    yield moto, gcs
    moto.stop()


def block_environment(tmp_path, moto, gcs) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI_", "PMIX_", "AWS_", "GOOGLE_", "CLOUDSDK_"))
           and k not in ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_COORDINATOR_ADDRESS", "STORAGE_EMULATOR_HOST",
                         "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(_bin_dirs() + [env.get("PATH", "")])
    env["XLA_FLAGS"] = XLA_COLLECTIVE_TIMEOUTS
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    # S3 on moto (as s3_helpers.s3_environment): static keys, no profile.
    env["AWS_ENDPOINT_URL"] = moto.endpoint
    env["AWS_ACCESS_KEY_ID"] = "testing"
    env["AWS_SECRET_ACCESS_KEY"] = "testing"
    env["AWS_REGION"] = "us-east-1"
    for name in ("credentials", "config"):
        (tmp_path / f"empty-aws-{name}").write_text("")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "empty-aws-credentials")
    env["AWS_CONFIG_FILE"] = str(tmp_path / "empty-aws-config")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    # GCS on fake-gcs-server; no gcloud credentials of the machine's user.
    env["STORAGE_EMULATOR_HOST"] = gcs.endpoint
    env["CLOUDSDK_CONFIG"] = str(tmp_path / "no-gcloud")
    env["CAIRN_HTTP_INITIAL_BACKOFF_MS"] = "5"
    return env


def run_unit(unit: Unit, cwd: pathlib.Path, scripts: pathlib.Path, env: dict, index: int) -> bool:
    """Runs (or writes) one unit; returns True when it ran. Fails the test,
    naming the block's line, when it exits non-zero, times out or stops
    before its end."""
    first = unit.first
    where = f"docs/GUIDE.md:{first.line} (section {first.section!r})"
    if first.directive.startswith("file "):
        name = first.directive.split(" ", 1)[1]
        (cwd / name).write_text(first.code)
        if first.lang == "python":
            compile(first.code, f"{where}: {name}", "exec")
        return False
    env = dict(env, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}")
    if first.lang == "python":
        code = "".join(b.code for b in unit.blocks) + f"\nprint({DONE!r})\n"
        script = scripts / f"block_{index:02d}_line_{first.line}.py"
        script.write_text(code)
        # As `python script.py` run from the section's directory would: that
        # directory first on sys.path (so a block imports a file an earlier
        # block wrote), tracebacks naming the script.
        cmd = [sys.executable, "-c", f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')"]
    elif first.lang == "sh":
        script = scripts / f"block_{index:02d}_line_{first.line}.sh"
        script.write_text(first.code + f"\necho {DONE}\n")
        cmd = ["bash", "-e", "-o", "pipefail", str(script)]
    else:
        pytest.fail(f"{where}: a ```{first.lang} block cannot run (only python and sh)")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{where}: still running after {BLOCK_TIMEOUT_S} s:\n{out[-4000:]}")
    finally:
        try:  # what the block left running in the background (a hung peer)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    took = time.monotonic() - start
    print(f"--- {where}: exit {proc.returncode} in {took:.1f} s\n{out[-3000:]}")
    assert proc.returncode == 0, f"{where}: exit status {proc.returncode}:\n{out[-6000:]}"
    assert out.rstrip().endswith(DONE), f"{where}: the block did not run to its end:\n{out[-4000:]}"
    return True


def run_section(section: str, tmp_path: pathlib.Path, moto, gcs) -> int:
    """Runs a section's blocks in order in a fresh directory; returns how
    many blocks it ran or wrote."""
    cwd = tmp_path / "work"
    scripts = tmp_path / "blocks"
    cwd.mkdir(parents=True)
    scripts.mkdir()
    env = block_environment(tmp_path, moto, gcs)
    count = 0
    for index, unit in enumerate(units_of(BLOCKS[section])):
        run_unit(unit, cwd, scripts, env, index)
        count += len(unit.blocks)
    return count


def test_guide_blocks_run(tmp_path, emulators, peer_transports):
    """Every section in order, each in a directory of its own; then the
    count: every fence of the file (counted the simplest way) was run or
    written, so a block the parser missed fails here."""
    moto, gcs = emulators
    ran = {}
    for n, section in enumerate(SECTIONS):
        ran[section] = run_section(section, tmp_path / f"section_{n}", moto, gcs)
    # Fences counted the simplest way (indented ones too, which the parser
    # does not take): every other line starting with ``` opens one.
    fence_lines = [line.strip() for line in GUIDE.read_text(encoding="utf-8").splitlines()
                   if line.lstrip().startswith("```")]
    opening = fence_lines[0::2]
    assert len(opening) == FENCES == sum(len(b) for b in BLOCKS.values()), opening
    assert sum(ran.values()) == FENCES, ran
    # The guide as written has at least this much in it.
    assert sum(1 for line in opening if line == "```python") >= 8
    assert sum(1 for line in opening if line == "```sh") >= 8
    assert sum(1 for n in ran.values() if n) >= 6, ran


def test_guide_has_only_runnable_blocks():
    bad = [f"docs/GUIDE.md:{b.line}: ```{b.lang}" for s in SECTIONS for b in BLOCKS[s]
           if b.lang not in ("python", "sh")]
    assert not bad, "every code block of the guide must run (```python or ```sh): " + ", ".join(bad)


def test_parser_reads_directives_and_refuses_unknown_ones():
    text = ("## A\n\n```python\nx = 1\n```\n\n<!-- guide: continue -->\n```python\nassert x == 1\n```\n"
            "<!-- guide: file w.py -->\n\n```python\nprint(1)\n```\n## B\n```sh\ntrue\n```\n")
    sections, blocks, fences = parse_guide(text)
    assert sections == ["A", "B"] and fences == 4
    assert [b.directive for b in blocks["A"]] == ["", "continue", "file w.py"]
    assert [len(u.blocks) for u in units_of(blocks["A"])] == [2, 1]
    with pytest.raises(ValueError, match=r"GUIDE.md:1: unknown directive 'skip'"):
        parse_guide("<!-- guide: skip -->\n```sh\ntrue\n```\n")
    with pytest.raises(ValueError, match=r"GUIDE.md:2: the ```sh fence is never closed"):
        parse_guide("## A\n```sh\ntrue\n")
