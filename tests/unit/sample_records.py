"""Helpers the runner, helper-process and batch tests share."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.integration.cases import Case
from pytest_resilibench.integration.runner import EpisodeRunner


def record_of(case: Case) -> EpisodeRecord:
    """An empty record with the case's identity: for tests that only move records around."""
    return EpisodeRecord(
        id=case.id, model=case.model, variant=case.variant.label, flaw=None,
        severity=None, task_id=case.task.id, task_type=case.task.type,
        difficulty=case.task.difficulty, repeat=case.repeat, seed=0,
        base_success=case.base_success, tool_mode="text", max_turns=10)


def summaries(runner: EpisodeRunner, todo: Sequence[Case], *, announce: bool = True
              ) -> list[dict[str, object]]:
    """The records `runner` gives for `todo` (announced first, or each on demand), as summary
    JSON without the one field that differs between two runs (`wall_time_s`); closes it."""
    try:
        if announce:
            runner.start(todo)
        got = [runner.result(case).summary_json() for case in todo]
    finally:
        runner.close()
    for record in got:
        record.pop("wall_time_s")
    return got
