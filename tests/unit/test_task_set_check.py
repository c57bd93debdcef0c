"""A task set checked by its content (core/task_set_check.py): every problem named by file,
line and field, all in one message; the folder's paths; the shipped sets sound; the verdict
kept by the content's sha256 (the shipped sets' here, any other set's on disk)."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.base import checked
from pytest_resilibench.core import task_set_check
from pytest_resilibench.core.fixture_files import read_manifest_bytes, write_fixture_file
from pytest_resilibench.core.task_set_check import (
    MAX_LISTED,
    REALISTIC_FILE,
    SHIPPED_SOUND,
    check_paths,
    content_problems,
    data_key,
)
from pytest_resilibench.core.tasks import TASK_SETS, FixtureError, load_tasks, task_set_dir
from tests.unit.task_set_files import (
    SOLVER_REPORT,
    TASKS_FILE,
    WORKFLOWS_FILE,
    jsonl,
    write_task_set,
)


def _rows(directory: Path, name: str) -> list[tuple[int, dict[str, Any]]]:
    with gzip.open(directory / name, "rt", encoding="utf-8") as fh:
        return [(n, json.loads(line)) for n, line in enumerate(fh, 1) if line.strip()]


@pytest.fixture(scope="module")
def shipped() -> dict[str, list[dict[str, Any]]]:
    """The default set's first 12 tasks and their workflows (cells 0..11: every type)."""
    directory = task_set_dir("default")
    return {name: [row for _, row in _rows(directory, name)[:12]]
            for name in (TASKS_FILE, WORKFLOWS_FILE)}


def _load_error(directory: Path) -> str:
    load_tasks.cache_clear()
    with pytest.raises(FixtureError) as caught:
        load_tasks(directory)
    return str(caught.value)


def _set(tmp_path: Path, shipped: dict[str, Any], *, tasks: Any = None,
         workflows: Any = None) -> Path:
    return write_task_set(tmp_path / "set", shipped[TASKS_FILE] if tasks is None else tasks,
                          shipped[WORKFLOWS_FILE] if workflows is None else workflows)


