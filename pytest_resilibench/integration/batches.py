"""CPU-bound episodes this process computes itself, a batch at a time, back to back.

A scripted agent's episode computed inside pytest's item loop runs cold: between two episodes
pytest's own work for an item (hooks, fixtures, reports) has taken the caches and the branch
predictor, and each has to warm them again. Measured on this project's 2-core machine
(docs/REPRODUCTION.md, "The harness's own cost"), 50,400 items on one core took 145 s of CPU
with each episode computed as its item asked, 116 s with the next 31 computed along with it.
So the item that finds its episode not yet computed computes it and the `BATCH - 1` announced
cases after it that this process may take (`claim`), and keeps their records for their
items. Records are pure functions of their case (every draw is keyed, see rng.py): which item
computed one changes nothing but `wall_time_s`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.integration.cases import Case

__all__ = ["BATCH", "Batches"]

# Enough episodes in a row to run warm; few enough that the records kept (~20 KB each) and
# those a run ended early never uses (`-x`, a decided sequential gate) cost nothing to speak of.
BATCH = 32

ComputeHere = Callable[[Case], EpisodeRecord]
# (a case's id, how many) -> the announced cases after it to compute now.
Claim = Callable[[str, int], Sequence[Case]]


class Batches:
    def __init__(self, cases: Sequence[Case], compute_here: ComputeHere,
                 claim: Claim | None = None) -> None:
        """`cases`: the announced order; `claim`: which of the cases after an index this
        process may compute (the helpers of ahead.py hold others); by default every one not
        taken or computed yet."""
        self._cases = list(cases)
        self._compute_here = compute_here
        self._claim = claim or self._unclaimed
        self._position = {case.id: i for i, case in enumerate(self._cases)}
        self._index = dict(self._position)  # not taken yet
        self._done: dict[str, EpisodeRecord] = {}

    def take(self, case: Case) -> EpisodeRecord:
        """The record of `case`: computed already with an earlier one, or now, with the next
        batch. Its own failure is the caller's; a later case's failure leaves that case to its
        own item, which computes it again and shows what went wrong."""
        record = self._done.pop(case.id, None)
        i = self._index.pop(case.id, None)
        if record is not None:
            return record
        record = self._compute_here(case)
        if i is not None:
            for later in self._claim(case.id, BATCH - 1):
                with contextlib.suppress(Exception):
                    self._done[later.id] = self._compute_here(later)
        return record

    def close(self) -> None:
        self._done.clear()
        self._index.clear()

    def _unclaimed(self, case_id: str, n: int) -> list[Case]:
        i = self._position[case_id]
        after = self._cases[i + 1: i + 1 + n]
        return [c for c in after if c.id in self._index and c.id not in self._done]
