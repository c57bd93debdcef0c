"""Scoring of one episode (docs/BENCHMARK.md: Scoring): pure functions over its calls.

A call is any mapping with at least `tool` and `ok` (a `CallResult.to_json()` or a recorded
call), in the order made; `arguments` is read for deviations from the plan, `output` (its
`ref` and `inputs`) and `deviations` for the deliverable. The four conditions:
- coverage: every required tool has a successful call with the task's values (a call with
  `deviations`, another option, destination or condition, does another step: issue 34);
- order: measured over the whole required list: every required tool succeeded, and their
  first successes came in the required order (one lucky call in order is no progress); a
  step the text asks twice is two steps of the list, done by the tool's first and second
  successes;
- output: the task's deliverable was produced where and as the task asked (`Deliverable`), and
  once where delivering it acts outside the data (no success of the output step after it: a
  second post, file write or notification spoils it; a retry after a failure is no repeat),
  and no step that acts outside the data done with the task's values more often than the
  task asks it (`Deliverable.acting`: a second notification or enqueue mid-flow spoils it too): a
  success of the output step whose call and every call its data descends from used the task's
  values (no `deviations`: not another destination, function or condition), whose data went
  through every required step the task's data flow passes through (no skipped step; a
  prerequisite the exact DP may skip does not count against it) and whose output is in the
  task's format where the task states one (`Deliverable.format`: a binary archive written to
  the task's csv destination is not its csv file); and no side effect the task did not ask
  for: no success of a tool that acts outside the data (`ToolSpec.acts_outside`: a post, a
  file write, a notification, a route, a schedule, an enqueue) that is no step of the task,
  nor of a step's tool with another value than the task's (`deviations`: another destination
  or recipient); environments whose outputs name no inputs (the live services) are judged on
  the deviations and side effects alone. Without a `Deliverable` (callers that know no task),
  a success of the output step;
- completion: the model sent the explicit completion signal.
Full success needs all four, partial at least two of which one is output or order (progress
itself: every tool called in any order plus the signal is not), anything less is a failure.
Penalties then cost a level each (full to partial, partial to failed): excess runs
(`excess_runs`: a required step succeeding again after it was done soundly as often as the
task asks) where the task's constraints say "do not run a step more often than needed"
(`NO_RERUNS`); elsewhere they are counted (`Score.excess_runs`) and cost nothing.
A different tool never counts for a step: the prompt says so (prompts.py), and only the
realistic profile's listed stand-ins (below) are documented alternatives.

Under the `realistic` fault profile (docs/FAULTS.md) `score_calls` takes the task's listed
`alternatives` (step tool -> stand-in): a stand-in's success counts exactly as the step's, and
nothing else does; and the output condition needs a success of the output step that is not
`tainted` (built while a source's latest run was silently empty: a wrong deliverable).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_resilibench.base.names import OUTCOMES, Outcome
from pytest_resilibench.core.registry import Role, ToolRegistry

if TYPE_CHECKING:
    from pytest_resilibench.core.tasks import Task

__all__ = [
    "OUTCOMES",
    "Conditions",
    "Deliverable",
    "Score",
    "conditions",
    "deliverable_of",
    "deviation",
    "errors_met_and_recovered",
    "excess_runs",
    "first_success_order",
    "lcs_length",
    "order_adherence",
    "outcome",
    "score_calls",
]


Call = Mapping[str, Any]


@dataclass(frozen=True)
class Conditions:
    coverage: bool
    order: bool
    output: bool
    completion: bool

    def to_json(self) -> dict[str, bool]:
        return {"coverage": self.coverage, "order": self.order, "output": self.output,
                "completion": self.completion}

    @property
    def count(self) -> int:
        return sum((self.coverage, self.order, self.output, self.completion))


@dataclass(frozen=True)
class Score:
    outcome: Outcome
    conditions: Conditions
    coverage: float
    order_adherence: float
    errors_met: int
    errors_recovered: int
    # Successes of a step beyond what the task asks and what failures justify (`excess_runs`),
    # counted whatever the task says; `penalties` names what cost the outcome a level
    # ("excess_runs" where the task says not to run a step more often than needed).
    excess_runs: int = 0
    penalties: tuple[str, ...] = ()


def first_success_order(calls: Sequence[Call], required: Sequence[str]) -> list[str]:
    """The required steps done, in the order done: a tool's n-th success with the task's
    values does its n-th step in `required` (a text may ask a step again: docs/BENCHMARK.md,
    Repeated steps); a success beyond those does no step. A call with `deviations` (another
    option, destination or condition than the task's) did another step than the task's."""
    left = Counter(required)
    done: list[str] = []
    for call in calls:
        tool = str(call.get("tool"))
        if call.get("ok") and left.get(tool, 0) > 0 and not call.get("deviations"):
            left[tool] -= 1
            done.append(tool)
    return done


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, O(len a x len b))."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def order_adherence(calls: Sequence[Call], required: Sequence[str]) -> float:
    """LCS of the first-success order against the required order, over the required count."""
    return _adherence(first_success_order(calls, required), required)


def conditions(calls: Sequence[Call], required: Sequence[str], *, completed: bool) -> Conditions:
    return _conditions(first_success_order(calls, required), required, completed=completed)


# The metrics from the first-success order, which `score_calls` computes once for all.
def _coverage(done: list[str], required: Sequence[str]) -> float:
    if not required:
        return 1.0
    return len(done) / len(required)


def _adherence(done: list[str], required: Sequence[str]) -> float:
    if not required:
        return 1.0
    return lcs_length(done, list(required)) / len(required)


def _conditions(done: list[str], required: Sequence[str], *, completed: bool,
                delivered: bool | None = None) -> Conditions:
    return Conditions(
        coverage=len(done) == len(required),
        order=bool(done) and done == list(required),
        output=bool(required) and required[-1] in done if delivered is None else delivered,
        completion=completed,
    )


@dataclass(frozen=True)
class Deliverable:
    """What the task's deliverable is: made by `tool` (in `format`, for the record: the
    lineage decides it) from data that went through every tool of `lineage`."""

    tool: str
    format: str | None
    lineage: frozenset[str]
    # Whether it is delivered by acting outside the data (`ToolSpec.acts_outside`: a post, a
    # file, a notification): then it is delivered once, and a second success spoils it.
    once: bool = False
    # Every step of the task that acts outside the data, with how often the task asks it
    # (twice where the text asks it again): one success more does it once too often (a second
    # notification, a second enqueue of the same messages) and spoils the deliverable.
    acting: tuple[tuple[str, int], ...] = ()
    # Every tool of the registry that acts outside the data: a success of one the task does
    # not ask, or of an asked one done with another value (`deviations`: another destination,
    # recipient or target), is a side effect the task never asked for and spoils the output.
    outside: frozenset[str] = frozenset()
    # Per required tool, the required steps its data must have gone through (as `lineage` for
    # the output step): an earlier success whose data did not is no sound run of the step.
    lineages: tuple[tuple[str, frozenset[str]], ...] = ()
    # Whether the task's constraints say "do not run a step more often than needed": then an
    # excess run (`excess_runs`) costs the outcome a level.
    runs_once: bool = False


# The task constraint that makes a step run more often than needed cost a level
# (solver/templates.py CONSTRAINTS; docs/BENCHMARK.md: Excess runs).
NO_RERUNS = "do not run a step more often than needed"


def deliverable_of(task: Task, registry: ToolRegistry) -> Deliverable:
    """The task's deliverable. Its lineage follows the data as the simulator's default input
    does (simulator.py `_default_input`: the latest output of a data dependency, else of a
    prerequisite, else the latest output) through the reference plan, kept to the task's
    own steps."""
    required = task.required_tools
    latest_by_tool: dict[str, str] = {}
    latest: str | None = None
    lineage: dict[str, frozenset[str]] = {}
    for step in task.reference_workflow().steps:
        spec = registry.get(step.tool)
        if spec is None:
            continue
        producer: str | None = None
        if spec.role is not Role.SOURCE and "source" in spec.parameters.get("properties", {}):
            producer = latest
            for group in registry.input_groups(spec.name, required):
                deps = [d for d in group if d in latest_by_tool]
                if deps:
                    producer = max(deps, key=list(latest_by_tool).index)
                    break
        lineage[spec.name] = frozenset({spec.name}) | lineage.get(producer or "", frozenset())
        latest_by_tool.pop(spec.name, None)
        latest_by_tool[spec.name] = latest = spec.name
    output = required[-1]
    fmt = task.expected_outputs.get("format")
    spec = registry.get(output)
    asked = frozenset(required)
    return Deliverable(output, fmt if isinstance(fmt, str) else None,
                       lineage.get(output, frozenset({output})) & asked,
                       once=spec is not None and spec.acts_outside,
                       acting=tuple((t, required.count(t)) for t in dict.fromkeys(required)
                                    if t in registry and registry[t].acts_outside),
                       outside=_outside_tools(registry),
                       lineages=tuple((t, lineage.get(t, frozenset({t})) & asked)
                                      for t in dict.fromkeys(required)),
                       runs_once=NO_RERUNS in task.constraints)


def _outside_tools(registry: ToolRegistry) -> frozenset[str]:
    """The registry's tools that act outside the data (memoised per registry)."""
    found = _OUTSIDE.get(registry)
    if found is None:
        found = _OUTSIDE[registry] = frozenset(t.name for t in registry if t.acts_outside)
    return found


