"""The MDP of one task, derived from the simulator's own success model (docs/BENCHMARK.md:
Solver, Scoring).

An episode succeeds in full when every required tool succeeded, their first successes came in
the required order, the output step (the last required tool) succeeded and the agent signalled
completion, within the turn budget (one tool call per turn; finishing costs no turn). So the
MDP's reward is 1 on reaching "all required tools succeeded in order" (the policy then finishes
at once) and 0 on running out of turns or on a required tool first succeeding out of order
(a dead end: the order condition can no longer hold), or on a step that acts outside the data
succeeding once more than the task asks (a second post or notification: the output condition
can no longer hold). A step the text asks again is listed twice: its tool's second success in
order does it (docs/BENCHMARK.md: Repeated steps).

The state holds exactly the parts of the history that `success_probability` reads:
- progress `k`: required tools 0..k-1 have succeeded, in order; none of k..n-1 has;
- for each *watched* tool (a dependency of some tool of the task), whether its latest run
  failed and, for a tool outside the required list (a prerequisite), whether it ever succeeded
  (for a required tool that follows from `k`);
- the outcomes of the last three calls (the history penalty), and the turns left (which give the
  number of calls made, since every turn is one call).

Actions are the tools that matter, `registry.closure(task.required_tools)`: the required tools
and their prerequisites. A call of any other tool changes nothing but the last-three window, so
it is left out of the optimum (see the solver report for the measured effect of allowing it).

States are packed into one integer, `code = k + (n+1) * (flags + 2**F * window)`, and the
transition tables of every action are built for all codes at once with numpy: the DP and PPO's
environment read them by indexing. Pure numpy/stdlib: the oracle agent imports this at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.simulator import (
    DEFAULT_BASE_SUCCESS,
    RECENT_WINDOW,
    success_probability,
)

__all__ = ["DEFAULT_MAX_TURNS", "OUTSIDE", "MdpState", "TaskMDP", "Transitions"]

DEFAULT_MAX_TURNS = 10
_WINDOW_STATES = 2**RECENT_WINDOW
_WINDOW_MASK = _WINDOW_STATES - 1
OUTSIDE = "<outside>"  # the action name of a call of a tool outside the closure


class MdpState(NamedTuple):
    """Where an episode stands: the packed history `code` (or `TaskMDP.dead`) and turns left."""

    code: int
    turns_left: int


@dataclass(frozen=True)
class Transitions:
    """One action's effect on every packed state: the success probability (before and after
    the history penalty applies, i.e. fewer than / at least three calls made) and the next
    state on success and on failure."""

    p_early: np.ndarray  # float64[N], calls_made < RECENT_WINDOW
    p_late: np.ndarray  # float64[N], calls_made >= RECENT_WINDOW
    on_success: np.ndarray  # int64[N], in 0..N (N = dead)
    on_failure: np.ndarray  # int64[N]


@dataclass(frozen=True)
class _Tool:
    name: str
    # Its positions in the required list (two where the text asks the step again), none for
    # a prerequisite.
    required_indices: tuple[int, ...]
    fail_bit: int  # flag bit of "latest run failed", -1 if nobody depends on it
    ok_bit: int  # flag bit of "ever succeeded" (prerequisites only), else -1
    deps: tuple[int, ...]  # indices (into TaskMDP.tools) of the tools it depends on
    # Whether a success acts outside the data (`ToolSpec.acts_outside`): one beyond those the
    # task asks spoils the deliverable (scoring.py), a dead end like a broken order.
    acting: bool = False

    @property
    def required_index(self) -> int:
        """Its first position in the required list, -1 for a prerequisite."""
        return self.required_indices[0] if self.required_indices else -1


class TaskMDP:
    """The MDP of one task (its required tools), for a base success rate and turn budget."""

    def __init__(
        self,
        required_tools: Sequence[str],
        *,
        registry: ToolRegistry | None = None,
        base_success: float = DEFAULT_BASE_SUCCESS,
        max_turns: int = DEFAULT_MAX_TURNS,
        with_outside: bool = False,
    ) -> None:
        if not required_tools:
            raise ValueError("a task needs at least one required tool")
        if max_turns < 0:
            raise ValueError(f"max_turns must be >= 0, got {max_turns}")
        self.registry = registry or default_registry()
        unknown = [t for t in required_tools if t not in self.registry]
        if unknown:
            raise ValueError(f"unknown tools {unknown}")
        # A tool listed twice is a step the text asks again: its second success does it.
        self.required: tuple[str, ...] = tuple(required_tools)
        self.task_tools = tuple(required_tools)  # what the simulator computes dependencies on
        self.base_success = base_success
        self.max_turns = max_turns
        names = self.registry.closure(self.required)
        deps_by_name = {t: self.registry.dependencies(t, self.task_tools) for t in names}
        watched = {d for deps in deps_by_name.values() for d in deps}
        index = {t: i for i, t in enumerate(names)}
        bits = 0
        tools = []
        for name in names:
            fail_bit = ok_bit = -1
            indices = tuple(i for i, t in enumerate(self.required) if t == name)
            if name in watched:
                fail_bit, bits = bits, bits + 1
                if not indices:
                    ok_bit, bits = bits, bits + 1
            tools.append(_Tool(name, indices, fail_bit, ok_bit,
                               tuple(index[d] for d in deps_by_name[name]),
                               acting=self.registry[name].acts_outside))
        self.tools: tuple[_Tool, ...] = tuple(tools)
        # `with_outside` adds one action standing for any tool outside the closure (it only
        # moves the window), to measure that restricting the actions to the closure costs
        # nothing.
        self.with_outside = with_outside
        self.actions: tuple[str, ...] = (*names, OUTSIDE) if with_outside else names
        self.action_index = {t: i for i, t in enumerate(self.actions)}
        self.n = len(self.required)
        self.flag_bits = bits
        self.n_states = (self.n + 1) * 2**bits * _WINDOW_STATES
        self.dead = self.n_states  # the absorbing "order broken" state

    # --- packing ----------------------------------------------------------------------------
    def pack(self, k: int, flags: int, window: int) -> int:
        return k + (self.n + 1) * (flags + (window << self.flag_bits))

    def unpack(self, code: int) -> tuple[int, int, int]:
        """(progress k, flags, window) of a packed state (not `dead`)."""
        k, rest = code % (self.n + 1), code // (self.n + 1)
        return k, rest & ((1 << self.flag_bits) - 1), rest >> self.flag_bits

    def initial_state(self) -> MdpState:
        return MdpState(self.pack(0, 0, 0), self.max_turns)

    def is_success(self, state: MdpState) -> bool:
        return state.code != self.dead and state.code % (self.n + 1) == self.n

    def is_terminal(self, state: MdpState) -> bool:
        return state.code == self.dead or self.is_success(state) or state.turns_left <= 0

    # --- the success model, vectorised over all packed states -------------------------------
    @cached_property
    def _codes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        codes = np.arange(self.n_states, dtype=np.int64)
        k = codes % (self.n + 1)
        rest = codes // (self.n + 1)
        return k, rest & ((1 << self.flag_bits) - 1), rest >> self.flag_bits

    @cached_property
    def _probability_table(self) -> np.ndarray:
        """p[late, unmet, failed_latest, recent_failures] from the simulator's own function."""
        most = max((len(t.deps) for t in self.tools), default=0) + 1
        table = np.empty((2, most, most, RECENT_WINDOW + 1))
        for late in range(2):
            for unmet in range(most):
                for failed in range(most):
                    for recent in range(RECENT_WINDOW + 1):
                        table[late, unmet, failed, recent] = success_probability(
                            self.base_success, unmet=unmet, failed_latest=failed,
                            calls_made=RECENT_WINDOW * late, recent_failures=recent)
        return table

    def _succeeded(self, tool: _Tool, k: np.ndarray, flags: np.ndarray) -> np.ndarray:
        succeeded: np.ndarray  # numpy's stubs type array comparisons as Any
        if tool.required_index >= 0:
            succeeded = k > tool.required_index
        else:
            succeeded = (flags >> tool.ok_bit) & 1 == 1
        return succeeded

    @cached_property
    def transitions(self) -> tuple[Transitions, ...]:
        """Per action (in `self.actions` order), its effect on every packed state."""
        k, flags, window = self._codes
        recent = np.zeros_like(window)
        for bit in range(RECENT_WINDOW):
            recent += (window >> bit) & 1
        table = self._probability_table
        out = []
        for tool in self.tools:
            unmet = np.zeros_like(k)
            failed = np.zeros_like(k)
            for d in tool.deps:
                dep = self.tools[d]
                unmet += ~self._succeeded(dep, k, flags)
                failed += (flags >> dep.fail_bit) & 1
            ok_flags, bad_flags, ok_k = flags, flags, k
            if tool.fail_bit >= 0:
                ok_flags = ok_flags & ~(1 << tool.fail_bit)
                bad_flags = bad_flags | (1 << tool.fail_bit)
            if tool.ok_bit >= 0:
                ok_flags = ok_flags | (1 << tool.ok_bit)
            shifted = (window << 1) & _WINDOW_MASK
            on_success = self._pack_many(k, ok_flags, shifted)
            if tool.required_indices:
                # Its step next: progress. Before its first step: the order is broken. Past
                # it, between or after its steps: nothing, or for a tool that acts outside
                # the data, a step done once too often (spoiled).
                is_next = np.isin(k, tool.required_indices)
                ok_k = np.where(is_next, k + 1, k)
                broken = (k < tool.required_indices[0]) | (~is_next & tool.acting)
                on_success = np.where(broken, self.dead,
                                      self._pack_many(ok_k, ok_flags, shifted))
            out.append(Transitions(
                p_early=table[0, unmet, failed, recent],
                p_late=table[1, unmet, failed, recent],
                on_success=on_success,
                on_failure=self._pack_many(k, bad_flags, shifted | 1),
            ))
        if self.with_outside:  # a tool with no dependency in the task, e.g. a utility
            shifted = (window << 1) & _WINDOW_MASK
            out.append(Transitions(
                p_early=table[0, 0, 0, recent], p_late=table[1, 0, 0, recent],
                on_success=self._pack_many(k, flags, shifted),
                on_failure=self._pack_many(k, flags, shifted | 1),
            ))
        return tuple(out)

    def _pack_many(self, k: np.ndarray, flags: np.ndarray, window: np.ndarray) -> np.ndarray:
        codes: np.ndarray = k + (self.n + 1) * (flags + (window << self.flag_bits))
        return codes

    # --- one step at a time (oracle, clairvoyant, tests) ------------------------------------
    def calls_made(self, state: MdpState) -> int:
        return self.max_turns - state.turns_left

    def probability(self, state: MdpState, tool: str) -> float:
        """The success probability of calling `tool` (a tool of the closure) in `state`."""
        if state.code == self.dead:
            raise ValueError("the order is broken: the MDP no longer tracks this episode")
        trans = self.transitions[self.action_index[tool]]
        late = self.calls_made(state) >= RECENT_WINDOW
        return float((trans.p_late if late else trans.p_early)[state.code])

    def step(self, state: MdpState, tool: str, ok: bool) -> MdpState:
        """The state after a call of `tool` that succeeded (`ok`) or failed. A tool outside
        the closure only shifts the last-three window; a name the registry does not know is
        no call at all (the simulator keeps no history of it) but still spends the turn."""
        turns = state.turns_left - 1
        if state.code == self.dead:
            return MdpState(self.dead, turns)
        a = self.action_index.get(tool)
        if a is not None:
            trans = self.transitions[a]
            return MdpState(int((trans.on_success if ok else trans.on_failure)[state.code]), turns)
        if tool not in self.registry:
            return MdpState(state.code, turns)
        return self.outside_call(state, ok)

    def outside_call(self, state: MdpState, ok: bool) -> MdpState:
        """The state after a call of a tool outside the closure: nothing of the task depends
        on it, so only the last-three window moves."""
        if state.code == self.dead:
            return MdpState(self.dead, state.turns_left - 1)
        k, flags, window = self.unpack(state.code)
        window = ((window << 1) | (not ok)) & _WINDOW_MASK
        return MdpState(self.pack(k, flags, window), state.turns_left - 1)

    def progress(self, state: MdpState) -> int:
        """How many required tools have succeeded in order (-1 when the order is broken)."""
        return -1 if state.code == self.dead else state.code % (self.n + 1)
