"""What a careful reader could tell from a flawed plan's surface: checks that no text feature
separates injected steps from genuine ones, and that a flawed prompt differs from the optimal
one only where its flaw record says (issue 13). Pure functions; the property tests
(tests/unit/test_plan_audit.py, a sample) and `bench/bench_plan_audit.py` (every task x flaw x
severity) run them.

- `surface_problems`: every step worded by the one renderer (`plan_text.step_purpose`, lower
  case), every tool a contingency or a prerequisite mark names is in the plan, the Advice
  speaks of prerequisites only when a step is marked, every argument value comes from the
  task (its inputs, a data format) or is a wrong value the record lists;
- `replay`: the parent plan with the record's changes applied, independently of the injectors:
  re-worded by `plan_text.shown_plan`, it must be the flawed plan itself;
- `plan_block_only`: the baseline and optimal user messages differ by the plan block alone;
- `spoiling_edits`: the record's accepted edits that, each alone on the parent plan run
  literally, leave the edited call unrefused but the deliverable wrong (the output condition,
  scoring.py): what only a reader of the plan against the task catches.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pytest_resilibench.core.flaws import VALUE_FLAWS, restated_flow
from pytest_resilibench.core.plan_extras import genuine_workflow
from pytest_resilibench.core.plan_text import (
    PREREQUISITE_MARK,
    plan_advice,
    shown_plan,
    step_purpose,
)
from pytest_resilibench.core.registry import DATA_FORMATS, ToolRegistry
from pytest_resilibench.core.scoring import deliverable_of, score_calls
from pytest_resilibench.core.simulator import EpisodeKey, Simulator
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.wording import WORDED_PARAMS
from pytest_resilibench.core.workflow import PlanStep, Workflow

__all__ = ["literal_run", "named_tools", "plan_block_only", "replay", "spoiling_edits",
           "surface_problems"]

_NAME = re.compile(r"\b[a-z]+_[a-z_]+\b")


def named_tools(text: str, registry: ToolRegistry) -> list[str]:
    """The registry tools a text names."""
    return [w for w in _NAME.findall(text) if w in registry]


def surface_problems(
    task: Task, plan: Workflow, record: Mapping[str, Any] | None, registry: ToolRegistry
) -> list[str]:
    """Every surface feature of `plan` that could mark a step as injected (empty: none)."""
    problems: list[str] = []
    tools = [s.tool for s in plan.steps]
    listed = {json_key(c.get("new")) for c in (record or {}).get("changes", ())}
    # The task's values and the genuine plan's own (its data flow and implied options,
    # plan_extras.py): what a genuine step may show.
    genuine = genuine_workflow(task, task.reference_workflow(), registry)
    task_values = {json_key(v) for v in task.inputs.values()} | {
        json_key(v) for s in genuine.steps for v in s.arguments.values()}
    for n, step in enumerate(plan.steps, 1):
        expected = step_purpose(step.tool, tools, task.required_tools, registry)
        if step.purpose != expected:
            problems.append(f"step {n}: purpose {step.purpose!r} is not the renderer's")
        if step.purpose[:1] != step.purpose[:1].lower():
            problems.append(f"step {n}: purpose starts in upper case")
        for name in named_tools(step.on_failure, registry):
            if name not in tools:
                problems.append(f"step {n}: its contingency names {name}, not in the plan")
        if step.purpose.startswith(PREREQUISITE_MARK):
            users = step.purpose.removeprefix(PREREQUISITE_MARK).split(":")[0].split(", ")
            problems += [f"step {n}: prerequisite of {u}, not in the plan"
                         for u in users if u not in tools]
        for param, value in step.arguments.items():
            key = json_key(value)
            if (param == "format" and value in DATA_FORMATS) or (
                    param == "source" and value in tools[:n - 1]) or (
                    param in WORDED_PARAMS and task.worded):
                continue  # (an option a task that words its options could have worded)
            if key not in task_values and key not in listed:
                problems.append(f"step {n}: {param}={value!r} comes from nowhere in the task")
    if plan.advice and plan.advice != plan_advice(plan.steps) and not plan.advice.startswith(
            "You have"):  # the realistic profile's own advice names no plan feature
        problems.append("the Advice is not computed from the plan as shown")
    if "prerequisite" in plan.advice.lower() and not any(
            s.purpose.startswith(PREREQUISITE_MARK) for s in plan.steps):
        problems.append("the Advice speaks of prerequisites, but no step is marked")
    return problems


def json_key(value: Any) -> str:
    """A hashable key of a JSON value."""
    return repr(value) if not isinstance(value, (dict, list)) else repr(sorted(str(value)))


def replay(
    parent: Workflow, record: Mapping[str, Any], task: Task, registry: ToolRegistry
) -> Workflow:
    """The parent plan with the record's changes applied, worded as every plan is."""
    steps: list[PlanStep] = list(parent.steps)
    origin: list[int | None] = list(range(len(steps)))
    removed: set[int] = set()
    renamed: dict[str, str] = {}
    for change in record["changes"]:
        kind = change["kind"]
        if kind == "moved":
            steps.insert(change["to"], steps.pop(change["from"]))
        elif kind == "removed":
            removed.add(change["index"])
        elif kind == "duplicated":
            at = origin.index(change["index"])
            steps.insert(change["at"], steps[at])
            origin.insert(change["at"], None)
        elif kind == "inserted":  # a step the task does not need (redundant_operations)
            near = steps[min(change["at"], len(steps) - 1)]
            steps.insert(change["at"], PlanStep(change["tool"], "", dict(change["arguments"]),
                                                near.on_failure))
            origin.insert(change["at"], None)
        elif kind in ("replaced", "drifted"):
            i = change["index"]
            steps[i] = PlanStep(change["new_tool"], "", dict(change["arguments"]),
                                steps[i].on_failure)
            renamed[change["tool"]] = change["new_tool"]
        else:  # parameter, format, source: one value, or the step's new arguments
            i = change["index"]
            arguments = dict(change.get("arguments") or
                             {**steps[i].arguments, change["parameter"]: change["new"]})
            steps[i] = PlanStep(steps[i].tool, steps[i].purpose, dict(sorted(arguments.items())),
                                steps[i].on_failure)
    if removed:
        steps = [s for s, i in zip(steps, origin, strict=True) if i not in removed]
    if record.get("flaw", "parameter_error") not in VALUE_FLAWS:
        steps = restated_flow(steps, parent.tools, task, registry)
    advice = None if parent.advice == plan_advice(parent.steps) else parent.advice
    return shown_plan(Workflow(tuple(steps), parent.advice), task.required_tools, registry,
                      renamed=renamed, advice=advice)