_OUTSIDE: weakref.WeakKeyDictionary[ToolRegistry, frozenset[str]] = weakref.WeakKeyDictionary()


def _done_too_often(steps: Sequence[Call], deliverable: Deliverable) -> bool:
    """Whether a step that acts outside the data succeeded with the task's values more often
    than the task asks (a call with `deviations` did another step; a success built on
    silently empty data, `tainted`, is redone under the realistic profile: no repeat)."""
    done = Counter(c.get("tool") for c in steps if c.get("ok") and not c.get("deviations")
                   and c.get("event") != "tainted")
    return any(done[tool] > asked for tool, asked in deliverable.acting)


def _made(steps: Sequence[Call]) -> dict[str, Call]:
    """Each successful call by the ref of the output it made."""
    made: dict[str, Call] = {}
    for call in steps:
        output = call.get("output")
        if call.get("ok") and isinstance(output, Mapping) and isinstance(output.get("ref"), str):
            made[output["ref"]] = call
    return made


def _ancestry(call: Call, made: Mapping[str, Call]) -> tuple[set[str], bool]:
    """The tools a call's data went through (itself included), back through the outputs it
    descends from, and whether all those calls used the task's values (no `deviations`)."""
    tools: set[str] = set()
    refs: set[str] = set()
    sound = True
    at: Call | None = call
    while at is not None:  # back through the data it descends from (made earlier)
        tools.add(str(at.get("tool")))
        sound = sound and not at.get("deviations")
        inputs = (at.get("output") or {}).get("inputs")
        ref = inputs[0] if isinstance(inputs, list) and inputs else None
        at = made.get(ref) if isinstance(ref, str) and ref not in refs else None
        refs.add(str(ref))
    return tools, sound


