"""The seven plan flaws (docs/BENCHMARK.md: Flaws): pure functions from a correct plan to a
flawed one.

`inject_flaw(flaw, severity, workflow, task, registry)` returns the flawed workflow and a JSON-able
record of exactly what changed. The draws are keyed by (task id, flaw), never by the run seed, so
a task's flawed plan is fixed. The severity says how many changes to make (light 1, medium 2,
severe 3, capped by what the plan allows); changes are made one after another from the same draw
stream, so severity is monotone by construction.

"Similar tool" and "neighbour" come from the registry: same category, same role, same operation
and shared keywords score a candidate; ties break by name.

Record: `{"flaw", "severity", "changes": [...]}`, one change per edit, each with its `kind`
(moved, removed, duplicated, inserted, replaced, drifted, parameter, format, source), the `tool`
and where (inserted: the step lands `at` with its `arguments`, `declined` or the step it
`repeats` with the `parameter` whose `old` value it changed to `new`):
`index` is the step's position in the parent plan (moved: `from`/`to` positions at the time of the
move, and the step it now stands `before` or `after`; duplicated: the copy lands `at`), plus the
old and new tool or value; a swapped-in tool's `arguments`; for parameter and data-flow edits
whether the simulator `accepted` the wrong value (the step or the deliverable is then not the
task's) or refuses it; `worded` on a wrong option the text states in words.

Injected steps read like genuine ones (`plan_text.shown_plan` words both): a swapped-in tool is
one the task's values fit (`task_value`: its own value, else another input's of the same kind;
an option, one its text could word), and a wrong value is plausible. Only a reader should catch
a flaw (issue 34; bench/bench_flaw_leaks.py measures it): each injector first takes the edits
that leave the plan as a genuine plan of another task would look (`_Plan.marks`: every shown
value used, a worded option taken, the dependency order kept): parameter_error misreads an
option the text words, sequence_disorder moves steps whose order only the text fixes,
logical_inconsistency skips a step the data must go through. Only where the plan allows none
do they fall back to edits a surface shows (a shown value changed, the first one refused when
run; a dependency broken; a `format` the data do not have).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from pytest_resilibench.base.names import FLAWS, FLOW_PARAMS, SEVERITIES
from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.flow_sense import makes_sense
from pytest_resilibench.core.plan_text import plan_advice, shown_plan
from pytest_resilibench.core.registry import (
    DATA_FORMATS,
    FILE_EXTENSIONS,
    Role,
    ToolRegistry,
    ToolSpec,
    default_registry,
)
from pytest_resilibench.core.simulator import LOCATION_PARAMS
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.wording import PHRASES, WORDED_PARAMS
from pytest_resilibench.core.workflow import PlanStep, Workflow

__all__ = [
    "FLAWS",
    "SEVERITIES",
    "SEVERITY_CHANGES",
    "VALUE_FLAWS",
    "inject_flaw",
    "restated_flow",
    "similar_tools",
    "task_value",
]

SEVERITY_CHANGES = {"light": 1, "medium": 2, "severe": 3}



class Marks(NamedTuple):
    """What a plan shows that a surface rule reads (`_Plan.marks`)."""

    unused: frozenset[str]  # keys of the Inputs block no step uses (the data's format aside)
    worded: bool            # a step takes an option the text words (core/wording.py)
    ordered: bool           # no step before one it depends on
    reads_source: bool      # a step reads a source
    delivers_last: bool     # the last step delivers
    sensible: bool          # a flow a person would ask for (core/flow_sense.py)


# The marks every genuine plan shows (`Marks` fields).
HARD_MARKS = (2, 3, 4, 5)

# How many of the most similar tools a swap draws from (variety without absurd swaps), among
# how many of the most similar ones (those the task's values fit).
_TOP_CANDIDATES = 3
SIMILAR_WINDOW = 10


# --- similarity -------------------------------------------------------------------------------
def _similarity(a: ToolSpec, b: ToolSpec) -> int:
    shared = len(set(a.keywords) & set(b.keywords))
    return (shared + 3 * (a.category == b.category) + 2 * (a.role == b.role)
            + 2 * (a.operation == b.operation))


def similar_tools(
    registry: ToolRegistry, name: str, *, other_function: bool = False,
    exclude: Collection[str] = (),
) -> list[str]:
    """Tools ranked by similarity to `name`, most similar first (deterministic). With
    `other_function`, only tools of a different operation (a different function)."""
    return [t for t in _ranking(registry, name, other_function) if t not in exclude]


# Rankings per registry, for as long as the registry lives.
_RANKINGS: weakref.WeakKeyDictionary[ToolRegistry, dict[tuple[str, bool], tuple[str, ...]]] = (
    weakref.WeakKeyDictionary())


def _ranking(registry: ToolRegistry, name: str, other_function: bool) -> tuple[str, ...]:
    rankings = _RANKINGS.setdefault(registry, {})
    ranking = rankings.get((name, other_function))
    if ranking is None:
        tool = registry[name]
        candidates = [t for t in registry if t.name != name
                      and not (other_function and t.operation == tool.operation)]
        candidates.sort(key=lambda t: (-_similarity(tool, t), t.name))
        ranking = rankings[(name, other_function)] = tuple(t.name for t in candidates)
    return ranking


# --- the plan as the simulator will see it --------------------------------------------------
class _Flow(NamedTuple):  # not a frozen dataclass: a plan's flow is made thousands of times
    """What a step consumes and produces if every step succeeds in order."""

    consumed: str  # data format
    produced: str
    producer: int | None  # the index of the step whose output it consumes


@dataclass
class _Plan:
    """A plan being edited, with what the injectors need to know about it."""

    steps: list[PlanStep]
    task: Task
    registry: ToolRegistry
    stream: DrawStream
    # The latest flow and the steps it is of: the injectors ask again and again of the same
    # steps (each try of an edit is undone before the next).
    _flow_of: tuple[tuple[PlanStep, ...], list[_Flow]] | None = field(
        default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.parent_tools = tuple(s.tool for s in self.steps)
        parent = _parent(self)
        self.parent_steps = parent.steps
        self.deliverable = parent.deliverable
        self.fitting = parent.fitting
        self.depends = parent.depends
        self.values = parent.values
        self.parent_shown = parent.shown

    def depends_on(self, later: str, earlier: str) -> bool:
        return earlier in self.registry.dependencies(later, self.parent_tools)

    def flow(self) -> list[_Flow]:
        """Each step's data if every step succeeds in order, by the rules the simulator runs
        (`ToolSpec.reads_input`, `ToolRegistry.default_source`, `ToolSpec.produced_format`).
        Read only: the list is shared by the calls made while the steps stay the same."""
        steps = tuple(self.steps)
        if self._flow_of is not None and self._flow_of[0] == steps:
            return self._flow_of[1]
        flow = self._flow(steps)
        self._flow_of = (steps, flow)
        return flow

    def _flow(self, steps: Sequence[PlanStep]) -> list[_Flow]:
        data_format = str(self.task.inputs.get("format", "json"))
        latest_by_tool: dict[str, int] = {}
        flow: list[_Flow] = []
        for i, step in enumerate(steps):
            spec = self.registry.get(step.tool)
            if spec is None:
                flow.append(_Flow(data_format, data_format, None))
                continue
            producer: int | None = None
            source = step.arguments.get("source")
            if isinstance(source, str) and source.split("#")[0] in latest_by_tool:
                producer = latest_by_tool[source.split("#")[0]]
            elif spec.reads_input:
                tool = self.registry.default_source(spec.name, self.task.required_tools,
                                                    latest_by_tool)
                producer = None if tool is None else latest_by_tool[tool]
            consumed = data_format if producer is None else flow[producer].produced
            flow.append(_Flow(consumed, spec.produced_format(step.arguments, consumed),
                              producer))
            latest_by_tool[spec.name] = i
        return flow

    def formats(self) -> list[tuple[str, str]]:
        return [(f.consumed, f.produced) for f in self.flow()]

    def lineage(self, index: int, flow: Sequence[_Flow]) -> set[str]:
        """The tools whose outputs the step's output descends from (itself included)."""
        tools: set[str] = set()
        at: int | None = index
        while at is not None and self.steps[at].tool not in tools:
            tools.add(self.steps[at].tool)
            at = flow[at].producer
        return tools

    def feeds_deliverable(self, index: int) -> bool:
        """Whether the last step's output descends from the step's (the output step is
        last in every plan a flaw starts from)."""
        return self.steps[index].tool in self.lineage(len(self.steps) - 1, self.flow())

    def refused_formats(self) -> set[int]:
        """The steps whose `format` does not match the data they would consume."""
        return {i for i, (step, data) in enumerate(zip(self.steps, self.flow(), strict=True))
                if step.arguments.get("format", data.consumed) != data.consumed}

    def skipped(self, refused: set[int]) -> list[str]:
        """The task steps the deliverable's data should go through (as in the parent plan)
        but no longer does; empty also when the steps whose `format` does not match their
        data are no longer the `refused` ones (another call would be refused, or a refused
        edit made before would now be accepted: its data changed with this one)."""
        if self.refused_formats() != refused:
            return []
        return sorted(self.deliverable - self.lineage(len(self.steps) - 1, self.flow()))

    def arguments_for(self, spec: ToolSpec, index: int) -> dict[str, Any] | None:
        """A genuine-looking call of a swapped-in tool: its required parameters (as a
        genuine step shows), each with a value of the task (its own, else another input's
        value of the same kind); None when the task has no fitting value for one."""
        args = self._task_values(spec)
        if args is None:
            return None
        if "format" in spec.required_parameters:
            args["format"] = self.formats()[index][0] if index < len(self.steps) else "json"
        return dict(sorted(args.items()))

    def marks(self) -> Marks:
        """What the plan shows of a genuine plan's look: the values of the Inputs block it
        leaves unused (a skipped guarded or a declined step leaves one unused in about two
        genuine plans in five), whether a step takes an option the text words, and what every
        genuine plan shows: no step before one it depends on, a step that reads a source, a
        last step that delivers."""
        return Marks(*(read(self) for read in _MARK_READERS))

    def keeps(self, marks: Marks, which: Sequence[int] = range(len(Marks._fields))) -> bool:
        """Whether the plan still shows what `marks` (a parent's) showed, of the fields at
        the indices `which` (all by default): no value left unused that it used, and each
        mark it showed. Only the fields asked are read, cheapest first, up to the first
        lost: the injectors ask this of every candidate edit."""
        for i in _CHEAP_FIRST:
            if i not in which:
                continue
            if i == 0:
                if not self._unused() <= marks.unused:
                    return False
            elif marks[i] and not _MARK_READERS[i](self):
                return False
        return True

    def _unused(self) -> frozenset[str]:
        """The keys of the Inputs block whose value no step takes (the data's format aside)."""
        shown = self.parent_shown
        used = {k for s in self.steps for k, v in s.arguments.items()
                if k in shown and str(v) == shown[k]}
        return frozenset(k for k in shown if k not in used)

    def _worded(self) -> bool:
        return any(k in WORDED_PARAMS for s in self.steps for k in s.arguments)

    def _ordered(self) -> bool:
        """No step before one it depends on (in the task)."""
        later: set[str] = set()
        for step in reversed(self.steps):
            if step.tool in self.registry and not self._depends(step.tool).isdisjoint(later):
                return False
            later.add(step.tool)
        return True

    def _depends(self, tool: str) -> frozenset[str]:
        """What `tool` depends on in the task, memoised for the task's flaws."""
        found = self.depends.get(tool)
        if found is None:
            found = self.depends[tool] = frozenset(
                self.registry.dependencies(tool, self.task.required_tools))
        return found

    def _reads_source(self) -> bool:
        return any((spec := self.registry.get(s.tool)) is not None and spec.role is Role.SOURCE
                   for s in self.steps)

    def _delivers_last(self) -> bool:
        last = self.registry.get(self.steps[-1].tool) if self.steps else None
        return last is not None and last.produces_output

    def _sensible(self) -> bool:
        return makes_sense([s.tool for s in self.steps], self.registry)

    def takes_shown(self, tool: str) -> bool:
        """Whether a swapped-in `tool` takes a value of the Inputs block (not the data's
        `format`): one the task shows, or another input's of its kind."""
        spec = self.registry[tool]
        return any(p not in ("format", "source") and p not in WORDED_PARAMS
                   for p in spec.required_parameters)

    def fits(self, tool: str) -> bool:
        """Whether the task has a value for each of the tool's required parameters (those
        `arguments_for` takes from the task), memoised for the task's flaws."""
        fits = self.fitting.get(tool)
        if fits is None:
            spec = self.registry.get(tool)
            fits = self.fitting[tool] = spec is not None and self._task_values(spec) is not None
        return fits

    def _task_values(self, spec: ToolSpec) -> dict[str, Any] | None:
        """The task's values for the tool's required parameters but `format` (which the data
        decides), or None when one has none: a dict of the caller's own, memoised for the
        task's flaws (each candidate swap asks again)."""
        if spec.name not in self.values:
            self.values[spec.name] = self._read_task_values(spec)
        found = self.values[spec.name]
        return None if found is None else dict(found)

    def _read_task_values(self, spec: ToolSpec) -> dict[str, Any] | None:
        props = _properties(spec)
        values: dict[str, Any] = {}
        for param in spec.required_parameters:
            if param == "format":
                continue
            value = task_value(param, props.get(param, {}), self.task.inputs)
            if value is None and param in WORDED_PARAMS and self.task.worded:
                # An option the task does not have: one its text could have worded.
                value = DrawStream("option", self.task.id, spec.name, param).choice(
                    sorted(PHRASES[param]))
            if value is None:
                return None
            values[param] = value
        return values

    def swap(self, index: int, tool: str) -> PlanStep:
        """Put `tool` at `index` with task values for its own arguments."""
        old = self.steps[index]
        spec = self.registry[tool]
        arguments = self.arguments_for(spec, index)
        assert arguments is not None, f"{tool} does not fit the task"
        self.steps[index] = PlanStep(tool=tool, purpose="", arguments=arguments,
                                     on_failure=old.on_failure)
        return old

    def permutation(self, indices: Sequence[int]) -> list[int]:
        """The indices in a drawn order (Fisher-Yates on the plan's stream)."""
        out = list(indices)
        for i in range(len(out) - 1, 0, -1):
            j = self.stream.randint(0, i)
            out[i], out[j] = out[j], out[i]
        return out


