"""`cairn convert` on damaged sources and hostile destinations.

Beside the cases test_convert.py and test_convert_orbax.py already cover
(hostile safetensors headers, a committed AXLearn or Orbax destination, a
failed write, a conversion killed half-way and resumed), this file covers:

- a source missing a chunk: converted to what the peers read (TensorStore
  and orbax-checkpoint read a missing chunk as the fill value; TensorStore's
  zarr driver does not store chunks equal to it, so AXLearn steps of zeros
  lack them legitimately), while `cairn verify` names it;
- a corrupt OCDBT B+tree node in an Orbax source written by orbax-checkpoint:
  a clear error naming the data file, nothing committed;
- the hostile safetensors sources again, now also checking that nothing
  that looks committed is left at the destination;
- a committed safetensors destination: refused unless --overwrite;
- a full disk (a 2 MiB tmpfs): a clear error naming the file and ENOSPC,
  nothing committed, and the same command finishes once there is room;
- a safetensors destination killed half-way: no file that looks valid, and
  the same command run again writes it whole;
- an Orbax or AXLearn destination killed half-way whose written chunks were
  then cut to 0 bytes: resuming keeps none of those arrays (it checks every
  chunk of an array it would keep) and writes them again, exactly.
"""
import json
import os
import signal
import struct
import subprocess

import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from safetensors.numpy import load_file, save_file

from conftest import same_bits
from convert_kill import convert_killed_after_arrays
from test_cli import run_cli




def nothing_committed(out):
    """No AXLearn index, Orbax step or safetensors file/index under `out`."""
    if not out.exists():
        return True
    names = [p.relative_to(out).as_posix() for p in out.rglob("*")]
    return not any(n.endswith("/index") or n == "index" or n.endswith("commit_success.txt") or
                   n.endswith(".safetensors") or n.endswith(".index.json") for n in names)


def write_axlearn_with_tensorstore(step_dir, arrays, chunks):
    """An AXLearn step as AXLearn's regular checkpointer writes it (TensorStore
    zarr driver, zstd level 1), with chunks smaller than the arrays."""
    index = [["step", 3]]
    for name, value in arrays.items():
        t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(step_dir / "gda" / name)},
                     "metadata": {"compressor": {"id": "zstd", "level": 1}, "shape": list(value.shape),
                                  "chunks": list(chunks), "dtype": "<f4"},
                     "create": True}).result()
        t.write(value).result()
        index.append([name, {"dtype": "float32", "shape": str(tuple(value.shape))}])
    (step_dir / "index").write_text(json.dumps(index))


def test_a_missing_chunk_converts_to_what_the_peers_read(tmp_path):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((64, 32), dtype=np.float32)
    step = tmp_path / "axl" / "step_00000003"
    write_axlearn_with_tensorstore(step, {"w": w}, (16, 32))
    # Control: complete, it converts to the same bits.
    r = run_cli("convert", str(tmp_path / "axl"), str(tmp_path / "ok"), "--to", "orbax", "--verify")
    assert r.returncode == 0, r.stderr
    got = ocp.PyTreeCheckpointer().restore(tmp_path / "ok" / "step_00000003" / "state")
    assert same_bits(got["w"], w)
    # Chunk rows 16..31 is lost.
    os.unlink(step / "gda" / "w" / "1.0")
    want = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(step / "gda" / "w")}}
                   ).result().read().result()
    assert np.all(want[16:32] == 0) and same_bits(want[:16], w[:16])
    r = run_cli("convert", str(tmp_path / "axl"), str(tmp_path / "out"), "--to", "orbax", "--verify")
    assert r.returncode == 0, r.stderr
    got = ocp.PyTreeCheckpointer().restore(tmp_path / "out" / "step_00000003" / "state")
    assert same_bits(got["w"], want)
    # `cairn verify` names the missing chunk.
    r = run_cli("verify", str(tmp_path / "axl"), "--json")
    assert r.returncode != 0
    problems = json.loads(r.stdout)["problems"]
    assert [(p["kind"], p["array"]) for p in problems] == [("missing_chunk", "w")], problems
    assert "1.0" in problems[0]["key"]


def btree_nodes(item):
    """(data file path, offset, length) of every B+tree node of the latest
    version of the OCDBT database at `item`, from TensorStore's own dump."""
    base = ts.KvStore.open(f"file://{item}/").result()
    manifest = ts.ocdbt.dump(base).result()
    out = []

    def walk(location):
        # "btreenode:<base path>:d/<file>:<offset>:<length>" (TensorStore's spelling)
        where, offset, length = location[len("btreenode:"):].rsplit(":", 2)
        base_path, _, relative = where.rpartition(":")
        out.append((item / base_path / relative, int(offset), int(length)))
        node = ts.ocdbt.dump(base, location).result()
        for e in node["entries"]:
            for v in e.values():
                if isinstance(v, str) and v.startswith("btreenode:"):
                    walk(v)

    walk(manifest["versions"][-1]["root"]["location"])
    return out


