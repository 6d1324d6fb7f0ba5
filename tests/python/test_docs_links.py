"""The docs point at things that exist.

Every relative link of a Markdown doc (README.md, docs/**/*.md) must name a file or
folder of the repository, and every repository path a doc names in the text
(`src/cairn/engine/save.h`, `tests/python/test_cli.py`, and `engine/save.h`
for a file under src/cairn/) must exist, so
that a file moved or renamed without its docs fails here, naming the doc, the
line and the path.

Not checked: web links, anchors inside a page, paths with placeholders
(`<step>`, `*_test.cc`), and `bench/results/`, which the benchmarks write.
"""
from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# [text](target) and [text](target "title"); images too.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A repository path with a file extension, starting at a top-level folder
# that holds code or docs.
_TOP = ("src", "include", "python", "cli", "tests", "bench", "scripts", "docs", "examples", "cmake")
_PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.\w+)" % "|".join(_TOP))
_SKIPPED_PREFIXES = ("bench/results/",)
# A path that starts at a layer's folder (`engine/save.h`, `kvstore/file/file_commit.cc`)
# names a file under src/cairn/.
_LAYERS = ("util", "dtype", "codec", "kvstore", "zarr", "layout", "engine", "dist", "emergency", "api")
_LAYER_PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.\w+)" % "|".join(_LAYERS))


def _docs() -> list[pathlib.Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    contributing = ROOT / "CONTRIBUTING.md"
    if contributing.exists():
        docs.append(contributing)
    return [d for d in docs if d.exists()]


def broken_links(doc: pathlib.Path, text: str | None = None) -> list[str]:
    """`<doc>:<line>: <what>` for every relative link or repository path in
    `doc` (or in `text`, read as if it were `doc`) that names nothing in the
    repository."""
    problems = []
    rel = doc.relative_to(ROOT)
    if text is None:
        text = doc.read_text(encoding="utf-8")
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        # Links count outside code (a regex in backticks is no link); paths
        # count anywhere.
        prose = "" if fenced else re.sub(r"`[^`]*`", "", line)
        for target in _LINK.findall(prose):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a web link, mailto:, or an anchor in this page
            path = target.split("#", 1)[0]
            if not path:
                continue
            resolved = (ROOT / path.lstrip("/")) if path.startswith("/") else (doc.parent / path)
            if not resolved.exists():
                problems.append(f"{rel}:{number}: link to {target} names no file ({resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved})")
        for path in _PATH.findall(line):
            if path.startswith(_SKIPPED_PREFIXES):
                continue
            if not (ROOT / path).exists():
                problems.append(f"{rel}:{number}: path {path} does not exist")
        for path in _LAYER_PATH.findall(line):
            if not (ROOT / "src" / "cairn" / path).exists():
                problems.append(f"{rel}:{number}: path {path} is not under src/cairn/")
    return problems


def test_the_architecture_names_every_folder_of_the_library():
    # docs/ARCHITECTURE.md's layer table is where a newcomer finds which folder a change
    # belongs in: a folder added under src/cairn/ without a word there fails here.
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    folders = sorted(str(d.relative_to(ROOT / "src" / "cairn"))
                     for d in (ROOT / "src" / "cairn").rglob("*") if d.is_dir() and d.name != "__pycache__")
    assert {"kvstore/s3", "engine/convert", "emergency"} <= set(folders), folders
    missing = [f for f in folders if f"`{f}/" not in text]
    assert not missing, f"docs/ARCHITECTURE.md does not name these folders of src/cairn/: {missing}"


def test_the_docs_are_found():
    docs = _docs()
    names = {str(d.relative_to(ROOT)) for d in docs}
    assert {"README.md", "docs/ARCHITECTURE.md", "docs/object_stores.md", "docs/EMERGENCY.md"} <= names, names


@pytest.mark.parametrize("doc", _docs(), ids=lambda d: str(d.relative_to(ROOT)))
def test_every_relative_link_and_repository_path_exists(doc):
    problems = broken_links(doc)
    assert not problems, "\n".join(problems)


def test_a_broken_link_and_a_missing_path_are_reported():
    # Control: the checker itself must report what it is there to catch, and
    # nothing else, in a page read as if it were docs/probe.md.
    text = ("Fine: [the architecture](ARCHITECTURE.md), [web](https://example.com/x.md), [here](#layers),\n"
            "[a format](formats/ocdbt.md#manifest), `src/cairn/engine/save.h`, `bench/results/objstore_bench.md`.\n"
            "Code, no link: `(a|b)[x](y)`.\n"
            "Broken: [gone](NO_SUCH_DOC.md#part) and `src/cairn/engine/no_such_file.cc`.\n"
            "Fine: `layout/orbax/step.h`. Broken: `emergency/no_such_manager.h`.\n")
    problems = broken_links(ROOT / "docs" / "probe.md", text)
    assert len(problems) == 3, problems
    assert problems[0].startswith("docs/probe.md:4: link to NO_SUCH_DOC.md#part"), problems
    assert problems[1] == "docs/probe.md:4: path src/cairn/engine/no_such_file.cc does not exist", problems
    assert problems[2] == "docs/probe.md:5: path emergency/no_such_manager.h is not under src/cairn/", problems
