"""Bound (iii): the DP optimum equals brute force, holds on the real simulator, and its
workflow is the plan the policy follows."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from pytest_resilibench.solver.rollout import simulate

from pytest_resilibench.core.optimum.dp import (
    evaluate,
    naive_policy,
    optimal_policy,
    solve,
    solve_task,
    workflow_of,
)
from pytest_resilibench.core.optimum.mdp import TaskMDP
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.scoring import first_success_order
from pytest_resilibench.core.simulator import EpisodeKey, success_probability
from pytest_resilibench.core.tasks import Task
from tests.solver.sample_tasks import NOTICING, POSTING, QUEUEING

REGISTRY = default_registry()
TINY = [
    (("network_fetcher", "network_poster"), 0.8, 6),  # prerequisite outside the list
    (("file_operations_reader", "data_processing_validator"), 0.6, 6),
    (("network_monitor", "network_router"), 0.7, 5),  # prerequisite inside the list
    (("integration_queue",), 0.6, 6),  # a two-level prerequisite chain
    (("utility_logger", "file_operations_reader", "file_operations_writer"), 0.5, 5),
]


def brute_force(required: tuple[str, ...], base: float, turns: int, *, naive: bool = False,
                outside: bool = False) -> float:
    """Expected full success by enumerating whole call histories, with the success
    probability recomputed from the history the way the simulator does: an implementation
    independent of the MDP's state packing."""
    tools = REGISTRY.closure(required)
    deps = {t: REGISTRY.dependencies(t, required) for t in tools}
    choices = (*tools, "utility_helper") if outside else tools  # any tool outside the closure

    def probability(history: tuple[tuple[str, bool], ...], tool: str) -> float:
        unmet = failed = 0
        for dep in deps.get(tool, ()):
            runs = [ok for t, ok in history if t == dep]
            unmet += not any(runs)
            failed += bool(runs) and not runs[-1]
        recent = sum(1 for _, ok in history[-3:] if not ok)
        return success_probability(base, unmet=unmet, failed_latest=failed,
                                   calls_made=len(history), recent_failures=recent)

    @cache
    def value(history: tuple[tuple[str, bool], ...]) -> float:
        done = first_success_order([{"tool": t, "ok": ok} for t, ok in history], required)
        if done == list(required):
            return 1.0
        if len(history) == turns or done != list(required[: len(done)]):
            return 0.0
        options = [required[len(done)]] if naive else choices
        best = 0.0
        for tool in options:
            p = probability(history, tool)
            best = max(best, p * value((*history, (tool, True)))
                       + (1 - p) * value((*history, (tool, False))))
        return best

    return value(())


@pytest.mark.parametrize(("required", "base", "turns"), TINY)
def test_dp_equals_brute_force_on_tiny_tasks(
    required: tuple[str, ...], base: float, turns: int
) -> None:
    mdp = TaskMDP(required, base_success=base, max_turns=turns)
    assert solve(mdp).value == pytest.approx(brute_force(required, base, turns), abs=1e-12)
    naive = brute_force(required, base, turns, naive=True)
    assert naive_policy(mdp).value == pytest.approx(naive, abs=1e-12)


@pytest.mark.parametrize(("required", "base", "turns"), TINY[:3])
def test_calling_tools_outside_the_closure_never_helps(
    required: tuple[str, ...], base: float, turns: int
) -> None:
    with_outside = TaskMDP(required, base_success=base, max_turns=turns, with_outside=True)
    plain = solve(TaskMDP(required, base_success=base, max_turns=turns)).value
    assert solve(with_outside).value == pytest.approx(plain, abs=1e-12)
    assert brute_force(required, base, turns, outside=True) == pytest.approx(plain, abs=1e-12)


def test_evaluate_reproduces_the_optimum_and_every_value_is_a_probability() -> None:
    mdp = TaskMDP(("network_fetcher", "data_processing_parser", "network_poster"))
    best = solve(mdp)
    assert evaluate(mdp, best.actions.astype(np.int64)).value == pytest.approx(best.value)
    assert ((best.values >= 0) & (best.values <= 1 + 1e-12)).all()
    # More turns never hurt.
    assert (np.diff(best.values[:, :-1], axis=0) >= -1e-12).all()




