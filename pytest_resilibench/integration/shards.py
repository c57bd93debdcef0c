"""`--resili-shard=K/N`: the part K of N of a run's planned episodes, for a CI matrix whose
jobs each run one shard and whose reports `resilibench report merge` joins (reporting/merge.py).

Whole tasks go together: every episode of a task (its models, variants, flaws, base rates and
repeats) lands in one shard, so the common-random-number pairs the verdicts read (the same
task, repeat and tool luck: reporting/pairing.py) never straddle two shards. Tasks are dealt
longest first to the least loaded shard (LPT, the rule of start_order.py), a task's load being
its cases' expected lengths summed (`runner.expected_turns`); ties go by task id, then to the
lowest shard. The split is a pure function of the run's cases: every shard job and every xdist
worker computes the same one, and the shards of one run cover its cases exactly once.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["MAX_SHARDS", "Shard", "parse_shard", "shard_loads", "split_tasks"]

# More shards than this is a typo (a CI matrix has tens of jobs, not thousands).
MAX_SHARDS = 1000

_C = TypeVar("_C")


@dataclass(frozen=True)
class Shard:
    """Part `index` (1-based, as the option writes it) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """`K/N` with 1 <= K <= N <= MAX_SHARDS; anything else a ValueError saying what is wanted."""
    spec = text.strip()
    k, sep, n = spec.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit() or len(spec) > 20:
        # The value is not quoted: whatever was typed there stays out of the logs.
        raise ValueError("takes K/N: this job's shard K of N, e.g. 2/4")
    index, count = int(k), int(n)
    if count < 1 or count > MAX_SHARDS:
        raise ValueError(f"{spec}: N must be in 1..{MAX_SHARDS}")
    if not 1 <= index <= count:
        raise ValueError(f"{spec}: K must be in 1..{count} (shards are numbered from 1)")
    return Shard(index, count)


def split_tasks(cases: Sequence[_C], count: int, task_of: Callable[[_C], str],
                length: Callable[[_C], int]) -> dict[str, int]:
    """Task id -> its shard (1-based): tasks longest first, each to the least loaded shard."""
    loads: dict[str, int] = {}
    for case in cases:
        task = task_of(case)
        loads[task] = loads.get(task, 0) + length(case)
    heap = [(0, index) for index in range(1, count + 1)]  # (load, shard): least, then lowest
    owner: dict[str, int] = {}
    for task in sorted(loads, key=lambda t: (-loads[t], t)):
        load, index = heapq.heappop(heap)
        owner[task] = index
        heapq.heappush(heap, (load + loads[task], index))
    return owner


def shard_loads(cases: Sequence[_C], count: int, task_of: Callable[[_C], str],
                length: Callable[[_C], int]) -> list[int]:
    """Each shard's expected load (its cases' lengths summed), shard 1 first: the balance."""
    owner = split_tasks(cases, count, task_of, length)
    loads = [0] * count
    for case in cases:
        loads[owner[task_of(case)] - 1] += length(case)
    return loads
