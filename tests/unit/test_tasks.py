"""Tasks: loading and verifying the stored fixtures, the JSON round trip."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_resilibench.core.faults import REALISTIC_PLANS
from pytest_resilibench.core.fixture_files import write_fixture_file
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import (
    DIFFICULTIES,
    FIXTURES_DIR,
    TASK_SCHEMA,
    TASK_SETS,
    TASK_TYPES,
    TASKS_FILE,
    WORKFLOWS_FILE,
    FixtureError,
    Task,
    data_flow_of,
    load_tasks,
    task_set_dir,
    task_set_identity,
)
from pytest_resilibench.core.workflow import Workflow
from tests.unit.task_set_files import write_task_set


def test_fixtures_load_all_tasks_in_id_order() -> None:
    tasks = load_tasks()
    assert len(tasks) == 5040
    assert [t.id for t in tasks] == [f"t{i:04d}" for i in range(5040)]
    assert {t.type for t in tasks} == set(TASK_TYPES)
    assert {t.difficulty for t in tasks} == set(DIFFICULTIES)
    assert tasks.manifest["total"] == 5040
    assert tasks.manifest["counts"]["data_pipeline"]["hard"] == 336
    assert load_tasks() is load_tasks()  # cached


def test_a_set_s_data_flow_comes_from_what_its_manifest_records() -> None:
    """Issue 50: the grammar of data flows runs under the explicit data flow, the paper's set
    (frozen with its tables) under the inferred one; a task's JSON (a fixture line) does not
    carry it, so no shipped file changed."""
    assert {t.data_flow for t in load_tasks()} == {"explicit"}
    assert {t.data_flow for t in load_tasks(TASK_SETS["paper"])} == {"inferred"}
    assert data_flow_of({"generator": {"grammar": "flows"}}) == "explicit"
    others: list[Any] = [{}, {"generator": {"grammar": "templates"}}, {"generator": []}, []]
    for manifest in others:
        assert data_flow_of(manifest) == "inferred"
    task = load_tasks().tasks[0]
    assert "data_flow" not in task.to_json()
    assert task.flow_under("paper") == "explicit" and task.flow_under("realistic") == "inferred"


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
    task = load_tasks(task_set_dir("paper")).by_id["t0008"]
    workflow = task.reference_workflow()
    assert workflow.tools == task.required_tools
    for step in workflow.steps:
        assert dict(step.arguments) == dict(task.step_arguments[step.tool])
    assert task.output_tool == task.required_tools[-1]
    assert default_registry()[task.output_tool].produces_output


def _rows(name: str) -> list[dict[str, Any]]:
    with gzip.open(FIXTURES_DIR / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _jsonl(rows: list[Any]) -> bytes:
    return gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in rows), mtime=0)


@pytest.fixture(scope="module")
def shipped() -> dict[str, list[dict[str, Any]]]:
    return {name: _rows(name) for name in (TASKS_FILE, WORKFLOWS_FILE)}


def _fixtures(directory: Path, tasks: list[Any], workflows: list[Any] | None) -> Path:
    """A fixtures directory written the way the generator and solver write theirs."""
    return write_task_set(directory, tasks, workflows)


def test_solver_workflows_are_merged(tmp_path: Path, shipped: dict[str, Any]) -> None:
    workflows = [dict(row) for row in shipped[WORKFLOWS_FILE][:10]]
    optimal = Workflow.from_json({**workflows[3]["optimal"], "advice": "retry"})
    workflows[3] = {**workflows[3], "optimal": optimal.to_json(),
                    "bounds": {"dp": 0.7, "naive": 0.5}}
    tasks = load_tasks(_fixtures(tmp_path, shipped[TASKS_FILE][:10], workflows))
    assert tasks.by_id["t0003"].reference_workflow() == optimal
    assert tasks.by_id["t0003"].bounds == {"dp": 0.7, "naive": 0.5}
    assert all(task.optimal is not None for task in tasks)


def test_a_task_without_its_workflow_is_an_error_not_a_fallback(
        tmp_path: Path, shipped: dict[str, Any]) -> None:
    _fixtures(tmp_path, shipped[TASKS_FILE][:10], shipped[WORKFLOWS_FILE][:9])
    with pytest.raises(FixtureError, match=r"field task_id: no row for 1 task \(e\.g\. t0009\)"):
        load_tasks(tmp_path)


def test_missing_workflows_are_an_error_the_solver_may_read_tasks_alone(
        tmp_path: Path, shipped: dict[str, Any]) -> None:
    _fixtures(tmp_path, shipped[TASKS_FILE][:10], None)
    with pytest.raises(FixtureError, match="resilibench solve --exact"):
        load_tasks(tmp_path)
    assert len(load_tasks(tmp_path, require_workflows=False)) == 10


def test_missing_fixtures_give_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="resilibench generate"):
        load_tasks(tmp_path)


def test_a_changed_file_fails_its_manifest_sha256(tmp_path: Path, shipped: dict[str, Any]) -> None:
    _fixtures(tmp_path, shipped[TASKS_FILE][:10], shipped[WORKFLOWS_FILE][:10])
    changed = [dict(row) for row in shipped[TASKS_FILE][:10]]
    changed[2]["description"] += " (edited)"
    (tmp_path / TASKS_FILE).write_bytes(_jsonl(changed))
    with pytest.raises(FixtureError, match="changed or damaged"):
        load_tasks(tmp_path)


def test_a_damaged_gzip_stream_is_a_fixture_error(tmp_path: Path,
                                                   shipped: dict[str, Any]) -> None:
    data = bytearray(_jsonl(shipped[TASKS_FILE][:5]))
    data[40:60] = bytes(20)  # a hole in the deflate stream, the header intact
    write_fixture_file(tmp_path, TASKS_FILE, bytes(data))
    with pytest.raises(FixtureError, match="is not gzip'd UTF-8 text"):
        load_tasks(tmp_path, require_workflows=False)


@pytest.mark.parametrize(("tasks", "message"), [
    ([], "holds no rows"),
    (["not an object"], "line 1: not a JSON object"),
    ([{"id": "t0000"}], "line 1, field schema: missing"),
])
def test_malformed_task_files_name_the_problem(tmp_path: Path, tasks: list[Any],
                                               message: str) -> None:
    _fixtures(tmp_path, tasks, None)
    with pytest.raises(FixtureError, match=message):
        load_tasks(tmp_path, require_workflows=False)


def test_duplicate_ids_and_unknown_tools_are_refused(tmp_path: Path,
                                                     shipped: dict[str, Any]) -> None:
    first = shipped[TASKS_FILE][0]
    _fixtures(tmp_path / "dup", [first, first], None)
    with pytest.raises(FixtureError, match="line 2, field id: t0000 again \\(first on line 1\\)"):
        load_tasks(tmp_path / "dup", require_workflows=False)
    unknown = {**first, "required_tools": [*first["required_tools"], "utility_teleporter"]}
    _fixtures(tmp_path / "unknown", [unknown], None)
    with pytest.raises(FixtureError, match=r"line 1, field required_tools\[3\]: unknown tool "
                                           r"'utility_teleporter'"):
        load_tasks(tmp_path / "unknown", require_workflows=False)


def test_a_file_the_manifest_does_not_list_is_refused(tmp_path: Path,
                                                      shipped: dict[str, Any]) -> None:
    _fixtures(tmp_path, shipped[TASKS_FILE][:2], None)
    (tmp_path / WORKFLOWS_FILE).write_bytes(_jsonl(shipped[WORKFLOWS_FILE][:2]))
    with pytest.raises(FixtureError, match="not listed in"):
        load_tasks(tmp_path)


def test_the_shipped_manifest_lists_every_file_that_shapes_a_prompt() -> None:
    for name in TASK_SETS:
        files = load_tasks(task_set_dir(name)).manifest["files"]
        assert {TASKS_FILE, WORKFLOWS_FILE} <= set(files)
        # Every file in the folder that a prompt reads is listed (and so verified).
        present = {p.name for p in task_set_dir(name).glob("*.gz")}
        assert present <= set(files)
    assert REALISTIC_PLANS in load_tasks(task_set_dir("paper")).manifest["files"]


def test_the_shipped_sets_are_named_where_options_name_them() -> None:
    from pytest_resilibench.integration.options import TASK_SET_NAMES

    assert tuple(TASK_SETS) == TASK_SET_NAMES
    assert task_set_dir("paper") == FIXTURES_DIR / "paper"
    with pytest.raises(ValueError, match=r"unknown task set 'mine'.*--resili-tasks"):
        task_set_dir("mine")


def test_a_task_set_s_identity_is_its_name_and_tasks_hash() -> None:
    manifest = load_tasks(task_set_dir("paper")).manifest
    sha = hashlib.sha256((task_set_dir("paper") / TASKS_FILE).read_bytes()).hexdigest()
    assert task_set_identity("paper", manifest) == {"name": "paper", "tasks_sha256": sha,
                                                     "tasks": 5040}
    assert task_set_identity("x", {}) == {"name": "x", "tasks_sha256": None, "tasks": None}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=200), st.builds(
    lambda rows: gzip.compress("\n".join(rows).encode(), mtime=0),
    st.lists(st.text(max_size=40), max_size=4))))
def test_any_bytes_load_or_give_one_fixture_error(tmp_path: Path, data: bytes) -> None:
    directory = tmp_path / "fuzz"
    write_task_set(directory, [], tasks_data=data)
    load_tasks.cache_clear()
    try:
        tasks = load_tasks(directory, require_workflows=False)
    except FixtureError:
        return
    assert all(isinstance(task, Task) for task in tasks)


@pytest.mark.parametrize(("lines", "message"), [
    (['{"id": "t0000"}', '{"id": ', '{"id": "t0002"}'], r"line 2: Expecting value"),
    # Two objects on one line would parse as two rows of one JSON array: still line 1's fault.
    (['{"id": "t0000"}, {"id": "t0001"}'], r"line 1: Extra data"),
])
def test_a_line_that_is_not_one_json_object_is_named(tmp_path: Path, lines: list[str],
                                                     message: str) -> None:
    """The file is parsed as one JSON array (faster); a file that does not parse so, line
    for line, is read again a line at a time to name the line."""
    write_fixture_file(tmp_path, TASKS_FILE, gzip.compress("\n".join(lines).encode(), mtime=0))
    with pytest.raises(FixtureError, match=message):
        load_tasks(tmp_path, require_workflows=False)
