"""The realistic profile's plans, solved once per task structure and kept on disk
(core/realistic_plans.py, docs/FAULTS.md: The default task set under `realistic`): a cold
cache solves each structure once and writes one entry each, a warm one solves none, a plan
read back is the solved plan byte for byte, and a damaged or foreign entry is solved again.
A set's stored plans (the shipped sets', a set of your own once the run names it) are used
instead: the default set's sample runs solve nothing."""

from __future__ import annotations

import gzip
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
from pytest_resilibench.core.workflow import Workflow

# Default-set tasks whose structures solve in a fraction of a second; t0090 shares t0000's.
IDS = ("t0000", "t0001", "t0002", "t0090", "t0003")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder, a process that knows no path yet, and the default set's stored
    plans out of sight (its tasks stand for a set that stores none)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(realistic_plans, "_TOOLS", {})
    real = faults_module.stored_plans
    monkeypatch.setattr(faults_module, "stored_plans",
                        lambda d: {} if d == task_set_dir("default") else real(d))
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


def test_the_default_set_s_sample_is_stored_and_never_solved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default run (`--resili-faults=realistic`, the default sample and seed) reads every
    plan from the shipped file: with an empty cache nothing is solved, nothing is written, and
    the prompts' path reads the stored plan (issue 47: no minutes of solving at start)."""
    from pytest_resilibench.integration.cases import sample_tasks
    from pytest_resilibench.integration.options import RunConfig

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(realistic_plans, "_TOOLS", {})
    sample = sample_tasks(load_tasks(task_set_dir("default")).tasks, RunConfig())
    stored = faults_module.stored_plans(task_set_dir("default"))
    assert sample and {t.id for t in sample} <= set(stored)
    before = realistic_plans.solved_count()
    assert realistic_plans.solve_missing(sample, default_registry()) == 0
    assert [realistic_plans.parent_plan(t, default_registry()) for t in sample] == [
        Workflow.from_json(stored[t.id]) for t in sample]
    assert realistic_plans.solved_count() == before
    assert not (tmp_path / "resilibench").exists()


def test_a_set_of_your_own_s_stored_plans_are_used_once_the_run_names_it(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks of no shipped set (the paper's first five under other ids), with their plans
    stored beside them: solved until the set is named (`use_stored`), then read."""
    from pytest_resilibench.core.fixture_files import write_fixture_file
    from tests.unit.task_set_files import jsonl, write_task_set

    paper = task_set_dir("paper")
    rows = {}
    for name in ("tasks.jsonl.gz", "workflows.jsonl.gz", faults_module.REALISTIC_PLANS):
        lines = gzip.decompress((paper / name).read_bytes()).splitlines()[:5]
        rows[name] = [json.loads(line.replace(b'"t0', b'"own0')) for line in lines]
    own = write_task_set(tmp_path / "own", rows["tasks.jsonl.gz"], rows["workflows.jsonl.gz"])
    write_fixture_file(own, faults_module.REALISTIC_PLANS,
                       jsonl(rows[faults_module.REALISTIC_PLANS]))
    tasks = list(load_tasks(own).tasks)
    assert [t.id for t in tasks] == [f"own{i:04d}" for i in range(5)]
    monkeypatch.setattr(realistic_plans, "_OWN_SETS", [])
    assert _solve(tasks) > 0  # not named: solved
    _forget(monkeypatch)
    monkeypatch.setattr(realistic_plans, "_OWN_SETS", [])
    realistic_plans.use_stored(own)
    before = realistic_plans.solved_count()
    assert _solve(tasks) == 0
    assert [realistic_plans.parent_plan(t, default_registry()) for t in tasks] == [
        Workflow.from_json(r["optimal"]) for r in rows[faults_module.REALISTIC_PLANS]]
    assert realistic_plans.solved_count() == before


def test_a_plan_depends_on_no_flaw_injector(tmp_path: Path) -> None:
    """A stored plan is the parent a flawed variant is made from (core/prompts.py): solving
    one imports neither the flaw injectors nor the prompts, so a change there cannot make a
    stored plan stale (tests/unit/test_faults.py solves a sample again against the rest)."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "from pytest_resilibench.core import realistic_plans\n"
            "from pytest_resilibench.core.registry import default_registry\n"
            "from pytest_resilibench.core.tasks import load_tasks, task_set_dir\n"
            "task = load_tasks(task_set_dir('paper')).by_id['t0000']\n"
            "assert realistic_plans.solved_plan(task, default_registry()).steps\n"
            "print('\\n'.join(sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    loaded = set(done.stdout.split())
    assert "pytest_resilibench.core.optimum.realistic" in loaded
    assert not loaded & {"pytest_resilibench.core.flaws", "pytest_resilibench.core.prompts",
                         "pytest_resilibench.core.plan_audit"}


def test_an_unwritable_cache_only_means_solving_again(
        cache: Path, tmp_path: Path, tasks: list[Task], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "blocked").write_text("a file where a folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocked"))
    assert _solve(tasks[:1]) == 1
    _forget(monkeypatch)
    assert _solve(tasks[:1]) == 1
