"""The prompt variants (docs/BENCHMARK.md: Prompt variants) and their text and native renderings.

Ten variants: `baseline` (task, inputs, outputs, tools), `cot` (baseline + step-by-step reasoning),
`optimal` (baseline + the reference plan) and `flawed` x 7 (the same template with a flawed plan;
the flaw is never named or hinted). The system message is the same for every variant of a tool
mode, so providers can cache it; everything task-specific is in the user message. The rules a
model is scored by (which order counts, the completion signal, the turn budget, one tool per
step) are in the system message and the task text, so every variant is told them: a plan
variant adds the plan block and nothing else (docs/ARCHITECTURE.md, "What each variant adds").

The plan block is readable and machine-parseable, one step a line:
`1. data_processing_parser — Parse raw text — arguments: {"format": "csv"} — if it fails: retry`.
`parse_plan` and `parse_task_inputs` are its exact inverses: built-in agents read only what a
model sees.
"""

from __future__ import annotations

import json
import re
import weakref
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pytest_resilibench.base.jsontext import json_text
from pytest_resilibench.base.names import (
    COMPLETION_SIGNAL,
    FLAWS,
    SEVERITIES,
    TOOL_MODES,
    VARIANT_KINDS,
    DataFlow,
)
from pytest_resilibench.base.plainkey import is_flat
from pytest_resilibench.core.flaws import inject_flaw
from pytest_resilibench.core.plan_extras import genuine_workflow
from pytest_resilibench.core.plan_text import shown_plan
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.workflow import PlanStep, Workflow

__all__ = [
    "COMPLETION_SIGNAL",
    "TOOL_MODES",
    "Prompt",
    "Variant",
    "all_variants",
    "parse_plan",
    "parse_task_inputs",
    "plan_for",
    "render_plan",
    "render_prompt",
]

PLAN_HEADER = "Execution plan:"
_PAPER_TURNS = 10  # the budget the task constraints name (the paper profile's)
INPUTS_LABEL = "Inputs: "
_SEP = " — "


@dataclass(frozen=True)
class Variant:
    """A prompt variant. `flawed` needs a flaw; its severity defaults to medium."""

    kind: str
    flaw: str | None = None
    severity: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in VARIANT_KINDS:
            raise ValueError(f"unknown variant {self.kind!r}; "
                             f"choose from {', '.join(VARIANT_KINDS)}")
        if self.kind == "flawed":
            if self.flaw not in FLAWS:
                raise ValueError(f"a flawed variant needs a flaw from {', '.join(FLAWS)}, "
                                 f"got {self.flaw!r}")
            if self.severity is None:
                object.__setattr__(self, "severity", "medium")
            if self.severity not in SEVERITIES:
                raise ValueError(f"unknown severity {self.severity!r}; "
                                 f"choose from {', '.join(SEVERITIES)}")
        elif self.flaw is not None or self.severity is not None:
            raise ValueError(f"variant {self.kind!r} takes no flaw or severity")

    @property
    def label(self) -> str:
        return f"flawed-{self.flaw}" if self.kind == "flawed" else self.kind

    @classmethod
    def from_label(cls, label: str, *, severity: str = "medium") -> Variant:
        """The variant of a label (`optimal`, `flawed-missing_step`, ...)."""
        kind, _, flaw = label.partition("-")
        if kind == "flawed":
            return cls(kind, flaw, severity)
        if flaw:
            raise ValueError(f"unknown variant label {label!r}")
        return cls(kind)


def all_variants(severity: str = "medium") -> list[Variant]:
    """The ten variants: baseline, cot, optimal and the seven flawed ones."""
    return [Variant("baseline"), Variant("cot"), Variant("optimal"),
            *(Variant("flawed", flaw, severity) for flaw in FLAWS)]


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: OpenAI chat `messages`, the `tools` list in native mode, and the
    plan shown (with what was injected into it, for flawed variants)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    plan: Workflow | None
    flaw_record: dict[str, Any] | None