def _copy(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return json.loads(json.dumps(rows))


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The content checks a load runs, counted as they run (the real check, called through)."""
    calls: list[int] = []
    real = task_set_check.content_problems

    def counted(*args: Any, **kwargs: Any) -> list[task_set_check.Problem]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(task_set_check, "content_problems", counted)
    return calls


# --- the shipped sets -----------------------------------------------------------------------
@pytest.mark.parametrize("name", list(TASK_SETS))
def test_the_shipped_sets_are_sound_and_their_verdicts_are_the_stored_ones(name: str) -> None:
    """Every file of both shipped sets passes every check, in full; their data keys (both ways
    a set loads) are the ones `SHIPPED_SOUND` holds, so a run skips the check on them."""
    directory = task_set_dir(name)
    manifest, manifest_bytes = read_manifest_bytes(directory)
    tasks, workflows = _rows(directory, TASKS_FILE), _rows(directory, WORKFLOWS_FILE)
    report = (directory / SOLVER_REPORT).read_bytes()
    assert REALISTIC_FILE in manifest["files"]  # both ship their realistic plans
    realistic = _rows(directory, REALISTIC_FILE)
    assert content_problems(manifest, tasks, workflows, report, realistic=realistic) == []
    keys = {data_key(manifest_bytes, report, complete=True, with_workflows=True),
            data_key(manifest_bytes, None, complete=False, with_workflows=True)}
    assert keys <= SHIPPED_SOUND, f"a shipped file changed: put {sorted(keys)} in SHIPPED_SOUND"


def test_a_shipped_set_loads_without_checking_its_content_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_checks(monkeypatch)
    load_tasks.cache_clear()
    assert len(load_tasks(task_set_dir("default"))) == 5040
    assert calls == []


# --- the verdict kept on disk ---------------------------------------------------------------
def test_a_sound_set_is_checked_once_and_a_changed_one_again(
        tmp_path: Path, shipped: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = _count_checks(monkeypatch)
    directory = _set(tmp_path, shipped)
    for _ in range(2):
        load_tasks.cache_clear()
        assert len(load_tasks(directory)) == 12
    assert len(calls) == 1  # the second load found the verdict
    assert len(list((tmp_path / "cache").rglob("*"))) == 4  # resilibench/checked/task-sets/KEY
    workflows = _copy(shipped[WORKFLOWS_FILE])
    workflows[0]["bounds"]["dp"] = math.nan
    write_fixture_file(directory, WORKFLOWS_FILE, jsonl(workflows))  # re-hashed
    for _ in range(2):  # a failing set is never remembered: checked, and refused, each time
        assert "line 1, field bounds.dp: nan is not a finite number" in _load_error(directory)
    assert len(calls) == 3


def test_a_cache_folder_that_cannot_be_written_only_means_checking_again(
        tmp_path: Path, shipped: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    load_tasks.cache_clear()
    assert len(load_tasks(_set(tmp_path, shipped))) == 12
    assert not checked.is_known("task-sets", "0" * 64)


# --- one message, every problem -------------------------------------------------------------
def test_every_problem_comes_in_one_message_named_by_file_line_and_field(
        tmp_path: Path, shipped: dict[str, Any]) -> None:
    tasks, workflows = _copy(shipped[TASKS_FILE]), _copy(shipped[WORKFLOWS_FILE])
    tasks[1]["difficulty"] = "insane"
    tasks[2]["constraints"] = "finish within 10 turns"
    workflows[0]["optimal"]["steps"][0]["tool"] = "utility_teleporter"
    workflows[3]["bounds"]["naive"] = "0.5"
    message = _load_error(_set(tmp_path, shipped, tasks=tasks, workflows=workflows))
    lines = message.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'set'} is not a sound task set (")
    folder = tmp_path / "set"
    for expected in (
        f"{folder / TASKS_FILE}, line 2, field difficulty: 'insane' is not one of easy, "
        "medium, hard",
        f"{folder / TASKS_FILE}, line 3, field constraints: 'finish within 10 turns' is not "
        "of type array",
        f"{folder / WORKFLOWS_FILE}, line 1, field optimal.steps[0].tool: unknown tool "
        "'utility_teleporter' (`resilibench tools` lists them)",
        f"{folder / WORKFLOWS_FILE}, line 4, field bounds.naive: '0.5' is not of type number",
    ):
        assert f"  {expected}" in lines, (expected, lines)
    assert "Traceback" not in message


def test_the_list_is_capped_and_says_how_many_more(tmp_path: Path,
                                                    shipped: dict[str, Any]) -> None:
    tasks = _copy(shipped[TASKS_FILE])
    for task in tasks:
        task["difficulty"] = task["type"] = "insane"
    message = _load_error(_set(tmp_path, shipped, tasks=tasks))
    lines = message.splitlines()
    assert "(24 problems;" in lines[0]  # two a task
    assert len(lines) == 1 + MAX_LISTED + 1 and MAX_LISTED < 24
    assert lines[-1] == f"  ... and {24 - MAX_LISTED} more"


# --- the checks, one by one -----------------------------------------------------------------
def _one(tmp_path: Path, shipped: dict[str, Any], *, tasks: Any = None,
         workflows: Any = None) -> str:
    return _load_error(_set(tmp_path, shipped, tasks=tasks, workflows=workflows))


def test_reference_plans_are_replayed_against_the_registry_and_their_task(
        tmp_path: Path, shipped: dict[str, Any]) -> None:
    workflows = _copy(shipped[WORKFLOWS_FILE])
    task = shipped[TASKS_FILE][0]
    steps = workflows[0]["optimal"]["steps"]
    value_key = next(k for k in steps[0]["arguments"] if k in task["inputs"])
    steps[0]["arguments"][value_key] = "https://evil.example.com/elsewhere"
    workflows[1]["optimal"]["steps"] = workflows[1]["optimal"]["steps"][1:]
    workflows[2]["optimal"]["steps"][0]["arguments"]["no_such_parameter"] = 1
    workflows[5]["optimal"]["steps"] = []
    workflows[6]["optimal"]["steps"].append({**steps[0], "tool": "computation_optimizer"})
    message = _one(tmp_path, shipped, workflows=workflows)
    for expected in (
        f"line 1, field optimal.steps[0].arguments.{value_key}: "
        "'https://evil.example.com/elsewhere' is not the task's",
        "line 2, field optimal.steps: leaves out required tools",
        "line 3, field optimal.steps[0].arguments: Additional properties are not allowed",
        "line 6, field optimal.steps: [] should be non-empty",
        "line 7, field optimal.steps[",
    ):
        assert expected in message, (expected, message)
    assert "computation_optimizer is neither a required tool of t0006 nor a prerequisite" in message


def test_stored_realistic_plans_are_checked_one_per_task_and_replayed(tmp_path: Path) -> None:
    """A set's realistic plans (the prompts read them instead of solving): a task's once (a
    task without one is solved at run time), known tools with valid arguments, the task's own
    values, its steps in order."""
    paper = task_set_dir("paper")
    tasks, workflows, plans = ([row for _, row in _rows(paper, name)[:12]]
                               for name in (TASKS_FILE, WORKFLOWS_FILE, REALISTIC_FILE))
    directory = write_task_set(tmp_path / "set", tasks, workflows)
    write_fixture_file(directory, REALISTIC_FILE, jsonl(plans))
    load_tasks.cache_clear()
    assert len(load_tasks(directory)) == 12  # sound as written, and with some plans only
    write_fixture_file(directory, REALISTIC_FILE, jsonl(plans[:5]))
    load_tasks.cache_clear()
    assert len(load_tasks(directory)) == 12
    bad = _copy(plans)
    steps = bad[0]["optimal"]["steps"]
    value_key = next(k for s in steps for k in s["arguments"] if k in tasks[0]["inputs"])
    next(s for s in steps if value_key in s["arguments"])["arguments"][value_key] = "elsewhere"
    bad[1]["optimal"]["steps"].reverse()
    bad[2]["optimal"]["steps"][0]["tool"] = "utility_teleporter"
    bad[3]["optimal"]["steps"][0]["arguments"]["no_such_parameter"] = 1
    bad[4] = {**bad[4], "task_id": "t9999"}
    write_fixture_file(directory, REALISTIC_FILE, jsonl([*bad, bad[5]]))
    message = _load_error(directory)
    for expected in (
        f"line 1, field optimal.steps[{[value_key in s['arguments'] for s in steps].index(True)}]"
        f".arguments.{value_key}: 'elsewhere' is not the task's",
        f"line 2, field optimal.steps: does not call the steps of {tasks[1]['id']} in order",
        "line 3, field optimal.steps[0].tool: unknown tool 'utility_teleporter'",
        "line 4, field optimal.steps[0].arguments: Additional properties are not allowed",
        "line 5, field task_id: no task t9999 in tasks.jsonl.gz",
        "line 13, field task_id: a second row for",
    ):
        assert expected in message, (expected, message)
    # A plans file the manifest does not list is refused too (the prompts would read it).
    manifest = json.loads((directory / "manifest.json").read_text())
    del manifest["files"][REALISTIC_FILE]
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert f"{REALISTIC_FILE}: not listed in" in _load_error(directory)


def test_rows_must_be_unique_and_match_across_files(tmp_path: Path,
                                                    shipped: dict[str, Any]) -> None:
    tasks = _copy(shipped[TASKS_FILE])
    workflows = [*_copy(shipped[WORKFLOWS_FILE])[1:], shipped[WORKFLOWS_FILE][1],
                 {**shipped[WORKFLOWS_FILE][2], "task_id": "t9999"}]
    message = _one(tmp_path, shipped, tasks=[*tasks, tasks[4]], workflows=workflows)
    assert "tasks.jsonl.gz, line 13, field id: t0004 again (first on line 5)" in message
    assert "workflows.jsonl.gz, line 12, field task_id: a second row for t0001 (first on " \
           "line 1)" in message
    assert "workflows.jsonl.gz, line 13, field task_id: no task t9999 in tasks.jsonl.gz" \
           in message
    assert "workflows.jsonl.gz, field task_id: no row for 1 task (e.g. t0000)" in message


def test_bounds_are_finite_in_range_and_ordered(tmp_path: Path,
                                                shipped: dict[str, Any]) -> None:
    workflows = _copy(shipped[WORKFLOWS_FILE])
    workflows[0]["bounds"]["dp"] = math.inf
    workflows[1]["bounds"]["dp"] = 1.5
    workflows[2]["bounds"] = {"dp": 0.5, "naive": 0.9}
    workflows[3]["bounds"]["ppo"] = workflows[3]["bounds"]["dp"] + 0.01
    workflows[4]["differs_from_naive"] = not workflows[4]["differs_from_naive"]
    message = _one(tmp_path, shipped, workflows=workflows)
    for expected in ("line 1, field bounds.dp: inf is not a finite number",
                     "line 2, field bounds.dp: 1.5 is greater than the maximum of 1",
                     "line 3, field bounds.naive: 0.9 exceeds the optimum dp 0.5",
                     "line 4, field bounds.ppo: ",
                     "line 5, field differs_from_naive: "):
        assert expected in message, (expected, message)


def test_task_rows_are_checked_field_by_field(tmp_path: Path, shipped: dict[str, Any]) -> None:
    tasks = _copy(shipped[TASKS_FILE])
    tasks[0]["worded"] = ["no_such_input"]
    tasks[1]["id"] = "t0001\nFAILED"
    tasks[2]["inputs"]["extra"] = {"nested": True}
    tasks[3]["schema"] = "resilibench.task/9"
    tasks[4]["surprise"] = 1
    first_tool = next(iter(tasks[5]["step_arguments"]))
    tasks[5]["step_arguments"][first_tool] = {"bogus": 1}
    tasks[6]["step_arguments"]["computation_optimizer"] = {}
    message = _one(tmp_path, shipped, tasks=tasks)
    for expected in ("line 1, field worded[0]: 'no_such_input' is not a key of inputs",
                     "line 2, field id: 't0001\\nFAILED' does not match",
                     "line 3, field inputs.extra: {'nested': True} is not of type",
                     "line 4, field schema: 'resilibench.task/9', expected "
                     "'resilibench.task/1'",
                     "line 5: Additional properties are not allowed ('surprise' was "
                     "unexpected)",
                     f"line 6, field step_arguments.{first_tool}: ",
                     "line 7, field step_arguments.computation_optimizer: computation_optimizer is "
                     "neither"):
        assert expected in message, (expected, message)


def test_the_manifest_says_the_truth_about_the_tasks(tmp_path: Path,
                                                     shipped: dict[str, Any]) -> None:
    directory = _set(tmp_path, shipped)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest.update(total=13, schema="resilibench.manifest/0", generator_hash="xyz",
                    counts={"simple_task": {"easy": 5}})
    (directory / "manifest.json").write_text(json.dumps(manifest))
    message = _load_error(directory)
    assert "manifest.json, field schema: 'resilibench.manifest/0', expected" in message
    assert "manifest.json, field generator_hash: 'xyz' does not match" in message
    manifest["schema"], manifest["generator_hash"] = "resilibench.manifest/1", "0" * 64
    (directory / "manifest.json").write_text(json.dumps(manifest))
    message = _load_error(directory)
    assert "manifest.json, field total: 13, but tasks.jsonl.gz holds 12 tasks" in message
    assert "manifest.json, field counts.simple_task.easy: 5, but tasks.jsonl.gz holds 1" \
           in message


@pytest.mark.parametrize(("report", "expected"), [
    (None, "solver_report.json: missing: `resilibench solve --exact"),
    (b"\x00garbage", "solver_report.json: not JSON"),
    (b"[1, 2]", "solver_report.json: [1, 2] is not of type object"),
    (json.dumps({"schema": "resilibench.solver_report/1", "dp_mean": 0.9, "naive_mean": 0.8,
                 "config": {"base_success": 0.8, "max_turns": 10, "tasks": 99}}).encode(),
     "solver_report.json, field config.tasks: 99, but tasks.jsonl.gz holds 12 tasks"),
    (b'{"schema": "resilibench.solver_report/1", "dp_mean": NaN, "naive_mean": 0.8, '
     b'"config": {"base_success": 0.8, "max_turns": 10, "tasks": 12}}',
     "solver_report.json, field dp_mean: nan is not a finite number"),
])
def test_the_solver_report_is_there_and_well_formed(
        tmp_path: Path, shipped: dict[str, Any], report: bytes | None, expected: str) -> None:
    directory = _set(tmp_path, shipped)
    if report is None:
        (directory / SOLVER_REPORT).unlink()
    else:
        (directory / SOLVER_REPORT).write_bytes(report)
    assert expected in _load_error(directory)
    load_tasks.cache_clear()
    assert len(load_tasks(directory, require_workflows=False)) == 12  # the solver's read


# --- the folder -----------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "expected"), [
    ("../../etc/passwd", "a path with '..'"),
    ("/etc/passwd", "an absolute path"),
    ("C:\\\\x", "not a file name"),
    ("not-there.jsonl.gz", "listed, but no such file"),
])
def test_the_manifest_lists_only_files_inside_the_folder(
        tmp_path: Path, shipped: dict[str, Any], name: str, expected: str) -> None:
    directory = _set(tmp_path, shipped)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": "0" * 64, "bytes": 10}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    message = _load_error(directory)
    assert f"manifest.json, field files[{json.dumps(name)}]: {expected}" in message, message


def test_no_file_of_the_set_is_a_symlink_out_of_it(tmp_path: Path,
                                                   shipped: dict[str, Any]) -> None:
    directory = _set(tmp_path, shipped)
    outside = tmp_path / "elsewhere.jsonl.gz"
    (directory / WORKFLOWS_FILE).rename(outside)
    (directory / WORKFLOWS_FILE).symlink_to(outside)  # same bytes, its sha256 still right
    (tmp_path / "report.json").write_bytes((directory / SOLVER_REPORT).read_bytes())
    (directory / SOLVER_REPORT).unlink()
    (directory / SOLVER_REPORT).symlink_to(tmp_path / "report.json")
    message = _load_error(directory)
    assert 'manifest.json, field files["workflows.jsonl.gz"]: a symlink out of the set' \
           in message
    assert f"{directory / SOLVER_REPORT}: a symlink out of the set's folder" in message


def test_a_symlink_inside_the_folder_is_fine(tmp_path: Path, shipped: dict[str, Any]) -> None:
    directory = _set(tmp_path, shipped)
    (directory / "data").mkdir()
    (directory / WORKFLOWS_FILE).rename(directory / "data" / WORKFLOWS_FILE)
    (directory / WORKFLOWS_FILE).symlink_to(directory / "data" / WORKFLOWS_FILE)
    load_tasks.cache_clear()
    assert len(load_tasks(directory)) == 12


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_in_place_of_a_file_is_refused_without_reading_it(
        tmp_path: Path, shipped: dict[str, Any]) -> None:
    """Reading a FIFO waits for a writer that never comes: nothing of the set may hang."""
    directory = _set(tmp_path, shipped)
    (directory / WORKFLOWS_FILE).unlink()
    os.mkfifo(directory / WORKFLOWS_FILE)
    assert 'files["workflows.jsonl.gz"]: not a regular file' in _load_error(directory)
    (directory / WORKFLOWS_FILE).unlink()
    os.replace(directory / "manifest.json", tmp_path / "manifest.json")
    os.mkfifo(directory / "manifest.json")
    assert "manifest.json is not a regular file" in _load_error(directory)


def test_check_paths_names_every_bad_entry_at_once(tmp_path: Path) -> None:
    (tmp_path / TASKS_FILE).write_bytes(b"x")
    manifest = {"files": {"../a": {}, "/b": {}, "c": {}, TASKS_FILE: {"bytes": 2}}}
    with pytest.raises(FixtureError, match=r"\(4 problems;") as caught:
        check_paths(tmp_path, manifest, complete=False)
    assert "1 bytes on disk, 2 listed: the file was changed or damaged" in str(caught.value)


# --- hostile content: problems, never a crash -----------------------------------------------
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=12)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (a key of an object, an index of a list)."""
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _paths(child, (*path, i))
    return found


def _put(row: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    row = json.loads(json.dumps(row))
    if not path:
        return value if isinstance(value, dict) else {"schema": value}
    node = row
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return row


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_value_anywhere_is_a_problem_never_a_crash(data: st.DataObject) -> None:
    """Whatever a hostile file puts wherever: a list of problems, each one line."""
    tasks, workflows = _SAMPLE[TASKS_FILE], _SAMPLE[WORKFLOWS_FILE]
    file = data.draw(st.sampled_from([TASKS_FILE, WORKFLOWS_FILE]))
    rows = tasks if file == TASKS_FILE else workflows
    index = data.draw(st.integers(0, len(rows) - 1))
    path = data.draw(st.sampled_from(_paths(rows[index])))
    changed = [*rows[:index], _put(rows[index], path, data.draw(_JSON)), *rows[index + 1:]]
    tasks, workflows = (changed, workflows) if file == TASKS_FILE else (tasks, changed)
    manifest = {"schema": "resilibench.manifest/1", "total": len(tasks),
                "files": {TASKS_FILE: {"sha256": "0" * 64, "bytes": 1}},
                "counts": {"simple_task": {"easy": 1}}}
    problems = content_problems(manifest, list(enumerate(tasks, 1)),
                                list(enumerate(workflows, 1)), None)
    assert all("\n" not in problem.render(Path("/set")) for problem in problems)


def _first(name: str, count: int) -> list[dict[str, Any]]:
    with gzip.open(task_set_dir("default") / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in itertools.islice(fh, count)]


_SAMPLE = {name: _first(name, 3) for name in (TASKS_FILE, WORKFLOWS_FILE)}
