"""The genuine plan's own arguments beyond the task's Inputs (docs/BENCHMARK.md: Prompt
variants, issue 34).

A plan that only ever repeats the Inputs verbatim gives a flaw away on its surface: any key
outside the Inputs, any value that is not an Inputs value, marks an injected edit. So the
reference plan states what a careful planner would: where each step reads its data from (the
`source` it consumes: an intermediate output, named by its tool), the `format` of that data,
and options the task implies (the `content_type` of the data posted, the `channel` a
recipient's address calls for, the HTTP `method` of a fetch, the file `encoding`).

Every extra is exactly what the simulator does anyway when the step runs in the plan's order
(the data flow of `ToolRegistry.default_source`, the format that data has), so it is accepted
and changes no outcome under the inferred data flow (the paper's set): a plan copier scores
the same with or without them. Under the explicit data flow (the default set, base/names.py
`DataFlow`) the `source` and `format` are what make the step read the right data: a genuine
plan names its format wherever the tool takes one and the data are not json, and a copier
that drops them reads the latest output as json (tests/unit/test_arguments_matter.py).
Which optional extras a step shows is a deterministic draw per (task, step), so plans
differ in form as genuine plans written by people do. A pure function of the task and its
reference workflow: it works for any task set, with no fixture regenerated.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.registry import ToolRegistry
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.workflow import PlanStep, Workflow

__all__ = ["CONTENT_TYPES", "genuine_workflow", "implied_options"]

# The content type of posted data in each format the poster's schema names.
CONTENT_TYPES = {"json": "application/json", "csv": "text/csv", "xml": "application/xml"}
# How often a step shows an optional extra it could show (the data's `format`, an implied
# option). Its `source` it always shows: the data flow is the plan's to state.
_SHOWN = 0.6


def implied_options(tool: str, consumed: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Option values the task implies for a step of `tool` consuming data in `consumed`
    format: each the value the step would run with anyway (its default, or what the data
    or the task's values call for), never a value the task contradicts."""
    options: dict[str, Any] = {}
    if tool == "network_poster" and consumed in CONTENT_TYPES:
        options["content_type"] = CONTENT_TYPES[consumed]
    elif tool == "utility_notifier":
        recipient = str(inputs.get("recipient", ""))
        if recipient.startswith("#"):
            options["channel"] = "slack"
        elif "@" in recipient:
            options["channel"] = "email"
    elif tool == "network_fetcher":
        options["method"] = "GET"
    elif tool == "file_operations_reader" and consumed not in ("binary",):
        options["encoding"] = "utf-8"
    return options


# Per task, for as long as the task lives (every variant and every episode asks).
_GENUINE: weakref.WeakKeyDictionary[Task, tuple[ToolRegistry, Workflow, Workflow]] = (
    weakref.WeakKeyDictionary())


def genuine_workflow(task: Task, workflow: Workflow, registry: ToolRegistry) -> Workflow:
    """`workflow` (the task's reference plan) with each step's genuine extras added; a step's
    own arguments always win."""
    found = _GENUINE.get(task)
    if found is not None and found[0] is registry and found[1] is workflow:
        return found[2]
    required = task.required_tools
    explicit = task.data_flow == "explicit"
    data_format = str(task.inputs.get("format", "json"))
    latest: dict[str, int] = {}
    produced: dict[str, str] = {}
    steps: list[PlanStep] = []
    for i, step in enumerate(workflow.steps):
        spec = registry.get(step.tool)
        if spec is None:
            steps.append(step)
            continue
        props = spec.parameters.get("properties", {})
        draws = DrawStream("plan-extras", task.id, i)
        producer = (registry.default_source(spec.name, required, latest)
                    if spec.reads_input else None)
        consumed = data_format if producer is None else produced[producer]
        extras: dict[str, Any] = {}
        # Only a producer the task needs: a prerequisite the plan may go on without could
        # have made no output to name.
        settled = producer is None or producer in required
        if producer is not None and producer in required and "source" in props:
            extras["source"] = producer
        # Under the explicit data flow a step left without its format reads json
        # (simulator.py): a genuine plan names it wherever its data are not json, and where
        # they are, as often as under the inferred flow (so its absence marks no edit). The
        # draw is made where it always was: the inferred flow's plans stay as they were.
        if settled and "format" in props and (draws.random() < _SHOWN
                                              or (explicit and consumed != "json")):
            extras["format"] = consumed
        for key, value in implied_options(spec.name, consumed, task.inputs).items():
            if key in props and key not in task.inputs and draws.random() < _SHOWN:
                extras[key] = value
        arguments = {**extras, **step.arguments}
        if extras and not registry.argument_errors(spec.name, arguments):
            step = PlanStep(step.tool, step.purpose, dict(sorted(arguments.items())),
                            step.on_failure)
        steps.append(step)
        produced[spec.name] = spec.produced_format(step.arguments, consumed)
        latest[spec.name] = i
    genuine = Workflow(tuple(steps), workflow.advice)
    _GENUINE[task] = (registry, workflow, genuine)
    return genuine
