"""The seven plan flaws (SPEC §5): pure functions from a correct plan to a flawed one.

`inject_flaw(flaw, severity, workflow, task, registry)` returns the flawed workflow and a JSON-able
record of exactly what changed. The draws are keyed by (task id, flaw), never by the run seed, so
a task's flawed plan is fixed. The severity says how many changes to make (light 1, medium 2,
severe 3, capped by what the plan allows); changes are made one after another from the same draw
stream, so severity is monotone by construction.

"Similar tool" and "neighbour" come from the registry: same category, same role, same operation
and shared keywords score a candidate; ties break by name.

Record: `{"flaw", "severity", "changes": [...]}`, one change per edit, each with its `kind`
(moved, removed, duplicated, replaced, drifted, parameter, format, source), the `tool` and where:
`index` is the step's position in the parent plan (moved: `from`/`to` positions at the time of the
move; duplicated: the copy lands `at`), plus the old and new tool or value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from pytest_resilibench.registry import DATA_FORMATS, Role, ToolRegistry, ToolSpec, default_registry
from pytest_resilibench.rng import DrawStream
from pytest_resilibench.tasks import Task
from pytest_resilibench.workflow import PlanStep, Workflow

__all__ = [
    "FLAWS",
    "SEVERITIES",
    "SEVERITY_CHANGES",
    "inject_flaw",
    "similar_tools",
    "tool_purpose",
    "with_purposes",
]

FLAWS = (
    "sequence_disorder",
    "tool_misuse",
    "parameter_error",
    "missing_step",
    "redundant_operations",
    "logical_inconsistency",
    "semantic_drift",
)
SEVERITIES = ("light", "medium", "severe")
SEVERITY_CHANGES = {"light": 1, "medium": 2, "severe": 3}

# Parameters that carry data flow rather than a task-bound value.
_FLOW_PARAMS = ("source", "format")
_PLACEHOLDER_PURPOSE = re.compile(r"^\s*(step\s*\d+)?\s*$", re.IGNORECASE)
# How many of the most similar tools a swap draws from (variety without absurd swaps).
_TOP_CANDIDATES = 3


# --- purposes and similarity --------------------------------------------------------------------
def tool_purpose(spec: ToolSpec) -> str:
    """A short purpose for a step: the first clause of the tool's description."""
    return _first_clause(spec.description)


@lru_cache(maxsize=256)
def _first_clause(text: str) -> str:
    return re.split(r"[,:;.]", text, maxsplit=1)[0].strip()


def with_purposes(workflow: Workflow, registry: ToolRegistry) -> Workflow:
    """The workflow with placeholder purposes ("step 3", "") replaced by the tools' purposes,
    so that every step of a plan, flawed or not, reads alike (a "step 3" shown second would
    give a reordering away)."""
    steps = tuple(
        PlanStep(s.tool, tool_purpose(registry[s.tool]), s.arguments, s.on_failure)
        if s.tool in registry and _PLACEHOLDER_PURPOSE.match(s.purpose) else s
        for s in workflow.steps
    )
    return Workflow(steps, workflow.advice)


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


# Rankings per registry (by identity; the registry is kept alive with its entry).
_RANKINGS: dict[int, tuple[ToolRegistry, dict[tuple[str, bool], tuple[str, ...]]]] = {}


def _ranking(registry: ToolRegistry, name: str, other_function: bool) -> tuple[str, ...]:
    _, rankings = _RANKINGS.setdefault(id(registry), (registry, {}))
    ranking = rankings.get((name, other_function))
    if ranking is None:
        tool = registry[name]
        candidates = [t for t in registry if t.name != name
                      and not (other_function and t.operation == tool.operation)]
        candidates.sort(key=lambda t: (-_similarity(tool, t), t.name))
        ranking = rankings[(name, other_function)] = tuple(t.name for t in candidates)
    return ranking


