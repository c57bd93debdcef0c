"""Ctrl-C held off while something must finish: the JSON report, written at a run's end, is
whole or the old one, never lost to an interrupt that lands while it is written."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["sigint_deferred"]


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """A SIGINT during the block waits for its end, then is delivered as it would have been
    (a KeyboardInterrupt where Python's handler is in place); a second one interrupts at once.
    Only on the main thread, and only where SIGINT is handled (a background job ignores it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if pending:  # pressed again: the user insists
            raise KeyboardInterrupt
        pending.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            signal.raise_signal(signal.SIGINT)
