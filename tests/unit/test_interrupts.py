"""Ctrl-C held off while the report is written: delivered after the block, at once when
pressed twice, not at all where SIGINT is ignored."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from pytest_resilibench.base.interrupts import sigint_deferred

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
