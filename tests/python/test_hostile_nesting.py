"""Deep nesting in stored metadata is refused with ValueError, never a crash
(docs/limits.md): JSON deeper than 128 levels (zarr attributes, unknown
must_understand members, Orbax custom_metadata), `_METADATA` key paths longer
than 256 keys, sharding_indexed nested more than 8 levels. Each hostile case
runs in a child process, so a stack overflow fails that test, not the suite;
each has a control case at the limit that must work, and the controls are
read by TensorStore too where it reads the format."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorstore as ts

import cairn

from conftest import file_url


def run_isolated(code: str) -> str:
    """Runs `code` in a fresh Python; returns its stdout. Fails the test (with
    the child's stderr) if the child crashes or exits non-zero."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, (f"child exited with {r.returncode} "
                               f"(negative: killed by signal)\nstderr:\n{r.stderr[-3000:]}")
    return r.stdout


def expect_value_error(call: str, *parts: str) -> None:
    """`call` (Python source, `cairn` imported) must raise ValueError whose
    message contains every one of `parts`, in a child process."""
    out = run_isolated(f"""
        import cairn, json, sys
        try:
            {call}
        except ValueError as e:
            print("VALUE_ERROR", json.dumps(str(e)))
        else:
            print("NO_ERROR")
    """)
    assert out.startswith("VALUE_ERROR"), out
    message = json.loads(out.split(" ", 1)[1])
    for p in parts:
        assert p in message, message


def nested_list(depth: int):
    v = 1
    for _ in range(depth):
        v = [v]
    return v


def write_v3(path, **extra) -> None:
    md = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8",
          "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
          "chunk_key_encoding": {"name": "default"}, "fill_value": 7,
          "codecs": [{"name": "bytes"}]}
    md.update(extra)
    path.mkdir(parents=True, exist_ok=True)
    # json.dumps recurses; text built by hand for the deep cases.
    (path / "zarr.json").write_text(json.dumps(md))


def write_deep_text(path, member: str, depth: int) -> None:
    """zarr.json whose `member` is `depth` nested lists (text, not json.dumps)."""
    write_v3(path)
    text = (path / "zarr.json").read_text()
    (path / "zarr.json").write_text(
        text[:-1] + f', "{member}": ' + "[" * depth + "1" + "]" * depth + "}")


def test_attributes_at_the_limit_open_in_cairn_and_tensorstore(tmp_path):
    # The document is one level, attributes one more: 126 lists reach 128.
    write_v3(tmp_path / "a", attributes={"x": nested_list(126)})
    arr = cairn.open(file_url(tmp_path / "a"))
    np.testing.assert_array_equal(arr.read(), np.full(4, 7, np.uint8))
    t = ts.open({"driver": "zarr3", "kvstore": file_url(tmp_path / "a")}).result()
    np.testing.assert_array_equal(t.read().result(), np.full(4, 7, np.uint8))


def test_attributes_one_level_deeper_are_value_error(tmp_path):
    write_v3(tmp_path / "a", attributes={"x": nested_list(127)})
    with pytest.raises(ValueError, match="nested deeper than 128") as e:
        cairn.open(file_url(tmp_path / "a"))
    assert "zarr.json" in str(e.value) and str(tmp_path / "a") in str(e.value)


@pytest.mark.parametrize("member", ["attributes_deep", "unknown_member"])
def test_half_a_million_levels_fail_without_crashing(tmp_path, member):
    # attributes must be an object: a deep value inside it; an unknown member
    # with must_understand false is kept verbatim (and was dumped recursively).
    path = tmp_path / "a"
    write_v3(path)
    text = (path / "zarr.json").read_text()
    deep = "[" * 500_000 + "1" + "]" * 500_000
    if member == "attributes_deep":
        text = text[:-1] + ', "attributes": {"x": ' + deep + "}}"
    else:
        text = text[:-1] + ', "extension": {"must_understand": false, "x": ' + deep + "}}"
    (path / "zarr.json").write_text(text)
    expect_value_error(f"cairn.open({file_url(path)!r})", "nested deeper than 128", "zarr.json")


def save_flat(path, custom_metadata=None):
    cairn.save(path, {"w": np.arange(3, dtype=np.float32)}, use_ocdbt=False,
               custom_metadata=custom_metadata)


def rewrite_metadata(item, fn):
    md = json.loads((item / "_METADATA").read_text())
    (item / "_METADATA").write_text(fn(md))


def deep_dict(depth: int, leaf):
    v = leaf
    for _ in range(depth):
        v = {"k": v}
    return v