# --- plans ---------------------------------------------------------------------------------
def plan_for(
    task: Task, variant: Variant, registry: ToolRegistry | None = None,
    faults: str = "paper", *, candidate: int | None = None,
) -> tuple[Workflow | None, dict[str, Any] | None]:
    """The plan a variant shows (None for baseline and cot) and the flaw record. Under the
    realistic fault profile the plan is that profile's optimal one, with its contingencies.
    A flawed plan is the task set's chosen candidate injection (`Task.flaw_choices`, made
    against the paper profile's parent: the realistic profile takes candidate 0), or
    `candidate` where given (the generator's filter weighs them)."""
    registry = registry or default_registry()
    if variant.kind in ("baseline", "cot"):
        return None, None
    derived = _derived(task, registry) if faults == "paper" else _realistic(task, registry)
    if variant.kind == "optimal":
        return derived.optimal, None
    assert variant.flaw is not None and variant.severity is not None
    if candidate is None:
        candidate = (task.flaw_choices.get(f"{variant.flaw}/{variant.severity}", 0)
                     if faults == "paper" else 0)
    flawed, record = inject_flaw(variant.flaw, variant.severity, derived.parent, task, registry,
                                 candidate=candidate)
    return _as_shown(flawed), record


@dataclass(frozen=True)
class _Derived:
    """What the prompts of a task derive from the task alone, whatever the variant."""

    registry: ToolRegistry
    header: str  # the user message's lines before the plan
    parent: Workflow  # the reference plan with purposes, which flaws are injected into
    optimal: Workflow  # the parent as shown


# Per task, for as long as the task lives (a run renders each under every variant).
_DERIVED: weakref.WeakKeyDictionary[Task, _Derived] = weakref.WeakKeyDictionary()


def _derived(task: Task, registry: ToolRegistry) -> _Derived:
    """Memoised per task (tasks are frozen; a run renders each under every variant)."""
    found = _DERIVED.get(task)
    if found is not None and found.registry is registry:
        return found
    reference = genuine_workflow(task, task.reference_workflow(), registry)
    parent = shown_plan(reference, task.required_tools, registry)
    derived = _DERIVED[task] = _Derived(registry, _header(task), parent, _as_shown(parent))
    return derived


_REALISTIC: weakref.WeakKeyDictionary[Task, _Derived] = weakref.WeakKeyDictionary()


def _realistic(task: Task, registry: ToolRegistry) -> _Derived:
    """`_derived` under the realistic fault profile (docs/FAULTS.md): the header names the
    profile's turn budget and the stand-ins the task lists; the parent plan is the profile's
    optimal plan (exact DP of `core/optimum/realistic.py`), whose steps say what to do on each
    event."""
    found = _REALISTIC.get(task)
    if found is not None and found.registry is registry:
        return found
    from pytest_resilibench.core.faults import EVENT_RULES, task_faults
    from pytest_resilibench.core.realistic_plans import parent_plan

    faults = task_faults(task, registry)
    header = _header(task, faults.max_turns) + "\n" + EVENT_RULES
    if faults.alternatives:
        header += "\nStand-ins (use one only when its step's tool is unavailable):\n" + \
            "\n".join(f"- {step}: {alt} with arguments {_json(dict(faults.arguments[alt]))}"
                      for step, alt in faults.alternatives.items())
    # Stored (the shipped sets), else solved once per structure and kept on disk.
    plan = parent_plan(task, registry)
    # The solver's Advice restates the profile's rules, which the header now gives every
    # variant: the plan's own Advice, as under the paper profile, explains its marks only.
    parent = shown_plan(plan, task.required_tools, registry)
    derived = _REALISTIC[task] = _Derived(registry, header, parent, _as_shown(parent))
    return derived


def _as_shown(workflow: Workflow) -> Workflow:
    """The workflow as the plan block shows it (one-line texts), so that `Prompt.plan` is
    exactly what `parse_plan` reads back."""
    return Workflow(
        steps=tuple(PlanStep(s.tool, _one_line(s.purpose), dict(s.arguments),
                             _one_line(s.on_failure)) for s in workflow.steps),
        advice=_one_line(workflow.advice),
    )


@lru_cache(maxsize=8192)  # purposes, contingencies and advice recur across every prompt
def _one_line(text: str) -> str:
    return " ".join(text.split())


# json.dumps(value, sort_keys=True, ensure_ascii=False), from an encoder built once
# (base/jsontext.py).
_json = json_text(sort_keys=True, ensure_ascii=False)


def render_plan(workflow: Workflow) -> str:
    """The plan block: a header, one numbered line per step, then the advice if any.
    Purposes and advice are shown on one line (runs of whitespace become one space)."""
    lines = [PLAN_HEADER]
    for n, step in enumerate(workflow.steps, 1):
        lines.append(
            f"{n}. {step.tool}{_SEP}{_one_line(step.purpose)}{_SEP}arguments: "
            f"{_json(dict(step.arguments))}{_SEP}if it fails: {_one_line(step.on_failure)}"
        )
    if workflow.advice.strip():
        lines.append(f"Advice: {_one_line(workflow.advice)}")
    return "\n".join(lines)


