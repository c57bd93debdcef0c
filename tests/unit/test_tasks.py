"""Tasks: loading the stored fixtures, the JSON round trip, the reference workflow fallback."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
from pathlib import Path

import pytest

from pytest_resilibench.registry import default_registry
from pytest_resilibench.tasks import (
    DIFFICULTIES,
    FIXTURES_DIR,
    TASK_SCHEMA,
    TASK_TYPES,
    Task,
    load_tasks,
)
from pytest_resilibench.workflow import PlanStep, Workflow


def test_fixtures_load_all_tasks_in_id_order() -> None:
    tasks = load_tasks()
    assert len(tasks) == 5040
    assert [t.id for t in tasks] == [f"t{i:04d}" for i in range(5040)]
    assert {t.type for t in tasks} == set(TASK_TYPES)
    assert {t.difficulty for t in tasks} == set(DIFFICULTIES)
    assert tasks.manifest["total"] == 5040
    assert tasks.manifest["counts"]["data_pipeline"]["hard"] == 336
    assert load_tasks() is load_tasks()  # cached


def test_fixture_lines_carry_the_schema_and_round_trip() -> None:
    with gzip.open(FIXTURES_DIR / "tasks.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in itertools.islice(fh, 50)]
    for row in rows:
        assert row["schema"] == TASK_SCHEMA
        assert Task.from_json(row).to_json() == row


def test_select_and_by_id() -> None:
    tasks = load_tasks()
    hard_api = tasks.select(types=["api_integration"], difficulties=["hard"])
    assert len(hard_api) == 336
    assert all(t.type == "api_integration" and t.difficulty == "hard" for t in hard_api)
    assert tasks.by_id["t0421"].id == "t0421"
    assert tasks.select() == list(tasks)


def test_reference_workflow_falls_back_to_required_tools() -> None:
    task = load_tasks().by_id["t0008"]
    workflow = task.reference_workflow()
    assert workflow.tools == task.required_tools
    for step in workflow.steps:
        assert dict(step.arguments) == dict(task.step_arguments[step.tool])
    assert task.output_tool == task.required_tools[-1]
    assert default_registry()[task.output_tool].produces_output


def test_solver_workflows_are_merged(tmp_path: Path) -> None:
    shutil.copy(FIXTURES_DIR / "tasks.jsonl.gz", tmp_path / "tasks.jsonl.gz")
    shutil.copy(FIXTURES_DIR / "manifest.json", tmp_path / "manifest.json")
    optimal = Workflow(steps=(PlanStep(tool="file_operations_reader", purpose="read"),),
                       advice="retry")
    row = {"task_id": "t0003", "optimal": optimal.to_json(), "bounds": {"dp": 0.7}}
    with gzip.open(tmp_path / "workflows.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    tasks = load_tasks(tmp_path)
    assert tasks.by_id["t0003"].reference_workflow() == optimal
    assert tasks.by_id["t0003"].bounds == {"dp": 0.7}
    assert tasks.by_id["t0004"].optimal is None


def test_missing_fixtures_give_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="resilibench generate"):
        load_tasks(tmp_path)
