"""Coordinators: how the processes of a job agree (docs/COORDINATORS.md).

cairn's engine runs in every process of a job and needs the job's index and
size, barriers, and small all-gathers and broadcasts. A ``Coordinator``
(``cairn.dist.Coordinator``) provides them::

    import cairn.dist
    coordinator = cairn.dist.detect()      # jax.distributed, mpirun, or one process
    coordinator.process_index, coordinator.process_count
    coordinator.barrier("my-step/ready", timeout_s=60)
    values = coordinator.all_gather("sizes", b"...")   # list of bytes, by process index
    plan = coordinator.broadcast("plan", root=0, value=b"...")

Every process calls the same collectives with the same names in the same
order. A collective that does not complete within ``timeout_s`` raises
``OSError`` (the Unavailable status) on the processes that waited; none
waits forever. The collectives release the GIL.

Makers:

* ``single()``: a job of one process.
* ``mpi()``: the processes started by ``mpirun`` (cairn built with MPI).
* ``from_jax()``: the processes of a ``jax.distributed`` job, through its
  coordination service's key-value store and barriers (no extra launcher).
* ``callback(...)``: any key-value store given as three Python functions.
* ``detect()``: the first that applies of from_jax, mpi, single.
"""

from __future__ import annotations

import itertools
from typing import Callable, Optional

from cairn import _core
from cairn import _leaves

Coordinator = _core.Coordinator
Coordinator.__module__ = __name__  # documented (and shown by help()) as cairn.dist.Coordinator

__all__ = ["Coordinator", "callback", "detect", "from_jax", "mpi", "single"]

# Every from_jax() coordinator gets its own key prefix, "cairn/<n>". Processes
# create coordinators in the same order, so they count alike.
_jax_coordinators = itertools.count()


def single() -> Coordinator:
    """The coordinator of a job of one process: collectives return at once."""
    return _core.single_coordinator()


def mpi(timeout_s: float = 60.0) -> Coordinator:
    """The coordinator of the ranks of ``MPI_COMM_WORLD``. Initializes MPI if
    needed (finalized at exit). Every rank must call it. Raises
    ``NotImplementedError`` if cairn was built without MPI."""
    if not _core.mpi_available:
        raise NotImplementedError("cairn was built without MPI (CMake did not find it)")
    return _core.mpi_coordinator(timeout_s)


def callback(process_index: int, process_count: int,
             kv_set: Callable[[str, bytes], None],
             kv_get: Callable[[str, int], bytes],
             barrier: Optional[Callable[[str, int], None]] = None,
             key_prefix: str = "cairn") -> Coordinator:
    """A coordinator over any key-value store shared by the processes.

    ``kv_set(key, value)`` stores bytes under a key (each key is set once);
    ``kv_get(key, timeout_ms)`` blocks until the key exists and returns its
    bytes, raising if ``timeout_ms`` passes; ``barrier(id, timeout_ms)``
    (optional) returns once every process has called it with ``id``. They
    are called from cairn's threads, with the GIL held during each call.
    """
    return _core.callback_coordinator(process_index, process_count, kv_set, kv_get,
                                      barrier, key_prefix)


def from_jax(client=None, key_prefix: Optional[str] = None, *,
             process_index: Optional[int] = None,
             process_count: Optional[int] = None) -> Coordinator:
    """A coordinator over ``jax.distributed``'s coordination service (the
    same key-value store and barriers Orbax uses). Call after
    ``jax.distributed.initialize``; every process must create its
    coordinators in the same order (each gets key prefix ``cairn/<n>``).

    ``client`` (default: jax's own) is anything with jax's client methods
    ``key_value_set_bytes``, ``blocking_key_value_get_bytes`` and
    ``wait_at_barrier``; ``process_index``/``process_count`` default to
    ``jax.process_index()``/``jax.process_count()``."""
    if client is None:
        from jax._src import distributed
        client = distributed.global_state.client
        if client is None:
            raise RuntimeError("cairn.dist.from_jax: jax.distributed is not initialized "
                               "(call jax.distributed.initialize first)")
    if process_index is None or process_count is None:
        import jax
        process_index = jax.process_index() if process_index is None else process_index
        process_count = jax.process_count() if process_count is None else process_count
    if key_prefix is None:
        key_prefix = f"cairn/{next(_jax_coordinators)}"

    if hasattr(client, "key_value_set_bytes"):
        def kv_set(key: str, value: bytes) -> None:
            client.key_value_set_bytes(key, value)

        def kv_get(key: str, timeout_ms: int) -> bytes:
            return client.blocking_key_value_get_bytes(key, timeout_ms)
    else:  # older jaxlib: str values; latin-1 maps bytes 1:1 onto code points
        def kv_set(key: str, value: bytes) -> None:
            client.key_value_set(key, value.decode("latin-1"))

        def kv_get(key: str, timeout_ms: int) -> bytes:
            return client.blocking_key_value_get(key, timeout_ms).encode("latin-1")

    def barrier(barrier_id: str, timeout_ms: int) -> None:
        client.wait_at_barrier(barrier_id, timeout_ms)

    return _core.callback_coordinator(process_index, process_count, kv_set, kv_get,
                                      barrier, key_prefix)


def detect() -> Coordinator:
    """The coordinator the job was started for: ``from_jax()`` if
    ``jax.distributed`` is initialized with more than one process, else
    ``mpi()`` under ``mpirun`` with more than one rank, else ``single()``."""
    state = _leaves.jax_state()
    if state is not None and state.client is not None and state.num_processes > 1:
        return from_jax()
    if _core._mpi_world_size() > 1:
        return mpi()
    return single()