# `Marks`' fields as `_Plan` reads them, in field order, and the order `keeps` reads them in
# (cheapest first).
_MARK_READERS: tuple[Callable[[_Plan], Any], ...] = (
    _Plan._unused, _Plan._worded, _Plan._ordered, _Plan._reads_source, _Plan._delivers_last,
    _Plan._sensible)
_CHEAP_FIRST = (4, 3, 1, 0, 2, 5)


@dataclass(frozen=True)
class _Parent:
    """What holds for every flaw injected into a task's parent plan."""

    registry: ToolRegistry
    steps: tuple[PlanStep, ...]
    # The task steps the parent plan's deliverable descends from (what scoring.py wants).
    deliverable: frozenset[str]
    fitting: dict[str, bool]  # which tools the task's values fit (`_Plan.fits`), as asked
    depends: dict[str, frozenset[str]]  # what a tool depends on in the task, as asked
    values: dict[str, dict[str, Any] | None]  # `_Plan._task_values` by tool, as asked
    # The Inputs block's values as a step's argument shows them (the data's format aside).
    shown: dict[str, str]


# Per task, for as long as the task lives: its seven flaws start from the same parent plan.
_PARENTS: weakref.WeakKeyDictionary[Task, _Parent] = weakref.WeakKeyDictionary()


