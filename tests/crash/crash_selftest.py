"""Two paths that check the campaign itself (not drawn by default): one that
renames a file into place without any fsync and one that syncs the file and
its directory. A power loss after the first must be reported as a loss; the
second must survive (tests/python/test_crash_campaign.py)."""

from __future__ import annotations

import os

from campaign import Finding, register_workload

DATA = b"committed bytes\n" * 64


def _write(ctx, sync: bool) -> None:
    tmp, final = ctx.root / "data.tmp", ctx.root / "data"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, DATA)
    if sync:
        os.fsync(fd)
    os.close(fd)
    os.rename(tmp, final)
    if sync:
        dfd = os.open(ctx.root, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
    ctx.commit(file="data")


def _check(ctx) -> list:
    if not ctx.committed():
        return []
    path = ctx.root / "data"
    got = path.read_bytes() if path.exists() else None
    if got != DATA:
        return [Finding("loss", f"committed file data holds {None if got is None else len(got)} bytes")]
    return []


register_workload("selftest_unsynced", lambda ctx: _write(ctx, False), _check, default=False,
                  kinds=("powerloss",))
register_workload("selftest_synced", lambda ctx: _write(ctx, True), _check, default=False,
                  kinds=("powerloss",))
