"""Resuming a run: the episode log a run keeps beside its report, and reading episodes back.

While a run with `--resili-report=R.json` goes, the controller appends every episode that
arrives to `R.json.episodes.jsonl` (its first line names the configuration that wrote it):
each line is written at once, so killing any process loses nothing already received, and the
file is fsynced at least every `FSYNC_INTERVAL_S`, so a machine crash loses at most that much.
The final report is then written atomically (`report.write_report`); a complete one removes
the log. A run that did not finish (an interrupt, a lost worker, a killed controller) leaves
the log, and the next run with the same report path picks it up: its episodes are replayed,
only the missing ones run. Every draw is a pure function of the case (common random numbers),
so the resumed report equals an uninterrupted run's but for the timing fields.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_resilibench.base.jsonfile import loads_bounded
from pytest_resilibench.base.redact import redact
from pytest_resilibench.core.record import episode_problem

__all__ = ["LOG_SCHEMA", "RESUME_FIELDS", "EpisodeLog", "ResumeSource", "log_path",
           "read_log", "read_report", "read_source", "resume_key"]

LOG_SCHEMA = "resilibench.episode-log/1"
# The report's config fields that decide what an episode does. The selection (models,
# variants, sample, ...) only decides which episodes run, so a resumed run may change it:
# episodes are matched by id, which names the model, variant, task and repeat.
RESUME_FIELDS = ("seed", "max_turns", "tool_mode", "temperature", "model_args", "api", "env",
                 "faults", "package_version", "fixture_hash")
FSYNC_INTERVAL_S = 0.5  # an fsync costs ~1.5 ms: per episode it would slow fast runs by a third


def log_path(report: Path) -> Path:
    return report.with_name(report.name + ".episodes.jsonl")


def resume_key(report_config: Mapping[str, Any], *, trajectories: bool) -> dict[str, Any]:
    """What two runs must share for one's episodes to stand in for the other's, redacted as
    the report is (a secret in `model_args` is `***` there, and must compare equal)."""
    fields = {name: report_config.get(name) for name in RESUME_FIELDS}
    return {**json.loads(redact(json.dumps(fields))), "trajectories": trajectories}


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return [f"{name}: recorded {a.get(name)!r}, now {b.get(name)!r}"
            for name in sorted(a.keys() | b.keys())
            if a.get(name) != b.get(name)]


@dataclass
class ResumeSource:
    path: Path
    key: dict[str, Any]
    episodes: dict[str, str] = field(default_factory=dict)  # episode id -> its JSON text
    skipped: int = 0  # unreadable lines (a torn last write): those episodes run again


def _episode_line(line: str) -> tuple[str, str] | None:
    try:
        episode = loads_bounded(line)
    except ValueError:
        return None
    if episode_problem(episode) is not None or not isinstance(episode.get("id"), str):
        return None
    return episode["id"], line


def read_log(path: Path, *, check: bool = True) -> ResumeSource:
    """The episodes of an episode log. A header that is not ours is a ValueError; lines that
    cannot be read (a write torn by a kill) are skipped and counted."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.readline()
            try:
                header = loads_bounded(head)
            except ValueError:
                header = None
            if not isinstance(header, dict) or header.get("schema") != LOG_SCHEMA or \
                    not isinstance(header.get("resume"), dict):
                if not check:
                    return ResumeSource(path, {})
                raise ValueError(f"{path}: not a resilibench episode log ({LOG_SCHEMA})")
            source = ResumeSource(path, header["resume"])
            for line in fh:
                if not line.strip():
                    continue
                parsed = _episode_line(line.rstrip("\n"))
                if parsed is None:
                    source.skipped += 1
                else:
                    source.episodes[parsed[0]] = parsed[1]
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return source


def read_report(path: Path) -> ResumeSource:
    """The episodes of a JSON report (complete or not), with the key of its config."""
    from pytest_resilibench.reporting.report import load_report

    data = load_report(path)
    episodes = data["episodes"]
    key = resume_key(data["config"], trajectories=bool(episodes) and all(
        "messages" in ep for ep in episodes))
    source = ResumeSource(Path(path), key)
    for ep in episodes:
        if isinstance(ep.get("id"), str):
            source.episodes[ep["id"]] = json.dumps(ep)
    return source


def read_source(path: Path, *, check: bool = True) -> ResumeSource:
    """An episode log (by its name) or a report."""
    return read_log(path, check=check) if path.name.endswith(".episodes.jsonl") else \
        read_report(path)


class EpisodeLog:
    """The append-only log of one run's arrived episodes (controller only).

    A write that fails once the run goes (a full disk: ENOSPC, EIO) raises nothing: the log
    stops there, `error` says why and `episodes` how many it took; the run's spool still holds
    every episode, and the report (or its copy elsewhere) is what keeps them then."""

    def __init__(self, path: Path, key: Mapping[str, Any], *, keep: bool) -> None:
        """Open `path`: kept and appended to with `keep` (its header matched), else begun
        afresh. Raises OSError when the file cannot be written: checked at start-up."""
        self.path = path
        self.error: str | None = None
        self.episodes = 0  # appended by this run
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | (0 if keep else os.O_TRUNC)
        self._fd = os.open(path, flags, 0o644)
        end = os.lseek(self._fd, 0, os.SEEK_END)
        if keep and end:
            self._drop_torn_line(end)
        else:
            header = {"schema": LOG_SCHEMA, "resume": dict(key)}
            self._write(json.dumps(header, sort_keys=True))
        os.fsync(self._fd)
        self._synced = time.monotonic()

    def _drop_torn_line(self, end: int) -> None:
        """A killed writer may have left half a line: cut it, so appends start a line."""
        with open(self.path, "rb") as fh:
            fh.seek(max(0, end - 1))
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
        os.ftruncate(self._fd, data.rfind(b"\n") + 1)
        os.lseek(self._fd, 0, os.SEEK_END)

    def _write(self, line: str) -> None:
        # Redacted as the report is (`redact.py`): a replay then equals the report's line.
        data = (redact(line.replace("\n", " ")) + "\n").encode("utf-8", "surrogatepass")
        while data:  # os.write may write less than asked (a signal, a full pipe)
            data = data[os.write(self._fd, data):]

    def append(self, payload: str) -> None:
        if self._fd < 0:  # failed before (or closed): the spool keeps the episode
            return
        try:
            self._write(payload)
            now = time.monotonic()
            if now - self._synced >= FSYNC_INTERVAL_S:
                os.fsync(self._fd)
                self._synced = now
        except OSError as exc:
            self._fail(exc)
            return
        self.episodes += 1

    def _fail(self, exc: OSError) -> None:
        self.error = exc.strerror or str(exc)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = -1

    def close(self, *, remove: bool = False) -> None:
        """Sync and close (a failed sync sets `error`); `remove` once a complete report holds
        every episode."""
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._fail(exc)
            else:
                os.close(self._fd)
                self._fd = -1
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink(missing_ok=True)