def _parent(plan: _Plan) -> _Parent:
    """The facts of the plan's parent (the plan as it starts), memoised per task."""
    steps = tuple(plan.steps)
    found = _PARENTS.get(plan.task)
    if found is not None and found.registry is plan.registry and found.steps == steps:
        return found
    deliverable = frozenset(plan.lineage(len(steps) - 1, plan.flow())
                            & set(plan.task.required_tools)) if steps else frozenset()
    shown = {k: str(v) for k, v in plan.task.shown_inputs.items() if k != "format"}
    parent = _PARENTS[plan.task] = _Parent(plan.registry, steps, deliverable, {}, {}, {},
                                              shown)
    return parent


def _properties(spec: ToolSpec) -> Mapping[str, Any]:
    props: Mapping[str, Any] = spec.parameters.get("properties", {})
    return props


# Parameters whose values are alike in kind: a swapped-in tool that needs one the task lacks
# takes another input's value of its kind (a job named like the task's queue), never a
# placeholder (a step carrying `https://api.example.com` would mark itself as injected).
_KINDS: tuple[frozenset[str], ...] = (
    frozenset({"url", "target_url"}),
    frozenset({"path", "destination", "directory"}),
    frozenset({"route_to", "service", "queue_name", "job_name", "recipient", "key", "event",
               "target_schema", "message"}),
    frozenset({"condition", "expression"}),
)


def task_value(param: str, schema: Mapping[str, Any], inputs: Mapping[str, Any]) -> Any:
    """The task's value for `param`, else another input's value of the same kind that the
    schema allows (deterministic: inputs in key order), else None."""
    if param in inputs:
        return inputs[param]
    kind = next((k for k in _KINDS if param in k), frozenset())
    for key in sorted(inputs):
        value = inputs[key]
        if key == "format" or not (
                key in kind or ("enum" in schema and key not in LOCATION_PARAMS)):
            continue
        if "enum" in schema and value not in schema["enum"]:
            continue
        if schema.get("type") == "integer" and not isinstance(value, int):
            continue
        if "pattern" in schema and not re.match(schema["pattern"], str(value)):
            continue
        return value
    if schema.get("type") == "integer" and "enum" not in schema:
        found = [v for k, v in sorted(inputs.items()) if isinstance(v, int)
                 and not isinstance(v, bool)]
        return found[0] if found else None
    return None


# --- the seven injectors -------------------------------------------------------------------------
Change = dict[str, Any]  # one entry of a flaw record's `changes`
Injector = Callable[[_Plan, int], list[Change]]


def _sequence_disorder(plan: _Plan, count: int) -> list[Change]:
    """Move a task step past task steps the text orders otherwise, up to `count` times:
    moves that break no dependency (two branches, two deliverables, two sources, a side
    step: an order only the text fixes, which the order condition scores), so no rule over
    the registry's dependencies or the roles' levels tells the flawed plan from a genuine one
    whose text orders them so (genuine plans keep the text's drawn order of such steps).
    Only a plan without any such move has one dependent step go before what it depends on
    (capped there: a second would mark it the more)."""
    steps, changes = plan.steps, list[Change]()
    for _ in range(count):
        pairs = _free_moves(plan)
        if not pairs and not changes:
            pairs = [(i, j) for j in range(len(steps)) for i in range(j)
                     if plan.depends_on(steps[j].tool, steps[i].tool)]
            if not pairs and len(steps) >= 2:
                pairs = [(0, len(steps) - 1)]  # no dependency at all: bring the last first
        if not pairs:
            break
        # Moves that leave a sensible flow sensible first (a branch out of a reader's order,
        # an event before any work, would mark the plan: core/flow_sense.py).
        sensible = [p for p in pairs if _move_keeps_sense(plan, *p)]
        if changes and not sensible:
            break  # a second move that marks the plan would only mark it the more
        pairs = sensible or pairs
        i, j = plan.stream.choice(pairs)
        step = steps.pop(j)
        steps.insert(i, step)
        changes.append({"kind": "moved", "tool": step.tool, "from": j, "to": i,
                        **({"before": steps[i + 1].tool} if i < j
                           else {"after": steps[i - 1].tool})})
    return changes


def _move_keeps_sense(plan: _Plan, i: int, j: int) -> bool:
    """Whether moving step j to position i keeps the plan's `Marks.sensible` (or it had
    none)."""
    before = plan.marks().sensible
    steps = plan.steps
    steps.insert(i, steps.pop(j))
    after = plan.marks().sensible
    steps.insert(j, steps.pop(i))
    return after or not before


