"""ResiliSession: the gate set-up at start-up and the pairing fields of its cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.session import ResiliSession
from pytest_resilibench.reporting.sequential import pair_key


def session(tmp_path: Path, **options: object) -> ResiliSession:
    config = RunConfig(models=("builtin:follower",), sample=1, **options)  # type: ignore[arg-type]
    return ResiliSession(config, rootdir=tmp_path)


def test_pair_fields_of_a_case_are_those_its_episode_carries(tmp_path: Path) -> None:
    state = session(tmp_path, variants=("optimal", "flawed"), flaws=("missing_step",),
                    base_success=(0.8, 0.6), seed=3)
    try:
        for case in state.cases[::7]:
            record = state.result(case).summary_json()
            for with_model in (True, False):
                assert pair_key(record, with_model=with_model) == pair_key(
                    state.pair_fields(case), with_model=with_model)
    finally:
        state.close()


def test_a_sequential_gate_needs_a_readable_baseline(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs --resili-baseline"):
        session(tmp_path, gate="sequential").prepare_gate()
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="--resili-baseline"):
        session(tmp_path, gate="sequential", baseline=bad).prepare_gate()
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"schema": "resilibench.report/1", "episodes": [
        {"model": "builtin:follower", "variant": "optimal", "task_id": "t0000",
         "outcome": "full"}]}))
    state = session(tmp_path, gate="sequential", baseline=good)
    state.prepare_gate()
    assert state.sequential is not None and state.baseline is not None
    fixed = session(tmp_path, baseline=good)
    fixed.prepare_gate()
    assert fixed.sequential is None and fixed.baseline == state.baseline


def test_without_a_json_report_an_item_carries_just_the_row_the_gathering_keeps(
        tmp_path: Path) -> None:
    """No report to write: the episode's text holds only `SLIM_FIELDS`, and the controller's
    store makes of it the very row it made of the whole summary."""
    from pytest_resilibench.integration.store import SLIM_FIELDS, EpisodeStore

    slim = session(tmp_path, variants=("optimal", "flawed"), flaws=("missing_step",))
    full = session(tmp_path, variants=("optimal", "flawed"), flaws=("missing_step",),
                   report=tmp_path / "run.json")
    try:
        for case in slim.cases[::5]:
            record = slim.result(case)
            text = slim.episode_json(record)
            assert set(json.loads(text)) <= set(SLIM_FIELDS)
            whole = full.episode_json(full.result(case))
            assert set(json.loads(whole)) > set(json.loads(text))
            kept = EpisodeStore()
            assert EpisodeStore(records=False).add(text) == kept.add(whole)
            kept.close()
    finally:
        slim.close()
        full.close()
