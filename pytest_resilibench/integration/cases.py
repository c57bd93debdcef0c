"""The run's cases: one per model x variant (x flaw x severity) x task x base rate x repeat.

Built from the `RunConfig` and the task fixtures alone, in a fixed order, so every xdist worker
collects exactly the same items: per model, task by task, each task's variants together. The
agents' memos of what they read (a task's text, a plan's steps, observations, calls) then serve
a task's other variants too, which meet the same tool luck: the built-in agents' episodes took
~6% less CPU than in variant-major order (docs/REPRODUCTION.md).

Each case's id is its episode's (`record.episode_id`), the readable id pytest shows and `-k`
matches: `o3-flawed-semantic_drift-simple_task-medium-t0421-r0` (severity and base rate appear
only when the run sweeps them). The id spells a model name safely (`builtin:adaptive` →
`builtin_adaptive`); `keywords` lets `-k` match the name as typed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_resilibench.base.rng import key_int
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.record import episode_id
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.integration.options import RunConfig

__all__ = ["Case", "build_cases", "keywords", "sample_tasks", "variants_of"]

@dataclass(frozen=True)
class Case:
    id: str
    model: str
    variant: Variant
    task: Task
    repeat: int
    base_success: float

    def __repr__(self) -> str:  # pytest shows this in failures; the task is too long
        return f"Case({self.id})"


def variants_of(config: RunConfig) -> list[Variant]:
    variants: list[Variant] = []
    for kind in config.variants:
        if kind == "flawed":
            variants += [Variant("flawed", flaw, severity)
                         for flaw in config.flaws for severity in config.severities]
        else:
            variants.append(Variant(kind))
    return variants


def sample_tasks(tasks: Iterable[Task], config: RunConfig) -> list[Task]:
    """`config.sample` tasks per type x difficulty cell, chosen by a hash of (seed, task id):
    stratified, deterministic, and the same for every model and variant of the run."""
    cells: dict[tuple[str, str], list[Task]] = {}
    for task in tasks:
        if task.type in config.task_types and task.difficulty in config.difficulties:
            cells.setdefault((task.type, task.difficulty), []).append(task)
    chosen: list[Task] = []
    for cell in sorted(cells):
        members = cells[cell]
        if config.sample is not None:
            members = sorted(members, key=lambda t: key_int(config.seed, "sample", t.id))
            members = members[: config.sample]
        chosen += members
    return sorted(chosen, key=lambda t: t.id)


def build_cases(config: RunConfig, tasks: Sequence[Task]) -> list[Case]:
    variants = variants_of(config)
    sampled = sample_tasks(tasks, config)
    show_severity = len(config.severities) > 1
    show_base = len(config.base_success) > 1
    cases = []
    for model in config.models:
        for task in sampled:
            for variant in variants:
                severity = variant.severity if show_severity else None
                for base in config.base_success:
                    for repeat in range(config.repeats):
                        case_id = episode_id(
                            model=model, variant=variant.label, task_type=task.type,
                            difficulty=task.difficulty, task_id=task.id, repeat=repeat,
                            severity=severity, base_success=base if show_base else None)
                        cases.append(Case(case_id, model, variant, task, repeat, base))
    return cases


def keywords(case: Case) -> set[str]:
    """Extra names `-k` matches for a case's item: the model as the user typed it
    (`-k builtin:adaptive`), which the id spells `builtin_adaptive`."""
    return {case.model}
