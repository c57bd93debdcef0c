"""The runner's start order: longest first (LPT), equals by case id, a block at a time; every
case exactly once; a pure function of the cases, so any partition of them (xdist workers)
starts its share in the same relative order."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.cases import build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.runner import expected_turns
from pytest_resilibench.integration.start_order import longest_first


def _order(lengths: list[int], block: int) -> list[int]:
    return list(longest_first(range(len(lengths)), block, lambda i: lengths[i],
                              lambda i: f"{i:04d}"))


def test_the_longest_start_first() -> None:
    assert _order([2, 5, 3, 9, 1, 4], 6) == [3, 1, 5, 2, 0, 4]


def test_equals_go_by_case_id_not_item_order() -> None:
    ids = {"a": "z", "b": "y", "c": "x"}
    order = list(longest_first("abc", 3, lambda c: 1, ids.__getitem__))
    assert order == ["c", "b", "a"]


def test_a_block_at_a_time() -> None:
    # blocks {0,1,2} and {3,4,5}: each sorted, the second after the first
    assert _order([1, 2, 3, 9, 8, 7], 3) == [2, 1, 0, 3, 4, 5]


@given(st.lists(st.integers(0, 12), max_size=60), st.integers(1, 20))
def test_every_case_once_within_its_block(lengths: list[int], block: int) -> None:
    order = _order(lengths, block)
    assert sorted(order) == list(range(len(lengths)))
    for started, case in enumerate(order):
        assert started // block == case // block  # never started outside its block


@given(st.lists(st.integers(0, 12), max_size=60), st.integers(1, 4))
def test_a_partition_starts_its_share_in_the_global_order(lengths: list[int],
                                                          workers: int) -> None:
    """One block: each round-robin share (xdist's) starts in the global order restricted to
    it, whatever the number of workers."""
    everything = _order(lengths, 1024)
    for worker in range(workers):
        share = list(range(worker, len(lengths), workers))
        mine = list(longest_first(share, 1024, lambda i: lengths[i], lambda i: f"{i:04d}"))
        assert mine == [i for i in everything if i in share]


def _makespan(durations: list[int], slots: int) -> int:
    free = [0] * slots
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def test_it_shortens_a_tail_that_item_order_leaves() -> None:
    """Two slots; the longest episode last in item order leaves one slot idle at the end."""
    lengths = [1, 1, 1, 1, 6]
    reordered = _makespan([lengths[i] for i in _order(lengths, 5)], 2)
    assert (_makespan(lengths, 2), reordered) == (8, 6)


def test_real_cases_longer_plans_first_and_the_same_every_session() -> None:
    config = RunConfig(models=("o3",), sample=1, repeats=2)
    cases = build_cases(config, list(load_tasks()))
    first = [c.id for c in longest_first(cases, 1024, expected_turns, lambda c: c.id)]
    fresh = build_cases(config, list(load_tasks()))  # another session's cases
    again = [c.id for c in longest_first(fresh, 1024, expected_turns, lambda c: c.id)]
    assert first == again
    by_id = {c.id: expected_turns(c) for c in cases}
    turns = [by_id[i] for i in first]
    assert turns == sorted(turns, reverse=True) and turns[0] > turns[-1]


def test_a_block_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="block"):
        list(longest_first([1], 0, lambda x: x, str))
