"""ResiliSession: the gate set-up at start-up and the pairing fields of its cases."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.session import ResiliSession
from pytest_resilibench.reporting.pairing import pair_key


def session(tmp_path: Path, **options: object) -> ResiliSession:
    config = RunConfig(models=("builtin:follower",), sample=1, **options)  # type: ignore[arg-type]
    return ResiliSession(config, rootdir=tmp_path)


def test_pair_fields_of_a_case_are_those_its_episode_carries(tmp_path: Path) -> None:
    state = session(tmp_path, variants=("optimal", "flawed"), flaws=("missing_step",),
                    base_success=(0.8, 0.6), seed=3)
    try:
        for case in state.cases[::7]:
            record = state.result(case).summary_json()
            fields = state.pair_fields(case)
            assert pair_key(record, str(record["model"])) == pair_key(fields, case.model)
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


# --- faults around the report (the real full disk, a tmpfs: tests/plugin/test_report_faults) --
def _gather(state: ResiliSession, count: int, planned: int | None = None) -> None:
    """What a run's controller does: plan (`planned` cases, `count` by default), gather
    `count` episodes, summarise."""
    state.plan({case.id: f"suite.py::test[{case.id}]"
                for case in state.cases[:planned or count]})
    for case in state.cases[:count]:
        state.add_episode(state.episode_json(state.result(case)), None, case.id)
    state.finish()


def _full_disk_under_the_log(state: ResiliSession) -> None:
    """The log's later writes meet a real ENOSPC: its descriptor is now /dev/full."""
    log = state._log
    assert log is not None
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, log._fd)
    os.close(full)


def _no_room_for(report: Path) -> None:
    """The report's folder is gone, a file stands at its name: the report cannot be written
    (the open log, moved with its folder, still can)."""
    report.parent.rename(report.parent.with_name("moved"))
    report.parent.write_text("not a folder")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_log_and_a_report_the_disk_cannot_take_leave_a_named_copy_of_every_episode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spare = tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spare))
    report = tmp_path / "out" / "run.json"
    state = session(tmp_path, report=report)
    try:
        state.prepare_resume()
        _full_disk_under_the_log(state)
        _gather(state, 6)  # no exception: the spool keeps them
        _no_room_for(report)
        state.write_report()
        [line] = state.lost
        copy = next(spare.iterdir())
        assert line.startswith(f"resilibench: could not write {report} (")
        assert line.endswith(f"its 6 episodes are kept in {copy}: free space, then copy it to "
                             f"{report}, or run again with --resili-resume={copy}")
        data = json.loads(copy.read_text())
        assert len(data["episodes"]) == 6 and data["complete"] is True
    finally:
        state.close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_log_that_failed_under_a_written_report_is_one_line(tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    log = Path(f"{report}.episodes.jsonl")
    state = session(tmp_path, report=report)
    try:
        state.prepare_resume()
        _full_disk_under_the_log(state)
        _gather(state, 4)
        state.write_report()
        assert len(json.loads(report.read_text())["episodes"]) == 4
        assert state.lost == [
            f"resilibench: the episode log {log} failed after 0 episodes (No space left on "
            f"device); the report {report} holds all 4: free space there before the next run "
            "(an interrupted one could not resume)"]
        assert not log.exists()  # the report holds them all
    finally:
        state.close()
    # Interrupted too: the report holds what the log lacks, and is what to resume from.
    state = session(tmp_path, report=report)
    try:
        state.prepare_resume()
        _full_disk_under_the_log(state)
        _gather(state, 4, planned=6)
        state.write_report()
        assert json.loads(report.read_text())["complete"] is False
        assert state.lost[-1] == (
            f"resilibench: the episode log {log} failed after 0 episodes (No space left on "
            f"device); the report {report} holds the 4 that arrived: free space there, then "
            f"run again with --resili-resume={report}")
        assert log.exists()
    finally:
        state.close()


def test_a_report_that_cannot_be_written_names_the_log_that_holds_its_episodes(
        tmp_path: Path) -> None:
    report = tmp_path / "out" / "run.json"
    state = session(tmp_path, report=report)
    try:
        state.prepare_resume()
        _gather(state, 5)
        _no_room_for(report)
        state.write_report()
        [line] = state.lost
        assert line.endswith(f"its 5 episodes are kept in {report}.episodes.jsonl: free space "
                             "there, then run the same command again (it replays them and "
                             "writes the report)")
        moved = tmp_path / "moved" / "run.json.episodes.jsonl"
        assert len(moved.read_text().splitlines()) == 1 + 5
    finally:
        state.close()


def test_the_report_is_locked_while_a_run_writes_it(tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    first = session(tmp_path, report=report)
    first.prepare_resume()
    lock = tmp_path / "run.json.lock"
    try:
        assert lock.read_text() == f"{os.getpid()}\n"
        second = session(tmp_path, report=report)
        with pytest.raises(ValueError, match=re.escape(
                f"--resili-report: another run (pid {os.getpid()}) is writing {report} (it "
                f"holds {lock}): wait for it to end, or give this run another --resili-report")):
            second.prepare_resume()
        second.close()
    finally:
        first.close()
    assert not lock.exists()
    third = session(tmp_path, report=report)
    third.prepare_resume()  # released by the first's end
    third.close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_with_nowhere_left_to_write_the_line_says_what_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.write_text("a file, not the temp dir")
    report = tmp_path / "out" / "run.json"
    state = session(tmp_path, report=report)
    try:
        state.prepare_resume()
        _full_disk_under_the_log(state)
        _gather(state, 2)
        _no_room_for(report)
        monkeypatch.setattr(tempfile, "tempdir", str(nowhere))  # the run's spool is made
        state.write_report()
        [line] = state.lost
        assert line.startswith(f"resilibench: could not write {report} (")
        assert f"nor in {nowhere} (Not a directory); the log {report}.episodes.jsonl holds " \
               "those that arrived before it failed (No space left on device): free space, " \
               "then run the same command again" in line
    finally:
        state.close()
