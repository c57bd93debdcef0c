"""Ctrl-C, any number of times. The first one interrupts as Python's handler does (a
KeyboardInterrupt), or waits while something must finish (`sigint_deferred`: the JSON report,
whole or the old one); the second and any later one end the process at once, quietly: one
line saying what became of the run, exit status 130, no traceback (`count_interrupts`).

Why not a KeyboardInterrupt each time: while a run unwinds from the first, a second one
lands anywhere, in a finally block, in pytest's own rendering of the first, in a garbage
collector callback (where Python prints it as an unraisable exception and drops it), and each
of those printed a traceback. A KeyboardInterrupt is also never raised in a frame registered
with `not_in` (a gc callback): it is signalled again, and so raised in the code that callback
interrupted.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import CodeType, FrameType

__all__ = ["count_interrupts", "not_in", "sigint_deferred"]

EXIT_AT_ONCE = 130  # the shell's status of a process ended by SIGINT (128 + 2)
_presses = 0
_last_words: Callable[[], str] | None = None  # the line of a run ended at once
_unsafe: set[CodeType] = set()
_AGAIN_AFTER_S = 0.01  # a gc callback is long over by then (else it is put off again)


def not_in(code: CodeType) -> None:
    """Never raise the KeyboardInterrupt in a frame running `code` (a gc callback, where
    Python would print it and drop it)."""
    _unsafe.add(code)


def count_interrupts(last_words: Callable[[], str]) -> Callable[[], None]:
    """Handle SIGINT as above, where Python's own handler is in place, on the main thread (a
    background job ignores SIGINT; a user's own handler is left alone). `last_words()` is
    the line printed when a later press ends the run. Returns what puts things back."""
    global _last_words, _presses
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return lambda: None
    _presses, _last_words = 0, last_words
    signal.signal(signal.SIGINT, _on_sigint)

    def restore() -> None:
        global _last_words
        _last_words = None
        if signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    return restore


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _presses
    if _in_unsafe(frame):
        # Sent again, a little later, from another thread: `raise_signal` or `os.kill` here
        # would be handled at once, in this frame still.
        again = threading.Timer(_AGAIN_AFTER_S, os.kill, (os.getpid(), signal.SIGINT))
        again.daemon = True
        again.start()
        return
    _presses += 1
    if _presses > 1:
        _end_now()
    raise KeyboardInterrupt


def _in_unsafe(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code in _unsafe:
            return True
        frame = frame.f_back
    return False


def _end_now() -> None:
    """The user insists: stop now. Nothing more runs but the line (no atexit, no finalizer:
    a report being written stays the old one, `atomic.py`; the episode log keeps what it
    holds, resume.py)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a third press during the line
    line = "resilibench: interrupted again: stopped at once"
    # The line is a courtesy: nothing it meets (a closed stream, a failing callback) may
    # print a traceback instead, or keep the process from ending.
    with suppress(Exception):
        line = _last_words() if _last_words is not None else line
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    with suppress(OSError):
        os.write(2, f"\n{line}\n".encode("utf-8", "replace"))
    os._exit(EXIT_AT_ONCE)


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """A SIGINT during the block waits for its end, then is delivered as it would have been
    (a KeyboardInterrupt where Python's handler or `count_interrupts`' is in place); a
    second one interrupts at once (with `count_interrupts`, a press after an earlier one
    ends the process). Only on the main thread, and only where SIGINT is handled (a
    background job ignores it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    pending: list[int] = []
    counted = previous is _on_sigint

    def hold(signum: int, frame: FrameType | None) -> None:
        global _presses
        if counted:
            _presses += 1
            if _presses > 1:
                _end_now()
        elif pending:  # pressed again: the user insists
            raise KeyboardInterrupt
        pending.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            if counted:  # counted already: delivered, not pressed again
                raise KeyboardInterrupt
            signal.raise_signal(signal.SIGINT)