def _free_moves(plan: _Plan) -> list[tuple[int, int]]:
    """The moves (step j to position i) that take a task step past task steps the text
    orders otherwise and break nothing a surface reads: neither the moved step nor a step it
    passes depends on the other, it passes no step of another level (utilities aside), and
    the plan's last step still delivers."""
    steps, registry = plan.steps, plan.registry
    required = plan.task.required_tools

    def deps(tool: str) -> set[str]:
        return (set(registry.dependencies(tool, required))
                | set(registry.dependencies(tool, plan.parent_tools)))

    moves: list[tuple[int, int]] = []
    for j, moved in enumerate(steps):
        spec = registry.get(moved.tool)
        if spec is None or moved.tool not in required:
            continue
        for direction in (-1, 1):
            i = j + direction
            while 0 <= i < len(steps):
                passed = registry.get(steps[i].tool)
                if passed is None or steps[i].tool in deps(moved.tool) \
                        or moved.tool in deps(steps[i].tool) or (
                        spec.role is not Role.UTILITY and passed.role is not Role.UTILITY
                        and passed.level != spec.level):
                    break
                # (past a step the text orders the other way: never a move back)
                if steps[i].tool in required and direction * (
                        required.index(steps[i].tool) - required.index(moved.tool)) > 0:
                    moves.append((i, j))
                i += direction
    # The last step still delivers, as in every genuine plan (a side step never goes last).
    last = len(steps) - 1

    def delivers(index: int) -> bool:
        spec = registry.get(steps[index].tool)
        return spec is not None and spec.produces_output

    return [(i, j) for i, j in moves
            if delivers(j if i == last else last - 1 if j == last else last)]


def _missing_step(plan: _Plan, count: int) -> list[Change]:
    """Drop steps the task needs, keeping at least one step. A step whose going leaves the
    plan as a genuine one looks (every shown value still used, an option the text words
    still taken: `_Plan.marks`; a guarded step the text skips leaves the same gap) is
    dropped first."""
    steps, changes = plan.steps, list[Change]()
    origin = list(range(len(steps)))
    needed = [i for i, s in enumerate(steps) if s.tool in plan.task.required_tools]
    drawn = plan.permutation(needed or origin)
    marks = plan.marks()
    for _ in range(count):
        if changes and len(steps) <= 1:
            break
        left = [i for i in drawn if i in origin]
        if not left:
            break

        def keeps(original: int, which: Sequence[int] = range(len(marks))) -> bool:
            at = origin.index(original)
            step = steps.pop(at)
            kept = plan.keeps(marks, which)
            steps.insert(at, step)
            return kept

        original = next((i for i in left if keeps(i)), None)
        if original is None:
            if changes:
                break  # one drop that marks itself would be the plan's tell
            # A value left unused, as genuine plans often show, never a mark none shows;
            # an option the text words kept where it can (most genuine plans take one).
            worded = (*HARD_MARKS, 1)
            original = next((i for i in left if keeps(i, worded)),
                            next((i for i in left if keeps(i, HARD_MARKS)), left[0]))
        at = origin.index(original)
        step = steps.pop(at)
        origin.pop(at)
        changes.append({"kind": "removed", "tool": step.tool, "index": original})
    return changes


def _redundant_operations(plan: _Plan, count: int) -> list[Change]:
    """Add operations the task does not need and that hurt when run (issue 50: the paper's
    unnecessary operation, not a verbatim copy). In order, as many as the severity asks:
    1. a step the text names but declines (a guarded step whose condition does not hold, a
       step stated under a condition the data do not meet), at the place the text names it:
       a source read too, a branch the data should not take, a deliverable the text turned
       down (its data or its side effect make the deliverable not the task's);
    2. a second run of a step that acts outside the data, to a destination of the same form
       the task never names (a post, write or notification nobody asked for);
    3. only where neither is left, a verbatim copy of a step (the paper's repeat)."""
    steps, changes = plan.steps, list[Change]()
    origin: list[int | None] = list(range(len(steps)))  # None marks an added step

    def insert(at: int, step: PlanStep, change: Change) -> None:
        steps.insert(at, step)
        origin.insert(at, None)
        changes.append(change)

    for tool in _declined_steps(plan):
        if len(changes) >= count:
            return changes
        at = _stated_place(plan, tool)
        arguments = plan.arguments_for(plan.registry[tool], at)
        if arguments is not None:
            insert(at, PlanStep(tool, "", arguments, _near(steps, at).on_failure),
                   {"kind": "inserted", "tool": tool, "at": at, "arguments": arguments,
                    "declined": True})
    acting = [i for i, s in enumerate(steps)
              if origin[i] is not None and plan.registry[s.tool].acts_outside]
    for i in sorted(acting, reverse=True):  # the deliverable's step first
        if len(changes) >= count:
            return changes
        step = steps[i]
        target = next((k for k in _TARGETS if isinstance(step.arguments.get(k), str)), None)
        new = _sibling(str(step.arguments[target]), plan.stream) if target else None
        if target is None or new is None:
            continue
        arguments = dict(sorted({**step.arguments, target: new}.items()))
        insert(i + 1, PlanStep(step.tool, "", arguments, _near(steps, i + 1).on_failure),
               {"kind": "inserted", "tool": step.tool, "at": i + 1, "arguments": arguments,
                "repeats": i, "parameter": target, "old": step.arguments[target],
                "new": new})
    drawn = plan.permutation(range(len(plan.parent_steps)))
    for original in (drawn * count)[:count - len(changes)]:
        at = origin.index(original) + 1
        insert(at, steps[at - 1], {"kind": "duplicated", "tool": steps[at - 1].tool,
                                   "index": original, "at": at})
    return changes


def _near(steps: Sequence[PlanStep], at: int) -> PlanStep:
    """The step an added step at `at` stands beside (whose contingency it takes)."""
    return steps[min(at, len(steps) - 1)]


# The parameters naming where a step that acts outside the data sends it.
_TARGETS = ("target_url", "destination", "recipient", "route_to", "queue_name", "job_name")


def _declined_steps(plan: _Plan) -> list[str]:
    """Steps the text names but the task does not run, in the text's order: tools outside
    the plan's closure whose own values (none a step of the plan takes) the Inputs block
    shows and the text states (a declined step, or a guarded one whose condition fails);
    never a side step (a log or a cache run for nothing costs a turn, nothing more)."""
    task, registry = plan.task, plan.registry
    closure = registry.closure(task.required_tools)
    taken = {p for t in closure for p in registry[t].required_parameters}
    found: list[tuple[int, str]] = []
    for spec in registry:
        own = [p for p in spec.required_parameters if p not in ("format", "source")]
        if (spec.name in closure or spec.role is Role.UTILITY or not own
                or any(p in taken or p not in task.inputs for p in own)):
            continue
        shown = [str(task.inputs[p]) for p in own if p not in WORDED_PARAMS]
        spots = [task.description.find(v) for v in shown]
        if shown and all(at >= 0 for at in spots):
            found.append((min(spots), spec.name))
    return [tool for _, tool in sorted(found)]


def _stated_place(plan: _Plan, tool: str) -> int:
    """Where the text names `tool` among the plan's steps: before the first step whose
    values it states later, and never after the last step (the deliverable's)."""
    text, registry = plan.task.description, plan.registry

    def spot(name: str, arguments: Mapping[str, Any]) -> int:
        spots = [text.find(str(v)) for k, v in arguments.items()
                 if k not in FLOW_PARAMS and text.find(str(v)) >= 0]
        return min(spots) if spots else -1

    own = spot(tool, {p: plan.task.inputs[p] for p in registry[tool].required_parameters
                      if p in plan.task.inputs})
    for i, step in enumerate(plan.steps[:-1]):
        if spot(step.tool, step.arguments) > own:
            return i
    return len(plan.steps) - 1


