"""The clairvoyant bound under the realistic fault profile (docs/FAULTS.md).

As `solver.clairvoyant` does for the paper profile: an agent that knew every draw of the
episode (which tools are down, whether the credentials expired, each call's rate-limit, outcome
and silent-failure draws) could plan around its bad luck. Every event is a pure function of
(seed, task, repeat, tool, call index), so a call's result is a function of the MDP state, the
tool and how many times it was called before; `clairvoyant` searches, depth first, for calls
that reach full success within the turn budget, over the actions of `RealisticMDP` (module
docstring there), with failed searches memoised on (state, calls per tool).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_resilibench.core.faults import RATE_LIMIT_RATE, SILENT_RATE, episode_faults, event_draws
from pytest_resilibench.core.optimum.realistic import DOWN, EXPIRED, UNKNOWN, RealisticMDP, RState
from pytest_resilibench.core.simulator import EpisodeKey, outcome_draw

__all__ = ["RealisticClairvoyant", "clairvoyant"]


@dataclass(frozen=True)
class RealisticClairvoyant:
    success: bool
    calls: tuple[str, ...]
    nodes: int


def clairvoyant(mdp: RealisticMDP, key: EpisodeKey) -> RealisticClairvoyant:
    """Whether full success was reachable on this episode's draws, and the calls that reach it."""
    faults = mdp.faults
    events = episode_faults(faults, key.seed, key.task_id, key.repeat)

    def result(state: RState, a: int, n: int) -> tuple[bool, str | None]:
        """The (ok, event) the n-th call of tool `a` would get in `state`."""
        tool = mdp.tools[a]
        step_tool = mdp.steps[tool.step] if tool.step >= 0 else None
        if not tool.alt and step_tool in faults.alternatives and (
                state.status[tool.step] == DOWN or tool.name in events.down):
            return False, "outage"
        if tool.remote and (state.auth == EXPIRED or (
                state.auth == UNKNOWN and events.credentials_expired)):
            return False, "auth_expired"
        draws = event_draws(key.seed, key.task_id, key.repeat, tool.name, n)
        u_rate, u_silent = draws.random(), draws.random()
        if tool.rate_limited and (state.blocked == a or u_rate < RATE_LIMIT_RATE):
            return False, "rate_limited"
        if outcome_draw(key, tool.name, n) >= mdp._probability(tool, state):
            return False, None
        if tool.silent:
            return True, "silent" if u_silent < SILENT_RATE else None
        # Whether a success is tainted depends on the state alone: the MDP's success branch.
        return True, next(event for _, _, ok, event in mdp.branches(state, a) if ok)

    failed: set[tuple[RState, tuple[int, ...]]] = set()
    path: list[str] = []
    nodes = 0

    def search(state: RState, used: tuple[int, ...]) -> bool:
        nonlocal nodes
        if mdp.is_success(state):
            return True
        if state.turns_left <= 0 or state.turns_left < mdp.n - state.k:
            return False
        if (state, used) in failed:
            return False
        nodes += 1
        preferred = mdp._preferred(state)
        for a in sorted(mdp.actions(state), key=lambda a: a != preferred):
            n = used[a] + 1
            ok, event = result(state, a, n)
            nxt = mdp.step(state, mdp.tools[a].name, ok, event)
            path.append(mdp.tools[a].name)
            if search(nxt, (*used[:a], n, *used[a + 1:])):
                return True
            path.pop()
        failed.add((state, used))
        return False

    success = search(mdp.initial_state(), (0,) * len(mdp.tools))
    return RealisticClairvoyant(success, tuple(path), nodes)
