"""`--resili-faults=realistic` on the default set solves each task structure's plan once per
machine (core/realistic_plans.py, docs/FAULTS.md): a cold run solves them on the controller
with a progress line and keeps one entry per structure; a warm run, workers included, solves
none and says nothing; the report is the same either way and at -n 0 and -n 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugin.conftest import comparable, load

# Four small tasks (one per cell): a run of seconds.
ARGS = ["--resili-sample=1", "-p", "no:cacheprovider", "--resili-faults=realistic",
        "--resili-task-types=simple_task,basic_task", "--resili-difficulties=medium,hard"]
LINE = "solving realistic plans"


def _entries(xdg: Path) -> dict[str, tuple[int, int]]:
    folder = xdg / "resilibench" / "checked" / "realistic-plans"
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()}


def _run(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdg: Path, report: Path,
         *extra: str) -> tuple[str, dict[str, object]]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}", *extra)
    assert result.ret in (0, 1), result.stdout.str() + result.stderr.str()
    return result.stdout.str() + result.stderr.str(), load(report)


def test_cold_runs_solve_once_warm_runs_read_and_reports_agree(
        suite: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold, warm_report = tmp_path / "cold", tmp_path / "warm.json"
    output, first = _run(suite, monkeypatch, cold, tmp_path / "cold.json", "-n", "0")
    entries = _entries(cold)
    n = len(entries)
    assert n == 4
    assert output.count(f"{LINE}: 0/{n} structures") == 1
    assert f"{LINE}: {n}/{n} structures (first run for this task set; cached" in output

    output, warm = _run(suite, monkeypatch, cold, warm_report, "-n", "2")
    assert LINE not in output
    assert _entries(cold) == entries  # no entry rewritten: nothing solved, workers included

    other = tmp_path / "other"
    output, spread = _run(suite, monkeypatch, other, tmp_path / "n2.json", "-n", "2")
    assert output.count(f"{LINE}: 0/{n} structures") == 1  # the controller's, once
    assert sorted(_entries(other)) == sorted(entries)
    assert comparable(first) == comparable(warm) == comparable(spread)
    assert len(first["episodes"]) > 4  # type: ignore[arg-type]
