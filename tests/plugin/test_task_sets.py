"""Choosing the task set: the shipped default and paper sets, and one's own from
`resilibench generate --seed S --out DIR`; the report and the terminal say which ran."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import load_tasks, task_set_dir
from tests.plugin.conftest import load

SMALL = ["--resili-sample=1", "-p", "no:cacheprovider", "--resili-model=builtin:oracle",
         "--resili-variants=optimal"]


def _sha(directory: Path) -> str:
    return hashlib.sha256((directory / "tasks.jsonl.gz").read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["default", "paper"])
def test_a_shipped_set_is_named_and_hashed_in_the_report_and_terminal(
        suite: pytest.Pytester, name: str) -> None:
    report = suite.path / "run.json"
    result = suite.runpytest(*SMALL, f"--resili-task-set={name}", f"--resili-report={report}")
    result.assert_outcomes()
    data = load(report)
    identity = data["config"]["task_set_identity"]
    sha = _sha(task_set_dir(name))
    assert identity == {"name": name, "tasks_sha256": sha, "tasks": 5040}
    assert data["config"]["task_set"] == name
    result.stdout.fnmatch_lines([f"task set: {name} (5040 tasks, tasks.jsonl.gz sha256 "
                                 f"{sha[:12]})"])


def test_a_private_set_from_generate_runs_and_is_recorded(suite: pytest.Pytester,
                                                         tmp_path: Path) -> None:
    private = tmp_path / "held-out"
    assert main(["generate", "--seed", "77", "--per-cell", "2", "--out", str(private)]) == 0
    report = suite.path / "run.json"
    result = suite.runpytest(*SMALL, f"--resili-tasks={private}", f"--resili-report={report}")
    result.assert_outcomes()
    data = load(report)
    assert data["config"]["task_set_identity"] == {
        "name": str(private), "tasks_sha256": _sha(private), "tasks": 30}
    ran = {e["task_id"]: e["task_type"] for e in data["episodes"]}
    own = load_tasks(private).by_id
    assert len(ran) == 15  # one task per type x difficulty, of the private set
    assert all(own[task_id].type == task_type for task_id, task_type in ran.items())
    result.stdout.fnmatch_lines([f"task set: {private} (30 tasks, *"])


def test_a_folder_without_tasks_or_an_unknown_set_stops_at_start(suite: pytest.Pytester,
                                                                tmp_path: Path) -> None:
    result = suite.runpytest(*SMALL, f"--resili-tasks={tmp_path}")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*{tmp_path} holds no tasks.jsonl.gz*resilibench generate*"])
    result = suite.runpytest(*SMALL, "--resili-task-set=private")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*private*default, paper*"])


def test_a_set_whose_task_asks_a_step_twice_runs_under_both_profiles(
        suite: pytest.Pytester, tmp_path: Path) -> None:
    """docs/BENCHMARK.md, Repeated steps: a task set of one's own may ask a step twice; the
    paper profile runs it (the oracle does both notices), and so does the realistic one,
    with a turn more for the repeat (docs/FAULTS.md)."""
    from pytest_resilibench.solver.generate import GeneratorConfig, write_fixtures
    from pytest_resilibench.solver.solve import solve_all

    from pytest_resilibench.core.faults import realistic_turns
    from tests.solver.sample_tasks import NOTICING

    own = tmp_path / "repeats"
    write_fixtures([NOTICING], own, GeneratorConfig(per_cell=1))
    solve_all([NOTICING], own, progress=False, log=lambda _: None)
    report = suite.path / "run.json"
    result = suite.runpytest(*SMALL, f"--resili-tasks={own}", f"--resili-report={report}",
                             "--resili-base-success=1.0")  # failures only from the history
    assert result.ret == 0
    episode, = load(report)["episodes"]
    # Full: both notices done, in place, and no third (Scoring: Repeated steps).
    assert episode["task_id"] == NOTICING.id and episode["outcome"] == "full"
    assert episode["coverage"] == 1.0 and episode["tool_calls"] >= 6
    result = suite.runpytest(*SMALL, f"--resili-tasks={own}", "--resili-faults=realistic",
                             f"--resili-report={report}")
    assert result.ret in (0, 1)  # the episode ran (its outcome is the draw's)
    episode, = load(report)["episodes"]
    closure = len(default_registry().closure(NOTICING.required_tools))
    assert episode["max_turns"] == realistic_turns(closure + 1) and episode["outcome"] != "error"
