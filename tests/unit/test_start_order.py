"""The runner's start order: longest first within a look-ahead, no case passed over for long,
every case exactly once."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.integration.start_order import longest_first


def test_the_longest_of_the_window_starts_first() -> None:
    lengths = [2, 5, 3, 9, 1, 4]
    order = list(longest_first(range(6), 3, lambda i: lengths[i]))
    # window {0,1,2} -> 1 (5); {0,2,3} -> 3 (9); {0,2,4} -> 2 (3); then 0, passed over three
    # times, goes first although 5 (4) is longer; then 5, 4
    assert order == [1, 3, 2, 0, 5, 4]


def test_equals_keep_item_order() -> None:
    assert list(longest_first("abcdef", 4, lambda c: 1)) == list("abcdef")


def test_a_lookahead_of_one_is_item_order() -> None:
    assert list(longest_first([3, 1, 2], 1, lambda x: x)) == [3, 1, 2]


def test_a_short_case_is_passed_over_at_most_lookahead_times() -> None:
    lengths = [1] + [9] * 20
    order = list(longest_first(range(21), 4, lambda i: lengths[i]))
    assert order.index(0) == 4  # passed over 4 times, then forced


@given(st.lists(st.integers(0, 12), max_size=60), st.integers(1, 20))
def test_every_case_once_and_bounded_lag(lengths: list[int], lookahead: int) -> None:
    order = list(longest_first(range(len(lengths)), lookahead, lambda i: lengths[i]))
    assert sorted(order) == list(range(len(lengths)))
    for started, case in enumerate(order):
        # a case starts within lookahead places of its window entry and lookahead passes
        assert started <= case + lookahead


def _makespan(durations: list[int], slots: int) -> int:
    free = [0] * slots
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def test_it_shortens_a_tail_that_item_order_leaves() -> None:
    """Two slots; the longest episode last in item order leaves one slot idle at the end."""
    lengths = [1, 1, 1, 1, 6]
    in_order = _makespan(lengths, 2)
    reordered = _makespan([lengths[i] for i in longest_first(range(5), 5,
                                                             lambda i: lengths[i])], 2)
    assert (in_order, reordered) == (8, 6)


def test_a_lookahead_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="lookahead"):
        list(longest_first([1], 0, lambda x: x))