_STEP_LINE = re.compile(
    r"^(?P<n>\d+)\. (?P<tool>\S+) — (?P<purpose>.*?) — arguments: (?P<args>\{.*\})"
    r" — if it fails: (?P<on_failure>.*)$"
)


def parse_plan(text: str) -> Workflow | None:
    """The plan in a prompt's text (the inverse of `render_plan`), or None if it has none.
    Unreadable step lines end the plan rather than raise."""
    lines = text.split("\n")
    try:
        start = len(lines) - 1 - lines[::-1].index(PLAN_HEADER)
    except ValueError:
        return None
    steps: list[PlanStep] = []
    advice = ""
    for line in lines[start + 1:]:
        match = _STEP_LINE.match(line)
        if match is None:
            if line.startswith("Advice: "):
                advice = line.removeprefix("Advice: ")
            break
        arguments = _step_arguments(match["args"])
        if arguments is None:
            break
        steps.append(PlanStep(tool=match["tool"], purpose=match["purpose"],
                              arguments=arguments, on_failure=match["on_failure"]))
    return Workflow(steps=tuple(steps), advice=advice)


# A step's arguments by their text: plans repeat the same few (`{"format": "json"}`, `{}`),
# read back from every prompt that shows a plan. Bounded; a miss parses.
_ARGUMENTS: dict[str, dict[str, Any]] = {}
_ARGUMENTS_SIZE = 4096


def _step_arguments(text: str) -> dict[str, Any] | None:
    """The JSON object a step line shows (a dict of its own), or None when it is not one."""
    known = _ARGUMENTS.get(text)
    if known is not None:
        return dict(known)  # flat: a shallow copy is a copy
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(arguments, dict):
        return None
    if is_flat(arguments):
        if len(_ARGUMENTS) >= _ARGUMENTS_SIZE:
            _ARGUMENTS.clear()
        _ARGUMENTS[text] = dict(arguments)
    return arguments


def parse_task_inputs(text: str) -> dict[str, Any]:
    """The task's inputs shown in a prompt's text ({} when absent or unreadable)."""
    for line in text.split("\n"):
        if line.startswith(INPUTS_LABEL):
            try:
                value = json.loads(line.removeprefix(INPUTS_LABEL))
            except json.JSONDecodeError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


# --- messages -------------------------------------------------------------------------------
_RULES = (
    "You complete a task by calling tools, one tool call per turn; each call's result comes "
    "back in the next message.\n"
    "How a task is scored (the same for every task):\n"
    "- Each step the task describes needs its own tool: another tool does not count for a "
    "step unless the task lists it as a stand-in for that step.\n"
    "- Do the steps in the order the task describes them: a step counts from its first "
    "success with the values the task gives, and each step's first success must come after "
    "the first successes of the steps before it.\n"
    "- The deliverable counts only if it is made as the task asks (its destination, values "
    "and format) from data that went through every step, and delivered once: a second "
    "success of a step that writes, posts, notifies, routes, schedules or enqueues delivers it "
    "twice and spoils it (a retry after a failure is no repeat).\n"
    f"- When the task is done, reply with {COMPLETION_SIGNAL} (and no tool call); it is read "
    "only in a reply without a tool call.\n"
    f"- Every reply that is not {COMPLETION_SIGNAL} costs one turn; the task's constraints "
    "give the turn budget, and every result reports the turns left.\n"
    "Tools fail at random (timeouts, network errors, ...): retry a failed call, or fix its "
    "arguments. A tool whose input steps have not succeeded (or failed last) fails far more "
    "often.\n"
    "A tool's output has a `ref`; pass it as `source` to a later tool to consume that output "
    "(by default a tool consumes the latest output of the step it depends on).\n"
)
# The explicit data flow's rule (base/names.py `DataFlow`) in place of the default above: an
# agent is told it, here and in the parameters' own words (registry.py `EXPLICIT_FLOW`).
_INFERRED_DEFAULT = "(by default a tool consumes the latest output of the step it depends on)"
_EXPLICIT_DEFAULT = (
    "(or a tool's name, for its latest output). A call that names no `source` consumes the "
    "latest output of any tool, whichever tool made it, and a tool that takes `format` reads "
    "its input as json unless the call names the input's format")
assert _INFERRED_DEFAULT in _RULES
_TEXT_CALLS = (
    "To call a tool, reply with exactly one call in this form:\n"
    '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>\n'
    "Every argument goes inside `arguments`.\n"
)
_NATIVE_CALLS = "Call tools with the function-calling interface, one call per turn.\n"
_COT = (
    "Think step by step: before each tool call, briefly reason about what is done, what is "
    "left and which tool comes next, then make the call."
)


