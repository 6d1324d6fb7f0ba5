"""Array URLs that TensorStore rejects, cairn's URL parser rejects too; URLs
it keeps, cairn keeps (src/cairn/zarr/array_url.h). Compared with the
installed TensorStore. The Python API (cairn.open / cairn.create) still
takes local paths: it turns them into file:// URLs before parsing."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tensorstore as ts

import cairn
from cairn import _core


@pytest.fixture
def array_dir(tmp_path):
    d = tmp_path / "a"
    t = ts.open({"driver": "zarr3", "kvstore": f"file://{d}/",
                 "metadata": {"shape": [3], "data_type": "int16",
                              "chunk_grid": {"name": "regular",
                                             "configuration": {"chunk_shape": [3]}}}},
                create=True).result()
    t.write(np.array([5, -6, 7], np.int16)).result()
    return d


@pytest.mark.parametrize("form", ["{d}", "{d}/", "{d}/|zarr2:", "{d}/|zarr3:", "{d}|zarr3:"])
def test_bare_paths_are_rejected_like_tensorstore(array_dir, form):
    url = form.format(d=array_dir)
    with pytest.raises(ValueError, match=r'unsupported URL scheme: "' + re.escape(str(array_dir))):
        ts.open(url).result()
    with pytest.raises(ValueError, match="has no URL scheme") as e:
        _core.Array.open(url)
    assert url in str(e.value)
    with pytest.raises(ValueError, match="has no URL scheme"):
        _core.Array.create(url, '{"shape": [1], "data_type": "int8"}', False)
    # Control: the same URL with file:// opens in both (where TensorStore
    # reads the format the URL names).
    file_url = "file://" + url
    if "zarr2" not in url:
        assert _core.Array.open(file_url).shape == (3,)
        np.testing.assert_array_equal(ts.open(file_url).result().read().result(),
                                      cairn.open(file_url).read())
    # The Python API converts a path itself.
    if "|" not in url:
        np.testing.assert_array_equal(cairn.open(url).read(), [5, -6, 7])


def test_file_url_without_trailing_slash_is_kept(array_dir):
    url = f"file://{array_dir}"
    # TensorStore keeps the kvstore path as written...
    assert ts.KvStore.Spec(url).to_json() == {"driver": "file", "path": str(array_dir)}
    assert ts.Spec(url).to_json()["kvstore"] == {"driver": "file", "path": str(array_dir)}
    # ...and its format detection finds the array in that directory; so does cairn.
    want = ts.open(url).result().read().result()
    np.testing.assert_array_equal(want, [5, -6, 7])
    assert _core.Array.open(url).shape == (3,)
    np.testing.assert_array_equal(cairn.open(url).read(), want)
    # With a driver part both treat the path as a directory.
    np.testing.assert_array_equal(ts.open(url + "|zarr3:").result().read().result(), want)
    np.testing.assert_array_equal(cairn.open(url + "|zarr3:").read(), want)
