"""Tasks: the benchmark's 5040 generated tasks, loaded from `fixtures/` (SPEC §3).

The generator lives in `solver/` (it needs BM25 and, for the reference workflows, the MDP); this
module only describes a task and loads the stored ones.

Fixture files (all under the fixtures directory):
- `tasks.jsonl.gz`: one task per line, `Task.to_json()`, sorted by id;
- `workflows.jsonl.gz` (written by the solver, optional): `{"task_id", "optimal", "bounds",
  ...}` per line; a task without one falls back to its required tools in order;
- `manifest.json`: schema version, generator config and its hash, counts, file hashes.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_resilibench.names import DIFFICULTIES, TASK_TYPES
from pytest_resilibench.workflow import PlanStep, Workflow

__all__ = [
    "DIFFICULTIES",
    "FIXTURES_DIR",
    "TASK_SCHEMA",
    "TASK_TYPES",
    "Task",
    "TaskSet",
    "load_tasks",
]

TASK_SCHEMA = "resilibench.task/1"
# The shipped fixtures: the repository's `fixtures/` folder, installed as the package
# `pytest_resilibench.fixtures` (pyproject.toml's package-dir), so a wheel carries them.
FIXTURES_DIR = Path(str(resources.files("pytest_resilibench.fixtures")))


@dataclass(frozen=True)
class Task:
    """One benchmark task. `required_tools` is ordered; its last tool produces the output."""

    id: str
    type: str
    difficulty: str
    description: str
    inputs: Mapping[str, Any]
    expected_outputs: Mapping[str, Any]
    required_tools: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    # Per required tool, the argument values of a correct call (task-bound values from
    # `inputs`, plus `format` where the tool requires it): what a correct plan shows.
    step_arguments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The certified reference plan (exact DP); None until the solver has written it.
    optimal: Workflow | None = None
    # Success bounds and solver figures for this task: e.g. {"dp": 0.71, "naive": 0.64}.
    bounds: Mapping[str, float] = field(default_factory=dict)

    @property
    def output_tool(self) -> str:
        return self.required_tools[-1]

    def reference_workflow(self) -> Workflow:
        """The optimal workflow, or the required tools in order before the solver ran."""
        if self.optimal is not None:
            return self.optimal
        return Workflow(
            steps=tuple(
                PlanStep(tool=t, purpose=f"step {i + 1}",
                         arguments=dict(self.step_arguments.get(t, {})))
                for i, t in enumerate(self.required_tools)
            ),
            advice="Retry a step that fails before moving on.",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": TASK_SCHEMA,
            "id": self.id,
            "type": self.type,
            "difficulty": self.difficulty,
            "description": self.description,
            "inputs": dict(self.inputs),
            "expected_outputs": dict(self.expected_outputs),
            "required_tools": list(self.required_tools),
            "constraints": list(self.constraints),
            "step_arguments": {k: dict(v) for k, v in self.step_arguments.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Task:
        return cls(
            id=data["id"],
            type=data["type"],
            difficulty=data["difficulty"],
            description=data["description"],
            inputs=dict(data["inputs"]),
            expected_outputs=dict(data.get("expected_outputs", {})),
            required_tools=tuple(data["required_tools"]),
            constraints=tuple(data.get("constraints", ())),
            step_arguments={k: dict(v) for k, v in data.get("step_arguments", {}).items()},
        )


@dataclass(frozen=True)
class TaskSet:
    """The loaded tasks, in id order, with the manifest they came with."""

    tasks: tuple[Task, ...]
    manifest: Mapping[str, Any]

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self.tasks}

    def select(
        self,
        *,
        types: Sequence[str] | None = None,
        difficulties: Sequence[str] | None = None,
    ) -> list[Task]:
        return [
            t for t in self.tasks
            if (types is None or t.type in types)
            and (difficulties is None or t.difficulty in difficulties)
        ]


def _read_jsonl_gz(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


@lru_cache(maxsize=4)
def load_tasks(directory: Path = FIXTURES_DIR) -> TaskSet:
    """Load tasks (and the solver's workflows, when present) from a fixtures directory."""
    directory = Path(directory)
    tasks_path = directory / "tasks.jsonl.gz"
    if not tasks_path.exists():
        raise FileNotFoundError(
            f"no task fixtures at {tasks_path}; run `resilibench generate` to create them"
        )
    manifest_path = directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    workflows: dict[str, dict[str, Any]] = {}
    workflows_path = directory / "workflows.jsonl.gz"
    if workflows_path.exists():
        workflows = {row["task_id"]: row for row in _read_jsonl_gz(workflows_path)}
    tasks = []
    for row in _read_jsonl_gz(tasks_path):
        task = Task.from_json(row)
        solved = workflows.get(task.id)
        if solved is not None:
            task = replace(
                task,
                optimal=Workflow.from_json(solved["optimal"]),
                bounds=dict(solved.get("bounds", {})),
            )
        tasks.append(task)
    tasks.sort(key=lambda t: t.id)
    return TaskSet(tuple(tasks), manifest)
