"""Counter-based draws: pure functions of their key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.base.rng import DrawStream, key_int, uniform


@given(st.lists(st.one_of(st.integers(), st.text()), max_size=5))
def test_draws_are_pure_functions_of_the_key(parts: list[object]) -> None:
    assert key_int(*parts) == key_int(*parts)
    assert 0.0 <= uniform(*parts) < 1.0


def test_streams_repeat_and_differ_by_key() -> None:
    a = [DrawStream(1, "t1", 0).random() for _ in range(3)]
    b = DrawStream(1, "t1", 0)
    assert a[0] == b.random()
    c = DrawStream(1, "t1", 1)
    assert c.random() != a[0]


def test_stream_crosses_block_boundaries_deterministically() -> None:
    s1, s2 = DrawStream("k"), DrawStream("k")
    first = [s1.bits64() for _ in range(20)]  # 8 words a block: three blocks
    assert first == [s2.bits64() for _ in range(20)]
    assert len(set(first)) == 20


def test_stream_helpers_stay_in_range() -> None:
    s = DrawStream("range")
    for _ in range(2000):
        assert 3 <= s.randint(3, 7) <= 7
        assert 1.5 <= s.uniform(1.5, 2.5) < 2.5
        assert s.choice("abc") in "abc"


def test_uniform_is_roughly_uniform() -> None:
    draws = [uniform("u", i) for i in range(20000)]
    mean = sum(draws) / len(draws)
    assert abs(mean - 0.5) < 0.01
    assert sum(d < 0.25 for d in draws) / len(draws) == pytest.approx(0.25, abs=0.015)
