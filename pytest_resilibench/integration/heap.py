"""The cyclic garbage collector during a benchmark run.

What pytest builds before its test loop (items, cases, tasks: most of a 50,400-item run's
objects) lives until the run ends, and so do the reports it keeps of every item; yet the
collector would walk them again at every full collection: during the loop (in the forked
helpers of `ahead.py` too, where an item waiting on a helper's pause of ~0.2 s sat idle),
twice after it (pytest's unraisable-exception plugin collects in its `pytest_unconfigure` and
again in its cleanup) and once more while the interpreter shuts down (~7 s of a 50,400-item
run: bench/bench_plugin.py). So the run freezes that heap (`gc.freeze`: out of every later
collection) for the loop, freezes what survives each full collection in it and what the
loop made once it ends (an xdist controller's 150,000 reports: 0.4 s of a collection at
unconfigure, after the summary), and thaws all after pytest's last collection, so that a
process that goes on (pytester runs in-process) gets it back; at exit the process freezes
everything again, so that shutting down walks nothing. Nothing at exit needs the collector:
Python does not promise to finalize the objects still alive then (the language reference,
"Data model", `object.__del__`).

Full collections themselves are deferred from the moment the benchmark activates until the
run ends (`defer_full_collections`): each walks every object that survived the young
generations since the last one, and a run makes its long-lived heap as it goes: collecting
50,400 items spent 1.3 s of its 6.2 s in 9 full collections; in the loop ~75 objects an item
survive (records awaiting their items, reports, memo entries), and a 12,000-item run on one
core spent 0.7 s of its 24 s in 14 full collections (60-120 ms each), for no garbage: its peak
memory is the same with none. The young generations, where cycles die, are collected as usual.
"""

from __future__ import annotations

import atexit
import gc

import pytest

from pytest_resilibench.base.interrupts import not_in

__all__ = ["FULL_COLLECTION_AFTER", "FrozenHeap", "defer_full_collections"]

_exit_hook = False  # `atexit` is per process, this plugin may activate many times in one
# Young-generation collections between two full ones during a run (CPython's default: 10): a
# 50,400-item run makes a few hundred a process.
FULL_COLLECTION_AFTER = 1000


def defer_full_collections() -> tuple[int, int, int]:
    """Let full collections wait for `FULL_COLLECTION_AFTER` young-generation ones (the
    collector's third threshold); the thresholds before, to restore."""
    before = gc.get_threshold()
    first, second, third = before
    gc.set_threshold(first, second, max(third, FULL_COLLECTION_AFTER))
    return before


class FrozenHeap:
    def __init__(self, config: pytest.Config) -> None:
        """Made when the benchmark activates (full collections are deferred from then on), so
        that `_thaw` is registered before the cleanups of the plugins configured after:
        `config.add_cleanup` runs them last registered first, and pytest's
        unraisable-exception plugin collects in its own."""
        global _exit_hook
        self._frozen = False
        self._thresholds = defer_full_collections()
        config.add_cleanup(self._thaw)
        if not _exit_hook:
            atexit.register(gc.freeze)
            _exit_hook = True

    def freeze(self) -> None:
        """Take everything alive now out of the collector's generations (the young garbage
        first: a frozen cycle would never be freed), and what survives each later full
        collection. Young generations only: cycles die young, and a full collection here
        walked a 50,400-item worker's whole heap (~890,000 objects, 0.25-0.3 s) to free 65."""
        gc.collect(1)
        gc.freeze()
        if not self._frozen:
            gc.callbacks.append(_refreeze)
        self._frozen = True

    def _thaw(self) -> None:
        gc.set_threshold(*self._thresholds)
        if self._frozen:
            gc.callbacks.remove(_refreeze)
            gc.unfreeze()
            self._frozen = False


def _refreeze(phase: str, info: dict[str, int]) -> None:
    """After a full collection, freeze its survivors: the reports a run keeps pile up (pytest
    keeps each) and the next full collection would walk them all again, and those before."""
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


# A Ctrl-C during a full collection would be handled in this callback, where Python prints
# the KeyboardInterrupt as unraisable and drops it: it is raised after it instead.
not_in(_refreeze.__code__)
