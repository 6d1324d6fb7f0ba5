"""A barrier for ``cairn.save(..., barrier=)`` built on ``jax.distributed``.

Every process of a ``jax.distributed`` job calls ``cairn.save`` with its own
``process_index`` and the same barrier. The barrier uses the distributed
client's ``wait_at_barrier`` (a coordination-service barrier, no device
collective, so it also works from a thread), with a per-call counter in the
barrier id because every process passes the same names in the same order.
With one process and no distributed client it returns at once.
"""

from __future__ import annotations

import itertools
from typing import Callable


def jax_barrier(prefix: str = "cairn", timeout_s: float = 300.0) -> Callable[[str], None]:
    """A callable ``barrier(name)`` that blocks until every process of the
    ``jax.distributed`` job has called it with the same name."""
    import jax  # the caller runs jax.distributed; cairn itself never needs jax
    from jax._src import distributed

    counter = itertools.count()
    timeout_ms = int(timeout_s * 1000)

    def barrier(name: str) -> None:
        key = f"{prefix}:{next(counter)}:{name}"
        client = distributed.global_state.client
        if client is None:
            if jax.process_count() > 1:
                raise RuntimeError("cairn: jax has several processes but no distributed client")
            return
        client.wait_at_barrier(key, timeout_ms)

    return barrier
