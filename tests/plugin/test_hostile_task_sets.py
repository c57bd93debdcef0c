"""A task set given with `--resili-tasks=DIR` is checked by its content, not by its hashes
(core/task_set_check.py): each corruption below is made to a real generated set, the manifest
is hashed again (so the sha256 check passes, as it would for anyone who edits a shared set),
and the run stops at start-up, before any episode, with exit 4 and one line naming the file,
the line and the field; never a traceback."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.core.fixture_files import write_fixture_file

SMALL = ["--resili-sample=1", "-p", "no:cacheprovider", "--resili-model=builtin:oracle",
         "--resili-variants=optimal"]
TASKS, WORKFLOWS = "tasks.jsonl.gz", "workflows.jsonl.gz"
Rows = list[dict[str, Any]]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real set from `resilibench generate` (15 tasks, their workflows, solver report)."""
    out = tmp_path_factory.mktemp("generated") / "set"
    assert main(["generate", "--seed", "46", "--per-cell", "1", "--out", str(out)]) == 0
    return out


def _rows(directory: Path, name: str) -> Rows:
    with gzip.open(directory / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _rewrite(directory: Path, name: str, change: Callable[[Rows], Rows | None]) -> None:
    """Change a JSON-lines file's rows and record its new sha256 in the manifest, as
    `write_fixture_file` does for the generator: the hash check then passes."""
    rows = _rows(directory, name)
    rows = change(rows) or rows
    text = "".join(json.dumps(row, allow_nan=True) + "\n" for row in rows)
    write_fixture_file(directory, name, gzip.compress(text.encode(), mtime=0))


def _manifest(directory: Path, change: Callable[[dict[str, Any]], None]) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    change(manifest)
    (directory / "manifest.json").write_text(json.dumps(manifest))


def _step_tool(rows: Rows) -> None:
    rows[0]["optimal"]["steps"][0]["tool"] = "utility_teleporter"


def _empty_plan(rows: Rows) -> None:
    rows[1]["optimal"]["steps"] = []


def _duplicate_row(rows: Rows) -> Rows:
    return [*rows, rows[0]]


def _nan_bound(rows: Rows) -> None:
    rows[2]["bounds"]["dp"] = float("nan")


def _string_bound(rows: Rows) -> None:
    rows[2]["bounds"]["naive"] = "0.9"


def _insane(rows: Rows) -> None:
    rows[3]["difficulty"] = "insane"


def _constraints_text(rows: Rows) -> None:
    rows[4]["constraints"] = "finish within 10 turns"


def _corrupt(directory: Path, case: str) -> None:
    edits: dict[str, Callable[[], object]] = {
        "unknown tool in a plan": lambda: _rewrite(directory, WORKFLOWS, _step_tool),
        "empty plan": lambda: _rewrite(directory, WORKFLOWS, _empty_plan),
        "duplicate workflow row": lambda: _rewrite(directory, WORKFLOWS, _duplicate_row),
        "NaN bound": lambda: _rewrite(directory, WORKFLOWS, _nan_bound),
        "string bound": lambda: _rewrite(directory, WORKFLOWS, _string_bound),
        "difficulty insane": lambda: _rewrite(directory, TASKS, _insane),
        "constraints as a string": lambda: _rewrite(directory, TASKS, _constraints_text),
        "wrong total": lambda: _manifest(directory, lambda m: m.update(total=16)),
        "wrong schema": lambda: _manifest(directory,
                                          lambda m: m.update(schema="resilibench.manifest/9")),
        "a path out of the folder": lambda: _manifest(directory, lambda m: m["files"].update(
            {"../../etc/passwd": {"sha256": "0" * 64, "bytes": 1}})),
        "no solver report": lambda: (directory / "solver_report.json").unlink(),
        "garbage solver report": lambda: (directory / "solver_report.json").write_bytes(
            b"\x89PNG garbage"),
    }
    edits[case]()


CASES = [
    ("unknown tool in a plan", f"*{WORKFLOWS}, line 1, field optimal.steps[[]0[]].tool: unknown "
                               "tool 'utility_teleporter'*"),
    ("empty plan", f"*{WORKFLOWS}, line 2, field optimal.steps: [[][]] should be non-empty"),
    ("duplicate workflow row", f"*{WORKFLOWS}, line 16, field task_id: a second row for t0000 "
                               "(first on line 1)"),
    ("NaN bound", f"*{WORKFLOWS}, line 3, field bounds.dp: nan is not a finite number"),
    ("string bound", f"*{WORKFLOWS}, line 3, field bounds.naive: '0.9' is not of type number"),
    ("difficulty insane", f"*{TASKS}, line 4, field difficulty: 'insane' is not one of easy, "
                          "medium, hard"),
    ("constraints as a string", f"*{TASKS}, line 5, field constraints: 'finish within 10 "
                                "turns' is not of type array"),
    ("wrong total", "*manifest.json, field total: 16, but tasks.jsonl.gz holds 15 tasks"),
    ("wrong schema", "*manifest.json, field schema: 'resilibench.manifest/9', expected "
                     "'resilibench.manifest/1'"),
    ("a path out of the folder", '*manifest.json, field files[[]"../../etc/passwd"[]]: a path '
                                 "with '..'*"),
    ("no solver report", "*solver_report.json: missing: `resilibench solve --exact*"),
    ("garbage solver report", "*solver_report.json: not JSON (*"),
]


@pytest.mark.parametrize(("case", "line"), CASES, ids=[case for case, _ in CASES])
def test_a_corrupted_set_stops_the_run_at_start_up_naming_file_line_and_field(
        suite: pytest.Pytester, generated: Path, tmp_path: Path, case: str, line: str) -> None:
    corrupted = tmp_path / "shared-set"
    shutil.copytree(generated, corrupted)
    _corrupt(corrupted, case)
    report = suite.path / "run.json"
    result = suite.runpytest(*SMALL, f"--resili-tasks={corrupted}", f"--resili-report={report}")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"ERROR: {corrupted} is not a sound task set (*",
                                 f"  {corrupted}/{line}"])
    output = "\n".join([*result.outlines, *result.errlines])
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert not report.exists()  # stopped before any episode


def test_the_untouched_copy_runs(suite: pytest.Pytester, generated: Path,
                                 tmp_path: Path) -> None:
    """The corruptions above are what stops those runs: the same copy, untouched, runs."""
    copy = tmp_path / "shared-set"
    shutil.copytree(generated, copy)
    result = suite.runpytest(*SMALL, f"--resili-tasks={copy}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ResiliBench: 15 episodes: 15 full, *"])


def test_several_problems_come_in_one_message(suite: pytest.Pytester, generated: Path,
                                              tmp_path: Path) -> None:
    corrupted = tmp_path / "shared-set"
    shutil.copytree(generated, corrupted)
    for case in ("unknown tool in a plan", "NaN bound", "constraints as a string",
                 "wrong total", "garbage solver report"):
        _corrupt(corrupted, case)
    result = suite.runpytest(*SMALL, f"--resili-tasks={corrupted}")
    assert result.ret == 4
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert errors == [f"ERROR: {corrupted} is not a sound task set (5 problems; `resilibench "
                      "schema tasks|workflows|realistic-workflows|manifest|solver-report` "
                      "prints each file's schema):"]
    wanted = dict(CASES)
    result.stderr.fnmatch_lines([f"  {corrupted}/{wanted[case]}" for case in (
        "wrong total", "constraints as a string", "unknown tool in a plan", "NaN bound",
        "garbage solver report")])
