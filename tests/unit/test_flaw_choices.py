"""The choices file of a task set (core/flaw_choices.py): which candidate injection each task
shows, checked by its content as the set loads."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.base.names import FLAWS
from pytest_resilibench.core.fixture_files import FixtureError, write_fixture_file
from pytest_resilibench.core.flaw_choices import (
    FLAW_CHOICES_FILE,
    FLAW_CHOICES_SCHEMA,
    choice_problems,
    choices_bytes,
    read_choices,
)
from pytest_resilibench.core.flow_sense import sense_problems
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import TASK_SETS, load_tasks
from tests.unit.test_flaws import CHANGE_KINDS

MADE_BY = {"candidates": 4, "seed": 0}
IDS = {"t0000", "t0001", "t0002"}


def written(directory: Path, data: bytes) -> tuple[Path, dict[str, Any]]:
    return directory, write_fixture_file(directory, FLAW_CHOICES_FILE, data)


def test_choices_round_trip_with_the_zeros_left_out(tmp_path: Path) -> None:
    choices = {"missing_step/light": {"t0000": 3, "t0001": 0},
               "tool_misuse/medium": {"t0001": 1, "t0002": 0}}
    data = choices_bytes(choices, MADE_BY)
    assert data == choices_bytes(dict(reversed(choices.items())), MADE_BY)  # canonical
    stored = json.loads(gzip.decompress(data))
    assert stored["schema"] == FLAW_CHOICES_SCHEMA and stored["filter"] == MADE_BY
    assert stored["choices"] == {"missing_step/light": {"t0000": 3},
                                 "tool_misuse/medium": {"t0001": 1}}
    assert read_choices(*written(tmp_path, data), IDS) == {
        "t0000": {"missing_step/light": 3}, "t0001": {"tool_misuse/medium": 1}}


@pytest.mark.parametrize(("change", "problem"), [
    ({"schema": "resilibench.flaw_choices/0"}, "schema"),
    ({"filter": {}}, "filter.candidates"),
    ({"choices": {"no_flaw/light": {}}}, "not a flaw/severity"),
    ({"choices": {"missing_step/light": {"t9999": 1}}}, "no such task"),
    ({"choices": {"missing_step/light": {"t0000": 4}}}, "not a candidate index"),
    ({"choices": {"missing_step/light": {"t0000": 0}}}, "not a candidate index"),
    ({"choices": {"missing_step/light": {"t0000": True}}}, "not a candidate index"),
    ({"choices": []}, "choices is not an object"),
])
def test_an_unsound_file_names_its_problem(tmp_path: Path, change: dict[str, Any],
                                           problem: str) -> None:
    data = {**json.loads(gzip.decompress(choices_bytes({}, MADE_BY))), **change}
    assert any(problem in p for p in choice_problems(data, IDS))
    with pytest.raises(FixtureError, match=problem.split()[0]):
        read_choices(*written(tmp_path, gzip.compress(json.dumps(data).encode())), IDS)


def test_a_set_without_the_file_shows_candidate_zero(tmp_path: Path) -> None:
    assert read_choices(tmp_path, {"files": {}}, IDS) == {}
    paper = load_tasks(TASK_SETS["paper"])
    assert FLAW_CHOICES_FILE not in paper.manifest["files"]
    assert all(not t.flaw_choices for t in paper)


def test_the_default_set_shows_its_chosen_candidates() -> None:
    """The shipped file loads (sound, listed in the manifest), some task takes a candidate
    other than 0, and `plan_for` shows the chosen one."""
    tasks = load_tasks(TASK_SETS["default"])
    assert FLAW_CHOICES_FILE in tasks.manifest["files"]
    chosen = [(t, key, k) for t in tasks for key, k in sorted(t.flaw_choices.items())]
    assert chosen
    task, key, k = chosen[0]
    flaw, severity = key.split("/")
    assert flaw in FLAWS
    shown = plan_for(task, Variant("flawed", flaw, severity))
    assert shown == plan_for(task, Variant("flawed", flaw, severity), candidate=k)
    assert shown[1] is not None and shown[1]["candidate"] == k
    assert shown != plan_for(task, Variant("flawed", flaw, severity), candidate=0)


def test_a_kept_candidate_is_a_sensible_plan_with_the_flaw_s_changes() -> None:
    """On a sample of the default set: each kept candidate makes its flaw's kind of changes
    and is as sensible a flow as candidate 0 (core/flow_sense.py)."""
    tasks = list(load_tasks(TASK_SETS["default"]))[::40]
    kept = [(t, key, k) for t in tasks for key, k in sorted(t.flaw_choices.items())]
    assert kept
    for task, key, k in kept:
        flaw, severity = key.split("/")
        variant = Variant("flawed", flaw, severity)
        plan, record = plan_for(task, variant)
        first, _ = plan_for(task, variant, candidate=0)
        assert plan is not None and record is not None and first is not None
        assert {c["kind"] for c in record["changes"]} <= CHANGE_KINDS[flaw], (task.id, key)
        if not sense_problems(first.tools, default_registry()):
            assert not sense_problems(plan.tools, default_registry()), (task.id, key, k)
