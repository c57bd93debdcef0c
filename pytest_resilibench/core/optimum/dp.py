"""Bound (iii), exactly: the optimal policy of a task's MDP by backward induction
(docs/BENCHMARK.md: Solver).

`V[L][s]` is the best probability of full success from packed state `s` with `L` turns left:
`V[0] = [k == n]`, and `V[L] = max_a p_a * V[L-1][succ_a] + (1 - p_a) * V[L-1][fail_a]` with
`V[L][s] = 1` once every required tool succeeded (finish at once). Every array operation runs
over all packed states of a level at once, so a task solves in milliseconds; solutions depend
only on the required tools, so tasks that share them share one solve.

Runtime API (the oracle agent uses it, without torch):

    sol = solve_task(task)                 # cached per (task, base_success, max_turns)
    sol.value                              # expected full success of the optimal policy
    sol.workflow                           # the optimal plan shown to models
    state = sol.initial_state()
    tool = sol.action(state)               # a tool name, or None: finish now
    state = sol.observe(state, tool, ok)   # after the call's result
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pytest_resilibench.core.plan_text import Contingency, shown_plan
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS, RECENT_WINDOW
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.workflow import PlanStep, Workflow

from .mdp import DEFAULT_MAX_TURNS, MdpState, TaskMDP

__all__ = ["Policy", "Solution", "evaluate", "naive_policy", "solve", "solve_task"]

_TIE = 1e-12  # values this close are ties, broken towards the plain next required step
FINISH = -1


@dataclass(frozen=True)
class Policy:
    """A deterministic policy: `actions[L][code]` is the action index with L turns left
    (FINISH = stop), and `values[L][code]` its probability of full success (dead = last)."""

    mdp: TaskMDP
    actions: np.ndarray  # int8[T+1, N]
    values: np.ndarray  # float64[T+1, N+1]

    @property
    def value(self) -> float:
        """Expected full success from the start of an episode."""
        start = self.mdp.initial_state()
        return float(self.values[start.turns_left, start.code])

    def action(self, state: MdpState) -> str | None:
        if state.code == self.mdp.dead or state.turns_left <= 0:
            return None
        a = int(self.actions[min(state.turns_left, self.mdp.max_turns), state.code])
        return None if a == FINISH else self.mdp.actions[a]


def _stacked(mdp: TaskMDP) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    trans = mdp.transitions
    return (np.stack([t.p_early for t in trans]), np.stack([t.p_late for t in trans]),
            np.stack([t.on_success for t in trans]), np.stack([t.on_failure for t in trans]))


def _next_required(mdp: TaskMDP) -> np.ndarray:
    """Per packed state, the action index of the next required tool (FINISH when done)."""
    k = np.arange(mdp.n_states) % (mdp.n + 1)
    lookup = np.array([mdp.action_index[t] for t in mdp.required] + [FINISH])
    actions: np.ndarray = lookup[k]
    return actions


def solve(mdp: TaskMDP) -> Policy:
    """The optimal policy of the MDP (bound iii), by backward induction."""
    p_early, p_late, succ, fail = _stacked(mdp)
    n_states, n_actions = mdp.n_states, len(mdp.actions)
    done = (np.arange(n_states) % (mdp.n + 1)) == mdp.n
    preferred = _next_required(mdp)
    # Tie-break rank: the next required step first, then the closure order (prerequisites).
    rank = np.repeat(np.arange(n_actions, 0, -1)[:, None], n_states, axis=1)
    rank[preferred.clip(0), np.arange(n_states)] = np.where(preferred >= 0, n_actions + 1, 0)
    values = np.zeros((mdp.max_turns + 1, n_states + 1))
    actions = np.full((mdp.max_turns + 1, n_states), FINISH, dtype=np.int8)
    values[0, :n_states] = done
    for turns in range(1, mdp.max_turns + 1):
        p = p_late if mdp.max_turns - turns >= RECENT_WINDOW else p_early
        v = values[turns - 1]
        q = p * v[succ] + (1.0 - p) * v[fail]
        best = q.max(axis=0)
        choice = np.where(q >= best - _TIE, rank, -1).argmax(axis=0)
        stop = done | (best <= 0.0)
        values[turns, :n_states] = np.where(done, 1.0, np.where(stop, 0.0, best))
        actions[turns] = np.where(stop, FINISH, choice)
    return Policy(mdp, actions, values)


def evaluate(mdp: TaskMDP, choose: np.ndarray) -> Policy:
    """The exact value of a deterministic policy given as `choose[L, code]`: an action index,
    or FINISH."""
    p_early, p_late, succ, fail = _stacked(mdp)
    n_states = mdp.n_states
    done = (np.arange(n_states) % (mdp.n + 1)) == mdp.n
    cols = np.arange(n_states)
    values = np.zeros((mdp.max_turns + 1, n_states + 1))
    values[0, :n_states] = done
    for turns in range(1, mdp.max_turns + 1):
        p = p_late if mdp.max_turns - turns >= RECENT_WINDOW else p_early
        a = choose[turns].astype(np.int64).clip(0)
        v = values[turns - 1]
        q = p[a, cols] * v[succ[a, cols]] + (1.0 - p[a, cols]) * v[fail[a, cols]]
        values[turns, :n_states] = np.where(done, 1.0, np.where(choose[turns] < 0, 0.0, q))
    return Policy(mdp, choose.astype(np.int8), values)


def naive_policy(mdp: TaskMDP) -> Policy:
    """"Required tools in order, retry on failure": always call the next required tool."""
    return evaluate(mdp, np.tile(_next_required(mdp), (mdp.max_turns + 1, 1)))


# --- the workflow shown to models ----------------------------------------------------------
def _contingency(policy: Policy, state: MdpState, tool: str) -> Contingency:
    """What the policy does when `tool` fails in `state`, assuming every other call
    succeeds and every retry of `tool` fails again: the tools it re-runs before retrying,
    how many retries, and where it goes on without `tool` once those are spent."""
    mdp = policy.mdp
    state = mdp.step(state, tool, ok=False)
    calls: list[str] = []
    while (nxt := policy.action(state)) is not None:
        calls.append(nxt)
        state = mdp.step(state, nxt, ok=nxt != tool)
    retries = calls.count(tool)
    if retries == 0:
        return Contingency(0, then=calls[0] if calls else None)
    first, last = calls.index(tool), len(calls) - 1 - calls[::-1].index(tool)

    def names(part: list[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for t in part if t != tool))

    return Contingency(retries, names(calls[:first]), names(calls[first:last]),
                       calls[last + 1] if last < len(calls) - 1 else None)


def workflow_of(policy: Policy, task: Task | None = None) -> Workflow:
    """The policy's path when every call succeeds, with its contingencies on failure, worded
    by the one plan renderer (`plan_text.shown_plan`) that also words flawed plans."""
    mdp = policy.mdp
    arguments = task.step_arguments if task is not None else {}
    state = mdp.initial_state()
    steps: list[PlanStep] = []
    while (tool := policy.action(state)) is not None:
        steps.append(PlanStep(tool=tool, purpose="",
                              arguments=dict(arguments.get(tool, {})),
                              on_failure=_contingency(policy, state, tool).render()))
        state = mdp.step(state, tool, ok=True)
    return shown_plan(Workflow(steps=tuple(steps)), mdp.required, mdp.registry)


# --- the runtime API --------------------------------------------------------------------------
@dataclass(frozen=True)
class Solution:
    """A task's optimal policy and plan (see the module docstring for the API)."""

    task: Task
    policy: Policy

    @property
    def mdp(self) -> TaskMDP:
        return self.policy.mdp

    @property
    def value(self) -> float:
        return self.policy.value

    @cached_property
    def workflow(self) -> Workflow:
        return workflow_of(self.policy, self.task)

    @cached_property
    def naive_value(self) -> float:
        return naive_policy(self.mdp).value

    def initial_state(self) -> MdpState:
        return self.mdp.initial_state()

    def action(self, state: MdpState) -> str | None:
        return self.policy.action(state)

    def observe(self, state: MdpState, tool: str, ok: bool) -> MdpState:
        return self.mdp.step(state, tool, ok)


