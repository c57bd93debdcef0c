"""Adversarial filtering of flaw instances (solver/adversarial_filter.py), on a small subset
of the default set."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pytest_resilibench.solver.adversarial_filter import (
    FilterConfig,
    choose_candidates,
    filter_flaws,
)
from pytest_resilibench.solver.flaw_detectors import example

from pytest_resilibench.core.flow_sense import sense_problems
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks

pytest.importorskip("sklearn")
REGISTRY = default_registry()
SMALL = FilterConfig(candidates=3, rounds=2, folds=3, seed=5)


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    every = list(load_tasks(TASK_SETS["default"]))
    return every[::len(every) // 45][:45]


def test_the_filter_is_a_function_of_its_seed(tasks: list[Task]) -> None:
    """Same seed, same choices; each a candidate index, whose plan is as sensible as
    candidate 0's (never a flow no person would write where candidate 0 has none)."""
    chosen = filter_flaws(tasks, ["tool_misuse"], ["light"], REGISTRY, SMALL)
    assert filter_flaws(tasks, ["tool_misuse"], ["light"], REGISTRY, SMALL) == chosen
    by_task = chosen["tool_misuse/light"]
    assert sorted(by_task) == sorted(t.id for t in tasks)
    assert set(by_task.values()) <= set(range(SMALL.candidates))
    variant = Variant("flawed", "tool_misuse", "light")
    for task in tasks:
        first = plan_for(task, variant, REGISTRY, candidate=0)[0]
        kept = plan_for(task, variant, REGISTRY, candidate=by_task[task.id])[0]
        assert first is not None and kept is not None
        if not sense_problems(first.tools, REGISTRY):
            assert not sense_problems(kept.tools, REGISTRY)


def test_the_filter_keeps_the_candidate_detectors_cannot_tell_from_genuine(
        tasks: list[Task]) -> None:
    """Give each task, as its last candidate, a copy of its genuine plan: detectors trained
    on other tasks' genuine against flawed plans score it as genuine, so the filter keeps it
    for most tasks, and never a candidate 0 that equals no genuine plan over it."""
    genuine, candidates = {}, {}
    for task in tasks:
        plan = plan_for(task, Variant("optimal"), REGISTRY)[0]
        assert plan is not None
        genuine[task.id] = example(task, plan, flawed=False)
        flawed = [example(task, p, flawed=True) for k in range(2)
                  if (p := plan_for(task, Variant("flawed", "redundant_operations", "medium"),
                                    REGISTRY, candidate=k)[0]) is not None]
        candidates[task.id] = [*flawed, replace(genuine[task.id], flawed=True)]
    chosen = choose_candidates(genuine, candidates, REGISTRY, SMALL)
    copies = sum(k == 2 for k in chosen.values())
    assert copies > len(tasks) / 2, chosen