def _tool_misuse(plan: _Plan, count: int) -> list[Change]:
    """Swap steps for similar tools that do something else (a different operation) and that
    the task's values fit (a step needing values the task lacks would give itself away)."""
    steps, changes = plan.steps, list[Change]()
    # Tools that take none of the values shown first (the options they take, the text would
    # word), and swaps that leave the plan as a genuine one looks (`_Plan.marks`): no shown
    # value left unused, an option the text words still taken.
    marks = plan.marks()
    for keep in (True, False):
        for i in plan.permutation(range(len(steps))):
            if len(changes) >= count or (not keep and changes):
                break
            if any(c["index"] == i for c in changes):
                continue
            in_plan = [s.tool for s in steps]
            candidates = sorted(
                (t for t in similar_tools(plan.registry, steps[i].tool, other_function=True,
                                          exclude=in_plan)[:SIMILAR_WINDOW] if plan.fits(t)),
                key=plan.takes_shown)
            if keep:
                candidates = [t for t in candidates if _swap_keeps(plan, i, t, marks)]
            if not candidates:
                continue
            old = plan.swap(i, plan.stream.choice(candidates[:_TOP_CANDIDATES]))
            changes.append({"kind": "replaced", "index": i, "tool": old.tool,
                            "new_tool": steps[i].tool, "arguments": dict(steps[i].arguments)})
    return changes


def _swap_keeps(plan: _Plan, index: int, tool: str, marks: Marks) -> bool:
    """Whether `tool` at `index` (with the task's values) leaves the plan's `marks`."""
    old = plan.swap(index, tool)
    kept = plan.keeps(marks)
    plan.steps[index] = old
    return kept


def _semantic_drift(plan: _Plan, count: int) -> list[Change]:
    """Keep a prefix; from then on each tool is a neighbour of the one before (compounding),
    up to the step before the deliverable's (the plan still delivers, from data that drifted
    off the task), or where no step there drifts, to the plan's end. Where the neighbours run
    out before that end, a later start is tried, and where no start up to the end drifts at
    all, an earlier one drifts `count` steps; each try draws from the flaw's stream afresh,
    so it depends on its start alone and a severity never drifts fewer steps than a lighter
    one."""
    n = len(plan.steps)
    best: tuple[list[PlanStep], list[Change]] = (plan.steps, [])
    # First drifts that leave the plan as a genuine one looks (`_Plan.marks`).
    for keep, end in ((True, n - 1), (True, n), (False, n - 1), (False, n)):
        if end >= 2 and not best[1]:
            best = _drift_to(plan, count, end, keep)
    plan.steps[:] = best[0]
    return best[1]


def _drift_to(plan: _Plan, count: int, n: int, keep: bool
              ) -> tuple[list[PlanStep], list[Change]]:
    """The best drift of `_semantic_drift` that ends by step `n` (exclusive), untried on
    the plan itself."""
    def drift(start: int, stop: int) -> tuple[list[PlanStep], list[Change]]:
        trial = replace(plan, steps=list(plan.steps), stream=plan.stream.restarted())
        return trial.steps, _drift_from(trial, start, stop, keep)

    first = max(n - count, min(1, n - 1))
    best: tuple[list[PlanStep], list[Change]] = (plan.steps, [])
    for start in range(first, n):
        tried = drift(start, n)
        if len(tried[1]) > len(best[1]):
            best = tried
        if start + len(tried[1]) == n:  # drifted to the end: no later start drifts more
            break
    for start in range(first - 1, min(1, n - 1) - 1, -1) if not best[1] else ():
        best = drift(start, start + count)
        if best[1]:
            break
    return best


def _drift_from(plan: _Plan, start: int, stop: int, keep: bool = False) -> list[Change]:
    """Drift steps start..stop-1, each a neighbour of the one before; stops where none fits
    (with `keep`, none that leaves the plan's `_Plan.marks`)."""
    steps, changes = plan.steps, list[Change]()
    used = set(plan.parent_tools)
    previous = steps[start - 1].tool if start > 0 else steps[0].tool
    marks = plan.marks()
    for i in range(start, stop):
        candidates = sorted((t for t in similar_tools(plan.registry, previous, exclude=used)
                             [:SIMILAR_WINDOW] if plan.fits(t)), key=plan.takes_shown)
        if keep:
            candidates = [t for t in candidates if _swap_keeps(plan, i, t, marks)]
        if not candidates:
            break
        new = plan.stream.choice(candidates[:_TOP_CANDIDATES])
        old = plan.swap(i, new)
        used.add(new)
        changes.append({"kind": "drifted", "index": i, "tool": old.tool, "new_tool": new,
                        "neighbour_of": previous, "arguments": dict(steps[i].arguments)})
        previous = new
    return changes


def _parameter_error(plan: _Plan, count: int) -> list[Change]:
    """Put a wrong value in one parameter of up to `count` steps: another value of an option
    the text states in words (`_misread`, accepted: the step is not the task's), as many as
    the plan has. A plan without any gets the older edits: the first refused when run (a
    value that breaks the tool's schema, or a location the task does not have), the others
    accepted, making the wrong deliverable (another function, a near-miss destination)."""
    order = plan.permutation(range(len(plan.steps)))
    # The options the text words, as many as the plan has (a wrong shown value would mark
    # itself against the Inputs block); only a plan without any takes shown values.
    changes = _take(plan, count, order, _misread)
    return changes or _refused_then_accepted(plan, count, order, _corrupt, either_first=True)


def _take(plan: _Plan, count: int, order: Sequence[int],
          edit: Callable[[_Plan, int], Change | None]) -> list[Change]:
    """Up to `count` edits, one a step, tried in `order` (each edit changes the plan)."""
    changes: list[Change] = []
    for i in order:
        if len(changes) >= count:
            break
        change = edit(plan, i)
        if change is not None:
            changes.append(change)
    return changes


def _misread(plan: _Plan, index: int) -> Change | None:
    """Another value for an option of step `index` that the task states in words
    (core/wording.py), where the step is one the task asks for: accepted when run, and the
    step is not the task's (scoring.py: a call with deviations does another step). Neither
    the Inputs block nor any other value shown has the option, so only a reader of the text
    against the plan catches it."""
    step = plan.steps[index]
    spec = plan.registry.get(step.tool)
    if spec is None or step.tool not in plan.task.required_tools:
        return None
    worded = [p for p in sorted(step.arguments) if p in plan.task.worded]
    if not worded:
        return None
    param = plan.stream.choice(worded)
    old = step.arguments[param]
    new = _wrong_value(param, _properties(spec)[param], old, plan.task.inputs, True,
                       plan.stream)
    if new is None or new == old:
        return None
    plan.steps[index] = replace(step, arguments=dict(sorted({**step.arguments,
                                                             param: new}.items())))
    return {"kind": "parameter", "index": index, "tool": step.tool, "parameter": param,
            "old": old, "new": new, "violates": "deliverable", "accepted": True,
            "worded": True}


