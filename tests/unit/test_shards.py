"""`--resili-shard=K/N` (integration/shards.py): whole tasks, balanced, deterministic, and the
shards of a run cover its cases exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.cases import build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.runner import expected_turns
from pytest_resilibench.integration.shards import Shard, parse_shard, shard_loads, split_tasks

TASKS = list(load_tasks())
CASES = build_cases(RunConfig(sample=4, repeats=2, models=("builtin:adaptive", "o3")), TASKS)


def _task(case: object) -> str:
    return case.task.id  # type: ignore[attr-defined]


def test_parse_shard() -> None:
    assert parse_shard(" 2/4 ") == Shard(2, 4)
    assert str(parse_shard("1/1")) == "1/1"


@pytest.mark.parametrize(("text", "says"), [
    ("2", "takes K/N"), ("a/b", "takes K/N"), ("-1/4", "takes K/N"), ("0/4", "K must be in 1..4"),
    ("5/4", "K must be in 1..4"), ("1/0", "N must be in"), ("1/1001", "N must be in"),
    ("1/99999999999999999999999999", "takes K/N"),
])
def test_a_bad_shard_says_what_it_takes(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace(".", r"\.")):
        parse_shard(text)


@pytest.mark.parametrize("count", [1, 2, 4, 7])
def test_the_shards_cover_every_case_once_with_whole_tasks(count: int) -> None:
    owner = split_tasks(CASES, count, _task, expected_turns)
    assert set(owner) == {case.task.id for case in CASES}
    assert set(owner.values()) == set(range(1, count + 1))
    # Deterministic: the same split from the cases in another order.
    assert split_tasks(list(reversed(CASES)), count, _task, expected_turns) == owner


def test_the_shards_are_balanced_by_expected_length() -> None:
    loads = shard_loads(CASES, 4, _task, expected_turns)
    assert sum(loads) == sum(expected_turns(case) for case in CASES)
    # LPT: no shard exceeds the lightest by more than the heaviest task.
    per_task: Counter[str] = Counter()
    for case in CASES:
        per_task[_task(case)] += expected_turns(case)
    assert max(loads) - min(loads) <= max(per_task.values())
