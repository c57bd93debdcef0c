"""Tasks: the benchmark's 5040 generated tasks, loaded from `fixtures/` (docs/BENCHMARK.md: Tasks).

The generator lives in `solver/` (it needs BM25 and, for the reference workflows, the MDP); this
module only describes a task and loads the stored ones.

Fixture files (all under the fixtures directory):
- `tasks.jsonl.gz`: one task per line, `Task.to_json()`, sorted by id;
- `workflows.jsonl.gz` (written by the solver): `{"task_id", "optimal", "bounds", ...}` per
  line, one for every task;
- `manifest.json`: schema version, generator config and its hash, counts, and the sha256 of
  every file (`fixture_files.py`), checked on every load;
- `solver_report.json` (written by the solver): its figures over the set;
- `flaw_choices.json.gz` (the default set's; written by the generator's adversarial filter):
  which candidate injection each task shows per flaw and severity (`flaw_choices.py`).

A set is checked by its content as it loads, not only by its hashes (`task_set_check.py`).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_resilibench.base.names import DIFFICULTIES, TASK_TYPES, DataFlow
from pytest_resilibench.core.fixture_files import FixtureError, read_manifest_bytes, verified_bytes
from pytest_resilibench.core.flaw_choices import read_choices
from pytest_resilibench.core.task_set_schemas import TASK_SCHEMA
from pytest_resilibench.core.workflow import PlanStep, Workflow

__all__ = [
    "DIFFICULTIES",
    "FIXTURES_DIR",
    "TASKS_FILE",
    "TASK_SCHEMA",
    "TASK_SETS",
    "TASK_TYPES",
    "WORKFLOWS_FILE",
    "FixtureError",
    "Task",
    "TaskSet",
    "data_flow_of",
    "find_task",
    "load_tasks",
    "task_set_dir",
    "task_set_identity",
]

# The shipped fixtures: the repository's `fixtures/` folder, installed as the package
# `pytest_resilibench.fixtures` (pyproject.toml's package-dir), so a wheel carries them. It
# holds the default task set (the grammar of data flows) and, in `paper/`, the paper's
# 5040 tasks, frozen for reproducing its tables (docs/BENCHMARK.md: Tasks).
FIXTURES_DIR = Path(str(resources.files("pytest_resilibench.fixtures")))
TASK_SETS: dict[str, Path] = {"default": FIXTURES_DIR, "paper": FIXTURES_DIR / "paper"}


def task_set_dir(name: str) -> Path:
    """The directory of a shipped task set (`--resili-task-set`)."""
    if name not in TASK_SETS:
        raise ValueError(f"unknown task set {name!r} (one of {', '.join(TASK_SETS)}; "
                         "--resili-tasks=DIR runs a set of your own)")
    return TASK_SETS[name]


def task_set_identity(name: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Which task set ran, for the report: its name (a shipped set's, or the directory
    given) and the sha256 of its tasks file, as verified on load."""
    files = manifest.get("files", {}) if isinstance(manifest, Mapping) else {}
    entry = files.get(TASKS_FILE) if isinstance(files, Mapping) else None
    sha = entry.get("sha256") if isinstance(entry, Mapping) else None
    return {"name": name, "tasks_sha256": sha if isinstance(sha, str) else None,
            "tasks": manifest.get("total") if isinstance(manifest, Mapping) else None}


