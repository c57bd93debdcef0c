"""The task MDP tracks exactly what the simulator's success model reads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_resilibench.solver.rollout import simulator_for

from pytest_resilibench.core.optimum.mdp import OUTSIDE, TaskMDP
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.scoring import conditions, first_success_order
from pytest_resilibench.core.simulator import EpisodeKey
from pytest_resilibench.core.tasks import Task
from tests.solver.sample_tasks import NOTICING, POSTING, QUEUEING

REGISTRY = default_registry()

OUTSIDE_TOOLS = {"utility_logger": {"message": "hi"}, "utility_tracker": {"event": "e"}}


def test_actions_are_the_closure_and_prerequisites_are_watched() -> None:
    mdp = TaskMDP(QUEUEING.required_tools)
    assert mdp.actions == REGISTRY.closure(QUEUEING.required_tools)
    assert {"integration_authenticator", "integration_connector"} <= set(mdp.actions)
    assert mdp.n == 3
    assert mdp.n_states == (mdp.n + 1) * 2**mdp.flag_bits * 8
    start = mdp.initial_state()
    assert start.turns_left == 10 and mdp.progress(start) == 0
    assert mdp.unpack(start.code) == (0, 0, 0)


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="unknown tools"):
        TaskMDP(("no_such_tool",))
    with pytest.raises(ValueError, match="at least one"):
        TaskMDP(())


def test_out_of_order_success_is_a_dead_end_and_success_is_terminal() -> None:
    mdp = TaskMDP(POSTING.required_tools)
    start = mdp.initial_state()
    dead = mdp.step(start, "network_poster", ok=True)
    assert dead.code == mdp.dead and mdp.is_terminal(dead) and mdp.progress(dead) == -1
    state = start
    for tool in POSTING.required_tools:
        state = mdp.step(state, tool, ok=True)
    assert mdp.is_success(state) and state.turns_left == 7


@settings(max_examples=60, deadline=None)
@given(
    task=st.sampled_from([POSTING, QUEUEING, NOTICING]),
    seed=st.integers(0, 10**6),
    base=st.sampled_from([0.9, 0.8, 0.6]),
    plan=st.lists(st.tuples(st.integers(0, 9), st.booleans()), min_size=1, max_size=14),
)
def test_probability_and_progress_match_the_simulator(
    task: Task, seed: int, base: float, plan: list[tuple[int, bool]]
) -> None:
    """Any sequence of calls (closure tools, outside tools, valid or invalid arguments):
    the MDP's success probability equals the simulator's before every call, and its
    progress/dead state equals what scoring makes of the simulator's history (a step asked
    twice included)."""
    mdp = TaskMDP(task.required_tools, base_success=base, max_turns=len(plan))
    sim = simulator_for(task, EpisodeKey(seed, task.id, 0), base_success=base)
    names = [*mdp.actions, *OUTSIDE_TOOLS]
    state = mdp.initial_state()
    for pick, valid in plan:
        tool = names[pick % len(names)]
        if tool in mdp.action_index and state.code != mdp.dead:  # dead: nothing to track
            assert mdp.probability(state, tool) == pytest.approx(sim.probability(tool), abs=1e-12)
        args = {**task.step_arguments, **OUTSIDE_TOOLS}[tool] if valid else {"bogus": 1}
        result = sim.call(tool, dict(args))
        state = mdp.step(state, tool, result.ok)
        calls = [{"tool": c.tool, "ok": c.ok} for c in sim.history]
        done = first_success_order(calls, task.required_tools)
        # Dead exactly when the steps done so far are no prefix of the required order, or a
        # step that acts outside the data succeeded more often than the task asks it.
        in_order = done == list(task.required_tools[: len(done)]) and not any(
            REGISTRY[t].acts_outside and sum(c["ok"] and c["tool"] == t for c in calls)
            > task.required_tools.count(t) for t in task.required_tools)
        assert (state.code == mdp.dead) == (not in_order)
        if in_order:
            assert mdp.progress(state) == len(done)
            full = conditions(calls, task.required_tools, completed=True).count == 4
            assert mdp.is_success(state) == full


def test_a_step_asked_twice_is_done_by_its_second_success_in_order() -> None:
    """A notice the text asks again (docs/BENCHMARK.md: Repeated steps): the notifier's
    second success after the logger does the fifth step; a second notice before the logger,
    or a third at all, sends one too many (a dead end, like a broken order)."""
    mdp = TaskMDP(NOTICING.required_tools)
    reader, validator, notifier, logger, _, _ = NOTICING.required_tools
    assert mdp.n == 6 and mdp.tools[mdp.action_index[notifier]].required_indices == (2, 4)
    state = mdp.initial_state()
    for tool in NOTICING.required_tools:
        assert mdp.progress(state) >= 0
        state = mdp.step(state, tool, ok=True)
    assert mdp.is_success(state)
    start = mdp.initial_state()
    for tool in (reader, validator, notifier):
        start = mdp.step(start, tool, ok=True)
    assert mdp.step(start, notifier, ok=True).code == mdp.dead
    # The validator's success again changes nothing for the deliverable; a failed notice is
    # no notice.
    state = start
    for tool, ok in ((logger, True), (validator, True), (notifier, False), (notifier, True)):
        state = mdp.step(state, tool, ok)
    assert mdp.progress(state) == 5
    assert mdp.step(state, notifier, ok=True).code == mdp.dead


def test_an_outside_call_only_moves_the_window() -> None:
    mdp = TaskMDP(POSTING.required_tools, with_outside=True)
    start = mdp.initial_state()
    for tool in ("utility_logger", OUTSIDE):
        failed = mdp.step(start, tool, ok=False)
        assert mdp.unpack(failed.code) == (0, 0, 1)
        assert failed.turns_left == start.turns_left - 1
    unknown = mdp.step(start, "not_a_tool", ok=False)
    assert unknown.code == start.code and unknown.turns_left == start.turns_left - 1