def _delivered_as_asked(steps: Sequence[Call], deliverable: Deliverable) -> bool:
    """Whether some success of the output step is the task's deliverable (module docstring)."""
    made = _made(steps)
    for at_call, call in enumerate(steps):
        output = call.get("output")
        if not (call.get("ok") and call.get("tool") == deliverable.tool
                and isinstance(output, Mapping)) or call.get("event") == "tainted":
            continue
        if "inputs" not in output:  # an environment that does not report lineage (live/)
            if not call.get("deviations"):
                return _once(steps[at_call + 1:], deliverable)
            continue
        # The format is part of what was asked: a binary archive written to the task's csv
        # destination is not its csv file (a stray step on the way can change the format).
        fmt = output.get("format")
        if deliverable.format is not None and isinstance(fmt, str) and fmt != deliverable.format:
            continue
        tools, sound = _ancestry(call, made)
        if sound and deliverable.lineage <= tools:
            return _once(steps[at_call + 1:], deliverable)
    return False


def _side_effect(steps: Sequence[Call], required: Sequence[str],
                 deliverable: Deliverable) -> bool:
    """Whether a call acted outside the data where the task did not ask: a success of a tool
    that acts outside the data (a post, a file write, a notification, a route, a schedule,
    an enqueue) that is no step of the task, or a step's tool done with another destination,
    recipient or target than the task's (`deviations`)."""
    asked = set(required)
    for call in steps:  # a loop, not any() over a generator: every episode is scored
        tool = call.get("tool")
        if (call.get("ok") and tool in deliverable.outside
                and (tool not in asked or call.get("deviations"))):
            return True
    return False


def excess_runs(steps: Sequence[Call], required: Sequence[str],
                deliverable: Deliverable) -> int:
    """Successes of a required step, with the task's values, after the step was already done
    soundly as often as the task asks it (docs/BENCHMARK.md: Excess runs). A success is sound
    when its data are: not silently empty or built on empty data (`event` silent/tainted,
    realistic profile) and, where outputs name their inputs, gone through every required step
    the task's data pass through before it; redoing an unsound run is a repair, not a rerun.
    A retry after a failure is no rerun either (a failed call did nothing)."""
    asked = Counter(required)
    lineages = dict(deliverable.lineages)
    made = _made(steps)
    sound: Counter[str] = Counter()
    excess = 0
    for call in steps:
        tool = str(call.get("tool"))
        if not (call.get("ok") and asked.get(tool) and not call.get("deviations")):
            continue
        if sound[tool] >= asked[tool]:
            excess += 1
            continue
        output = call.get("output")
        if call.get("event") in ("silent", "tainted"):
            continue
        if isinstance(output, Mapping) and "inputs" in output:
            tools, _ = _ancestry(call, made)
            if not lineages.get(tool, frozenset()) <= tools:
                continue
        sound[tool] += 1
    return excess


