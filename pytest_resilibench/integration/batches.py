"""CPU-bound episodes this process computes itself, a batch at a time, back to back.

A scripted agent's episode computed inside pytest's item loop runs cold: between two episodes
pytest's own work for an item (hooks, fixtures, reports) has taken the caches and the branch
predictor, and each has to warm them again. Measured on this project's 2-core machine
(docs/REPRODUCTION.md, "The harness's own cost"), 50,400 items on one core took 145 s of CPU
with each episode computed as its item asked, 116 s with the next 31 computed along with it.
So the item that finds its episode not yet computed computes it and the `BATCH - 1` announced
cases after it that this process may take (`claim`), and keeps their records for their
items. Records are pure functions of their case (every draw is keyed, see rng.py): which item
computed one changes nothing but `wall_time_s`. A batch is computed by one call
(`compute_batch`), so that the runner drives its episodes on one turn of its event loop
rather than one loop run an episode (~15 us each, 50,400 times in a full run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.integration.cases import Case

__all__ = ["BATCH", "Batches"]

# Enough episodes in a row to run warm; few enough that the records kept (~20 KB each) and
# those a run ended early never uses (`-x`, a decided sequential gate) cost nothing to speak of.
BATCH = 32

# Cases -> each one's record, or the exception computing it raised (in the cases' order).
ComputeBatch = Callable[[Sequence[Case]], list[EpisodeRecord | Exception]]
# (a case's id, how many) -> the announced cases after it to compute now.
Claim = Callable[[str, int], Sequence[Case]]


class Batches:
    def __init__(self, cases: Sequence[Case], compute_batch: ComputeBatch,
                 claim: Claim | None = None) -> None:
        """`cases`: the announced order; `claim`: which of the cases after an index this
        process may compute (the helpers of ahead.py hold others); by default every one not
        taken or computed yet."""
        self._cases = list(cases)
        self._compute_batch = compute_batch
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
        later = list(self._claim(case.id, BATCH - 1)) if i is not None else []
        own, *others = self._compute_batch([case, *later])
        for done, result in zip(later, others, strict=True):
            if isinstance(result, EpisodeRecord):
                self._done[done.id] = result
        if isinstance(own, Exception):
            raise own
        return own

    def close(self) -> None:
        self._done.clear()
        self._index.clear()

    def _unclaimed(self, case_id: str, n: int) -> list[Case]:
        i = self._position[case_id]
        after = self._cases[i + 1: i + 1 + n]
        return [c for c in after if c.id in self._index and c.id not in self._done]
