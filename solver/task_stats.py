"""How memorisable a task set is (issue 34, docs/BENCHMARK.md: Tasks): its distinct tool
structures, optimal tool sequences and input-key sets, and how much of it a lookup predicts.

The lookup is the memoriser's attack: from half the tasks (a deterministic split on a hash of
the task id) learn "input-key set -> optimal plan"; then, for each task of the other half,
predict the plan its input-key set mapped to most often. A prediction counts when it is the
task's optimal plan exactly: the same tools in the same order, and every argument the same,
an argument equal to a task input counting as "that input" (a plan that says "pass `path`"
transfers to another task with other paths, which is how a memoriser would use it).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_resilibench.core.tasks import Task

__all__ = ["Diversity", "LookupResult", "abstract_plan", "diversity", "fixed_by_keys",
           "in_training_half", "lookup_prediction", "overlap"]

AbstractPlan = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


@dataclass(frozen=True)
class Diversity:
    tasks: int
    tool_sets: int          # distinct sets of required tools
    tool_sequences: int     # distinct ordered required-tool lists
    optimal_sequences: int  # distinct tool sequences of the optimal plans
    key_sets: int           # distinct sets of input keys


@dataclass(frozen=True)
class LookupResult:
    held_out: int
    predicted: int          # held-out tasks whose plan the lookup predicted exactly
    key_set_seen: int       # held-out tasks whose input-key set occurs in the training half

    @property
    def share(self) -> float:
        return self.predicted / self.held_out if self.held_out else 0.0


def _value(value: Any, inputs: Mapping[str, Any]) -> str:
    for key in sorted(inputs):
        if inputs[key] == value:
            return f"${key}"
    return json.dumps(value, sort_keys=True)


def abstract_plan(task: Task) -> AbstractPlan:
    """The task's reference plan with each argument equal to an input replaced by its key."""
    return tuple(
        (step.tool, tuple(sorted((p, _value(v, task.inputs)) for p, v in step.arguments.items())))
        for step in task.reference_workflow().steps)


def _key_set(task: Task) -> frozenset[str]:
    """The keys of the Inputs block a model sees (options the text words are not there:
    core/wording.py)."""
    return frozenset(task.shown_inputs)


def in_training_half(task: Task) -> bool:
    """The deterministic split: the first bit of sha256(task id)."""
    return hashlib.sha256(task.id.encode()).digest()[0] < 128


def diversity(tasks: Sequence[Task]) -> Diversity:
    return Diversity(
        tasks=len(tasks),
        tool_sets=len({frozenset(t.required_tools) for t in tasks}),
        tool_sequences=len({t.required_tools for t in tasks}),
        optimal_sequences=len({t.reference_workflow().tools for t in tasks}),
        key_sets=len({_key_set(t) for t in tasks}),
    )


def fixed_by_keys(tasks: Sequence[Task]) -> tuple[int, int]:
    """(tasks whose input-key set, shared with another task, always comes with the one same
    plan; tasks whose key set is shared at all): the key sets that fix the plan."""
    plans: dict[frozenset[str], list[AbstractPlan]] = defaultdict(list)
    for task in tasks:
        plans[_key_set(task)].append(abstract_plan(task))
    shared = [found for found in plans.values() if len(found) > 1]
    return sum(len(f) for f in shared if len(set(f)) == 1), sum(len(f) for f in shared)


def lookup_prediction(tasks: Sequence[Task]) -> LookupResult:
    """Train the key-set lookup on one half, score it on the other (module docstring)."""
    seen: dict[frozenset[str], Counter[AbstractPlan]] = defaultdict(Counter)
    held_out = []
    for task in tasks:
        if in_training_half(task):
            seen[_key_set(task)][abstract_plan(task)] += 1
        else:
            held_out.append(task)
    predicted = known = 0
    for task in held_out:
        plans = seen.get(_key_set(task))
        if not plans:
            continue
        known += 1
        # The most frequent plan; ties broken by the plan itself so the result is stable.
        best = min(plans.items(), key=lambda item: (-item[1], item[0]))[0]
        predicted += best == abstract_plan(task)
    return LookupResult(held_out=len(held_out), predicted=predicted, key_set_seen=known)


def overlap(first: Sequence[Task], second: Sequence[Task]) -> dict[str, float]:
    """How much of `second` `first` already holds: the share of its tool sets, of its tasks
    whose tool set occurs in `first`, of its input values (key=value pairs) and of its
    descriptions."""
    sets_a = {frozenset(t.required_tools) for t in first}
    sets_b = {frozenset(t.required_tools) for t in second}
    values_a = {(k, json.dumps(v, sort_keys=True)) for t in first for k, v in t.inputs.items()}
    values_b = {(k, json.dumps(v, sort_keys=True)) for t in second for k, v in t.inputs.items()}
    texts_a = {t.description for t in first}
    return {
        "tool_sets_shared": len(sets_a & sets_b) / max(1, len(sets_b)),
        "tasks_with_shared_tool_set": sum(frozenset(t.required_tools) in sets_a
                                          for t in second) / max(1, len(second)),
        "input_values_shared": len(values_a & values_b) / max(1, len(values_b)),
        "descriptions_shared": sum(t.description in texts_a for t in second)
        / max(1, len(second)),
    }
