"""cairn.open(url).read() fills a destination of ordinary pages, not one that
numpy asked transparent huge pages for (madvise MADV_HUGEPAGE, numpy does
that from 4 MiB on): a read writes its destination once, right after
allocating it, and on VMs that return free memory to the host, faulting in
fresh huge pages ran ~10x slower than ordinary pages (cairn/_memory.py). On
moto, where a chunk GET writes into the destination on the HTTP thread, this
made cairn's zarr3 restore at 1 request in flight 0.6-0.8x TensorStore's
(docs/object_stores.md). No timing here: the mapping's VmFlags say it."""
import numpy as np
import pytest

import cairn


def _huge_page_advised(a: np.ndarray) -> bool:
    """Whether any mapping under `a`'s bytes carries MADV_HUGEPAGE ("hg"):
    numpy advises only the 2 MiB-aligned middle of a block, a mapping of
    its own."""
    begin, end = a.ctypes.data, a.ctypes.data + a.nbytes
    advised = False
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            first = line.split(" ", 1)[0]
            if "-" in first and not first.endswith(":"):
                lo, hi = (int(x, 16) for x in first.split("-"))
                inside = lo < end and begin < hi
            elif inside and line.startswith("VmFlags:"):
                advised = advised or "hg" in line.split()[1:]
    return advised


def _numpy_asks_for_huge_pages() -> bool:
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    return bool(multiarray._get_madvise_hugepage())


@pytest.mark.parametrize("fmt", ["zarr3", "zarr2"])
def test_read_destination_is_not_madvised_for_huge_pages(tmp_path, fmt):
    url = f"file://{tmp_path}/a/|{fmt}:"
    data = np.arange(1024 * 2048, dtype=np.float32).reshape(1024, 2048)  # 8 MiB
    cairn.create(url, shape=list(data.shape), dtype="float32", chunks=[256, 2048]).write(data)
    out = cairn.open(url).read()
    assert np.array_equal(out, data)
    assert out.flags.writeable and out.flags.c_contiguous
    assert out.ctypes.data % 64 == 0
    assert not _huge_page_advised(out)
    out[0, 0] = -1.0  # an ordinary, writable numpy array
    # Control: numpy's own array of the same size is madvised, so the check
    # above can fail (it did with np.empty).
    if _numpy_asks_for_huge_pages():
        control = np.empty_like(data)
        control.fill(0)
        assert _huge_page_advised(control)


def test_small_reads_and_boxes_still_read_right(tmp_path):
    url = f"file://{tmp_path}/b/|zarr3:"
    data = np.arange(60, dtype=np.int16).reshape(6, 10)
    cairn.create(url, shape=[6, 10], dtype="int16", chunks=[4, 4]).write(data)
    arr = cairn.open(url)
    assert np.array_equal(arr.read(), data)
    assert np.array_equal(arr.read(origin=[1, 2], shape=[3, 5]), data[1:4, 2:7])
    assert arr.read(origin=[6, 10], shape=[0, 0]).shape == (0, 0)
