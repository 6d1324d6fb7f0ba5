"""`cairn ls / info / verify / diff` on checkpoints written by orbax-checkpoint (real
orbax + jax, 8 simulated CPU devices) and by cairn, in all four variants; verify against
every kind of damage; cairn's zstd frames carry checksums and still restore bit-exactly
in Orbax and TensorStore."""

import json
import shutil
import subprocess

import jax
import numpy as np
import pytest
import tensorstore as ts

import cairn
from orbax_helpers import (VARIANT_IDS, VARIANTS, P, assert_bit_equal, mesh, ocp, rich_tree,
                           sharded, to_host)
from test_cli import cairn_cli

ITEM = "state"


def run(*args, timeout=120):
    return subprocess.run([cairn_cli(), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def big_tree(m, seed=0):
    """rich_tree plus arrays large enough that OCDBT stores them out of line."""
    rng = np.random.default_rng(seed)
    t = rich_tree(m, rng_seed=seed)
    t["big"] = {"w": sharded(rng.standard_normal((64, 48)).astype(np.float32), m, P("data", None)),
                "v": rng.standard_normal((40, 30)).astype(np.float64)}
    return t


def param_leaves(tree):
    """{param name: numpy value} of the array leaves, as Orbax names them."""
    out = {}
    for kp, v in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if isinstance(v, str) or v is None:
            continue
        name = ".".join(str(getattr(k, "key", getattr(k, "idx", None))) for k in kp)
        v = to_host(v)
        out[name] = v[2] if isinstance(v, tuple) else np.asarray(v)  # a PRNG key: its data
    return out


@pytest.fixture(scope="module")
def tree():
    return big_tree(mesh())


@pytest.fixture(scope="module")
def orbax_roots(tmp_path_factory, tree):
    """{variant id: checkpoint root} saved by ocp.CheckpointManager, steps 0 and 1."""
    roots = {}
    for (ocdbt, zarr3), vid in zip(VARIANTS, VARIANT_IDS):
        root = tmp_path_factory.mktemp("orbax") / vid
        handler = ocp.PyTreeCheckpointHandler(use_ocdbt=ocdbt, use_zarr3=zarr3)
        with ocp.CheckpointManager(root, item_names=(ITEM,),
                                   item_handlers={ITEM: handler},
                                   metadata={"run": vid}) as mgr:
            for step in (0, 1):
                mgr.save(step, args=ocp.args.Composite(**{ITEM: ocp.args.PyTreeSave(tree)}))
            mgr.wait_until_finished()
        roots[vid] = root
    return roots


@pytest.fixture(scope="module")
def cairn_items(tmp_path_factory, tree):
    """{variant id: item directory} saved by cairn.save."""
    items = {}
    for (ocdbt, zarr3), vid in zip(VARIANTS, VARIANT_IDS):
        d = tmp_path_factory.mktemp("cairn") / vid
        cairn.save(str(d), tree, use_ocdbt=ocdbt, use_zarr3=zarr3)
        items[vid] = d
    return items


def damaged(src, tmp_path, name="ckpt"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def flip(path, offset):
    b = bytearray(path.read_bytes())
    b[offset] ^= 0x5A
    path.write_bytes(bytes(b))


def verify_json(path):
    r = run("verify", "--json", path)
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] == (r.returncode == 0)
    return report


def assert_problem(path, kind, *names):
    """verify exits non-zero and names the problem in both output forms."""
    r = run("verify", path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert kind in r.stdout and all(n in r.stdout for n in names), r.stdout
    report = verify_json(path)
    assert not report["ok"]
    assert any(p["kind"] == kind for p in report["problems"]), report["problems"]
    return report


# ---- --help ---------------------------------------------------------------

@pytest.mark.parametrize("command", ["ls", "info", "verify", "diff"])
def test_help(command):
    r = run(command, "--help")
    assert r.returncode == 0 and "--json" in r.stdout and command in r.stdout


# ---- ls / info ------------------------------------------------------------

@pytest.mark.parametrize("vid", VARIANT_IDS)
def test_ls_matches_orbax_metadata(orbax_roots, tree, vid):
    root = orbax_roots[vid]
    item = root / "1" / ITEM
    r = run("ls", "--json", root)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows == json.loads(run("ls", "--json", item).stdout)
    assert rows == json.loads(run("ls", "--json", root / "1").stdout)
    md = ocp.PyTreeCheckpointer().metadata(item).item_metadata.tree
    expected = {}
    for _, m in jax.tree_util.tree_flatten_with_path(md)[0]:
        if hasattr(m, "shape") and hasattr(m, "name"):
            expected[m.name] = m
    assert {row["path"] for row in rows} == set(expected) == set(param_leaves(tree))
    values = param_leaves(tree)
    ocdbt = vid.startswith("ocdbt")
    for row in rows:
        m = expected[row["path"]]
        assert tuple(row["shape"]) == tuple(m.shape)
        assert np.dtype(row["dtype"]) == np.dtype(m.dtype) == values[row["path"]].dtype
        # The stored chunk, as TensorStore (which Orbax uses) opens it.
        kv = ({"driver": "ocdbt", "base": f"file://{item}/", "path": row["path"] + "/"}
              if ocdbt else f"file://{item}/{row['path']}/")
        t = ts.open({"driver": "zarr3" if "zarr3" in vid else "zarr", "kvstore": kv}).result()
        assert tuple(row["chunks"]) == tuple(t.chunk_layout.write_chunk.shape or ())
        if not ocdbt:
            files = (item / row["path"]).rglob("*")
            assert row["bytes"] == sum(f.stat().st_size for f in files if f.is_file())
        else:
            assert row["bytes"] > 0
    # Text (issue 29): the step line, a header, then one row per array.
    text = run("ls", root).stdout.splitlines()
    assert text[0] == f"step 1 of {root} (latest committed; 2 steps)", text[0]
    assert text[1].split() == ["PATH", "DTYPE", "SHAPE", "CHUNKS", "SIZE"]
    assert len(text) == len(rows) + 2 and text[2].split()[:2] == [rows[0]["path"], rows[0]["dtype"]]


@pytest.mark.parametrize("vid", VARIANT_IDS)
def test_info(orbax_roots, vid):
    root = orbax_roots[vid]
    (root / "2.orbax-checkpoint-tmp").mkdir()
    try:
        r = run("info", "--json", root)
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        text = run("info", root).stdout
    finally:
        (root / "2.orbax-checkpoint-tmp").rmdir()
    assert info["kind"] == "root" and info["format"] == vid.replace("-", "+")
    assert [(s["step"], s["finalized"]) for s in info["steps"]] == [(0, True), (1, True),
                                                                   (2, False)]
    assert info["step_dir"] == str(root / "1")
    assert info["root_metadata"]["custom_metadata"] == {"run": vid}
    [item] = [i for i in info["items"] if i["name"] == ITEM]
    assert item["handler"].endswith("PyTreeCheckpointHandler")
    assert item["variant"] == vid.replace("-", "+")
    md = ocp.PyTreeCheckpointer().metadata(root / "1" / ITEM).item_metadata.tree
    n = sum(1 for _, m in jax.tree_util.tree_flatten_with_path(md)[0] if hasattr(m, "shape"))
    assert item["num_arrays"] == n == len(item["arrays"])
    assert item["total_bytes"] == sum(a["bytes"] for a in item["arrays"]) > 0
    assert vid.replace("-", "+") in text and "2.orbax-checkpoint-tmp" in text


def test_info_and_ls_errors(tmp_path):
    r = run("info", tmp_path / "missing")
    assert r.returncode != 0 and "missing" in r.stderr
    r = run("info", tmp_path)
    # Issue 29: an empty directory is no checkpoint of any format, exit 2.
    assert r.returncode == 2 and "not a checkpoint: no Orbax, AXLearn or safetensors files" in r.stderr
    r = run("verify", tmp_path)
    assert r.returncode == 2 and str(tmp_path) in r.stderr


# ---- verify: clean --------------------------------------------------------

@pytest.mark.parametrize("vid", VARIANT_IDS)
def test_verify_clean(orbax_roots, cairn_items, tree, vid):
    for path in (orbax_roots[vid], cairn_items[vid]):
        r = run("verify", path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith("OK:") and r.stderr == ""  # no progress bar off a terminal
        report = verify_json(path)
        assert report["problems"] == [] and report["arrays"] >= len(param_leaves(tree))
        assert report["chunks"] > 0 and report["bytes_read"] > 0


# ---- verify: damage -------------------------------------------------------

def test_verify_deleted_chunk(orbax_roots, tmp_path):
    item = damaged(orbax_roots["dir-zarr2"] / "1" / ITEM, tmp_path)
    (item / "big.w" / "1.0").unlink()
    assert_problem(item, "missing_chunk", "big.w", "big.w/1.0")
    item = damaged(orbax_roots["ocdbt-zarr3"] / "1" / ITEM, tmp_path, "ocdbt")
    key = next(k for k in cairn.kvstore.open(f"file://{item}/|ocdbt:").keys("big.w/c/"))
    cairn.kvstore.open(f"file://{item}/|ocdbt:").delete(key)
    assert_problem(item, "missing_chunk", key)


def test_verify_truncated_data_file(orbax_roots, tmp_path):
    item = damaged(orbax_roots["ocdbt-zarr2"] / "1" / ITEM, tmp_path)
    for f in (item / "ocdbt.process_0" / "d").iterdir():
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    report = assert_problem(item, "truncated_data_file", "ocdbt.process_0/d/")
    assert any(p["array"] == "big.w" for p in report["problems"])
    item = damaged(orbax_roots["dir-zarr3"] / "1" / ITEM, tmp_path, "dir")
    chunk = next(f for f in (item / "big.v" / "c").rglob("*") if f.is_file())
    chunk.write_bytes(chunk.read_bytes()[:-30])
    assert_problem(item, "corrupt_chunk", "big.v")


def test_verify_flipped_byte_in_ocdbt_node(orbax_roots, tmp_path):
    item = damaged(orbax_roots["ocdbt-zarr3"] / "1" / ITEM, tmp_path)
    [node_file] = list((item / "d").iterdir())
    flip(node_file, node_file.stat().st_size // 2)
    report = assert_problem(item, "ocdbt_node", "crc32c")
    assert any(node_file.name in p["message"] or node_file.name in p["file"]
               for p in report["problems"])


def test_verify_flipped_byte_in_shard_index(orbax_roots, tmp_path):
    item = damaged(orbax_roots["dir-zarr3"] / "1" / ITEM, tmp_path)
    shard = next(f for f in (item / "big.w" / "c").rglob("*") if f.is_file())
    flip(shard, shard.stat().st_size - 10)  # inside the 20-byte index + crc32c
    assert_problem(item, "corrupt_chunk", "big.w", "crc32c")


@pytest.mark.parametrize("vid", ["dir-zarr3", "dir-zarr2"])
def test_verify_flipped_checksum_byte_in_cairn_chunk(cairn_items, tmp_path, vid):
    """Flips the last byte of a zstd frame: its content checksum. Only the checksum can
    catch that, so this proves cairn writes it and verify checks it."""
    item = damaged(cairn_items[vid], tmp_path)
    if vid == "dir-zarr2":
        chunk = item / "big.v" / "0.0"
        frame_end = chunk.stat().st_size
    else:
        chunk = next(f for f in (item / "big.v" / "c").rglob("*") if f.is_file())
        frame_end = chunk.stat().st_size - 20  # one inner chunk: 16-byte entry + crc32c
    flip(chunk, frame_end - 1)
    assert_problem(item, "corrupt_chunk", "big.v", "checksum")


def test_verify_missing_metadata(orbax_roots, tmp_path):
    for vid in ("ocdbt-zarr3", "dir-zarr2"):
        root = damaged(orbax_roots[vid], tmp_path, vid)
        (root / "1" / ITEM / "_METADATA").unlink()
        assert_problem(root, "missing_metadata", str(root / "1" / ITEM / "_METADATA"))
        assert_problem(root / "1" / ITEM, "missing_metadata")


def test_verify_uncommitted_tmp_directory(orbax_roots, tmp_path):
    root = damaged(orbax_roots["ocdbt-zarr2"], tmp_path)
    shutil.copytree(root / "1", root / "2.orbax-checkpoint-tmp")
    # A root's uncommitted step is a warning, not damage (issue 29:
    # test_cli_user.py); an uncommitted item inside a committed step is.
    r = run("verify", root)
    assert r.returncode == 0 and "2.orbax-checkpoint-tmp" in r.stderr and "warning" in r.stderr, r.stderr
    shutil.copytree(root / "1" / ITEM, root / "1" / "extra.orbax-checkpoint-tmp")
    assert_problem(root / "1", "uncommitted", "extra.orbax-checkpoint-tmp")


# ---- cairn writes checksummed zstd frames that Orbax and TensorStore read --

def zstd_frame_has_checksum(frame: bytes) -> bool:
    assert frame[:4] == b"\x28\xb5\x2f\xfd", "not a zstd frame"
    return bool(frame[4] & 0x04)  # Frame_Header_Descriptor: Content_Checksum_flag


@pytest.mark.parametrize("vid", VARIANT_IDS)
def test_cairn_zstd_checksums_restore_bit_exactly(cairn_items, tree, vid):
    item = cairn_items[vid]
    if vid == "dir-zarr2":
        zarray = json.loads((item / "big.v" / ".zarray").read_text())
        assert zarray["compressor"] == {"id": "zstd", "level": 1}
        assert zstd_frame_has_checksum((item / "big.v" / "0.0").read_bytes())
    if vid == "dir-zarr3":
        codecs = json.loads((item / "big.v" / "zarr.json").read_text())["codecs"]
        inner = codecs[0]["configuration"]["codecs"]
        assert {"name": "zstd", "configuration": {"level": 3, "checksum": True}} in inner
        shard = next(f for f in (item / "big.v" / "c").rglob("*") if f.is_file())
        assert zstd_frame_has_checksum(shard.read_bytes())
    assert_bit_equal(tree, ocp.PyTreeCheckpointer().restore(item))
    want = param_leaves(tree)
    ocdbt = vid.startswith("ocdbt")
    kv = ({"driver": "ocdbt", "base": f"file://{item}/", "path": "big.v/"} if ocdbt
          else f"file://{item}/big.v/")
    t = ts.open({"driver": "zarr3" if "zarr3" in vid else "zarr", "kvstore": kv}).result()
    assert t.read().result().tobytes() == want["big.v"].tobytes()


# ---- diff -----------------------------------------------------------------

def test_diff_identical_across_formats(orbax_roots, cairn_items):
    r = run("diff", orbax_roots["ocdbt-zarr3"], orbax_roots["dir-zarr2"] / "1" / ITEM)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("identical") and r.stderr == ""
    r = run("diff", "--json", cairn_items["ocdbt-zarr2"], orbax_roots["dir-zarr3"])
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["identical"] and d["format_a"] == "ocdbt+zarr2" and d["format_b"] == "dir+zarr3"
    assert d["only_in_a"] == d["only_in_b"] == [] and len(d["arrays"]) > 10
    assert all(a["same"] and a["max_abs"] == 0 for a in d["arrays"])


def test_diff_different(tmp_path, tree):
    m = mesh()
    other = jax.tree_util.tree_map(lambda x: x, tree)
    w = np.asarray(tree["big"]["w"]).copy()
    w[3, 5] += 0.5
    w[60, 1] = w[60, 1] * 3 + 1
    other["big"]["w"] = sharded(w, m, P("data", None))
    other["big"]["v"] = np.asarray(tree["big"]["v"]).astype(np.float32)
    other["params"]["dense"]["bias"] = np.arange(7, dtype=np.float32)
    other["extra"] = np.ones(3, np.int8)
    del other["params"]["w.with.dots"]
    other["step_name"] = "changed"
    a, b = tmp_path / "a", tmp_path / "b"
    cairn.save(str(a), tree, use_ocdbt=True, use_zarr3=True)
    with ocp.PyTreeCheckpointer(use_ocdbt=False, use_zarr3=False) as c:
        c.save(b, other)
    r = run("diff", "--json", a, b)
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert not d["identical"]
    assert d["only_in_a"] == ["params.w.with.dots"] and d["only_in_b"] == ["extra"]
    assert d["strings_differ"] == ["step_name"]
    arrays = {x["path"]: x for x in d["arrays"]}
    w0 = np.asarray(tree["big"]["w"]).astype(np.float64)
    diff = np.abs(w0 - w.astype(np.float64))
    assert arrays["big.w"]["num_different"] == 2
    assert arrays["big.w"]["max_abs"] == pytest.approx(diff.max())
    rel = diff / np.maximum(np.abs(w0), np.abs(w.astype(np.float64)))
    assert arrays["big.w"]["max_rel"] == pytest.approx(np.nanmax(rel))
    assert arrays["big.v"]["dtype_a"] == "float64" and arrays["big.v"]["dtype_b"] == "float32"
    v = np.asarray(tree["big"]["v"])
    assert arrays["big.v"]["max_abs"] == pytest.approx(
        np.abs(v - v.astype(np.float32).astype(np.float64)).max())
    bias = arrays["params.dense.bias"]
    assert bias["shape_a"] == [6] and bias["shape_b"] == [7] and not bias["values_compared"]
    assert arrays["params.both"]["same"]
    text = run("diff", a, b)
    assert text.returncode == 1
    for s in ("only in A: params.w.with.dots", "only in B: extra", "big.w: 2 values differ",
              "big.v: dtype float64 vs float32", "params.dense.bias: shape [6] vs [7]"):
        assert s in text.stdout, text.stdout


def test_diff_array_urls(tmp_path):
    values = np.random.default_rng(3).standard_normal((37, 21)).astype(np.float32)
    a = ts.open({"driver": "zarr3", "kvstore": f"file://{tmp_path}/a/",
                 "metadata": {"shape": [37, 21], "data_type": "float32",
                              "chunk_grid": {"name": "regular",
                                             "configuration": {"chunk_shape": [8, 8]}}}},
                create=True).result()
    a.write(values).result()
    b = ts.open({"driver": "zarr", "kvstore": f"file://{tmp_path}/b/",
                 "metadata": {"shape": [37, 21], "dtype": "<f4", "chunks": [10, 21]}},
                create=True).result()
    b.write(values).result()
    r = run("diff", f"file://{tmp_path}/a/|zarr3:", tmp_path / "b")
    assert r.returncode == 0, r.stdout + r.stderr
    b[36, 20] = values[36, 20] + 2
    r = run("diff", "--json", f"file://{tmp_path}/a/|zarr3:", f"file://{tmp_path}/b/|zarr2:")
    assert r.returncode == 1, r.stderr
    [arr] = json.loads(r.stdout)["arrays"]
    assert arr["num_different"] == 1 and arr["max_abs"] == pytest.approx(2, rel=1e-6)
    r = run("diff", tmp_path / "a", tmp_path / "nothing")
    assert r.returncode == 2 and "nothing" in r.stderr


# ---- progress bar ---------------------------------------------------------

def run_on_terminal(*args, delay_ms):
    """Runs cairn with stderr on a pseudo-terminal; returns (returncode, stderr text)."""
    import os
    import pty
    master, slave = pty.openpty()
    env = dict(os.environ, CAIRN_PROGRESS_DELAY_MS=str(delay_ms))
    p = subprocess.Popen([cairn_cli(), *map(str, args)], stdout=subprocess.DEVNULL,
                         stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=120), out.decode(errors="replace")


@pytest.mark.parametrize("command", ["verify", "diff"])
def test_progress_bar_only_on_a_terminal(orbax_roots, command):
    args = [orbax_roots["ocdbt-zarr3"]] * (2 if command == "diff" else 1)
    rc, err = run_on_terminal(command, *args, delay_ms=0)
    assert rc == 0 and f"{command} [" in err and "%" in err, err
    rc, err = run_on_terminal(command, *args, delay_ms=60000)  # work shorter than the delay
    assert rc == 0 and err == "", err
    r = run(command, *args)  # not a terminal
    assert r.returncode == 0 and r.stderr == ""
