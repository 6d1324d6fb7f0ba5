"""Destination arrays for reads: allocated so that filling them is cheap."""
from __future__ import annotations

import mmap

import numpy as np

_HUGEPAGE_HINT_BYTES = 4 << 20  # numpy asks for transparent huge pages from this size on


def aligned_empty(shape, dtype, alignment: int = 64):
    """np.empty(shape, dtype) whose data starts on an `alignment`-byte
    boundary: jax.device_put onto a CPU device then adopts the buffer
    instead of copying it (it needs 64-byte alignment; np.empty gives 16).

    Buffers of 4 MiB or more are anonymous mappings of their own (page
    aligned) instead of numpy's allocation, which asks the kernel for
    transparent huge pages (madvise MADV_HUGEPAGE) from that size on: a
    restore writes each destination once, right after allocating it, and a
    fresh huge page costs its zeroing up front (2 MiB at once, on the thread
    that touches it first); on VMs that hand free memory back to the host
    (virtio-balloon free page reporting) huge pages come from the returned
    blocks, and faulting them in ran at ~0.1 GB/s against ~1 GB/s for
    ordinary pages (docs/EMERGENCY.md, "Recovery time"). The mapping is
    unmapped when the last array viewing it goes."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes >= _HUGEPAGE_HINT_BYTES:
        region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        return np.frombuffer(region, dtype=np.uint8).view(dtype).reshape(shape)
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + nbytes].view(dtype).reshape(shape)
