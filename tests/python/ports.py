"""A port for a server a test starts: the jax.distributed coordinator of a
multi-process job, or an emulator.

A port found free with bind(("127.0.0.1", 0)) comes from the kernel's
ephemeral range, where every outgoing connection on the machine also takes
its local port: between the test closing its probe and the server binding,
a client (an HTTP request of this suite, or of another copy running side by
side) may take it, and the job fails with "address already in use". So the
port is chosen at random below that range (no outgoing connection is given
such a port) and checked free on every address, as servers bind it."""

from __future__ import annotations

import random
import socket

_LOWEST = 10000


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def unused_port() -> int:
    """A TCP port nothing is bound to now, outside the ephemeral range when
    the range leaves room below it (else an ephemeral one)."""
    low, _ = _ephemeral_range()
    if low - 1 > _LOWEST:
        for _ in range(100):
            port = random.randint(_LOWEST, low - 1)
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
