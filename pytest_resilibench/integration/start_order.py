"""The order in which the runner starts episodes that wait on a model: longest first (LPT).

A run's wall time is set by its last episodes: when fewer remain than there are slots, slots
idle while the longest of them finish (the tail; issue 47 measured 55% of Little's law at
concurrency 64 over 150 episodes, 71% over 600, with the longest first only among the next
`concurrency` cases in item order). Starting the longest first (longest processing time
first, the classic list-scheduling rule) leaves the short episodes for the tail.

The order is the sort by (expected length, longest first; then case id) of each block of
`block` consecutive cases in item order. The runner's run-ahead window is the block
(runner.py): every case of a block is started before any item of it waits, so no item runs
its episode on demand, and at most a block of records wait for their items. A run whose
cases fit in one block (the runner's default holds 1024) is in one global order, and since
the key is the case's alone, an xdist worker's share starts in that order restricted to its
share, whatever the partition. Nothing here depends on timing; an episode's result does not
depend on when it starts (its seed, task, repeat and call decide it: docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TypeVar

__all__ = ["longest_first"]

_T = TypeVar("_T")


def longest_first(cases: Iterable[_T], block: int, length: Callable[[_T], int],
                  ident: Callable[[_T], str]) -> Iterator[_T]:
    """`cases`, each block of `block` consecutive ones sorted longest first by `length`,
    equals by `ident` (ascending)."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    source = iter(cases)
    while chunk := list(islice(source, block)):
        yield from sorted(chunk, key=lambda case: (-length(case), ident(case)))