Edit = Callable[[_Plan, int, bool], "Change | None"]


def _refused_then_accepted(
    plan: _Plan, count: int, order: Sequence[int], edit: Edit, *, either_first: bool
) -> list[Change]:
    """`count` edits on distinct steps in `order`: the first refused when run, the others
    accepted (each falls back to the other kind where none of its kind fits; the first only
    `either_first`). Where the light edit takes the only step an accepted edit fits, medium
    and severe draw their refused edit on another step: every medium and severe plan then
    carries an accepted wrong value (light stays as it is); where one step is the only
    place for either kind (a two-step task), they carry the accepted one alone."""
    parent = list(plan.steps)
    changes = _edits(plan, count, order, edit, either_first)
    if count > 1 and not any(c["accepted"] for c in changes):
        edited = list(plan.steps)
        for first in order:  # the refused edit on a step that leaves one for an accepted
            plan.steps[:] = parent
            tried = _edits(plan, count, order, edit, either_first, first=first)
            if any(c["accepted"] for c in tried) and not tried[0]["accepted"]:
                return tried
        plan.steps[:] = parent  # one step takes both kinds: the accepted edit wins
        accepted = [c for i in order if (c := edit(plan, i, True)) is not None][:count - 1]
        if accepted:
            return accepted
        plan.steps[:] = edited
    return changes


def _edits(
    plan: _Plan, count: int, order: Sequence[int], edit: Edit, either_first: bool,
    first: int | None = None,
) -> list[Change]:
    changes = list[Change]()
    for accepted in [False] + [True] * (count - 1):
        done = {c["index"] for c in changes}
        steps = [i for i in order if i not in done]
        if first is not None and not changes:
            steps = [first]
        change = next((c for i in steps if (c := edit(plan, i, accepted)) is not None), None)
        if change is None and first is not None and not changes:
            return []
        if change is None and (accepted or either_first):  # none of that kind: the other
            change = next((c for i in steps if (c := edit(plan, i, not accepted)) is not None),
                          None)
        if change is None:
            break
        changes.append(change)
    return changes


def _corrupt(plan: _Plan, index: int, accepted: bool) -> Change | None:
    """A wrong value in step `index`: refused at run time, or `accepted` (a task value that
    says what to make, swapped for a plausible other one)."""
    step = plan.steps[index]
    spec = plan.registry.get(step.tool)
    if spec is None:
        return None
    props = _properties(spec)
    inputs = plan.task.inputs
    bound = [p for p in sorted(step.arguments) if p in props and p not in FLOW_PARAMS
             and p in inputs]
    if accepted:
        if not plan.feeds_deliverable(index):
            return None  # a wrong value off the deliverable's lineage would change nothing
        pool = [p for p in bound if p not in LOCATION_PARAMS]
    else:
        pool = [p for p in bound if p in LOCATION_PARAMS]
    if not pool:
        return None
    param = plan.stream.choice(pool)
    old = step.arguments.get(param)
    new = _wrong_value(param, props[param], old, inputs, accepted, plan.stream)
    if new is None or new == old:
        return None
    arguments = dict(sorted({**step.arguments, param: new}.items()))
    schema_errors = plan.registry.argument_errors(spec.name, arguments)
    refused = bool(schema_errors) or (param in LOCATION_PARAMS and new != inputs.get(param))
    if accepted == refused:
        return None
    plan.steps[index] = replace(step, arguments=arguments)
    violates = "schema" if schema_errors else ("task_inputs" if not accepted else "deliverable")
    return {"kind": "parameter", "index": index, "tool": step.tool, "parameter": param,
            "old": old, "new": new, "violates": violates, "accepted": accepted}


def _wrong_value(
    param: str, schema: Mapping[str, Any], old: Any, inputs: Mapping[str, Any], accepted: bool,
    stream: DrawStream,
) -> Any:
    """A plausible wrong value, of the forms right values take (None: none plausible): another
    member of an enum, another of the integers tasks use, a sibling of a string the task
    generator could have made (another period, organisation, site, region or version: `_sibling`)
    or, refused, another input's value of the same kind (a URL where a path goes). Never a
    suffix nor a form the schema does not allow: a wrong value must not mark itself."""
    if "enum" in schema:
        others = [v for v in schema["enum"] if v != old]
        return stream.choice(others) if accepted and others else None
    kind = schema.get("type")
    if kind == "integer":
        if isinstance(old, int):
            return stream.choice([v for v in (7, 12, 14, 30, 90) if v != old])
        return None
    if not isinstance(old, str) or not old:
        return None
    if not accepted:
        other = [v for k, v in sorted(inputs.items()) if k in LOCATION_PARAMS and k != param
                 and isinstance(v, str) and v != old
                 and re.match(schema.get("pattern", ""), v)]
        if other and stream.random() < 0.5:
            return stream.choice(other)
    sibling = _sibling(old, stream)
    if sibling is not None:
        return sibling
    # A value of another task field of the same kind (a queue named like the job).
    # else of any other text field (a title that names the task's word).
    kind_of = next((k for k in _KINDS if param in k), frozenset())
    fields = [v for k, v in sorted(inputs.items()) if k != param and k != "format"
              and isinstance(v, str) and v != old and re.match(schema.get("pattern", ""), v)]
    alike = [v for k, v in sorted(inputs.items()) if k in kind_of and v in fields]
    return stream.choice(alike or fields) if fields else None


# The generators' interchangeable parts (solver/generate.py and solver/flows.py write task
# values from them; tests/solver/test_flows.py holds these pools to theirs): a wrong value
# swaps one for another, so it reads like a value of another task of either set.
_SIBLINGS: tuple[tuple[str, ...], ...] = (
    ("q1", "q2", "q3", "q4", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
     "oct", "nov", "dec", "w07", "w19", "w33", "w48"),
    ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell", "soylent",
     "cyberdyne", "aperture", "massive", "vandelay", "wonka", "oscorp", "pied-piper", "dunder",
     "gringotts", "monarch", "nakatomi", "virtucon", "wernham", "zorg", "duff"),
    ("berlin", "lyon", "osaka", "austin", "leeds", "porto", "quebec", "pune", "perth", "oslo",
     "lima", "cork", "turin", "graz", "ghent", "malmo"),
    ("eu-west", "us-east", "ap-south"),
    ("gateway", "identity", "sso", "vault", "iam"),
    ("summary", "report", "clean", "export", "digest", "extract"),
    ("v1", "v2", "v3", "v4"),
    ("2022", "2023", "2024", "2025", "2026", "2027"),
)
_PARTS = tuple((re.compile(rf"(?<![A-Za-z0-9]){re.escape(m)}(?![A-Za-z0-9])"), pool)
               for pool in _SIBLINGS for m in pool)