def test_a_corrupt_btree_node_is_a_clear_error(tmp_path):
    rng = np.random.default_rng(8)
    state = {"w": rng.standard_normal((64, 32), dtype=np.float32), "b": rng.standard_normal(32, dtype=np.float32)}
    item = tmp_path / "orbax" / "5" / "default"
    ocp.PyTreeCheckpointer().save(item, state)
    # Control: intact, it converts.
    r = run_cli("convert", str(tmp_path / "orbax"), str(tmp_path / "ok"), "--to", "axlearn")
    assert r.returncode == 0, r.stderr
    nodes = btree_nodes(item)
    assert nodes, "no B+tree node found"
    path, offset, length = nodes[0]
    data = bytearray(path.read_bytes())
    data[offset + length // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    out = tmp_path / "out"
    r = run_cli("convert", str(tmp_path / "orbax"), str(out), "--to", "axlearn")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert path.name in r.stderr and "crc32c" in r.stderr, r.stderr
    assert nothing_committed(out), sorted(p.name for p in out.rglob("*"))


def write_raw_safetensors(path, header, data):
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)


@pytest.mark.parametrize("to", ["axlearn", "orbax", "safetensors"])
@pytest.mark.parametrize("case,raw,message", [
    ("truncated header", struct.pack("<Q", 10_000) + b'{"w": ', "past the end"),
    ("claims more than the file", None, "data buffer holds 8"),
    ("overlapping offsets", None, "overlaps"),
])
def test_hostile_safetensors_leave_nothing_committed(tmp_path, to, case, raw, message):
    src = tmp_path / "bad.safetensors"
    if raw is not None:
        src.write_bytes(raw)
    elif case == "claims more than the file":
        write_raw_safetensors(src, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8)
    else:
        write_raw_safetensors(src, {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                    "v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8)
    out = tmp_path / "out"
    r = run_cli("convert", str(src), str(out), "--to", to)
    assert r.returncode == 1, r.stderr
    assert message in r.stderr and "bad.safetensors" in r.stderr, r.stderr
    assert nothing_committed(out)
    # Control: a sound file converts to the same destination.
    save_file({"w": np.arange(4, dtype=np.float32)}, str(tmp_path / "good.safetensors"))
    r = run_cli("convert", str(tmp_path / "good.safetensors"), str(out), "--to", to)
    assert r.returncode == 0, r.stderr
    assert not nothing_committed(out)


def test_a_committed_safetensors_destination_is_refused_unless_overwrite(tmp_path):
    save_file({"w": np.arange(6, dtype=np.float32)}, str(tmp_path / "a.safetensors"))
    save_file({"w": -np.arange(6, dtype=np.float32)}, str(tmp_path / "b.safetensors"))
    out = tmp_path / "out"
    assert run_cli("convert", str(tmp_path / "a.safetensors"), str(out), "--to", "safetensors").returncode == 0
    r = run_cli("convert", str(tmp_path / "b.safetensors"), str(out), "--to", "safetensors")
    assert r.returncode == 2  # an input error (issue 29's exit statuses)
    assert "model.safetensors" in r.stderr and "exists" in r.stderr, r.stderr
    assert same_bits(load_file(str(out / "model.safetensors"))["w"], np.arange(6, dtype=np.float32))
    r = run_cli("convert", str(tmp_path / "b.safetensors"), str(out), "--to", "safetensors", "--overwrite")
    assert r.returncode == 0, r.stderr
    assert same_bits(load_file(str(out / "model.safetensors"))["w"], -np.arange(6, dtype=np.float32))


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB tmpfs (needs CAP_SYS_ADMIN, which root has here and in CI)."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs ({r.stderr.strip()}); convert_test.cc injects "
                    "a full disk with FaultKvStore instead")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


@pytest.mark.parametrize("to", ["axlearn", "orbax", "safetensors"])
def test_a_full_disk_is_a_clear_error_and_commits_nothing(tmp_path, small_tmpfs, to):
    rng = np.random.default_rng(9)
    # 4 MiB of random floats: zstd cannot fit them in 2 MiB.
    arrays = {f"layers.{i}.w": rng.standard_normal((256, 1024), dtype=np.float32) for i in range(4)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    out = small_tmpfs / "out"
    r = run_cli("convert", str(tmp_path / "model.safetensors"), str(out), "--to", to,
                "--memory-budget", "1MiB")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "No space left on device" in r.stderr and str(small_tmpfs) in r.stderr, r.stderr
    assert nothing_committed(out), sorted(p.as_posix() for p in out.rglob("*"))
    # Control: with room (the tmpfs grown to 64 MiB), the same command
    # finishes, resuming from what the failed run left (resume checks every
    # chunk of an array it keeps).
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_tmpfs)], check=True)
    r = run_cli("convert", str(tmp_path / "model.safetensors"), str(out), "--to", to,
                "--memory-budget", "1MiB")
    assert r.returncode == 0, r.stderr
    if to == "safetensors":
        got = load_file(str(out / "model.safetensors"))
    elif to == "axlearn":
        got = {k: ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(
            out / "step_00000000" / "gda" / k.replace(".", "/"))}}).result().read().result() for k in arrays}
    else:
        tree = ocp.PyTreeCheckpointer().restore(out / "0" / "default")
        got = {k: tree["layers"][k.split(".")[1]]["w"] for k in arrays}
    for k, v in arrays.items():
        assert same_bits(got[k], v), k


