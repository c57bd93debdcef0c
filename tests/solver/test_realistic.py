"""The realistic profile's MDP, exact DP, report section and PPO (docs/FAULTS.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_resilibench.solver.realistic_report import realistic_section

from pytest_resilibench.core.optimum.realistic import (
    RealisticMDP,
    RState,
    realistic_mdp,
    realistic_solution,
)
from pytest_resilibench.core.tasks import Task, load_tasks, task_set_dir
from tests.solver.sample_tasks import NOTICING

# The paper set: its realistic plans are stored, and its structures are the small ones.
TASKS = load_tasks(task_set_dir("paper")).by_id
SMALL = TASKS["t0015"]  # file_operations_reader -> file_operations_writer
REMOTE = TASKS["t0009"]  # network_fetcher -> data_processing_validator -> file_operations_writer
DEFAULT = load_tasks().by_id


def test_branches_are_distributions_in_every_reachable_state() -> None:
    mdp = realistic_mdp(REMOTE)
    mdp.value(mdp.initial_state())
    for state in list(mdp._values)[:3000]:
        for a in mdp.actions(state):
            branches = mdp.branches(state, a)
            assert sum(w for w, *_ in branches) == pytest.approx(1.0)
            assert all(nxt.turns_left == state.turns_left - 1 for _, nxt, _, _ in branches)


@settings(max_examples=30, deadline=None)
@given(salt=st.integers(0, 10**6))
def test_no_deterministic_policy_beats_the_dp(salt: int) -> None:
    """A seeded arbitrary policy over the MDP's actions is never worth more than the DP."""
    mdp = realistic_mdp(SMALL)

    def arbitrary(state: RState) -> str | None:
        actions = mdp.actions(state)
        if not actions:
            return None
        return mdp.tools[actions[hash((salt, state)) % len(actions)]].name

    assert mdp.evaluate(arbitrary) <= mdp.value(mdp.initial_state()) + 1e-12


def _memoised_on_full_states(mdp: RealisticMDP) -> RealisticMDP:
    """The same MDP solved with every state its own memo entry (no canonical key)."""

    class Plain(RealisticMDP):
        def _canonical(self, state: RState) -> RState:
            return state

    return Plain(mdp.faults, mdp.steps, registry=mdp.registry,
                 base_success=mdp.base_success)


@pytest.mark.parametrize("task", [REMOTE, DEFAULT["t0005"], NOTICING],
                         ids=["remote", "prerequisite", "asked-twice"])
def test_the_canonical_memo_changes_no_value_and_no_action(task: Task) -> None:
    """States that differ only in flags no later call reads share a memo entry
    (`RealisticMDP._canonical`): every state the full solve visits gets the same value and
    the same best action from the shared entry, bit for bit."""
    mdp = realistic_mdp(task)
    plain = _memoised_on_full_states(mdp)
    assert plain.value(plain.initial_state()) == mdp.value(mdp.initial_state())
    assert mdp.states_solved() < plain.states_solved()
    for state, (value, action) in plain._values.items():
        assert (mdp.value(state), mdp.best_action(state)) == (
            value, None if action < 0 else plain.tools[action].name)


def test_dp_beats_retrying_and_the_plan_lists_contingencies() -> None:
    solution = realistic_solution(REMOTE)
    mdp = solution.mdp
    assert 0.0 < mdp.naive_value <= mdp.plan_retry_value < solution.value <= 1.0
    steps = {s.tool: s for s in solution.workflow.steps}
    assert "network_monitor" in steps["network_fetcher"].on_failure
    assert "records: 0" in steps["network_fetcher"].on_failure
    # The happy path covers every required step in order.
    tools = [s.tool for s in solution.workflow.steps]
    assert [t for t in tools if t in REMOTE.required_tools] == list(REMOTE.required_tools)


def test_an_outage_is_answered_with_the_stand_in() -> None:
    mdp = realistic_mdp(REMOTE)
    state = mdp.initial_state()
    while mdp.best_action(state) != "network_fetcher":  # e.g. an authentication first
        tool = mdp.best_action(state)
        assert tool is not None
        state = mdp.step(state, tool, True, None)
    down = mdp.step(state, "network_fetcher", False, "outage")
    assert mdp.best_action(down) == "network_monitor"
    limited = mdp.step(state, "network_fetcher", False, "rate_limited")
    assert mdp.best_action(limited) != "network_fetcher"  # never an immediate retry
    expired = mdp.step(state, "network_fetcher", False, "auth_expired")
    assert mdp.best_action(expired) == "integration_authenticator"
    silent = mdp.step(state, "network_fetcher", True, "silent")
    assert mdp.best_action(silent) in ("network_fetcher",)  # re-run the empty source


def test_report_section_has_figures_by_difficulty() -> None:
    tasks = [t for t in load_tasks(task_set_dir("paper")).tasks[:30]
             if len(t.required_tools) <= 3]
    section = realistic_section(tasks)
    assert section["config"]["tasks"] == len(tasks)
    for row in section["by_difficulty"].values():
        assert row["dp_mean"] > row["plan_retry_mean"] >= row["naive_mean"] > 0
        assert row["gap_dp_naive_pp"] == pytest.approx(
            100 * (row["dp_mean"] - row["naive_mean"]))


def test_ppo_trains_and_its_greedy_policy_is_valued_exactly() -> None:
    pytest.importorskip("torch")
    from pytest_resilibench.solver.realistic_ppo import RealisticPpoConfig, greedy_chooser, train

    mdp = realistic_mdp(SMALL)
    net, history = train([mdp], RealisticPpoConfig(updates=3, n_envs=8, steps_per_env=8))
    assert len(history) == 3 and all(0.0 <= h["success"] <= 1.0 for h in history)
    value = mdp.evaluate(greedy_chooser(net, mdp))
    assert 0.0 <= value <= mdp.value(mdp.initial_state()) + 1e-12


def test_clairvoyant_paths_replay_on_the_simulator_and_bound_the_oracle() -> None:
    """The clairvoyant's calls, replayed on the real simulator, succeed (its model of the
    draws is the simulator's), and wherever the oracle succeeded the clairvoyant does too."""
    import asyncio

    from pytest_resilibench.solver.realistic_clairvoyant import clairvoyant

    from pytest_resilibench.core.faults import task_faults
    from pytest_resilibench.core.prompts import Variant
    from pytest_resilibench.core.registry import default_registry
    from pytest_resilibench.core.scoring import score_calls
    from pytest_resilibench.core.simulator import EpisodeKey, Simulator
    from pytest_resilibench.runtime.agents.builtin import make_builtin
    from pytest_resilibench.runtime.episode import run_episode

    mdp = realistic_mdp(REMOTE)
    faults = task_faults(REMOTE, default_registry())
    found = 0
    for seed in range(40):
        key = EpisodeKey(seed, REMOTE.id, 0)
        bound = clairvoyant(mdp, key)
        oracle = asyncio.run(run_episode(REMOTE, Variant("optimal"), make_builtin("oracle"),
                                         seed=seed, faults="realistic"))
        assert bound.success or oracle.outcome != "full"
        if not bound.success:
            continue
        found += 1
        sim = Simulator(default_registry(), key, task_tools=REMOTE.required_tools,
                        inputs=REMOTE.inputs, faults=faults)
        calls = [sim.call(t, dict(faults.arguments[t])).to_json() for t in bound.calls]
        score = score_calls(calls, REMOTE.required_tools, completed=True,
                            alternatives=faults.alternatives)
        assert score.outcome == "full", bound.calls
    assert found >= 30
