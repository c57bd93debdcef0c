"""Bound (ii): a policy that reads the draws does at least as well as any policy, seed by seed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_resilibench.solver.clairvoyant import OUTSIDE, clairvoyant
from pytest_resilibench.solver.rollout import simulate, simulator_for

from pytest_resilibench.base.rng import uniform
from pytest_resilibench.core.optimum.dp import naive_policy, solve_task
from pytest_resilibench.core.optimum.mdp import MdpState, TaskMDP
from pytest_resilibench.core.simulator import EpisodeKey, outcome_draw
from pytest_resilibench.core.tasks import Task
from tests.solver.sample_tasks import POSTING, QUEUEING

BASE, TURNS = 0.6, 6


def random_policy(mdp: TaskMDP, salt: int) -> object:
    """A policy that calls closure tools at random (keyed draws, so reproducible)."""
    def choose(state: MdpState) -> str | None:
        if mdp.is_success(state):
            return None
        u = uniform("random-policy", salt, state.code, state.turns_left)
        return mdp.actions[int(u * len(mdp.actions))]
    return choose


@settings(max_examples=40, deadline=None)
@given(task=st.sampled_from([POSTING, QUEUEING]), seed=st.integers(0, 2**31),
       policy=st.sampled_from(["optimal", "naive", "random"]))
def test_clairvoyant_is_at_least_the_realized_outcome(task: Task, seed: int, policy: str) -> None:
    solution = solve_task(task, base_success=BASE, max_turns=TURNS)
    mdp = solution.mdp
    choose = {
        "optimal": solution.action,
        "naive": naive_policy(mdp).action,
        "random": random_policy(mdp, seed),
    }[policy]
    key = EpisodeKey(seed, task.id, 0)
    realized = simulate(task, choose, key, mdp=mdp, base_success=BASE, max_turns=TURNS)
    bound = clairvoyant(task.required_tools, key, mdp=mdp)
    assert bound.success >= realized.full_success


OUTSIDE_ARGS = {"utility_logger": {"message": "x"}, "utility_tracker": {"event": "x"},
                "utility_cache": {"key": "x"}}


@settings(max_examples=25, deadline=None)
@given(task=st.sampled_from([POSTING, QUEUEING]), seed=st.integers(0, 2**31))
def test_a_found_path_replays_on_the_simulator(task: Task, seed: int) -> None:
    """The clairvoyant's moves are real: played on the simulator they give full success."""
    mdp = TaskMDP(task.required_tools, base_success=BASE, max_turns=TURNS)
    key = EpisodeKey(seed, task.id, 0)
    found = clairvoyant(task.required_tools, key, mdp=mdp)
    if not found.success:
        return
    sim = simulator_for(task, key, base_success=BASE)
    for move in found.moves:
        if move.tool == OUTSIDE:
            # Any outside tool with the wanted outcome (invalid arguments fail for sure).
            tool = next((t for t in OUTSIDE_ARGS if not move.ok or outcome_draw(
                key, t, sum(c.tool == t for c in sim.history) + 1) < sim.probability(t)), None)
            if tool is None:
                return  # the rare case where the bound errs upwards
            args = OUTSIDE_ARGS[tool] if move.ok else {"bogus": 1}
        else:
            tool = move.tool
            args = dict(task.step_arguments[tool]) if move.kind == "call" else {"bogus": 1}
        assert sim.call(tool, args).ok == move.ok
    done = [c.tool for c in sim.history if c.ok and c.tool in task.required_tools]
    assert list(dict.fromkeys(done)) == list(task.required_tools)
    assert len(sim.history) <= TURNS


def test_on_average_the_clairvoyant_bounds_the_optimum() -> None:
    solution = solve_task(POSTING, base_success=BASE, max_turns=TURNS)
    episodes = 300
    clair = realized = 0
    for seed in range(episodes):
        key = EpisodeKey(seed, POSTING.id, 0)
        won = simulate(POSTING, solution.action, key, mdp=solution.mdp, base_success=BASE,
                       max_turns=TURNS).full_success
        bound = clairvoyant(POSTING.required_tools, key, mdp=solution.mdp).success
        assert bound >= won
        clair += bound
        realized += won
    assert clair / episodes >= solution.value
    assert clair > realized  # reading the draws is worth something at base 0.6