_SWAPPED_OPERATORS = {" - ": " + ", " + ": " - ", " * ": " / ", " / ": " * ", " > ": " < ",
                      " < ": " > ", " >= ": " <= ", " <= ": " >= ", " == ": " != "}


def _sibling(value: str, stream: DrawStream) -> str | None:
    """Another value of the same form: an expression with the opposite operator, else one
    interchangeable part swapped for another of its kind (None: the value has none)."""
    for operator, opposite in _SWAPPED_OPERATORS.items():
        if operator in value:
            return value.replace(operator, opposite, 1)
    spots = [(m.start(), m.end(), pool) for part, pool in _PARTS
             for m in part.finditer(value)]
    if not spots:
        return None
    start, end, pool = stream.choice(spots)
    new = stream.choice([p for p in pool if p != value[start:end]])
    return value[:start] + new + value[end:]


def _logical_inconsistency(plan: _Plan, count: int) -> list[Change]:
    """Make steps consume what they should not: an earlier output that exists but skips a
    step the data must go through (a `source` naming it, with its format: accepted, and the
    deliverable is wrong), on as many steps as the plan has. A plan without such a skip gets
    the older edits: the first consumes what its predecessors do not produce (a `format` no
    earlier step has, else a `source` no earlier step produces: refused when run), the others
    skip. Where the data has one path (a source, then the output step), a writer's
    destination names another format than its data's instead (accepted, wrong deliverable);
    an aggregator or notifier there has no accepted data-flow edit (its one task value is
    parameter_error's) and keeps the refused one."""
    steps = plan.steps
    takes_input = [i for i, s in enumerate(steps)
                   if s.tool in plan.registry
                   and {"format", "source"} & set(_properties(plan.registry[s.tool]))]
    eligible = [i for i in takes_input if i > 0] or takes_input
    # Steps that show a `format` first (a wrong one there changes a value, not the keys), and
    # among them those whose data is no longer the task's raw data (the wrong format is then
    # the raw one, a value the task itself shows).
    raw = str(plan.task.inputs.get("format", "json"))
    flow = plan.flow()
    order = sorted(plan.permutation(eligible), key=lambda i: (
        flow[i].consumed == raw, "format" not in steps[i].arguments))
    parent = list(steps)
    # Skips first, as many as the plan has: a `source` naming an earlier step is what genuine
    # steps show, and a format no step consumes would mark itself against the Inputs'.
    changes = _take(plan, count, order, lambda plan, i: _inconsistent(plan, i, True))
    if changes:
        return changes
    changes = _refused_then_accepted(plan, count, order, _inconsistent, either_first=False)
    if count > 1 and not any(c["accepted"] for c in changes):
        # One data path (a source, then the output step): no earlier output to skip to. A
        # writer then files its data under another format's name instead (accepted, and the
        # deliverable is not the one asked for).
        steps[:] = parent
        changes = _refused_then_accepted(plan, count, order, _misfiled_or_inconsistent,
                                         either_first=False)
    return changes


def _inconsistent(plan: _Plan, i: int, accepted: bool) -> Change | None:
    steps = plan.steps
    step, spec = steps[i], plan.registry[steps[i].tool]
    flow = plan.flow()
    props = _properties(spec)
    if accepted:
        if "source" not in props:
            return None
        # An earlier output that exists, read with its format, such that the deliverable's
        # data no longer goes through a step it must (tried on the plan: the flow decides).
        skipping: list[tuple[int, dict[str, Any], list[str]]] = []
        refused = plan.refused_formats()
        for k in range(i):
            if steps[k].tool == step.tool or k == flow[i].producer:
                continue
            changed: dict[str, Any] = {"source": steps[k].tool}  # its latest output
            if "format" in step.arguments or "format" in spec.required_parameters:
                changed["format"] = flow[k].produced
            arguments = dict(sorted({**step.arguments, **changed}.items()))
            steps[i] = replace(step, arguments=arguments)
            skips = plan.skipped(refused)
            steps[i] = step
            if skips and _skips_alone(plan, i, arguments):
                skipping.append((k, arguments, skips))
        if not skipping:
            return None
        k, arguments, skips = plan.stream.choice(skipping)
        steps[i] = replace(step, arguments=arguments)
        return {"kind": "source", "index": i, "tool": step.tool, "parameter": "source",
                "old": step.arguments.get("source"), "new": arguments["source"],
                "arguments": arguments, "skips": skips, "accepted": True}
    raw = str(plan.task.inputs.get("format", "json"))
    shown_format = step.arguments.get("format")
    if shown_format == raw and flow[i].consumed == raw:
        # It reads the task's raw data, as its format says: it names an earlier output of
        # another format instead (the format no longer fits what it reads: refused).
        others = [k for k in range(i) if steps[k].tool != step.tool
                  and k != flow[i].producer and flow[k].produced != raw]
        if others and "source" in props:
            k = plan.stream.choice(others)
            steps[i] = replace(step, arguments=dict(sorted(
                {**step.arguments, "source": steps[k].tool}.items())))
            return {"kind": "source", "index": i, "tool": step.tool, "parameter": "source",
                    "old": step.arguments.get("source"), "new": steps[k].tool,
                    "consumes": flow[k].produced, "format": raw, "accepted": False}
    # The task's own data format where the step reads data made from it (the slip of a
    # planner who forgot the parse), else a format the task shows elsewhere, else any other.
    shown = {raw, *(f for fl in flow for f in (fl.consumed, fl.produced))}
    wrong_formats = ([raw] if raw != flow[i].consumed else sorted(shown - {flow[i].consumed})
                     or [f for f in DATA_FORMATS if f != flow[i].consumed])
    kinds = [k for k in ("format", "source") if k in props]
    if not kinds or ("format" not in kinds and any(
            "format" in _properties(plan.registry[s.tool]) for s in steps[1:]
            if s.tool in plan.registry)):
        return None  # a step that takes a `format` takes the refused edit
    # A wrong `format` first: a `source` naming a step that has made nothing yet marks
    # itself (genuine plans only name earlier steps).
    kind = "format" if "format" in kinds else "source"
    if kind == "format":
        new: str = plan.stream.choice(wrong_formats)
        detail: dict[str, Any] = {"consumes": flow[i].consumed}
    else:
        later = [s.tool for s in steps[i + 1:] if s.tool != step.tool]
        outside = [t for t in similar_tools(plan.registry, step.tool)
                   if t not in plan.parent_tools][:_TOP_CANDIDATES]
        # A tool's name, as genuine steps name their source: one that has made nothing yet.
        new = plan.stream.choice(later or outside)
        detail = {"produced_by_then": [s.tool for s in steps[:i]]}
    old = step.arguments.get(kind)
    steps[i] = replace(step, arguments=dict(sorted({**step.arguments, kind: new}.items())))
    return {"kind": kind, "index": i, "tool": step.tool, "parameter": kind,
            "old": old, "new": new, **detail, "accepted": False}