def _once(later: Sequence[Call], deliverable: Deliverable) -> bool:
    """Whether no call after the deliverable's delivered it again (a second post, write or
    notification: the recipient got it twice), where it is delivered once."""
    return not deliverable.once or not any(
        c.get("ok") and c.get("tool") == deliverable.tool for c in later)


def _as_steps(calls: Sequence[Call], alternatives: Mapping[str, str]) -> list[Call]:
    """The calls with each listed stand-in renamed to the step it stands in for."""
    step_of = {alt: step for step, alt in alternatives.items()}
    return [{**call, "tool": step_of.get(str(call.get("tool")), call.get("tool"))}
            for call in calls]


def _delivered(steps: Sequence[Call], required: Sequence[str]) -> bool:
    """Whether the output step succeeded with a sound deliverable (realistic profile)."""
    return bool(required) and any(
        c.get("ok") and c.get("tool") == required[-1] and c.get("event") != "tainted"
        for c in steps)


def outcome(conds: Conditions, penalties: int = 0) -> Outcome:
    """Full: all four. Partial: at least two, one of them progress itself (the deliverable
    as asked, or every step in order): calling every tool in any order and saying done is
    not progress. Anything less fails. Each penalty costs a level (full to partial, partial
    to failed)."""
    if conds.count == 4:
        level = 2
    else:
        level = 1 if conds.count >= 2 and (conds.output or conds.order) else 0
    return _LEVELS[max(0, level - penalties)]


_LEVELS: tuple[Outcome, Outcome, Outcome] = ("failed", "partial", "full")


def _alternatives(tool: str, registry: ToolRegistry | None) -> frozenset[str]:
    """Tools that can stand in for `tool`: the same role and the same category or operation
    (a network validator for a data validator; a scanner for a reader)."""
    if registry is None:
        return frozenset((tool,))
    known = _STAND_INS.setdefault(registry, {})
    found = known.get(tool)
    if found is None:
        spec = registry.get(tool)
        found = frozenset((tool,)) if spec is None else frozenset(
            t.name for t in registry
            if t.role is spec.role
            and (t.category == spec.category or t.operation == spec.operation))
        if len(known) < _STAND_INS_SIZE:  # tools an agent invents are not all kept
            known[tool] = found
    return found


# Stand-ins per registry (by identity; each entry keeps its registry, so the id stays valid).
# Stand-ins per registry, for as long as the registry lives.
_STAND_INS: weakref.WeakKeyDictionary[ToolRegistry, dict[str, frozenset[str]]] = (
    weakref.WeakKeyDictionary())
_STAND_INS_SIZE = 4096


def errors_met_and_recovered(
    calls: Sequence[Call], *, registry: ToolRegistry | None = None
) -> tuple[int, int]:
    """Failed calls, and those later followed by a success of the same tool or of a suitable
    alternative (see `_alternatives`)."""
    met = recovered = 0
    for i, call in enumerate(calls):
        if call.get("ok"):
            continue
        met += 1
        stand_ins = _alternatives(str(call.get("tool")), registry)
        if any(later.get("ok") and later.get("tool") in stand_ins for later in calls[i + 1:]):
            recovered += 1
    return met, recovered


def score_calls(
    calls: Sequence[Call],
    required: Sequence[str],
    *,
    completed: bool,
    registry: ToolRegistry | None = None,
    alternatives: Mapping[str, str] | None = None,
    deliverable: Deliverable | None = None,
) -> Score:
    """Score an episode; `alternatives` (realistic profile only) and `deliverable` as the
    module says."""
    delivered = None
    steps = calls
    if alternatives is not None:
        steps = _as_steps(calls, alternatives)
        delivered = _delivered(steps, required)
    excess = 0
    penalties: tuple[str, ...] = ()
    if deliverable is not None:
        delivered = ((delivered is not False) and _delivered_as_asked(steps, deliverable)
                     and not _done_too_often(steps, deliverable)
                     and not _side_effect(steps, required, deliverable))
        excess = excess_runs(steps, required, deliverable)
        if excess and deliverable.runs_once:
            penalties = ("excess_runs",)
    done = first_success_order(steps, required)
    conds = _conditions(done, required, completed=completed, delivered=delivered)
    met, recovered = errors_met_and_recovered(calls, registry=registry)
    return Score(
        outcome=outcome(conds, len(penalties)),
        conditions=conds,
        coverage=_coverage(done, required),
        order_adherence=_adherence(done, required),
        errors_met=met,
        errors_recovered=recovered,
        excess_runs=excess,
        penalties=penalties,
    )