@dataclass(frozen=True, eq=False)
class Task:
    """One benchmark task. `required_tools` is ordered; its last tool produces the output.
    Equal and hashed by identity (`eq=False`), so caches of what a task derives (prompts,
    reference steps, deliverables) key on the task itself, weakly."""

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
    # The keys of `inputs` the description states in words and the prompt's Inputs block
    # leaves out (core/wording.py): a step's options, found only by reading the text.
    worded: tuple[str, ...] = ()
    # The certified reference plan (exact DP); None until the solver has written it.
    optimal: Workflow | None = None
    # Success bounds and solver figures for this task: e.g. {"dp": 0.71, "naive": 0.64}.
    bounds: Mapping[str, float] = field(default_factory=dict)
    # What a call's data-flow arguments mean in its set's environment (base/names.py
    # `DataFlow`): the set's, from its manifest (`data_flow_of`), not part of `to_json`.
    data_flow: DataFlow = "inferred"
    # Per "flaw/severity", the candidate injection the generator kept for this task (issue
    # 50: `flaw_choices.py`); a flaw it does not list takes candidate 0.
    flaw_choices: Mapping[str, int] = field(default_factory=dict)

    @property
    def shown_inputs(self) -> dict[str, Any]:
        """The inputs the prompt's Inputs block shows: all but those stated in words."""
        return {k: v for k, v in self.inputs.items() if k not in self.worded}

    def flow_under(self, faults: str) -> DataFlow:
        """The data flow of an episode of this task under a fault profile: the realistic
        profile's plans and stand-ins name no data flow, so it keeps the inferred one."""
        return self.data_flow if faults == "paper" else "inferred"

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
            # Only where there are any: a task set without worded options keeps its bytes.
            **({"worded": list(self.worded)} if self.worded else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, optimal: Workflow | None = None,
                  bounds: Mapping[str, float] | None = None,
                  data_flow: DataFlow = "inferred") -> Task:
        """The task of its JSON, with the reference workflow and bounds the solver wrote
        for it (a separate fixture file, `WORKFLOWS_FILE`) and its set's data flow."""
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
            worded=tuple(data.get("worded", ())),
            optimal=optimal,
            bounds={} if bounds is None else bounds,
            data_flow=data_flow,
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


TASKS_FILE = "tasks.jsonl.gz"
WORKFLOWS_FILE = "workflows.jsonl.gz"


def data_flow_of(manifest: Mapping[str, Any]) -> DataFlow:
    """The data flow of a set's environment: explicit for a set of the grammar of data flows
    (the default set and any `resilibench generate` writes with it: their genuine plans
    name every step's data flow, plan_extras.py), inferred for any other (the paper's set,
    frozen with its tables: docs/REPRODUCTION.md). Read from what the manifest already
    records, so no shipped file changes."""
    generator = manifest.get("generator") if isinstance(manifest, Mapping) else None
    grammar = generator.get("grammar") if isinstance(generator, Mapping) else None
    return "explicit" if grammar == "flows" else "inferred"


Row = tuple[int, dict[str, Any]]  # a JSON-lines record and its 1-based line number


def _jsonl_rows(directory: Path, manifest: Mapping[str, Any], name: str) -> list[Row]:
    """The JSON objects of a verified gzip'd JSON-lines fixture file, with their lines."""
    data = verified_bytes(directory, manifest, name)
    try:
        numbered = [(number, line) for number, line
                    in enumerate(gzip.decompress(data).decode("utf-8").splitlines(), 1)
                    if line.strip()]
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise FixtureError(f"{directory / name} is not gzip'd UTF-8 text ({exc})") from None
    if not numbered:
        raise FixtureError(f"{directory / name} holds no rows")
    # The lines as one JSON array: one parse instead of one a line (every pytest process of a
    # run loads the fixtures before its first item). A file that does not parse so, row for
    # row, is read again a line at a time to say which line is wrong.
    try:
        rows = json.loads(f"[{','.join(line for _, line in numbered)}]")
    except (ValueError, RecursionError):
        rows = None
    if (isinstance(rows, list) and len(rows) == len(numbered)
            and all(isinstance(row, dict) for row in rows)):
        return [(number, row) for (number, _), row in zip(numbered, rows, strict=True)]
    return _rows_one_by_one(directory / name, numbered)


def _rows_one_by_one(path: Path, numbered: list[tuple[int, str]]) -> list[Row]:
    rows = []
    for number, line in numbered:
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise FixtureError(f"{path}, line {number}: {exc}") from None
        if not isinstance(row, dict):
            raise FixtureError(f"{path}, line {number}: not a JSON object")
        rows.append((number, row))
    return rows


