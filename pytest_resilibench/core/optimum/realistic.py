"""The MDP of a task under the `realistic` fault profile, solved exactly (docs/FAULTS.md).

The paper's MDP (`mdp.py`) holds what `success_probability` reads; this one adds what the
realistic events make observable, so the optimal policy can react to them:
- the outage status of each step that has a stand-in: unknown, up (its tool answered something
  other than SERVICE_UNAVAILABLE) or down;
- the credentials: unknown, expired (a remote tool said AUTH_EXPIRED) or good (an
  authenticator call succeeded, or a remote tool answered without AUTH_EXPIRED);
- the tool the previous call was rate limited on (calling it again at once is refused);
- the silent-failure steps whose latest run came back empty, and whether the deliverable was
  produced on empty data (progress `n` without success: the output step must run again).

Outcomes of a call, in the simulator's order: outage, expired credentials, rate limit (each an
observable failure), then the paper's success draw, then, for a data source, a silent failure.
The events are drawn independently of each other and of the success draw (`faults.py`), so a
call's outcome distribution is the product of these branches.

Actions. At progress k: the step's tool and its stand-in, the prerequisites, the authenticator
(when the task has remote tools), re-runs of the silent-failure steps already done, and a wait
(a call of a tool outside the task, `TaskFaults.wait_tool`) while a rate limit holds. Calls
of later steps are left out: their success breaks the required order and their failure only
costs a turn. Re-runs of finished steps other than an empty source, an authenticator call
outside the task once the credentials are good, and waits with no rate limit pending, are left
out too: they can only move the failure flags and the last-three window (the paper profile's
solver report measures what calls outside the closure gain there: nothing). So "optimal" means
optimal among the policies that never make those calls.

Values are computed by memoised recursion over the states reachable from the start, keyed by
what a later call can still read (`RealisticMDP._canonical`; pure Python: thousands to about a
hundred thousand states per task structure, seconds at most). The oracle agent and the prompts
solve default-set tasks at run time (only the paper set's plans are stored), so it must stay
fast, and it must not import torch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from pytest_resilibench.core.faults import (
    ALT_FACTOR,
    AUTH_EXPIRY_RATE,
    AUTHENTICATOR,
    OUTAGE_RATE,
    RATE_LIMIT_RATE,
    SILENT_RATE,
    TaskFaults,
    task_faults,
)
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.simulator import (
    DEFAULT_BASE_SUCCESS,
    RECENT_WINDOW,
    success_probability,
)
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.workflow import PlanStep, Workflow

__all__ = ["RState", "RealisticMDP", "RealisticSolution", "happy_path_tools", "realistic_solution",
           "workflow_of"]

_WINDOW_MASK = (1 << RECENT_WINDOW) - 1
UNKNOWN, UP, DOWN = 0, 1, 2  # outage status of a step
GOOD, EXPIRED = 1, 2  # credentials (UNKNOWN as above)


class RState(NamedTuple):
    """Where an episode stands under the realistic profile (see the module docstring).
    `k == n + 1` is success: the deliverable was produced on sound data."""

    k: int
    turns_left: int
    ok: int  # prerequisites that succeeded (bit per prerequisite)
    failed: int  # latest run failed (bit per step, then per prerequisite)
    window: int  # last three calls, bit set = failed
    status: tuple[int, ...]  # outage status per step (UNKNOWN for steps without stand-in)
    auth: int
    blocked: int  # tool index the previous call was rate limited on, -1 none
    empty: int  # silent-failure steps whose latest run was empty (bit per step)


@dataclass(frozen=True)
class _Tool:
    name: str
    step: int  # the step it runs (its own or the one it stands in for), -1 otherwise
    # Every position of that step in the required list (two where the text asks it again);
    # `step` is the first, which keys the step's flags (failed, outage, empty).
    positions: tuple[int, ...]
    alt: bool  # a stand-in
    prereq: int  # index among the prerequisites, -1 otherwise
    remote: bool
    rate_limited: bool
    silent: bool
    deps: tuple[tuple[str, int], ...]  # ("step", j) or ("prereq", i)


class RealisticMDP:
    """One task structure's MDP under the realistic profile."""

    def __init__(self, faults: TaskFaults, task_tools: tuple[str, ...], *,
                 registry: ToolRegistry | None = None,
                 base_success: float = DEFAULT_BASE_SUCCESS) -> None:
        self.faults = faults
        self.registry = registry or default_registry()
        self.base_success = base_success
        self.steps = faults.steps
        self.n = len(self.steps)
        self.max_turns = faults.max_turns
        prereqs = [t for t in faults.closure if t not in self.steps]
        names = [*faults.closure, *faults.alternatives.values()]
        if faults.remote and AUTHENTICATOR not in names:
            names.append(AUTHENTICATOR)
        names.append(faults.wait_tool)
        step_of = faults.step_of

        def dep(name: str) -> tuple[str, int]:
            return ("step", self.steps.index(name)) if name in self.steps else \
                ("prereq", prereqs.index(name))

        tools = []
        for name in names:
            step_name = step_of.get(name, name)
            positions = tuple(i for i, s in enumerate(self.steps) if s == step_name)
            step = positions[0] if positions else -1
            deps = self.registry.dependencies(step_name, task_tools) \
                if step_name in faults.closure else ()
            tools.append(_Tool(
                name=name, step=step, positions=positions, alt=name in step_of,
                prereq=prereqs.index(name) if name in prereqs else -1,
                remote=name in faults.remote, rate_limited=name in faults.rate_limited,
                silent=step >= 0 and step_name in faults.silent,
                deps=tuple(dep(d) for d in deps)))
        self.tools: tuple[_Tool, ...] = tuple(tools)
        self.index = {t.name: i for i, t in enumerate(self.tools)}
        self.prereqs = tuple(prereqs)
        self.success_k = self.n + 1
        # Memoised by `_canonical(state)`: states that differ only in what no call can read
        # any more share one value and one best action.
        self._values: dict[RState, tuple[float, int]] = {}
        self._relevant: dict[tuple[int, int], tuple[int, int, tuple[int, ...]]] = {}
        # The steps whose outage status can be known (their tool has a stand-in).
        self._outage_steps = tuple(sorted({t.step for t in self.tools if t.step >= 0
                                           and self.steps[t.step] in faults.alternatives}))

    # --- states -----------------------------------------------------------------------------
    def initial_state(self) -> RState:
        return RState(0, self.max_turns, 0, 0, 0, (UNKNOWN,) * self.n, UNKNOWN, -1, 0)

    def is_success(self, state: RState) -> bool:
        return state.k == self.success_k

    def actions(self, state: RState) -> list[int]:
        """The tools worth calling now (module docstring), as indices into `self.tools`."""
        if state.k == self.success_k or state.turns_left <= 0:
            return []
        current = min(state.k, self.n - 1)  # k == n: the deliverable must be made again
        out = []
        for i, tool in enumerate(self.tools):
            if current in tool.positions:
                out.append(i)
            elif tool.step >= 0:
                if tool.silent and tool.step < state.k and (state.empty >> tool.step) & 1:
                    out.append(i)
            elif tool.prereq >= 0:
                out.append(i)
            elif tool.name == AUTHENTICATOR:
                if state.auth != GOOD:
                    out.append(i)
            elif state.blocked >= 0:  # the wait tool
                out.append(i)
        return out

    # --- the model --------------------------------------------------------------------------
    def _probability(self, tool: _Tool, state: RState) -> float:
        unmet = failed = 0
        for kind, j in tool.deps:
            if kind == "step":
                unmet += j >= state.k
                failed += (state.failed >> j) & 1
            else:
                unmet += not (state.ok >> j) & 1
                failed += (state.failed >> (self.n + j)) & 1
        calls = self.max_turns - state.turns_left
        p = success_probability(self.base_success, unmet=unmet, failed_latest=failed,
                                calls_made=calls,
                                recent_failures=bin(state.window).count("1"))
        return ALT_FACTOR * p if tool.alt else p

    def _fail_bit(self, tool: _Tool) -> int:
        if tool.step >= 0:
            return 1 << tool.step
        if tool.prereq >= 0:
            return 1 << (self.n + tool.prereq)
        return 0

    def branches(self, state: RState, a: int) -> list[tuple[float, RState, bool, str | None]]:
        """The outcomes of calling tool `a`: (probability, next state, ok, event)."""
        tool = self.tools[a]
        out: list[tuple[float, RState, bool, str | None]] = []
        turns = state.turns_left - 1
        bit = self._fail_bit(tool)

        def failure(weight: float, event: str | None, status: tuple[int, ...], auth: int,
                    blocked: int) -> None:
            out.append((weight, state._replace(
                turns_left=turns, failed=state.failed | bit, window=_shift(state.window, True),
                status=status, auth=auth, blocked=blocked), False, event))

        weight = 1.0
        status, auth = state.status, state.auth
        if tool.step >= 0 and not tool.alt and self.steps[tool.step] in self.faults.alternatives:
            s = status[tool.step]
            if s == DOWN:
                failure(1.0, "outage", status, auth, -1)
                return out
            if s == UNKNOWN:
                failure(OUTAGE_RATE, "outage", _set(status, tool.step, DOWN), auth, -1)
                weight *= 1 - OUTAGE_RATE
                status = _set(status, tool.step, UP)
        if tool.remote:
            if auth == EXPIRED:
                failure(weight, "auth_expired", status, auth, -1)
                return out
            if auth == UNKNOWN:
                failure(weight * AUTH_EXPIRY_RATE, "auth_expired", status, EXPIRED, -1)
                weight *= 1 - AUTH_EXPIRY_RATE
                auth = GOOD
        if tool.rate_limited:
            if state.blocked == a:
                failure(weight, "rate_limited", status, auth, a)
                return out
            failure(weight * RATE_LIMIT_RATE, "rate_limited", status, auth, a)
            weight *= 1 - RATE_LIMIT_RATE
        p = self._probability(tool, state)
        failure(weight * (1 - p), None, status, auth, -1)
        weight *= p
        if tool.name == AUTHENTICATOR:
            auth = GOOD
        ok = state.ok | (1 << tool.prereq) if tool.prereq >= 0 else state.ok
        done = state._replace(turns_left=turns, ok=ok, failed=state.failed & ~bit,
                              window=_shift(state.window, False), status=status, auth=auth,
                              blocked=-1)
        if tool.silent:
            s_bit = 1 << tool.step
            for w, empty, event in ((SILENT_RATE, done.empty | s_bit, "silent"),
                                    (1 - SILENT_RATE, done.empty & ~s_bit, None)):
                k = done.k + 1 if done.k in tool.positions else done.k
                out.append((weight * w, done._replace(k=k, empty=empty), True, event))
            return out
        k = done.k
        event = None
        if min(k, self.n - 1) in tool.positions:
            if min(k, self.n - 1) == self.n - 1:  # the deliverable: sound only on sound data
                k = self.n if done.empty else self.success_k
                event = "tainted" if done.empty else None
            else:
                k += 1
                event = "tainted" if done.empty and self._consumes(tool) else None
        elif done.empty and self._consumes(tool):
            event = "tainted"
        out.append((weight, done._replace(k=k), True, event))
        return out

    def _consumes(self, tool: _Tool) -> bool:
        return self.registry[tool.name].role.value in ("processor", "aggregator", "output")

    # --- exact values -----------------------------------------------------------------------
    def value(self, state: RState) -> float:
        return self._solve(state)[0]

    def best_action(self, state: RState) -> str | None:
        a = self._solve(state)[1]
        return None if a < 0 else self.tools[a].name

    def _canonical(self, state: RState) -> RState:
        """`state` with what no later call reads cleared: a failure flag or a
        prerequisite's success is read only by a call of a step that depends on it, an outage
        status only by a call of its step's own tool, and a step's tool is never called again
        once the progress has passed its last position (unless a silent-failure re-run is due,
        which only its own call can make due). What is cleared cannot change the value or the
        best action (tests/solver/test_realistic.py checks every state), and without it the
        states shrink 4-14 times (default tasks: 330,000 -> 50,000 for a four-step one with
        three stand-ins, 1.2 million -> 84,000 for the slowest five-step one sampled)."""
        key = (state.k, state.empty)
        relevant = self._relevant.get(key)
        if relevant is None:
            current = min(state.k, self.n - 1)
            live = [t for t in self.tools if t.step < 0 or max(t.positions) >= current
                    or (t.silent and (state.empty >> t.step) & 1)]
            mask = ok_mask = 0
            for tool in live:
                for kind, j in tool.deps:
                    mask |= 1 << (j if kind == "step" else self.n + j)
                    ok_mask |= (kind == "prereq") << j
            read = {t.step for t in live if t.step >= 0 and not t.alt}
            unread = tuple(j for j in self._outage_steps if j not in read)
            relevant = self._relevant[key] = (mask, ok_mask, unread)
        mask, ok_mask, unread = relevant
        status = state.status
        if any(status[j] for j in unread):
            cleared = list(status)
            for j in unread:
                cleared[j] = UNKNOWN
            status = tuple(cleared)
        if state.failed & ~mask == 0 and state.ok & ~ok_mask == 0 and status is state.status:
            return state
        return RState(state.k, state.turns_left, state.ok & ok_mask, state.failed & mask,
                      state.window, status, state.auth, state.blocked, state.empty)

    def _solve(self, state: RState) -> tuple[float, int]:
        state = self._canonical(state)
        found = self._values.get(state)
        if found is not None:
            return found
        if state.k == self.success_k:
            result = (1.0, -1)
        elif state.turns_left <= 0 or state.turns_left < self.n - state.k:
            result = (0.0, -1)
        else:
            result = (0.0, -1)
            preferred = self._preferred(state)
            for a in self.actions(state):
                q = sum(w * self._solve(nxt)[0] for w, nxt, _, _ in self.branches(state, a))
                # Ties go to the plain next step, then the lower index (closure order).
                if q > result[0] + 1e-12 or (abs(q - result[0]) <= 1e-12 and a == preferred
                                             and q > 0):
                    result = (q, a)
        self._values[state] = result
        return result

    def _preferred(self, state: RState) -> int:
        return self.index[self.steps[min(state.k, self.n - 1)]]

    def evaluate(self, choose: Callable[[RState], str | None]) -> float:
        """The exact value of a deterministic policy from the start."""
        memo: dict[RState, float] = {}

        def v(state: RState) -> float:
            if state.k == self.success_k:
                return 1.0
            if state.turns_left <= 0:
                return 0.0
            found = memo.get(state)
            if found is None:
                tool = choose(state)
                found = 0.0 if tool is None else sum(
                    w * v(nxt) for w, nxt, _, _ in self.branches(state, self.index[tool]))
                memo[state] = found
            return found

        return v(self.initial_state())

    def naive_action(self, state: RState) -> str | None:
        """"Required tools in order, retry on failure": the current step's own tool."""
        if state.k == self.success_k:
            return None
        return self.steps[min(state.k, self.n - 1)]

    @cached_property
    def naive_value(self) -> float:
        return self.evaluate(self.naive_action)

    @cached_property
    def plan_tools(self) -> tuple[str, ...]:
        """The optimal policy's calls when nothing goes wrong (the plan's steps)."""
        return tuple(tool for _, tool in _happy_path(self))

    def plan_retry_action(self, state: RState) -> str | None:
        """"The plan's tools in order, each retried until it succeeds" (a literal plan
        follower): the first plan tool not done yet; None once every step is done, even on
        empty data (a literal follower does not read outputs)."""
        seen: dict[str, int] = {}
        for tool in self.plan_tools:
            t = self.tools[self.index[tool]]
            if t.step >= 0:  # its n-th step in the plan is its n-th position
                nth = seen[tool] = seen.get(tool, -1) + 1
                if t.positions[min(nth, len(t.positions) - 1)] >= state.k:
                    return tool
            elif t.prereq >= 0:
                if not (state.ok >> t.prereq) & 1:
                    return tool
            elif tool == AUTHENTICATOR and state.auth != GOOD:
                return tool
        return None

    @cached_property
    def plan_retry_value(self) -> float:
        return self.evaluate(self.plan_retry_action)

    def step(self, state: RState, tool: str, ok: bool, event: str | None) -> RState:
        """The state after an observed call (what the oracle tracks). A call the model
        leaves out (a later step, an unknown tool) only spends the turn and moves the
        window, which is all it does while it fails; see the module docstring."""
        a = self.index.get(tool)
        if a is not None and a in self.actions(state):
            for _, nxt, b_ok, b_event in self.branches(state, a):
                if b_ok == ok and b_event == event:
                    return nxt
        return state._replace(turns_left=state.turns_left - 1,
                              window=_shift(state.window, not ok), blocked=-1)

    def states_solved(self) -> int:
        return len(self._values)


