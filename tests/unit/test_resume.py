"""The episode log: a header naming the options, one episode a line, torn last lines cut or
skipped, secrets masked, removed only when asked (the end-to-end runs: tests/plugin)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_resilibench.base.redact import register_secret
from pytest_resilibench.integration.resume import (
    LOG_SCHEMA,
    EpisodeLog,
    differences,
    log_path,
    read_log,
    read_source,
    resume_key,
)

KEY = resume_key({"seed": 0, "max_turns": 10}, trajectories=False)


def episode(i: int, **extra: object) -> str:
    return json.dumps({"schema": "resilibench.episode/1", "id": f"e{i}", "model": "m",
                       "variant": "optimal", "task_id": f"t{i:04d}", "outcome": "full",
                       **extra})


def test_log_round_trip_and_header(tmp_path: Path) -> None:
    path = log_path(tmp_path / "run.json")
    assert path.name == "run.json.episodes.jsonl"
    log = EpisodeLog(path, KEY, keep=False)
    for i in range(3):
        log.append(episode(i))
    log.close()
    header = json.loads(path.read_text().splitlines()[0])
    assert header == {"schema": LOG_SCHEMA, "resume": KEY}
    source = read_source(path)
    assert source.key == KEY and sorted(source.episodes) == ["e0", "e1", "e2"]
    assert source.skipped == 0


def test_a_torn_last_line_is_skipped_then_cut_before_appending(tmp_path: Path) -> None:
    path = log_path(tmp_path / "run.json")
    log = EpisodeLog(path, KEY, keep=False)
    log.append(episode(0))
    log.close()
    with open(path, "a", encoding="utf-8") as fh:  # a writer killed mid-line
        fh.write(episode(1)[:25])
    assert read_log(path).skipped == 1
    log = EpisodeLog(path, KEY, keep=True)
    log.append(episode(2))
    log.close()
    source = read_log(path)
    assert sorted(source.episodes) == ["e0", "e2"] and source.skipped == 0


def test_secrets_never_reach_the_log(tmp_path: Path) -> None:
    register_secret("gw-log-secret-5150")
    path = log_path(tmp_path / "run.json")
    log = EpisodeLog(path, KEY, keep=False)
    log.append(episode(0, infra_error="HTTP 401 for key gw-log-secret-5150 at "
                                      "http://u:pw@127.0.0.1:1/v1"))
    log.close(remove=False)
    text = path.read_text()
    assert "gw-log-secret-5150" not in text and "u:pw" not in text
    assert "key *** at http://***@127.0.0.1:1/v1" in text


def test_close_removes_only_when_asked_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    path = log_path(tmp_path / "run.json")
    EpisodeLog(path, KEY, keep=False).close(remove=True)
    assert not path.exists()
    path.write_text('{"schema": "something else"}\n')
    with pytest.raises(ValueError, match="not a resilibench episode log"):
        read_log(path)
    assert read_log(path, check=False).episodes == {}


def test_differences_name_what_changed() -> None:
    other = resume_key({"seed": 3, "max_turns": 10}, trajectories=True)
    assert differences(KEY, other) == ["seed: recorded 0, now 3",
                                       "trajectories: recorded False, now True"]


def _full_disk_under(log: EpisodeLog) -> None:
    """Every later write of the log meets a real ENOSPC: its descriptor now is /dev/full."""
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, log._fd)
    os.close(full)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_log_whose_disk_fills_stops_and_says_why_without_raising(tmp_path: Path) -> None:
    path = log_path(tmp_path / "run.json")
    log = EpisodeLog(path, KEY, keep=False)
    log.append(episode(0))
    _full_disk_under(log)
    for i in range(1, 4):
        log.append(episode(i))  # the run goes on: its spool keeps them
    assert (log.episodes, log.error) == (1, "No space left on device")
    log.close()
    log.close(remove=True)
    assert not path.exists()
