"""Task sets written the way `resilibench generate` and `solve` write theirs, from rows the
tests choose: the manifest's schema and total, and a solver report beside the workflows."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from pytest_resilibench.core.fixture_files import write_fixture_file
from pytest_resilibench.core.task_set_schemas import MANIFEST_SCHEMA, SOLVER_REPORT_SCHEMA

TASKS_FILE, WORKFLOWS_FILE, SOLVER_REPORT = ("tasks.jsonl.gz", "workflows.jsonl.gz",
                                             "solver_report.json")


def jsonl(rows: list[Any]) -> bytes:
    return gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in rows), mtime=0)


def solver_report(tasks: int) -> dict[str, Any]:
    """The fields every solver report has (solver/solve.py), for `tasks` tasks."""
    return {"schema": SOLVER_REPORT_SCHEMA, "dp_mean": 0.9, "naive_mean": 0.8, "ppo": None,
            "config": {"base_success": 0.8, "max_turns": 10, "tasks": tasks, "structures": 1}}


def write_task_set(directory: Path, tasks: list[Any], workflows: list[Any] | None = None,
                   *, tasks_data: bytes | None = None) -> Path:
    """A task set of these rows (`tasks_data`: the tasks file's bytes instead); with
    workflows, its solver report too."""
    write_fixture_file(directory, TASKS_FILE, jsonl(tasks) if tasks_data is None else tasks_data,
                       {"schema": MANIFEST_SCHEMA, "total": max(1, len(tasks))})
    if workflows is not None:
        write_fixture_file(directory, WORKFLOWS_FILE, jsonl(workflows))
        (directory / SOLVER_REPORT).write_text(json.dumps(solver_report(len(tasks))))
    return directory
