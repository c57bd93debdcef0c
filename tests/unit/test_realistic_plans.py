"""The realistic profile's plans, solved once per task structure and kept on disk
(core/realistic_plans.py, docs/FAULTS.md: The default task set under `realistic`): a cold
cache solves each structure once and writes one entry each, a warm one solves none, a plan
read back is the solved plan byte for byte, and a damaged or foreign entry is solved again."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pytest_resilibench.core import faults as faults_module
from pytest_resilibench.core import realistic_plans
from pytest_resilibench.core.faults import task_faults
from pytest_resilibench.core.optimum.realistic import realistic_solution
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import Task, load_tasks, task_set_dir

# Default-set tasks whose structures solve in a fraction of a second; t0090 shares t0000's.
IDS = ("t0000", "t0001", "t0002", "t0090", "t0003")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder, and a process that knows no path yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(realistic_plans, "_TOOLS", {})
    yield tmp_path / "resilibench" / "checked" / realistic_plans.KIND


def _forget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process: nothing known but what is on disk."""
    monkeypatch.setattr(realistic_plans, "_TOOLS", {})


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    by_id = {t.id: t for t in load_tasks(task_set_dir("default")).tasks}
    return [by_id[i] for i in IDS]


def _solve(tasks: Sequence[Task]) -> int:
    before = realistic_plans.solved_count()
    returned = realistic_plans.solve_missing(tasks, default_registry())
    assert realistic_plans.solved_count() - before == returned
    return returned


def _plans(tasks: list[Task]) -> list[str]:
    return [json.dumps(realistic_plans.parent_plan(t, default_registry()).to_json())
            for t in tasks]


def test_a_cold_cache_solves_each_structure_once_and_a_warm_one_none(
        cache: Path, tasks: list[Task], monkeypatch: pytest.MonkeyPatch) -> None:
    structures = {realistic_plans._structure(t, default_registry()) for t in tasks}
    assert len(structures) == 4  # two of the tasks share one
    progress: list[tuple[int, int]] = []
    assert realistic_plans.solve_missing(tasks, default_registry(),
                                         lambda d, n: progress.append((d, n))) == 4
    assert progress == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert len(list(cache.iterdir())) == 4
    assert _solve(tasks) == 0  # known to this process
    _forget(monkeypatch)
    progress.clear()
    assert realistic_plans.solve_missing(tasks, default_registry(),
                                         lambda d, n: progress.append((d, n))) == 0
    assert progress == []  # nothing to solve, nothing shown
    before = realistic_plans.solved_count()
    _plans(tasks)  # the prompts' path reads too
    assert realistic_plans.solved_count() == before


def test_a_plan_read_from_the_cache_is_the_solved_plan_byte_for_byte(
        cache: Path, tasks: list[Task], monkeypatch: pytest.MonkeyPatch) -> None:
    solved = [json.dumps(realistic_solution(t, registry=default_registry()).workflow.to_json())
              for t in tasks]
    assert _plans(tasks) == solved  # cold: solved here (lazily, as a worker without the cache)
    _forget(monkeypatch)
    before = realistic_plans.solved_count()
    assert _plans(tasks) == solved  # warm: read back
    assert realistic_plans.solved_count() == before


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "other key",
                                    "unknown tool", "steps out of order", "not a list"])
def test_a_damaged_or_foreign_entry_is_solved_again(
        cache: Path, tasks: list[Task], monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    task, other = tasks[0], tasks[1]
    assert _solve([task, other]) == 2
    entries = {p.name: p.read_bytes() for p in cache.iterdir()}
    key = realistic_plans._disk_key(task_faults(task, default_registry()),
                                    default_registry())
    good = json.loads(entries[key])
    path = cache / key
    bad: object
    if damage == "garbage":
        path.write_bytes(b"\x00\xffnot json")
    elif damage == "truncated":
        path.write_bytes(entries[key][:-5])
    elif damage == "foreign":  # another structure's entry under this key
        (other_key,) = set(entries) - {key}
        path.write_bytes(entries[other_key])
    else:
        bad = dict(good)
        if damage == "other key":
            bad["key"] = "0" * 64
        elif damage == "unknown tool":
            bad["tools"] = [*good["tools"][:-1], "file_deleter"]
        elif damage == "steps out of order":
            bad["tools"] = list(reversed(good["tools"]))
        else:
            bad["tools"] = "x"
        path.write_text(json.dumps(bad))
    _forget(monkeypatch)
    assert _solve([task, other]) == 1
    assert path.read_bytes() == entries[key]  # rewritten sound


def test_the_key_holds_the_profile_and_the_solver(
        cache: Path, tasks: list[Task], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another rate or another solver source is another entry, never a stale plan."""
    faults = task_faults(tasks[0], default_registry())
    key = realistic_plans._disk_key(faults, default_registry())
    monkeypatch.setattr(faults_module, "OUTAGE_RATE", 0.2)
    assert realistic_plans._disk_key(faults, default_registry()) != key
    monkeypatch.undo()
    monkeypatch.setattr(realistic_plans, "_solver_digest", lambda: "another solver")
    assert realistic_plans._disk_key(faults, default_registry()) != key
    other = task_faults(tasks[1], default_registry())
    assert realistic_plans._disk_key(other, default_registry()) != key


def test_stored_plans_are_neither_solved_nor_cached(cache: Path) -> None:
    paper = list(load_tasks(task_set_dir("paper")).tasks[:40])
    assert _solve(paper) == 0
    assert not cache.exists()


def test_an_unwritable_cache_only_means_solving_again(
        tmp_path: Path, tasks: list[Task], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "blocked").write_text("a file where a folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocked"))
    monkeypatch.setattr(realistic_plans, "_TOOLS", {})
    assert _solve(tasks[:1]) == 1
    _forget(monkeypatch)
    assert _solve(tasks[:1]) == 1