_POLICIES: OrderedDict[tuple[object, ...], Policy] = OrderedDict()
_SOLUTIONS: OrderedDict[tuple[object, ...], Solution] = OrderedDict()
_CACHE_SIZE = 512


def _remember(cache: OrderedDict[tuple[object, ...], object], key: tuple[object, ...],
              value: object) -> None:
    cache[key] = value
    if len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


def optimal_policy(
    required_tools: Sequence[str], *, registry: ToolRegistry | None = None,
    base_success: float = DEFAULT_BASE_SUCCESS, max_turns: int = DEFAULT_MAX_TURNS,
) -> Policy:
    """The optimal policy for a list of required tools (cached: tasks share them)."""
    registry = registry or default_registry()
    key = (tuple(required_tools), base_success, max_turns, registry)
    policy = _POLICIES.get(key)
    if policy is None:
        mdp = TaskMDP(required_tools, registry=registry, base_success=base_success,
                      max_turns=max_turns)
        policy = solve(mdp)
        _remember(_POLICIES, key, policy)  # type: ignore[arg-type]
    return policy


def solve_task(
    task: Task, *, registry: ToolRegistry | None = None,
    base_success: float = DEFAULT_BASE_SUCCESS, max_turns: int = DEFAULT_MAX_TURNS,
) -> Solution:
    """The optimal solution of a task, cached per (task, base_success, max_turns)."""
    registry = registry or default_registry()
    key = (task.id, task.required_tools, base_success, max_turns, registry)
    solution = _SOLUTIONS.get(key)
    if solution is None:
        policy = optimal_policy(task.required_tools, registry=registry,
                                base_success=base_success, max_turns=max_turns)
        solution = Solution(task, policy)
        _remember(_SOLUTIONS, key, solution)  # type: ignore[arg-type]
    return solution