def _task_of(row: dict[str, Any], number: int, directory: Path,
             solved: Mapping[str, Any] | None, data_flow: DataFlow) -> Task:
    """The task of row `number` of the tasks file, with its reference workflow from `solved`
    (its row of the workflows file), built once. The rows were checked (`task_set_check.py`):
    a failure here is a last guard, not the message a user should see."""
    optimal = bounds = None
    if solved is not None:
        try:
            optimal = Workflow.from_json(solved["optimal"])
            bounds = dict(solved.get("bounds", {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FixtureError(f"{directory / WORKFLOWS_FILE}: the workflow of {row.get('id')} "
                               f"is malformed ({type(exc).__name__}: {exc})") from None
    try:
        return Task.from_json(row, optimal=optimal, bounds=bounds, data_flow=data_flow)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FixtureError(f"{directory / TASKS_FILE}, line {number}: not a task "
                           f"({type(exc).__name__}: {exc})") from None


@lru_cache(maxsize=4)
def load_tasks(directory: Path = FIXTURES_DIR, *, require_workflows: bool = True) -> TaskSet:
    """Load the tasks of a fixtures directory with their reference workflows, every file
    verified against the manifest's sha256 (`fixture_files.py`) and checked by its content
    (`task_set_check.py`: every problem in one message); a missing, changed, incomplete or
    unsound file is a `FixtureError`, never a silent fallback. `require_workflows=False` is
    for the solver, which reads the tasks it is about to solve."""
    from pytest_resilibench.core.task_set_check import REALISTIC_FILE, check_paths, check_task_set

    directory = Path(directory)
    if not (directory / TASKS_FILE).exists():
        raise FixtureError(f"no task fixtures at {directory / TASKS_FILE}; "
                           f"`resilibench generate --out {directory}` writes them")
    manifest, manifest_bytes = read_manifest_bytes(directory)
    check_paths(directory, manifest, complete=require_workflows)  # before any file is read
    rows = _jsonl_rows(directory, manifest, TASKS_FILE)
    workflow_rows: list[Row] | None = None
    if require_workflows or (directory / WORKFLOWS_FILE).exists():
        if not (directory / WORKFLOWS_FILE).exists():
            raise FixtureError(f"no reference workflows at {directory / WORKFLOWS_FILE}: the "
                               f"optimal and flawed prompts need them; `resilibench solve "
                               f"--exact --fixtures {directory} --out {directory}` writes them")
        workflow_rows = _jsonl_rows(directory, manifest, WORKFLOWS_FILE)
    # Stored realistic plans, read only to be checked (listed, or merely there: unlisted is
    # a problem, as the prompts would find them).
    plans = REALISTIC_FILE in manifest.get("files", {}) or (directory / REALISTIC_FILE).exists()
    check_task_set(directory, manifest=manifest, manifest_bytes=manifest_bytes, tasks=rows,
                   workflows=workflow_rows, complete=require_workflows,
                   realistic=(lambda: _jsonl_rows(directory, manifest, REALISTIC_FILE))
                   if plans else None)
    solved = (None if workflow_rows is None
              else {row["task_id"]: row for _, row in workflow_rows})
    flow = data_flow_of(manifest)
    tasks = [_task_of(row, number, directory, None if solved is None else solved[row["id"]],
                      flow)
             for number, row in rows]
    if workflow_rows is not None:  # the choices are of flawed plans, which need workflows
        chosen = read_choices(directory, manifest, {t.id for t in tasks})
        tasks = [replace(t, flaw_choices=chosen[t.id]) if t.id in chosen else t
                 for t in tasks]
    return TaskSet(tuple(sorted(tasks, key=lambda t: t.id)), manifest)


def find_task(task_id: str, fixtures: Path = FIXTURES_DIR) -> Task:
    """A task of a fixtures directory (`serve-mcp --task`): its simulator needs the task
    alone, not its plan. KeyError when the directory has no such task."""
    task = load_tasks(Path(fixtures), require_workflows=False).by_id.get(task_id)
    if task is None:
        raise KeyError(f"no task {task_id!r} in {fixtures}")
    return task