# A plan's statements of what a step does anyway (plan_extras.py): a call that leaves one out
# runs as the step says, so it still follows the step where the step's value is the right one.
_DETAILS = frozenset({"source", "format", "content_type", "channel", "encoding"})


def _follows(call: Call, tool: str, arguments: Mapping[str, Any],
             expected: Mapping[str, Any] | None = None) -> bool:
    """Whether a call carries out a plan step: the step's tool with every argument it names
    (a detail the call leaves out counts where the step's value is the `expected` one)."""
    args = call.get("arguments")
    if call.get("tool") != tool:
        return False
    if not arguments:
        return True
    if not isinstance(args, Mapping):
        return False
    for k, v in arguments.items():
        if k in args:
            if args[k] != v:
                return False
        elif not (k in _DETAILS and expected is not None and expected.get(k) == v):
            return False
    return True


def _contradicts(arguments: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """Whether an argument both name has another value in `expected`."""
    for k, v in arguments.items():  # noqa: SIM110 (every plan step: a generator costs more)
        if k in expected and expected[k] != v:
            return True
    return False


def deviation(
    calls: Sequence[Call],
    plan: Sequence[Mapping[str, Any]],
    reference: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """How the agent departed from the plan it was shown, and whether that was right.

    `plan` and `reference` are plan steps (`{"tool", "arguments"}`, as `PlanStep.to_json()`);
    the reference is the correct (optimal) workflow the shown plan was derived from. A plan
    step is *wrong* when its tool is not in the reference, it repeats an earlier step's tool
    more often than the reference does, or its arguments contradict the reference step's. A
    step is *followed* when some call made it (tool and every argument the step names).
    Deviations are right where a wrong step was not followed, wrong where a correct step was
    not. `restored` lists reference tools the plan left out that the agent ran successfully
    anyway; `reordered` says whether the
    plan's order contradicted the reference's and the agent's first successes followed the
    reference instead.
    """
    # Read only, as the plan's and the reference's arguments: no copies.
    ref_args = {str(s["tool"]): s.get("arguments") or {} for s in reference}
    ref_tools = [str(s["tool"]) for s in reference]
    calls_of: dict[Any, list[Call]] = {}  # a step is followed only by calls of its tool
    for call in calls:
        calls_of.setdefault(call.get("tool"), []).append(call)
    wrong: list[int] = []
    not_followed: list[int] = []
    left = Counter(ref_tools)  # the reference's steps of each tool not yet matched
    for i, step in enumerate(plan):  # loops, not any() over generators: run every episode
        tool = str(step.get("tool"))
        arguments = step.get("arguments") or {}
        expected = ref_args.get(tool)
        is_wrong = expected is None or left[tool] <= 0 or _contradicts(arguments, expected)
        left[tool] -= 1
        if is_wrong:
            wrong.append(i)
        for call in calls_of.get(tool, ()):
            if _follows(call, tool, arguments, expected):
                break
        else:
            not_followed.append(i)
    plan_tools = {str(s.get("tool")) for s in plan}
    done = first_success_order(calls, ref_tools)
    restored = list(dict.fromkeys(t for t in ref_tools if t not in plan_tools and t in done))
    plan_order = [str(s.get("tool")) for s in plan if s.get("tool") in ref_args]
    plan_order = list(dict.fromkeys(plan_order))
    in_plan = set(plan_order)
    ref_order = [t for t in ref_tools if t in in_plan]
    done_shared = [t for t in done if t in in_plan]
    shared = set(done_shared)
    reordered = (
        plan_order != ref_order
        and len(done_shared) >= 2
        and done_shared == [t for t in ref_order if t in shared]
    )
    right = [i for i in not_followed if i in wrong]
    return {
        "plan_steps": len(plan),
        "wrong_steps": wrong,
        "not_followed": not_followed,
        "right_deviations": len(right),
        "wrong_deviations": len(not_followed) - len(right),
        "restored": restored,
        "reordered": reordered,
    }
