"""The library's events (include/cairn/events.h) logged to
``logging.getLogger("cairn")``: a step an interrupted save left behind and
that was dropped (WARNING), a restore that fell back (WARNING), a
conversion that resumed arrays (INFO), a step deleted by retention (INFO).
The native layer decides and words every event; this module only logs it."""

from __future__ import annotations

import atexit
import logging

from cairn import _core

__all__ = ["install"]

logger = logging.getLogger("cairn")


def _log(levelno: int, message: str) -> None:
    logger.log(levelno, "%s", message)


def install() -> None:
    """Sends the native events to the "cairn" logger (until exit)."""
    _core._set_event_sink(_log)
    atexit.register(_core._set_event_sink, None)