def plan_block_only(baseline: str, optimal: str, plan_block: str) -> bool:
    """Whether the optimal user message is the baseline one plus the plan block alone."""
    return optimal == baseline + "\n\n" + plan_block


# A literal run retries a step until it succeeds (a refusal is final: it cannot succeed).
_MAX_CALLS_PER_STEP = 50


def literal_run(task: Task, plan: Workflow, registry: ToolRegistry, seed: int = 0
                ) -> tuple[list[dict[str, Any]], list[int]]:
    """The calls of `plan` run literally (each step retried until it succeeds) and the
    indices of the steps the simulator refused (INVALID_INPUT)."""
    sim = Simulator(registry, EpisodeKey(seed, task.id), task_tools=task.required_tools,
                    inputs=task.inputs)
    calls: list[dict[str, Any]] = []
    refused: list[int] = []
    for index, step in enumerate(plan.steps):
        for _ in range(_MAX_CALLS_PER_STEP):
            result = sim.call(step.tool, dict(step.arguments))
            calls.append(result.to_json())
            if result.ok:
                break
            if result.deterministic:
                refused.append(index)
                break
    return calls, refused


def delivered(task: Task, calls: list[dict[str, Any]], registry: ToolRegistry) -> bool:
    """Whether the calls made the task's deliverable as asked (the output condition)."""
    return score_calls(calls, task.required_tools, completed=True, registry=registry,
                       deliverable=deliverable_of(task, registry)).conditions.output


def done_as_asked(task: Task, calls: list[dict[str, Any]], registry: ToolRegistry) -> bool:
    """Whether the calls made the task's deliverable as asked and did every step with the
    task's values (the output and coverage conditions)."""
    conditions = score_calls(calls, task.required_tools, completed=True, registry=registry,
                             deliverable=deliverable_of(task, registry)).conditions
    return conditions.output and conditions.coverage


def spoiling_edits(
    parent: Workflow, record: Mapping[str, Any], task: Task, registry: ToolRegistry
) -> list[Mapping[str, Any]]:
    """The record's accepted edits that, each alone on `parent` run literally, leave their
    call unrefused and the task not done as asked: the deliverable wrong, or a step done with
    another value than the task's (an option the text words: scoring.py counts no such
    success); `parent` itself is done as asked."""
    found = []
    for change in record["changes"]:
        if not change.get("accepted"):
            continue
        plan = replay(parent, {"changes": [change]}, task, registry)
        calls, refused = literal_run(task, plan, registry)
        if change["index"] not in refused and not done_as_asked(task, calls, registry):
            found.append(change)
    return found
