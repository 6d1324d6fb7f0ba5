"""TensorStore's URL for an older OCDBT generation, `file:///x/|ocdbt:@v5/`,
means the same in cairn: that generation (not a key prefix `@v5/`), printed
the same way; and a version cairn cannot read is an error, never another
meaning. Every case is compared with the real tensorstore package.
"""

from __future__ import annotations

import re

import pytest
import tensorstore as ts

import cairn
from ocdbt_helpers import ts_commit, ts_open


def _ts_read_url(url: str) -> dict:
    store = ts.KvStore.open(url).result()
    return {k.decode(): store.read(k).result().value for k in store.list().result()}


def _cairn_read_url(url: str) -> dict:
    store = cairn.kvstore.open(url)
    return {k: store.get(k) for k in store.keys()}


@pytest.fixture
def three_generations(tmp_path):
    store = ts_open(tmp_path)
    for g in (1, 2, 3):
        ts_commit(store, {"x": str(g).encode(), f"sub/y{g}": b"y" * (g * 700),
                          "@v1/literal": b"at"})
    return f"file://{tmp_path}/"


def test_each_generation_reads_as_in_tensorstore(three_generations):
    base = three_generations
    latest = cairn.kvstore.open({"driver": "ocdbt", "base": base}).latest_generation
    assert latest >= 4  # TensorStore's empty generation 1 and three commits
    xs = []
    for gen in range(1, latest + 1):
        for suffix in (f"@v{gen}/", f"@v{gen}/sub/", f"@v0{gen}", f"@v{gen}/%40v1/"):
            url = f"{base}|ocdbt:{suffix}"
            assert _cairn_read_url(url) == _ts_read_url(url), url
        xs.append(_cairn_read_url(f"{base}|ocdbt:@v{gen}/").get("x"))
    # The generations really differ (so the version was not ignored).
    assert xs[0] is None and xs[-1] == b"3" and set(xs) == {None, b"1", b"2", b"3"}
    for suffix in ("", "sub/", "%40v1/"):  # controls: the latest generation
        url = f"{base}|ocdbt:{suffix}"
        assert _cairn_read_url(url) == _ts_read_url(url) != {}, url
    assert _cairn_read_url(f"{base}|ocdbt:%40v1/") == {"literal": b"at"}


@pytest.mark.parametrize("suffix", ["@v5/", "@v05/", "@v5", "@v5/a/b/", "%40v5/", "a/@v5/",
                                    "@v18446744073709551615/", "a%20b/", "x:y/"])
def test_urls_print_as_in_tensorstore(tmp_path, suffix):
    url = f"file://{tmp_path}/|ocdbt:{suffix}"
    assert cairn.kvstore.open(url).url == ts.KvStore.Spec(url).url


def test_a_fixed_generation_is_read_only(three_generations):
    old = cairn.kvstore.open(f"{three_generations}|ocdbt:@v2/")
    with pytest.raises(RuntimeError, match=r"opened at generation 2 \(read-only\)"):
        old.put("x", b"9")
    # Control: the latest generation is writable.
    cairn.kvstore.open(f"{three_generations}|ocdbt:").put("x", b"4")
    assert _ts_read_url(f"{three_generations}|ocdbt:")["x"] == b"4"


def test_a_missing_generation_fails_in_both(three_generations):
    url = f"{three_generations}|ocdbt:@v9/"
    with pytest.raises(ValueError, match="NOT_FOUND: Version where v9 not present"):
        _ts_read_url(url)
    with pytest.raises(FileNotFoundError, match="generation 9 is not present"):
        _cairn_read_url(url)


@pytest.mark.parametrize("version", ["v0", "v5a", "v+5", "x", "V5", "", "v18446744073709551616"])
def test_invalid_versions_fail_in_both(tmp_path, version):
    url = f"file://{tmp_path}/|ocdbt:@{version}/"
    with pytest.raises(ValueError, match="Invalid OCDBT version"):
        ts.KvStore.Spec(url)
    what = "generation number" if version.startswith("v") else "version"
    with pytest.raises(ValueError, match=re.escape(f"invalid kvstore URL `{url}`: invalid OCDBT {what} `{version}`")):
        cairn.kvstore.open(url)


def test_commit_time_versions_are_refused(three_generations):
    url = f"{three_generations}|ocdbt:@2099-01-01T00:00:00Z/"
    # TensorStore reads the latest generation committed before that time...
    assert _ts_read_url(url)["x"] == b"3"
    # ...which cairn does not implement: an error, not a key prefix.
    with pytest.raises(NotImplementedError, match="commit-time versions"):
        cairn.kvstore.open(url)