def _shift(window: int, failed: bool) -> int:
    return ((window << 1) | failed) & _WINDOW_MASK


def _set(status: tuple[int, ...], j: int, value: int) -> tuple[int, ...]:
    return (*status[:j], value, *status[j + 1:])


# --- the plan shown to models ----------------------------------------------------------------
def _happy_path(mdp: RealisticMDP) -> Iterator[tuple[RState, str]]:
    """The optimal policy's calls when every call succeeds with no event."""
    state = mdp.initial_state()
    while (tool := mdp.best_action(state)) is not None:
        yield state, tool
        branches = mdp.branches(state, mdp.index[tool])
        clean = [nxt for _, nxt, ok, event in branches if ok and event is None]
        state = clean[0]


def contingency(faults: TaskFaults, tool: str) -> str:
    """What to do when a step's call meets each realistic event (plain text, one line)."""
    parts = ["retry"]
    alt = faults.alternatives.get(tool)
    if alt is not None:
        args = dict(faults.arguments.get(alt, {}))
        parts.append(f"if it is unavailable (SERVICE_UNAVAILABLE), use {alt} with arguments "
                     f"{_json(args)} instead")
    if tool in faults.remote:
        parts.append(f"if AUTH_EXPIRED, call {AUTHENTICATOR} with arguments "
                     f"{_json(dict(faults.arguments.get(AUTHENTICATOR, {})))}, then retry")
    if tool in faults.rate_limited:
        parts.append(f"if RATE_LIMITED, make another call first (e.g. {faults.wait_tool} with "
                     f"arguments {_json(dict(faults.arguments[faults.wait_tool]))}), then retry")
    if tool in faults.silent:
        parts.append("if its output shows records: 0, re-run it before going on")
    return "; ".join(parts)


