"""`--resili-faults=realistic` never solves a plan its task set stores (issue 47): the default
set's shipped plans and those `resilibench generate` writes beside a set of your own are read,
with an empty cache, nothing solved and nothing said. A set that stores none has each task
structure's plan solved once per machine (core/realistic_plans.py, docs/FAULTS.md): a cold run
solves them on the controller with a progress line and keeps one entry per structure; a warm
run, workers included, solves none and says nothing; the report is the same either way and at
-n 0 and -n 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.core.faults import REALISTIC_PLANS
from tests.plugin.conftest import comparable, load

# Four small tasks (one per cell): a run of seconds.
ARGS = ["--resili-sample=1", "-p", "no:cacheprovider", "--resili-faults=realistic",
        "--resili-task-types=simple_task,basic_task", "--resili-difficulties=medium,hard"]
LINE = "solving realistic plans"


@pytest.fixture(scope="module")
def own_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A set of your own (another seed, one task a cell) as `resilibench generate` writes it,
    realistic plans included, and the same set without them."""
    root = tmp_path_factory.mktemp("own")
    with pytest.MonkeyPatch.context() as patch:  # the generator's own plan cache, apart
        patch.setenv("XDG_CACHE_HOME", str(root / "generator-cache"))
        assert main(["generate", "--seed", "9", "--per-cell", "1", "--out",
                     str(root / "with")]) == 0
    bare = root / "without"
    shutil.copytree(root / "with", bare)
    (bare / REALISTIC_PLANS).unlink()
    manifest = json.loads((bare / "manifest.json").read_text())
    del manifest["files"][REALISTIC_PLANS]
    (bare / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return root / "with", bare


def _folder(xdg: Path) -> Path:
    return xdg / "resilibench" / "checked" / "realistic-plans"


def _entries(xdg: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in _folder(xdg).iterdir()}


def _run(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdg: Path, report: Path,
         *extra: str) -> tuple[str, dict[str, object]]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}", *extra)
    assert result.ret in (0, 1), result.stdout.str() + result.stderr.str()
    return result.stdout.str() + result.stderr.str(), load(report)


@pytest.mark.parametrize("task_set", ["default", "own"])
def test_stored_plans_are_read_with_an_empty_cache_and_nothing_solved(
        suite: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        own_sets: tuple[Path, Path], task_set: str) -> None:
    where = [] if task_set == "default" else [f"--resili-tasks={own_sets[0]}"]
    output, report = _run(suite, monkeypatch, tmp_path / "xdg", tmp_path / "run.json",
                          "-n", "0", *where)
    assert LINE not in output
    assert not _folder(tmp_path / "xdg").exists()  # nothing solved, so nothing kept
    assert len(report["episodes"]) > 4  # type: ignore[arg-type]


def test_cold_runs_solve_once_warm_runs_read_and_reports_agree(
        suite: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        own_sets: tuple[Path, Path]) -> None:
    bare = f"--resili-tasks={own_sets[1]}"  # a set that stores no plan
    cold, warm_report = tmp_path / "cold", tmp_path / "warm.json"
    output, first = _run(suite, monkeypatch, cold, tmp_path / "cold.json", "-n", "0", bare)
    entries = _entries(cold)
    n = len(entries)
    assert n > 0
    assert output.count(f"{LINE}: 0/{n} structures") == 1
    assert f"{LINE}: {n}/{n} structures (first run for this task set; cached" in output

    output, warm = _run(suite, monkeypatch, cold, warm_report, "-n", "2", bare)
    assert LINE not in output
    assert _entries(cold) == entries  # no entry rewritten: nothing solved, workers included

    other = tmp_path / "other"
    output, spread = _run(suite, monkeypatch, other, tmp_path / "n2.json", "-n", "2", bare)
    assert output.count(f"{LINE}: 0/{n} structures") == 1  # the controller's, once
    assert sorted(_entries(other)) == sorted(entries)
    assert comparable(first) == comparable(warm) == comparable(spread)
    assert len(first["episodes"]) > 4  # type: ignore[arg-type]