@pytest.mark.parametrize("to", ["orbax", "axlearn"])
def test_resume_writes_again_arrays_whose_chunks_were_damaged(tmp_path, to):
    rng = np.random.default_rng(11)
    arrays = {f"layers.{i:02d}.w": rng.standard_normal((128, 128), dtype=np.float32) for i in range(12)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    def args(out):
        return ["convert", str(tmp_path / "model.safetensors"), str(out), "--to", to,
                "--memory-budget", "256KiB", "--threads", "2", "--json"]

    for out in (tmp_path / "kept", tmp_path / "damaged"):
        killed = convert_killed_after_arrays(tmp_path / "model.safetensors", out, 8, to=to,
                                             memory_budget=256 << 10, threads=2)
        assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    # Every chunk the killed run wrote into `damaged` is cut to 0 bytes
    # (Orbax: the OCDBT data files holding the chunk values, ~60 KiB each,
    # its committed generations point to, not the B+tree nodes' files of a
    # few hundred bytes;
    # AXLearn: the chunk files), as a full disk or a crash can leave them.
    cut = 0
    for p in (tmp_path / "damaged").rglob("*"):
        if not p.is_file() or p.name.startswith("."):
            continue
        if to == "orbax":
            in_data = p.parent.name == "d" and p.stat().st_size >= 16 << 10
        else:
            in_data = "gda" in p.parts
        if in_data:
            os.truncate(p, 0)
            cut += 1
    assert cut > 0
    # Control: undamaged, the arrays committed before the kill are kept.
    r = run_cli(*args(tmp_path / "kept"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["arrays_resumed"] >= 4
    # Damaged: none is kept, all are written again, and the result is exact.
    r = run_cli(*args(tmp_path / "damaged"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["arrays_resumed"] == 0, r.stdout
    for out in (tmp_path / "kept", tmp_path / "damaged"):
        if to == "orbax":
            tree = ocp.PyTreeCheckpointer().restore(out / "0" / "default")
            got = {k: tree["layers"][k.split(".")[1]]["w"] for k in arrays}
        else:
            got = {k: ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(
                out / "step_00000000" / "gda" / k.replace(".", "/"))}}).result().read().result()
                for k in arrays}
        for k, v in arrays.items():
            assert same_bits(got[k], v), (out.name, k)


@pytest.mark.parametrize("sharded", [False, True])
def test_a_killed_safetensors_conversion_leaves_no_valid_file(tmp_path, sharded):
    rng = np.random.default_rng(10)
    arrays = {f"layers.{i:02d}.w": rng.standard_normal((128, 128), dtype=np.float32) for i in range(12)}
    save_file(arrays, str(tmp_path / "src.safetensors"))
    out = tmp_path / "out"
    args = ["convert", str(tmp_path / "src.safetensors"), str(out), "--to", "safetensors",
            "--memory-budget", "256KiB", "--threads", "2"]
    if sharded:
        args += ["--max-file-size", "200KiB"]
    kill = dict(to="safetensors", memory_budget=256 << 10, threads=2)
    if sharded:
        kill["max_file_size"] = 200 << 10
    killed = convert_killed_after_arrays(tmp_path / "src.safetensors", out, 6, **kill)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    assert not (out / "model.safetensors").exists()
    assert not (out / "model.safetensors.index.json").exists()
    # No reader takes what is there for a checkpoint: a sharded set's files
    # without the index are refused by name.
    r = run_cli("ls", str(out))
    assert "layers." not in r.stdout, r.stdout
    r = run_cli("convert", str(out), str(tmp_path / "again"), "--to", "axlearn")
    # Not a checkpoint: an input error, 2 (issue 29); a set missing files: 1.
    assert r.returncode == (1 if sharded else 2), r.stderr
    if sharded:
        assert "model.safetensors.index.json" in r.stderr and "incomplete" in r.stderr, r.stderr
    assert nothing_committed(tmp_path / "again")
    # The same command run again writes it whole.
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    got = {}
    for f in sorted(out.glob("*.safetensors")):
        got.update(load_file(str(f)))
    assert sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        assert same_bits(got[k], v), k