def _json(value: object) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def happy_path_tools(mdp: RealisticMDP) -> tuple[str, ...]:
    """The tools of the optimal policy's happy path: all a plan needs of the solved MDP (what
    core/realistic_plans.py keeps on disk per task structure)."""
    return tuple(tool for _, tool in _happy_path(mdp))


def realistic_workflow(mdp: RealisticMDP, task: Task) -> Workflow:
    """The optimal policy's happy path as a plan, each step with its contingencies."""
    return workflow_of(happy_path_tools(mdp), task, mdp.registry)


def workflow_of(tools: tuple[str, ...], task: Task, registry: ToolRegistry) -> Workflow:
    """The plan that calls `tools` (a happy path of the task's structure) with this task's
    arguments, each step with its contingencies."""
    from pytest_resilibench.core.plan_text import tool_purpose

    faults = task_faults(task, registry)  # this task's arguments (the MDP is shared)
    steps = []
    for tool in tools:
        spec = registry[tool]
        purpose = tool_purpose(spec)
        if tool not in faults.steps:
            purpose = f"not a task step, but it prevents failures later: {purpose}"
        steps.append(PlanStep(tool=tool, purpose=purpose,
                              arguments=dict(faults.arguments.get(tool, {})),
                              on_failure=contingency(faults, tool)))
    advice = (f"You have {faults.max_turns} turns, one tool call each. Tools fail at random and "
              "some fail in ways a retry cannot fix: a tool that is down stays down (use the "
              "step's stand-in), expired credentials need a new authentication, a rate limit "
              "needs another call in between, and a source that returns records: 0 must be "
              "re-run before anything uses its data. Run the steps in this order and reply "
              "TASK_COMPLETED as soon as the last step has succeeded with sound data.")
    return Workflow(steps=tuple(steps), advice=advice)