def _skips_alone(plan: _Plan, i: int, arguments: dict[str, Any]) -> bool:
    """Whether step `i` with `arguments`, the one edit on the parent plan, still takes the
    deliverable's data past a step it must go through: a path it skips only behind another
    edit's refused step would spoil nothing once a reader mends that step."""
    current = list(plan.steps)
    plan.steps[:] = plan.parent_steps
    refused = plan.refused_formats()
    plan.steps[i] = replace(plan.steps[i], arguments=arguments)
    skips = plan.skipped(refused)
    plan.steps[:] = current
    return bool(skips)


def _misfiled_or_inconsistent(plan: _Plan, i: int, accepted: bool) -> Change | None:
    """Accepted: a destination named for another format than the data the step writes (the
    task's `/reports/x.csv` for csv data becomes `/reports/x.json`); refused: as
    `_inconsistent`."""
    if not accepted:
        return _inconsistent(plan, i, False)
    step = plan.steps[i]
    consumed = plan.flow()[i].consumed
    old = step.arguments.get("destination")
    suffix = f".{FILE_EXTENSIONS[consumed]}" if consumed in FILE_EXTENSIONS else None
    if not (suffix and isinstance(old, str) and old == plan.task.inputs.get("destination")
            and old.endswith(suffix) and plan.feeds_deliverable(i)):
        return None
    claimed = plan.stream.choice([f for f in DATA_FORMATS if f != consumed])
    new = old.removesuffix(suffix) + f".{FILE_EXTENSIONS[claimed]}"
    plan.steps[i] = replace(step, arguments=dict(sorted({**step.arguments,
                                                         "destination": new}.items())))
    return {"kind": "format", "index": i, "tool": step.tool, "parameter": "destination",
            "old": old, "new": new, "consumes": consumed, "names": claimed, "accepted": True}


def restated_flow(steps: Sequence[PlanStep], parent_tools: Sequence[str], task: Task,
                  registry: ToolRegistry) -> list[PlanStep]:
    """`steps` (edited from a plan of `parent_tools`) with their data flow restated as
    `inject_flaw` restates a structural flaw's (plan_audit.py replays records with it)."""
    plan = _Plan(list(steps), task, registry, DrawStream("restate", task.id))
    plan.parent_tools = tuple(parent_tools)
    _restate_flow(plan)
    return plan.steps


VALUE_FLAWS = frozenset({"parameter_error", "logical_inconsistency"})


def _restate_flow(plan: _Plan) -> None:
    """After steps moved, went or changed tool: each `source` that names no earlier step
    names what the step now reads (the simulator's default input), and each optional
    `format` the data it now consumes, as a genuine plan's do (`plan_extras.py`). So the
    flaw is the moved, missing or swapped step, not a dangling name that marks it."""
    registry, required = plan.registry, plan.task.required_tools
    latest: dict[str, int] = {}
    for i, step in enumerate(plan.steps):
        spec = registry.get(step.tool)
        if spec is None:
            continue
        source = step.arguments.get("source")
        # A swapped-in step, or one that moved past the data it reads, states its source
        # as the genuine steps do.
        swapped_in = (source is None and step.tool not in plan.parent_tools
                      and "source" in _properties(spec))
        unstated = (source is None and not swapped_in and spec.reads_input and latest
                    and "source" in _properties(spec))
        if (isinstance(source, str) and source not in latest) or swapped_in or unstated:
            arguments = {k: v for k, v in step.arguments.items() if k != "source"}
            producer = (registry.default_source(spec.name, required, latest)
                        if spec.reads_input else None)
            # (a swapped-in step names its producer where a genuine step would: a task step,
            # or another swapped-in step standing where one was)
            if producer is not None and (not swapped_in or producer in required
                                         or producer not in plan.parent_tools):
                arguments["source"] = producer
            plan.steps[i] = replace(step, arguments=dict(sorted(arguments.items())))
        latest[spec.name] = i
    explicit = plan.task.data_flow == "explicit"
    for i, (step, data) in enumerate(zip(list(plan.steps), plan.flow(), strict=True)):
        spec = registry.get(step.tool)
        if spec is None or "format" in spec.required_parameters:
            continue
        # Under the explicit data flow a genuine step names the format of data that are not
        # json wherever its tool takes one (plan_extras.py): so does a swapped-in step.
        unstated = (explicit and "format" not in step.arguments and data.consumed != "json"
                    and "format" in _properties(spec))
        if step.arguments.get("format", data.consumed) != data.consumed or unstated:
            plan.steps[i] = replace(step, arguments={**step.arguments, "format": data.consumed})


_INJECTORS: dict[str, Injector] = {
    "sequence_disorder": _sequence_disorder,
    "tool_misuse": _tool_misuse,
    "parameter_error": _parameter_error,
    "missing_step": _missing_step,
    "redundant_operations": _redundant_operations,
    "logical_inconsistency": _logical_inconsistency,
    "semantic_drift": _semantic_drift,
}
assert tuple(_INJECTORS) == FLAWS


def inject_flaw(
    flaw: str, severity: str, workflow: Workflow, task: Task,
    registry: ToolRegistry | None = None, *, candidate: int = 0,
) -> tuple[Workflow, dict[str, Any]]:
    """The flawed workflow and the record of what was injected (pure, deterministic). The
    flawed plan is worded by the renderer of every plan (`plan_text.shown_plan`), so only
    the tools and arguments the record lists tell it from its parent.

    `candidate` k draws from the stream keyed (task id, flaw, k): k = 0 is the one stream a
    set without choices uses (its key has no k, so its plans keep their bytes); the generator
    keeps, per (task, flaw, severity), the candidate shallow detectors find hardest to tell
    from genuine (solver/adversarial_filter.py), and the record names it when not 0."""
    if flaw not in _INJECTORS:
        raise ValueError(f"unknown flaw {flaw!r}; choose from {', '.join(FLAWS)}")
    if severity not in SEVERITY_CHANGES:
        raise ValueError(f"unknown severity {severity!r}; choose from {', '.join(SEVERITIES)}")
    registry = registry or default_registry()
    if candidate < 0:
        raise ValueError(f"a candidate index is 0 or more, got {candidate}")
    key = (task.id, flaw) if candidate == 0 else (task.id, flaw, candidate)
    plan = _Plan(list(workflow.steps), task, registry, DrawStream("flaw", *key))
    changes = _INJECTORS[flaw](plan, SEVERITY_CHANGES[severity]) if plan.steps else []
    if flaw not in VALUE_FLAWS:
        _restate_flow(plan)
    renamed = {c["tool"]: c["new_tool"] for c in changes if "new_tool" in c}
    # A computed Advice is computed again; another profile's (docs/FAULTS.md) is kept.
    advice = None if workflow.advice == plan_advice(workflow.steps) else workflow.advice
    flawed = shown_plan(Workflow(tuple(plan.steps), workflow.advice), task.required_tools,
                        registry, renamed=renamed, advice=advice)
    record = {"flaw": flaw, "severity": severity, "changes": changes}
    return flawed, record if candidate == 0 else {**record, "candidate": candidate}
