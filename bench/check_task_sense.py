"""Tasks a person would write (issue 50): counts, over a task set, the kinds of request no
person would make, and prints a seeded sample of tasks for a human read.

Each category is a rule over a task's required steps (in order), its reference plan and its
text. A task can fall in several. The target is 0 in every category (docs/BENCHMARK.md).

- data_before_data: a step that works on records (a processor, an aggregator, the helper's
  chores) comes before any step that brings records (a reader, scanner, fetcher or connector);
- monitor_only_source: a health monitor is the only source of the data the steps process;
- consumes_optimizer: a parser, transformer, filter or aggregator takes an optimiser's output
  as its records (the nearest step before it that makes data is the optimiser);
- event_before_work: a `..._processed` event is tracked before any step processed anything;
- destination_at_source: the text checks "the destination's" health at the source's URL;
- phantom_service: "the service's reply" is checked where no step talks to a service;
- unexplained_prerequisite: a prerequisite of the plan (credentials, a connection) that the
  text states in a sentence naming no step that needs it (a value of a step of the plan
  whose prerequisite it is);
- repeated_sentence: a sentence of the text shared with more than 1% of the set's tasks (the
  count is of tasks holding such a sentence; the most shared sentence and its count are shown).

Run:  python bench/check_task_sense.py [--task-set default] [--sample 30] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_resilibench.core.registry import Role, ToolRegistry, default_registry
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks

RECORD_SOURCES = frozenset({"file_operations_reader", "file_operations_scanner",
                            "network_fetcher", "integration_connector"})
RECORD_WORK = frozenset({"utility_helper"})  # a utility that works on the records
CONSUMERS = frozenset({"data_processing_parser", "data_processing_transformer",
                       "data_processing_filter", "data_processing_aggregator"})
SERVICE_TOOLS = frozenset({"network_fetcher", "network_poster", "network_monitor",
                           "network_router", "integration_connector"})


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _works_on_records(tool: str, registry: ToolRegistry) -> bool:
    spec = registry.get(tool)
    return tool in RECORD_WORK or (spec is not None and spec.role in (Role.PROCESSOR,
                                                                        Role.AGGREGATOR))


def data_before_data(task: Task, registry: ToolRegistry) -> bool:
    for tool in task.required_tools:
        if tool in RECORD_SOURCES:
            return False
        if _works_on_records(tool, registry):
            return True
    return False


def monitor_only_source(task: Task, registry: ToolRegistry) -> bool:
    tools = set(task.required_tools)
    return "network_monitor" in tools and not tools & RECORD_SOURCES and any(
        _works_on_records(t, registry) for t in tools)


def consumes_optimizer(task: Task, registry: ToolRegistry) -> bool:
    made: str | None = None  # the latest step that made data
    for tool in task.required_tools:
        spec = registry.get(tool)
        if tool in CONSUMERS and made == "computation_optimizer":
            return True
        if spec is not None and spec.role is not Role.UTILITY and spec.role is not Role.OUTPUT:
            made = tool
    return False


def event_before_work(task: Task, registry: ToolRegistry) -> bool:
    arguments = task.step_arguments.get("utility_tracker", {})
    if not str(arguments.get("event", "")).endswith("_processed"):
        return False
    for tool in task.required_tools:
        if tool == "utility_tracker":
            return True
        if _works_on_records(tool, registry):
            return False
    return False


def destination_at_source(task: Task, registry: ToolRegistry) -> bool:
    monitored = task.step_arguments.get("network_monitor", {}).get("url")
    fetched = task.step_arguments.get("network_fetcher", {}).get("url")
    return ("destination" in task.description and monitored is not None
            and monitored == fetched)


def phantom_service(task: Task, registry: ToolRegistry) -> bool:
    return ("service's reply" in task.description
            and not set(task.required_tools) & SERVICE_TOOLS)


def unexplained_prerequisite(task: Task, registry: ToolRegistry) -> bool:
    required = set(task.required_tools)
    steps = task.reference_workflow().steps
    for step in steps:
        if step.tool in required:
            continue
        # The values of the steps that need it (a prerequisite's prerequisite is needed by
        # the prerequisite, which the text names in its own sentence).
        needers = [s for s in steps if step.tool in registry[s.tool].prerequisites]
        values = [str(v) for s in needers for v in s.arguments.values()]
        for value in map(str, step.arguments.values()):
            holding = [s for s in _sentences(task.description) if value in s]
            if holding and not any(v in s for s in holding for v in values):
                return True
    return False


RULES: dict[str, Callable[[Task, ToolRegistry], bool]] = {
    "data_before_data": data_before_data,
    "monitor_only_source": monitor_only_source,
    "consumes_optimizer": consumes_optimizer,
    "event_before_work": event_before_work,
    "destination_at_source": destination_at_source,
    "phantom_service": phantom_service,
    "unexplained_prerequisite": unexplained_prerequisite,
}


def repeated_sentences(tasks: Sequence[Task]) -> tuple[int, str, int]:
    """Tasks holding a sentence shared with more than 1% of the set; the most shared."""
    held = Counter(s for t in tasks for s in set(_sentences(t.description)))
    common = {s for s, n in held.items() if n > len(tasks) / 100}
    top, count = held.most_common(1)[0] if held else ("", 0)
    return sum(1 for t in tasks if common & set(_sentences(t.description))), top, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task-set", default="default")
    parser.add_argument("--sample", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    registry = default_registry()
    tasks = list(load_tasks(TASK_SETS.get(args.task_set) or Path(args.task_set)))
    print(f"{args.task_set}: {len(tasks)} tasks; tasks in each category (target 0)")
    for name, rule in RULES.items():
        hits = [t for t in tasks if rule(t, registry)]
        example = f"  e.g. {hits[0].id}" if hits else ""
        print(f"  {name:26} {len(hits):5d}  {100 * len(hits) / len(tasks):5.1f}%{example}")
    held, top, count = repeated_sentences(tasks)
    print(f"  {'repeated_sentence':26} {held:5d}  {100 * held / len(tasks):5.1f}%  "
          f"(most shared, in {count} tasks: {top[:70]!r})")
    print(f"\n{args.sample} tasks drawn with seed {args.seed}, for a human read:")
    for task in random.Random(args.seed).sample(tasks, min(args.sample, len(tasks))):
        print(f"\n{task.id} {task.type}/{task.difficulty}: {', '.join(task.required_tools)}")
        print(f"  {task.description}")


if __name__ == "__main__":
    main()