def test_key_path_at_the_limit_round_trips(tmp_path):
    # A string leaf: an array's param name (511 characters here) would be a
    # directory name longer than the file system allows.
    tree = {"a": np.arange(2, dtype=np.int16), "deep": deep_dict(255, "leaf")}
    cairn.save(tmp_path / "ok", tree, use_ocdbt=False)
    back = cairn.restore(tmp_path / "ok")
    np.testing.assert_array_equal(back["a"], np.arange(2, dtype=np.int16))
    assert back["a"].dtype == np.int16
    deep = back["deep"]
    for _ in range(255):
        deep = deep["k"]
    assert deep == "leaf"


def test_key_path_one_longer_is_refused_on_save_and_restore(tmp_path):
    with pytest.raises(ValueError, match="257 keys"):
        cairn.save(tmp_path / "no", deep_dict(257, "leaf"), use_ocdbt=False)
    save_flat(tmp_path / "item")

    def lengthen(md):
        (name, entry), = md["tree_metadata"].items()
        entry["key_metadata"] = [{"key": "k", "key_type": 2}] * 257
        return json.dumps(md)

    rewrite_metadata(tmp_path / "item", lengthen)
    with pytest.raises(ValueError, match="257 keys, longer than 256") as e:
        cairn.restore(tmp_path / "item")
    assert "_METADATA" in str(e.value)


def test_hundred_thousand_key_path_fails_without_crashing(tmp_path):
    save_flat(tmp_path / "item")

    def lengthen(md):
        (name, entry), = md["tree_metadata"].items()
        entry["key_metadata"] = [{"key": "k", "key_type": 2}] * 100_000
        return json.dumps(md)

    rewrite_metadata(tmp_path / "item", lengthen)
    expect_value_error(f"cairn.restore({str(tmp_path / 'item')!r})", "100000 keys", "_METADATA")


def test_custom_metadata_depth(tmp_path):
    # Control: deep but within the limit, saved and read back by cairn and Orbax's file.
    save_flat(tmp_path / "ok", custom_metadata=nested_list(100))
    assert json.loads((tmp_path / "ok" / "_METADATA").read_text())["custom_metadata"] == \
        nested_list(100)
    cairn.restore(tmp_path / "ok")
    with pytest.raises(ValueError, match="nested deeper than 128"):
        save_flat(tmp_path / "no", custom_metadata=nested_list(200))
    rewrite_metadata(tmp_path / "ok", lambda md: json.dumps(md)[:-1].rsplit(
        '"custom_metadata":', 1)[0] + '"custom_metadata": ' + "[" * 300_000 + "]" * 300_000 + "}")
    expect_value_error(f"cairn.restore({str(tmp_path / 'ok')!r})", "nested deeper than 128",
                       "_METADATA")


def sharding(levels: int) -> list:
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
    index = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
    for _ in range(levels):
        codecs = [{"name": "sharding_indexed",
                   "configuration": {"chunk_shape": [2], "codecs": codecs,
                                     "index_codecs": index}}]
    return codecs


def test_nested_sharding_within_the_limit_matches_tensorstore(tmp_path):
    md = {"shape": [8], "data_type": "uint16",
          "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
          "codecs": sharding(8)}
    arr = cairn.create(file_url(tmp_path / "a") + "|zarr3:", md)
    values = np.arange(8, dtype=np.uint16) * 3
    arr.write(values)
    t = ts.open({"driver": "zarr3", "kvstore": file_url(tmp_path / "a")}).result()
    np.testing.assert_array_equal(t.read().result(), values)


def test_nested_sharding_beyond_the_limit_is_value_error(tmp_path):
    write_v3(tmp_path / "a", codecs=sharding(9))
    with pytest.raises(ValueError, match="sharding_indexed: nested more than 8 levels deep"):
        cairn.open(file_url(tmp_path / "a"))
    # Thousands of levels: the JSON limit answers first, without a crash.
    path = tmp_path / "b"
    write_v3(path)
    inner = '[{"name": "bytes"}]'
    for _ in range(5000):
        inner = ('[{"name": "sharding_indexed", "configuration": {"chunk_shape": [4], '
                 '"index_codecs": [{"name": "bytes"}], "codecs": ' + inner + "}}]")
    md = json.loads((path / "zarr.json").read_text())
    del md["codecs"]
    (path / "zarr.json").write_text(json.dumps(md)[:-1] + ', "codecs": ' + inner + "}")
    expect_value_error(f"cairn.open({file_url(path)!r})", "nested deeper than 128")
