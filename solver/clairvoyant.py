"""Bound (ii): the best outcome of a policy that reads the seeded draws (docs/BENCHMARK.md: Solver).

The n-th call of tool t in episode (seed, task, repeat) succeeds iff
`outcome_draw(key, t, n) < p(state)`, so an agent that knew every draw could plan around its
bad luck. `clairvoyant()` searches, depth first, for a sequence of at most `max_turns` calls
that reaches full success. So that the bound holds for *any* agent on that seed, the search
offers every move an agent has:
- a proper call of a tool of the closure (its outcome is the draw's);
- a call of such a tool with invalid arguments: INVALID_INPUT for sure, which still spends the
  tool's draw, marks its latest run failed and counts as a failure in the last-three window
  (only worth trying where the proper call would succeed);
- a call of a tool outside the closure: only the window moves. Its outcome is taken as the
  searcher's choice: with ~20 such tools drawing independently one nearly always has either
  outcome, and where none would, the bound errs upwards, as a bound may.
Failed searches are memoised on (state, draws used per tool); branches without enough turns
for the remaining required tools are cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_resilibench.core.optimum.mdp import DEFAULT_MAX_TURNS, OUTSIDE, MdpState, TaskMDP
from pytest_resilibench.core.registry import ToolRegistry
from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS, EpisodeKey, outcome_draw

__all__ = ["ClairvoyantResult", "Move", "clairvoyant"]

MoveKind = Literal["call", "invalid", "outside"]


@dataclass(frozen=True)
class Move:
    tool: str  # OUTSIDE for a tool outside the closure
    kind: MoveKind
    ok: bool


@dataclass(frozen=True)
class ClairvoyantResult:
    """Whether full success was reachable on this episode's draws, and a shortest-found way."""

    success: bool
    moves: tuple[Move, ...]
    nodes: int  # search nodes expanded (a cost figure)


def clairvoyant(
    required_tools: Sequence[str],
    key: EpisodeKey,
    *,
    registry: ToolRegistry | None = None,
    base_success: float = DEFAULT_BASE_SUCCESS,
    max_turns: int = DEFAULT_MAX_TURNS,
    mdp: TaskMDP | None = None,
) -> ClairvoyantResult:
    """Search the episode's draws for a full success within `max_turns` calls."""
    if mdp is None:
        mdp = TaskMDP(required_tools, registry=registry, base_success=base_success,
                      max_turns=max_turns)
    tools = tuple(t.name for t in mdp.tools)
    draws: dict[tuple[int, int], float] = {}

    def draw(a: int, n: int) -> float:
        u = draws.get((a, n))
        if u is None:
            u = draws[(a, n)] = outcome_draw(key, tools[a], n)
        return u

    # Try the plain next step first: most episodes succeed along it.
    order = sorted(range(len(tools)), key=lambda a: (tools[a] not in mdp.required, a))
    failed: set[tuple[int, int, tuple[int, ...]]] = set()
    path: list[Move] = []
    nodes = 0

    def search(state: MdpState, used: tuple[int, ...]) -> bool:
        nonlocal nodes
        if mdp.is_success(state):
            return True
        if state.code == mdp.dead or state.turns_left < mdp.n - mdp.progress(state):
            return False
        memo = (state.code, state.turns_left, used)
        if memo in failed:
            return False
        nodes += 1
        for a in order:
            tool = tools[a]
            ok = draw(a, used[a] + 1) < mdp.probability(state, tool)
            after = (*used[:a], used[a] + 1, *used[a + 1 :])
            outcomes = ((ok, "call"), (False, "invalid")) if ok else ((False, "call"),)
            for result, kind in outcomes:
                path.append(Move(tool, kind, result))  # type: ignore[arg-type]
                if search(mdp.step(state, tool, result), after):
                    return True
                path.pop()
        for result in (True, False):
            path.append(Move(OUTSIDE, "outside", result))
            if search(mdp.outside_call(state, result), used):
                return True
            path.pop()
        failed.add(memo)
        return False

    success = search(mdp.initial_state(), (0,) * len(tools))
    return ClairvoyantResult(success, tuple(path), nodes)