# --- the runtime API --------------------------------------------------------------------------
@dataclass(frozen=True)
class RealisticSolution:
    task: Task
    mdp: RealisticMDP

    @property
    def value(self) -> float:
        return self.mdp.value(self.mdp.initial_state())

    @property
    def naive_value(self) -> float:
        return self.mdp.naive_value

    @cached_property
    def workflow(self) -> Workflow:
        return realistic_workflow(self.mdp, self.task)

    def initial_state(self) -> RState:
        return self.mdp.initial_state()

    def action(self, state: RState) -> str | None:
        return self.mdp.best_action(state)

    def observe(self, state: RState, tool: str, ok: bool, event: str | None) -> RState:
        return self.mdp.step(state, tool, ok, event)


_MDPS: OrderedDict[tuple[object, ...], RealisticMDP] = OrderedDict()
_CACHE_SIZE = 256


def realistic_mdp(task: Task, *, registry: ToolRegistry | None = None,
                  base_success: float = DEFAULT_BASE_SUCCESS) -> RealisticMDP:
    """The task's realistic MDP, shared by tasks of the same structure (cached)."""
    registry = registry or default_registry()
    faults = task_faults(task, registry)
    key = (tuple(task.required_tools), tuple(sorted(faults.alternatives.items())),
           base_success, registry)
    mdp = _MDPS.get(key)
    if mdp is None:
        mdp = RealisticMDP(faults, tuple(task.required_tools), registry=registry,
                           base_success=base_success)
        _MDPS[key] = mdp
        if len(_MDPS) > _CACHE_SIZE:
            _MDPS.popitem(last=False)
    return mdp


def realistic_solution(task: Task, *, registry: ToolRegistry | None = None,
                       base_success: float = DEFAULT_BASE_SUCCESS) -> RealisticSolution:
    return RealisticSolution(task, realistic_mdp(task, registry=registry,
                                                 base_success=base_success))
