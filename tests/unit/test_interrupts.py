"""Ctrl-C held off while the report is written: delivered after the block, at once when
pressed twice, not at all where SIGINT is ignored; counted (`count_interrupts`): the first a
KeyboardInterrupt, a later one ends the process at once with one line and no traceback; never
raised inside a gc callback, where Python would drop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from types import FrameType

import pytest

from pytest_resilibench.base import interrupts
from pytest_resilibench.base.interrupts import count_interrupts, sigint_deferred

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.fixture(autouse=True)
def python_handler() -> Iterator[None]:
    """Python's own SIGINT handler, whatever the runner set (a background job ignores it)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_sigint_during_the_block_is_delivered_after_it() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("the block went on")
    assert done == ["the block went on"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_sigint_interrupts_at_once() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        done.append("not reached")
    assert done == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nothing_is_delivered_without_a_sigint_or_where_it_is_ignored() -> None:
    with sigint_deferred():
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


GC_SCRIPT = """
import gc, os, signal, sys, time
from pytest_resilibench.base.interrupts import count_interrupts, not_in

def pressed_in_a_gc_callback(phase, info):
    if phase == "start" and info["generation"] == 2:  # gc.collect()'s
        # What Python does when the signal arrived during the collection: its handler runs
        # on this callback's first bytecodes.
        signal.getsignal(signal.SIGINT)(signal.SIGINT, sys._getframe())

not_in(pressed_in_a_gc_callback.__code__)
dropped = []
sys.unraisablehook = dropped.append
signal.signal(signal.SIGINT, signal.default_int_handler)
count_interrupts(lambda: "unused")
gc.callbacks.append(pressed_in_a_gc_callback)
try:
    gc.collect()
    print("the collection ended", flush=True)
    for _ in range(1000):  # bounded: the interrupt lands here
        time.sleep(0.01)
    print("never interrupted")
except KeyboardInterrupt:
    print("interrupted after the callback;", len(dropped), "dropped")
"""


def test_a_sigint_in_a_gc_callback_is_raised_after_it_not_dropped() -> None:
    """Where Python's handler would raise inside the callback (printed as unraisable and
    dropped: the run went on), it is raised in the code the collection interrupted. In a
    process of its own: nothing of other tests' threads and handlers in the way."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(GC_SCRIPT)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.splitlines() == ["the collection ended",
                                        "interrupted after the callback; 0 dropped"], done
    assert done.returncode == 0 and "Traceback" not in done.stderr


def test_the_first_press_interrupts_and_restore_puts_python_s_handler_back() -> None:
    restore = count_interrupts(lambda: "unused")
    try:
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    except BaseException:
        restore()
        raise
    assert interrupts._presses == 1
    restore()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_user_s_own_handler_is_left_alone() -> None:
    def mine(signum: int, frame: FrameType | None) -> None:
        pass

    signal.signal(signal.SIGINT, mine)
    count_interrupts(lambda: "unused")()
    assert signal.getsignal(signal.SIGINT) is mine


SCRIPT = """
import os, signal, sys, time
from pytest_resilibench.base.interrupts import count_interrupts, sigint_deferred

signal.signal(signal.SIGINT, signal.default_int_handler)
count_interrupts(lambda: "resilibench: the last words")
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    print("first: a KeyboardInterrupt", flush=True)
try:
    with sigint_deferred():  # the report being written
        for _ in range({presses} - 1):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        print("not reached", flush=True)
finally:
    print("no finally either", flush=True)
"""


@pytest.mark.parametrize("presses", [2, 3])
def test_a_later_press_ends_the_process_at_once_with_one_line(presses: int) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT.format(presses=presses))],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == interrupts.EXIT_AT_ONCE == 130
    assert done.stdout == "first: a KeyboardInterrupt\n"
    assert done.stderr.strip() == "resilibench: the last words"
