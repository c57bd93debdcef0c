"""The cyclic garbage collector during a benchmark run.

What pytest builds before its test loop (items, cases, tasks: most of a 50,400-item run's
objects) lives until the run ends, yet the collector would walk it again at every full
collection: during the loop, twice after it (pytest's unraisable-exception plugin collects in
its `pytest_unconfigure` and again in its cleanup) and once more while the interpreter shuts
down (7 of a 50,400-item run's 90 seconds: bench/bench_plugin.py). So the run freezes that
heap (`gc.freeze`: out of every collection) for the loop and thaws it after pytest's last
collection, so that a process that goes on (pytester runs in-process) gets it back; and at
exit the process freezes everything again, so that shutting down walks nothing. Nothing at exit
needs the collector: Python does not promise to finalize the objects still alive then (the
reference, "Data model", `object.__del__`).
"""

from __future__ import annotations

import atexit
import gc

import pytest

__all__ = ["FrozenHeap"]

_exit_hook = False  # `atexit` is per process, this plugin may activate many times in one


class FrozenHeap:
    def __init__(self, config: pytest.Config) -> None:
        """Made when the benchmark activates, so that `_thaw` is registered before the
        cleanups of the plugins configured after: `config.add_cleanup` runs them last
        registered first, and pytest's unraisable-exception plugin collects in its own."""
        global _exit_hook
        self._frozen = False
        config.add_cleanup(self._thaw)
        if not _exit_hook:
            atexit.register(gc.freeze)
            _exit_hook = True

    def freeze(self) -> None:
        """Take everything alive now out of the collector's generations (garbage first: a
        frozen cycle would never be freed)."""
        gc.collect()
        gc.freeze()
        self._frozen = True

    def _thaw(self) -> None:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
