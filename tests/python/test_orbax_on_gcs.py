"""orbax-checkpoint writing and reading gs:// directly, on fake-gcs-server
(Orbax reaches the bucket through etils.epath -> gcsfs, both honouring
STORAGE_EMULATOR_HOST, and writes arrays with TensorStore's gcs driver):

- Orbax saves a tree with sharded jax arrays, numpy arrays and scalars to the
  bucket in each of its four storage variants; cairn restores it bit-exact.
- cairn saves the same tree to the bucket in each variant; Orbax restores it
  bit-exact.
- One checkpoint root on the bucket shared by Orbax's CheckpointManager and
  cairn: Orbax saves step 1, cairn saves step 2; Orbax's manager lists both
  and restores step 2, cairn restores its latest step and step 1.
"""

from __future__ import annotations

import orbax_helpers as h  # sets XLA_FLAGS first

import logging
import os

import orbax.checkpoint as ocp
import pytest

import cairn
from s3_helpers import FakeGcsServer, gcs_environment

BUCKET = "cairn-orbax-gcs"
logging.getLogger("gcsfs").setLevel(logging.ERROR)  # "no default credentials": the emulator needs none


@pytest.fixture(scope="module")
def gcs():
    server = FakeGcsServer.shared()
    server.create_bucket(BUCKET)
    return server


@pytest.fixture
def root(gcs, monkeypatch, request):
    gcs_environment(monkeypatch, gcs.endpoint)
    return f"gs://{BUCKET}/{request.node.name.replace('[', '-').replace(']', '')}-{os.getpid()}"


@pytest.fixture(scope="module")
def mesh():
    return h.mesh()


@pytest.mark.parametrize("use_ocdbt,use_zarr3", h.VARIANTS, ids=h.VARIANT_IDS)
def test_orbax_saves_to_the_bucket_and_cairn_restores(root, mesh, use_ocdbt, use_zarr3):
    tree = h.rich_tree(mesh)
    handler = ocp.PyTreeCheckpointHandler(use_ocdbt=use_ocdbt, use_zarr3=use_zarr3)
    ocp.Checkpointer(handler).save(f"{root}/ckpt", args=ocp.args.PyTreeSave(tree))
    h.assert_bit_equal(tree, cairn.restore(f"{root}/ckpt"))


@pytest.mark.parametrize("use_ocdbt,use_zarr3", h.VARIANTS, ids=h.VARIANT_IDS)
def test_cairn_saves_to_the_bucket_and_orbax_restores(root, mesh, use_ocdbt, use_zarr3):
    tree = h.rich_tree(mesh)
    cairn.save(f"{root}/ckpt", tree, use_ocdbt=use_ocdbt, use_zarr3=use_zarr3)
    h.assert_bit_equal(tree, ocp.PyTreeCheckpointer().restore(f"{root}/ckpt"))


def test_orbax_and_cairn_share_a_checkpoint_root_on_the_bucket(root, mesh):
    first = h.rich_tree(mesh)
    second = {"w": h.numpy_tree()["a"] * 3, "n": h.numpy_tree()["b"]["c.d"] + 1}
    with ocp.CheckpointManager(root) as mngr:
        mngr.save(1, args=ocp.args.PyTreeSave(first))
        mngr.wait_until_finished()
    cairn.save(root, second, step=2)
    with ocp.CheckpointManager(root) as mngr:
        assert list(mngr.all_steps()) == [1, 2]
        assert mngr.latest_step() == 2
        h.assert_bit_equal(second, mngr.restore(2, args=ocp.args.PyTreeRestore()))
    assert cairn.orbax.all_steps(root) == [1, 2]
    h.assert_bit_equal(second, cairn.restore(root))
    h.assert_bit_equal(first, cairn.restore(f"{root}/1/default"))
