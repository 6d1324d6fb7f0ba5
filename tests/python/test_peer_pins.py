"""The peers the interop tests pin (their versions' quirks are asserted
here and there: TensorStore 0.1.86's dtypes and fill, orbax-checkpoint
0.12.8's files, jax/flax/optax trees) are pinned exactly in
requirements-dev.txt, and the suite runs against exactly those versions.
An upgrade is made on purpose: the pin, the tests and the docs together.
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import re

import pytest

REQUIREMENTS = pathlib.Path(__file__).resolve().parents[2] / "requirements-dev.txt"
PINNED_PEERS = ["tensorstore", "orbax-checkpoint", "jax", "jaxlib", "flax", "optax"]


def pins() -> dict[str, str]:
    out = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;]+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


@pytest.mark.parametrize("peer", PINNED_PEERS)
def test_each_peer_the_tests_depend_on_is_pinned_to_the_installed_version(peer):
    pinned = pins()
    assert peer in pinned, f"{peer} is not pinned with == in {REQUIREMENTS.name}"
    installed = importlib.metadata.version(peer)
    assert installed == pinned[peer], (
        f"{peer} {installed} is installed but {REQUIREMENTS.name} pins {pinned[peer]}: "
        "upgrade on purpose (the pin, the tests and the docs together)")
