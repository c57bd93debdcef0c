"""Play a policy on the real simulator: the check that the MDP's numbers hold for real episodes.

A policy here is any callable `(state) -> tool | None` over the MDP's state (None: finish);
calls use the task's `step_arguments`, so none is refused as INVALID_INPUT. Success is scored
by `pytest_resilibench.core.scoring`, the function that scores real episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_resilibench.core.optimum.mdp import DEFAULT_MAX_TURNS, MdpState, TaskMDP
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.scoring import conditions
from pytest_resilibench.core.simulator import (
    DEFAULT_BASE_SUCCESS,
    CallResult,
    EpisodeKey,
    Simulator,
)
from pytest_resilibench.core.tasks import Task

__all__ = ["Rollout", "simulate"]

Chooser = Callable[[MdpState], "str | None"]


@dataclass(frozen=True)
class Rollout:
    calls: tuple[CallResult, ...]
    full_success: bool
    final_state: MdpState


def simulator_for(task: Task, key: EpisodeKey, *, registry: ToolRegistry | None = None,
                  base_success: float = DEFAULT_BASE_SUCCESS) -> Simulator:
    return Simulator(registry or default_registry(), key, task_tools=task.required_tools,
                     inputs=task.inputs, base_success=base_success)


def simulate(
    task: Task,
    choose: Chooser,
    key: EpisodeKey,
    *,
    mdp: TaskMDP | None = None,
    registry: ToolRegistry | None = None,
    base_success: float = DEFAULT_BASE_SUCCESS,
    max_turns: int = DEFAULT_MAX_TURNS,
) -> Rollout:
    """One episode of `choose` on the simulator; the agent finishes when it returns None
    (its completion signal) or when the turns run out (no signal: not a full success)."""
    registry = registry or default_registry()
    if mdp is None:
        mdp = TaskMDP(task.required_tools, registry=registry, base_success=base_success,
                      max_turns=max_turns)
    sim = simulator_for(task, key, registry=registry, base_success=base_success)
    state = mdp.initial_state()
    completed = False
    while state.turns_left > 0:
        tool = choose(state)
        if tool is None:
            completed = True
            break
        result = sim.call(tool, dict(task.step_arguments.get(tool, {})))
        state = mdp.step(state, tool, result.ok)
    else:
        # A policy that reached success on its last call still gets to say so.
        completed = mdp.is_success(state)
    calls = tuple(sim.history)
    full = conditions([{"tool": c.tool, "ok": c.ok} for c in calls], task.required_tools,
                      completed=completed)
    return Rollout(calls, full.count == 4, state)