@pytest.mark.parametrize(("task", "base", "turns"), [(POSTING, 0.6, 6), (QUEUEING, 0.6, 8)])
def test_dp_value_holds_on_the_real_simulator(task: Task, base: float, turns: int) -> None:
    """The optimal policy played on the simulator succeeds at the rate the DP promises:
    the Monte-Carlo estimate lies in the 99% interval around the DP value."""
    solution = solve_task(task, base_success=base, max_turns=turns)
    episodes = 1500
    wins = 0
    for seed in range(episodes):
        run = simulate(task, solution.action, EpisodeKey(seed, task.id, 0), mdp=solution.mdp,
                       base_success=base, max_turns=turns)
        assert not any(c.deterministic for c in run.calls)  # step_arguments are valid
        wins += run.full_success
    value = solution.value
    half_width = 2.576 * math.sqrt(value * (1 - value) / episodes)
    assert abs(wins / episodes - value) <= half_width
    assert 0.2 < value < 0.95  # an informative check, not a trivial one


def test_the_workflow_is_the_success_path_with_contingencies() -> None:
    solution = solve_task(POSTING)
    workflow = solution.workflow
    assert workflow.tools == ("network_fetcher", "data_processing_validator",
                              "integration_authenticator", "network_poster")
    assert [dict(s.arguments) for s in workflow.steps] == [
        dict(POSTING.step_arguments[t]) for t in workflow.tools]
    assert all(s.on_failure.startswith(("retry", "re-run")) for s in workflow.steps)
    assert workflow.steps[-1].purpose.startswith("post data to a remote web API")
    assert "prerequisite of network_poster" in workflow.steps[2].purpose
    # The Advice explains the plan's marks only: the scoring rules are the system prompt's.
    assert "prerequisites" in workflow.advice and "TASK_COMPLETED" not in workflow.advice
    assert solution.value > solution.naive_value + 0.05
    # Following the API along the success path reproduces the plan, then finishes.
    state = solution.initial_state()
    for tool in workflow.tools:
        assert solution.action(state) == tool
        state = solution.observe(state, tool, ok=True)
    assert solution.action(state) is None


def test_contingency_advice_follows_the_policy() -> None:
    """The advice is what the policy does on failure, and it depends on the budget: with 4
    turns for 4 steps nothing can be retried but a failed prerequisite is skipped; with 5,
    one retry each."""
    def advice(turns: int) -> dict[str, str]:
        workflow = workflow_of(optimal_policy(POSTING.required_tools, max_turns=turns), POSTING)
        return {s.tool: s.on_failure for s in workflow.steps}

    tight = advice(4)
    assert tight["integration_authenticator"] == "go on with network_poster without it"
    assert tight["network_poster"] == "stop: no turns are left for a retry"
    assert tight["network_fetcher"] == "retry once"  # skipping the prerequisite pays for it
    roomy = advice(5)
    assert roomy["network_poster"] == "retry once"
    assert roomy["integration_authenticator"] == (
        "retry once; if it still fails, go on with network_poster without it")


def test_solutions_are_cached_and_keyed_by_budget() -> None:
    assert solve_task(POSTING) is solve_task(POSTING)
    short = solve_task(POSTING, max_turns=3)
    assert short is not solve_task(POSTING)
    assert short.value < solve_task(POSTING).value
    assert solve_task(POSTING, max_turns=2).value == 0.0  # 3 steps cannot fit in 2 turns
    assert solve_task(POSTING, max_turns=2).action(solve_task(POSTING).initial_state()) is None


def test_reference_plans_carry_no_labels_a_flaw_would_betray() -> None:
    """Flawed plans are edits of this one: step numbers, or advice naming a tool, would
    show where a step was moved, dropped or swapped."""
    import re

    from pytest_resilibench.core.optimum.dp import solve_task
    from pytest_resilibench.core.registry import default_registry
    from pytest_resilibench.core.tasks import load_tasks

    names = default_registry().names
    for task in list(load_tasks())[::97]:
        workflow = solve_task(task).workflow
        assert not any(re.search(r"\bstep \d+", s.purpose) for s in workflow.steps)
        assert not any(name in workflow.advice for name in names), workflow.advice
        stored = task.reference_workflow()
        assert not any(re.search(r"\bstep \d+", s.purpose) for s in stored.steps)
        assert not any(name in stored.advice for name in names), stored.advice


def test_a_task_that_asks_a_step_twice_is_solved_with_both_steps() -> None:
    """docs/BENCHMARK.md, Repeated steps: the optimum runs the notice twice, in place; its
    value is the naive plan's or better and below a task without the second notice."""
    solution = solve_task(NOTICING)
    assert solution.workflow.tools == NOTICING.required_tools
    once = tuple(dict.fromkeys(NOTICING.required_tools))
    assert solution.naive_value <= solution.value < optimal_policy(once).value