# --- the plan as the simulator will see it --------------------------------------------------
@dataclass
class _Plan:
    """A plan being edited, with what the injectors need to know about it."""

    steps: list[PlanStep]
    task: Task
    registry: ToolRegistry
    stream: DrawStream

    def __post_init__(self) -> None:
        self.parent_tools = tuple(s.tool for s in self.steps)

    def depends_on(self, later: str, earlier: str) -> bool:
        return earlier in self.registry.dependencies(later, self.parent_tools)

    def formats(self) -> list[tuple[str, str]]:
        """(consumed, produced) data format of each step if every step succeeds in order,
        mirroring the simulator's default input (latest output of a dependency, else latest)."""
        data_format = str(self.task.inputs.get("format", "json"))
        latest_by_tool: dict[str, str] = {}
        latest: str | None = None
        flow = []
        for step in self.steps:
            spec = self.registry.get(step.tool)
            if spec is None:
                flow.append((data_format, data_format))
                continue
            consumed = data_format
            source = step.arguments.get("source")
            if isinstance(source, str) and source.split("#")[0] in latest_by_tool:
                consumed = latest_by_tool[source.split("#")[0]]
            elif spec.role is not Role.SOURCE and "source" in _properties(spec):
                deps = [d for d in self.registry.dependencies(spec.name, self.task.required_tools)
                        if d in latest_by_tool]
                consumed = latest_by_tool[deps[-1]] if deps else (latest or data_format)
            produced = _produced_format(spec, step.arguments, consumed)
            latest_by_tool[spec.name] = latest = produced
            flow.append((consumed, produced))
        return flow

    def arguments_for(self, spec: ToolSpec, index: int, old: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments that make a valid call of a swapped-in tool: task values where the task
        has them, the old step's values where they fit, schema defaults otherwise."""
        props = _properties(spec)
        args: dict[str, Any] = {}
        for param in spec.required_parameters:
            if param == "format":
                continue
            if param in self.task.inputs:
                args[param] = self.task.inputs[param]
            elif param in old:
                args[param] = old[param]
            else:
                args[param] = _default_value(param, props[param])
        if "format" in props and ("format" in spec.required_parameters or "format" in old):
            args["format"] = self.formats()[index][0] if index < len(self.steps) else "json"
        return dict(sorted(args.items()))

    def swap(self, index: int, tool: str) -> PlanStep:
        """Put `tool` at `index` with valid arguments of its own and its own purpose."""
        old = self.steps[index]
        spec = self.registry[tool]
        self.steps[index] = PlanStep(tool=tool, purpose=tool_purpose(spec), arguments={},
                                     on_failure=old.on_failure)
        self.steps[index] = replace(self.steps[index],
                                    arguments=self.arguments_for(spec, index, old.arguments))
        return old

    def permutation(self, indices: Sequence[int]) -> list[int]:
        """The indices in a drawn order (Fisher-Yates on the plan's stream)."""
        out = list(indices)
        for i in range(len(out) - 1, 0, -1):
            j = self.stream.randint(0, i)
            out[i], out[j] = out[j], out[i]
        return out


def _properties(spec: ToolSpec) -> Mapping[str, Any]:
    props: Mapping[str, Any] = spec.parameters.get("properties", {})
    return props


def _produced_format(spec: ToolSpec, arguments: Mapping[str, Any], consumed: str) -> str:
    if spec.output_format is None:
        return consumed
    if spec.output_format.startswith("param:"):
        return str(arguments.get(spec.output_format.removeprefix("param:"), consumed))
    return spec.output_format


_DEFAULT_STRINGS = {
    "url": "https://api.example.com/data",
    "target_url": "https://api.example.com/submit",
    "path": "data/input.csv",
    "destination": "output/result.json",
    "directory": "data",
    "route_to": "primary-service",
    "endpoint": "db://warehouse",
    "service": "data-api",
    "recipient": "ops-team@example.com",
    "queue_name": "jobs",
    "job_name": "workflow-job",
    "condition": "value > 0",
    "expression": "sum(value)",
    "target_schema": "standard",
    "message": "step completed",
    "key": "intermediate",
    "event": "step_completed",
    "group_by": "category",
}


def _default_value(param: str, schema: Mapping[str, Any]) -> Any:
    """A schema-valid, plausible value for a parameter the task does not fix."""
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    return _DEFAULT_STRINGS.get(param, param.replace("_", "-"))


# --- the seven injectors -------------------------------------------------------------------------
Change = dict[str, Any]  # one entry of a flaw record's `changes`
Injector = Callable[[_Plan, int], list[Change]]


def _sequence_disorder(plan: _Plan, count: int) -> list[Change]:
    """Move a dependent step before one of its prerequisites, `count` times."""
    steps, changes = plan.steps, list[Change]()
    for _ in range(count):
        pairs = [(i, j) for j in range(len(steps)) for i in range(j)
                 if plan.depends_on(steps[j].tool, steps[i].tool)]
        if not pairs:
            if changes or len(steps) < 2:
                break
            pairs = [(0, len(steps) - 1)]  # no dependency at all: still bring the last first
        i, j = plan.stream.choice(pairs)
        step = steps.pop(j)
        steps.insert(i, step)
        changes.append({"kind": "moved", "tool": step.tool, "from": j, "to": i,
                        "before": steps[i + 1].tool})
    return changes


def _missing_step(plan: _Plan, count: int) -> list[Change]:
    """Drop steps the task needs, keeping at least one step."""
    steps, changes = plan.steps, list[Change]()
    origin = list(range(len(steps)))
    needed = [i for i, s in enumerate(steps) if s.tool in plan.task.required_tools]
    for original in plan.permutation(needed or origin)[:count]:
        if changes and len(steps) <= 1:
            break
        at = origin.index(original)
        step = steps.pop(at)
        origin.pop(at)
        changes.append({"kind": "removed", "tool": step.tool, "index": original})
    return changes


def _redundant_operations(plan: _Plan, count: int) -> list[Change]:
    """Repeat steps: a copy right after the original or later in the plan."""
    steps, changes = plan.steps, list[Change]()
    origin: list[int | None] = list(range(len(steps)))  # None marks an inserted copy
    for original in (plan.permutation(range(len(steps))) * count)[:count]:
        at = origin.index(original) + 1
        at = plan.stream.randint(at, min(at + 1, len(steps)))
        steps.insert(at, steps[origin.index(original)])
        origin.insert(at, None)
        changes.append({"kind": "duplicated", "tool": steps[at].tool, "index": original,
                        "at": at})
    return changes


def _tool_misuse(plan: _Plan, count: int) -> list[Change]:
    """Swap steps for similar tools that do something else (a different operation)."""
    steps, changes = plan.steps, list[Change]()
    for i in plan.permutation(range(len(steps)))[:count]:
        in_plan = [s.tool for s in steps]
        candidates = similar_tools(plan.registry, steps[i].tool, other_function=True,
                                   exclude=in_plan)[:_TOP_CANDIDATES]
        if not candidates:
            continue
        old = plan.swap(i, plan.stream.choice(candidates))
        changes.append({"kind": "replaced", "index": i, "tool": old.tool,
                        "new_tool": steps[i].tool})
    return changes


def _semantic_drift(plan: _Plan, count: int) -> list[Change]:
    """Keep a prefix; from then on each tool is a neighbour of the one before (compounding)."""
    steps, changes = plan.steps, list[Change]()
    start = max(len(steps) - count, min(1, len(steps) - 1))
    used = set(plan.parent_tools)
    previous = steps[start - 1].tool if start > 0 else steps[0].tool
    for i in range(start, len(steps)):
        candidates = similar_tools(plan.registry, previous, exclude=used)
        if not candidates:
            break
        new = plan.stream.choice(candidates[:_TOP_CANDIDATES])
        old = plan.swap(i, new)
        used.add(new)
        changes.append({"kind": "drifted", "index": i, "tool": old.tool, "new_tool": new,
                        "neighbour_of": previous})
        previous = new
    return changes


def _parameter_error(plan: _Plan, count: int) -> list[Change]:
    """Put a wrong value in one parameter of `count` steps: one that breaks the tool's schema
    or contradicts the task's inputs (the simulator answers INVALID_INPUT either way)."""
    steps, changes = plan.steps, list[Change]()
    for i in plan.permutation(range(len(steps))):
        if len(changes) == count:
            break
        change = _corrupt(plan, i)
        if change is not None:
            changes.append(change)
    return changes


def _corrupt(plan: _Plan, index: int) -> Change | None:
    step = plan.steps[index]
    spec = plan.registry.get(step.tool)
    if spec is None:
        return None
    props = _properties(spec)
    present = [p for p in sorted(step.arguments) if p not in _FLOW_PARAMS and p in props]
    # Prefer a value the task fixes (a wrong path reads as a slip); else add a bad option.
    bound = [p for p in present if p in plan.task.inputs]
    absent = [p for p in sorted(props) if p not in _FLOW_PARAMS and p not in step.arguments]
    pool = bound or present or absent
    if not pool:
        return None
    param = plan.stream.choice(pool)
    old = step.arguments.get(param)
    new = _wrong_value(param, props[param], old, param in plan.task.inputs, plan.stream)
    arguments = dict(sorted({**step.arguments, param: new}.items()))
    schema_errors = plan.registry.argument_errors(spec.name, arguments)
    contradicts = param in plan.task.inputs and new != plan.task.inputs[param]
    if not schema_errors and not contradicts:
        return None
    plan.steps[index] = replace(step, arguments=arguments)
    return {"kind": "parameter", "index": index, "tool": step.tool, "parameter": param,
            "old": old, "new": new, "violates": "schema" if schema_errors else "task_inputs"}


_NOT_IN_ENUM = ("average", "auto", "full", "standard", "all", "median")
_SUFFIXES = ("_old", "_backup", "_v0", "_tmp")


def _wrong_value(
    param: str, schema: Mapping[str, Any], old: Any, bound: bool, stream: DrawStream
) -> Any:
    """A plausible-looking wrong value: another allowed value where the task fixes one (it
    contradicts the task), else a value outside the schema."""
    if "enum" in schema:
        others = [v for v in schema["enum"] if v != old]
        if bound and others:
            return stream.choice(others)
        return stream.choice([v for v in _NOT_IN_ENUM if v not in schema["enum"]])
    kind = schema.get("type")
    if kind == "integer":
        hi = schema.get("maximum")
        return hi + stream.randint(1, 10) if hi is not None else -stream.randint(1, 10)
    if kind == "boolean":
        return stream.choice(("yes", "no"))
    if kind == "array":
        return stream.choice(("all", "*"))
    if bound and isinstance(old, str) and old:
        return _mutate_string(old, stream)
    if "pattern" in schema:
        return "ftp://" + _DEFAULT_STRINGS.get(param, param).split("://")[-1]
    return ""  # breaks minLength: an empty value


_SWAPPED_OPERATORS = {" - ": " + ", " + ": " - ", " * ": " / ", " / ": " * ", " > ": " < ",
                      " < ": " > ", " >= ": " <= ", " <= ": " >= ", " == ": " != "}


def _mutate_string(value: str, stream: DrawStream) -> str:
    """A near miss of a task value: the opposite operator, another number, or a suffix
    before the extension."""
    for operator, opposite in _SWAPPED_OPERATORS.items():
        if operator in value:
            return value.replace(operator, opposite, 1)
    number = re.search(r"\d+", value)
    if number and "/" not in value and "." not in value:
        return value[: number.start()] + number.group() + "0" + value[number.end():]
    suffix = stream.choice(_SUFFIXES)
    if "@" in value:
        local, _, domain = value.partition("@")
        return f"{local}{suffix}@{domain}"
    head, slash, last = value.rpartition("/")
    stem, dot, ext = last.rpartition(".")
    last = f"{stem}{suffix}.{ext}" if dot and stem else f"{last}{suffix}"
    return f"{head}{slash}{last}"


def _logical_inconsistency(plan: _Plan, count: int) -> list[Change]:
    """Make steps consume what their predecessors do not produce: a `format` no earlier step
    has, or a `source` ref that no earlier step produces."""
    steps, changes = plan.steps, list[Change]()
    takes_input = [i for i, s in enumerate(steps)
                   if s.tool in plan.registry
                   and {"format", "source"} & set(_properties(plan.registry[s.tool]))]
    eligible = [i for i in takes_input if i > 0] or takes_input
    for i in plan.permutation(eligible)[:count]:
        step, spec = steps[i], plan.registry[steps[i].tool]
        flow = plan.formats()
        seen = {str(plan.task.inputs.get("format", "json"))}
        seen.update(f for pair in flow[: i + 1] for f in pair)
        wrong_formats = [f for f in DATA_FORMATS if f not in seen]
        kinds = [k for k in ("format", "source") if k in _properties(spec)]
        if not wrong_formats and "format" in kinds:
            kinds.remove("format")
        if not kinds:
            continue
        kind = plan.stream.choice(kinds)
        if kind == "format":
            new: str = plan.stream.choice(wrong_formats)
            detail: dict[str, Any] = {"consumes": flow[i][0]}
        else:
            later = [s.tool for s in steps[i + 1:] if s.tool != step.tool]
            outside = [t for t in similar_tools(plan.registry, step.tool)
                       if t not in plan.parent_tools][:_TOP_CANDIDATES]
            new = f"{plan.stream.choice(later or outside)}#1"
            detail = {"produced_by_then": [f"{s.tool}#1" for s in steps[:i]]}
        old = step.arguments.get(kind)
        steps[i] = replace(step, arguments=dict(sorted({**step.arguments, kind: new}.items())))
        changes.append({"kind": kind, "index": i, "tool": step.tool, "parameter": kind,
                        "old": old, "new": new, **detail})
    return changes


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
    registry: ToolRegistry | None = None,
) -> tuple[Workflow, dict[str, Any]]:
    """The flawed workflow and the record of what was injected (pure, deterministic)."""
    if flaw not in _INJECTORS:
        raise ValueError(f"unknown flaw {flaw!r}; choose from {', '.join(FLAWS)}")
    if severity not in SEVERITY_CHANGES:
        raise ValueError(f"unknown severity {severity!r}; choose from {', '.join(SEVERITIES)}")
    registry = registry or default_registry()
    workflow = with_purposes(workflow, registry)
    plan = _Plan(list(workflow.steps), task, registry, DrawStream("flaw", task.id, flaw))
    changes = _INJECTORS[flaw](plan, SEVERITY_CHANGES[severity]) if plan.steps else []
    flawed = Workflow(steps=tuple(plan.steps), advice=workflow.advice)
    return flawed, {"flaw": flaw, "severity": severity, "changes": changes}