@lru_cache(maxsize=2 * len(TOOL_MODES))
def _default_system(tool_mode: str, data_flow: DataFlow) -> str:
    return _render_system(tool_mode, default_registry(), data_flow)


@lru_cache(maxsize=2)
def _default_tools(data_flow: DataFlow) -> tuple[dict[str, Any], ...]:
    """The native `tools` of the default registry, built once (0.5 ms a time): every prompt
    gets its own list of the same entries, which no one modifies."""
    return tuple(default_registry().to_openai(data_flow=data_flow))


def _render_system(tool_mode: str, registry: ToolRegistry, data_flow: DataFlow) -> str:
    rules = _RULES if data_flow == "inferred" else \
        _RULES.replace(_INFERRED_DEFAULT, _EXPLICIT_DEFAULT)
    if tool_mode == "native":
        return rules + _NATIVE_CALLS
    tools = "\n".join(
        f"- {spec.name}: {spec.description} Parameters: "
        f"{json.dumps(spec.shown_parameters(data_flow), sort_keys=True)}"
        for spec in registry
    )
    return rules + _TEXT_CALLS + "\nAvailable tools:\n" + tools


def _header(task: Task, max_turns: int = _PAPER_TURNS) -> str:
    parts = [
        f"Task: {_one_line(task.description)}",
        f"{INPUTS_LABEL}{_json(task.shown_inputs)}",
        f"Expected outputs: {_json(dict(task.expected_outputs))}",
    ]
    constraints = _with_budget(task.constraints, max_turns)
    if constraints:
        parts.append("Constraints:\n" + "\n".join(f"- {c}" for c in constraints))
    return "\n".join(parts)


_PAPER_BUDGET = f"finish within {_PAPER_TURNS} turns"  # every generated task's constraint


def _with_budget(constraints: tuple[str, ...], max_turns: int) -> tuple[str, ...]:
    """The constraints with the episode's turn budget in place of the paper's: a task's own
    budget constraint is restated, and one that names none is told a budget other than the
    paper's (at the paper's budget every prompt stays as it was: prompts are cached and
    hashed)."""
    if max_turns == _PAPER_TURNS:
        return constraints
    budget = f"finish within {max_turns} turn{'' if max_turns == 1 else 's'}"
    if _PAPER_BUDGET not in constraints:
        return (*constraints, budget)
    return tuple(budget if c == _PAPER_BUDGET else c for c in constraints)


def _user_message(
    task: Task, variant: Variant, plan: Workflow | None, registry: ToolRegistry | None = None,
    faults: str = "paper", max_turns: int = _PAPER_TURNS,
) -> str:
    registry = registry or default_registry()
    if faults != "paper":  # the profile's own budget
        header = _realistic(task, registry).header
    elif max_turns == _PAPER_TURNS:
        header = _derived(task, registry).header
    else:
        header = _header(task, max_turns)
    parts = [header]
    if plan is not None:
        parts.append("\n" + render_plan(plan))
    if variant.kind == "cot":
        parts.append("\n" + _COT)
    return "\n".join(parts)


def render_prompt(
    task: Task, variant: Variant, *, tool_mode: str = "text",
    registry: ToolRegistry | None = None, faults: str = "paper", max_turns: int = _PAPER_TURNS,
) -> Prompt:
    """The messages (and native tools) a model sees for a task under a variant (and a fault
    profile: `realistic` shows its budget, stand-ins and contingencies, docs/FAULTS.md). The
    task's constraints state the episode's turn budget, `max_turns` (under `realistic`, the
    profile's own, whatever `max_turns` says)."""
    if tool_mode not in TOOL_MODES:
        raise ValueError(f"unknown tool mode {tool_mode!r}; choose from {', '.join(TOOL_MODES)}")
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    registry = registry or default_registry()
    data_flow = task.flow_under(faults)
    if registry is default_registry():
        system = _default_system(tool_mode, data_flow)
    else:
        system = _render_system(tool_mode, registry, data_flow)
    plan, record = plan_for(task, variant, registry, faults)
    messages = [
        {"role": "system", "content": system},
        {"role": "user",
         "content": _user_message(task, variant, plan, registry, faults, max_turns)},
    ]
    tools = None
    if tool_mode == "native":
        tools = (list(_default_tools(data_flow)) if registry is default_registry()
                 else registry.to_openai(data_flow=data_flow))
    return Prompt(messages=messages, tools=tools, plan=plan, flaw_record=record)
