"""The JSON report (schema `resilibench.report/1`), written atomically on the controller.

`config` and `episodes` depend only on what ran, never on workers or timing, so the report of
`-n 0`, `-n 2` and `-n 4` is the same but for the timing fields (`TIMING_FIELDS`) and
`environment`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_resilibench.base.atomic import atomic_open
from pytest_resilibench.base.outputs import prepare

__all__ = [
    "REPORT_SCHEMA", "TIMING_FIELDS", "envelope", "fixture_hash", "load_report", "write_report"]

REPORT_SCHEMA = "resilibench.report/1"
TIMING_FIELDS = ("wall_time_s",)


def fixture_hash(manifest: Mapping[str, Any]) -> str | None:
    """A short hash of the fixtures' manifest: two runs on different tasks never compare."""
    if not manifest:
        return None
    text = json.dumps(manifest, sort_keys=True).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def _git_commit(cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def envelope(
    *,
    config: Mapping[str, Any],
    summary: Mapping[str, Any],
    rootdir: Path,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything in a report but the episodes."""
    return {
        "schema": REPORT_SCHEMA,
        "config": dict(config),
        "environment": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "machine": platform.machine(),
            "commit": _git_commit(rootdir),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **(extra or {}),
        },
        "summary": dict(summary),
    }


def write_report(path: Path, head: Mapping[str, Any], episode_lines: Iterable[str]) -> None:
    """Write `head` plus `"episodes": [...]`, each episode one JSON text as given, streamed
    (a run's episodes need not fit in memory as objects) and atomically: to a temporary file
    beside `path`, then renamed over it, so a reader never sees half a report and an
    interrupted write leaves the old one intact. Every line is redacted (`redact.py`)."""
    from pytest_resilibench.base.redact import redact

    path = prepare(path)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        text = json.dumps(dict(head), indent=1, sort_keys=True)
        fh.write(redact(text[: text.rindex("}")].rstrip()) + ',\n "episodes": [')
        for i, line in enumerate(episode_lines):
            fh.write(("\n  " if i == 0 else ",\n  ") + redact(line))
        fh.write("\n ]\n}\n")


def load_report(path: str | Path) -> dict[str, Any]:
    """A `resilibench.report/1` file, checked enough that the summary, the gate and the
    reports can trust it: bounded size and nesting, finite numbers (`jsonfile.py`), and every
    episode's fields of the right types (`record.episode_problem`). Raises
    FileNotFoundError, or ValueError with a message that names the file."""
    from pytest_resilibench.base.jsonfile import load_json_file
    from pytest_resilibench.core.record import REQUIRED_FIELDS, episode_problem

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such report file")
    try:
        data = load_json_file(path, what="a JSON report")
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: expected schema {REPORT_SCHEMA!r}, found {found!r}")
    episodes = data.get("episodes")
    if not isinstance(episodes, list):
        raise ValueError(f"{path}: 'episodes' must be a list of episode objects")
    missing = {f for e in episodes if isinstance(e, dict)
               for f in REQUIRED_FIELDS if f not in e}
    if missing:
        raise ValueError(f"{path}: episodes lack required fields {sorted(missing)}")
    seen: dict[str, int] = {}  # an episode's id -> its index
    for i, episode in enumerate(episodes):
        if (problem := episode_problem(episode)) is not None:
            raise ValueError(f"{path}: episode {i}: {problem}")
        # An id twice (a merge, a hand edit) would count its episode twice in every rate.
        episode_id = episode.get("id")
        if episode_id is not None and seen.setdefault(episode_id, i) != i:
            raise ValueError(f"{path}: episode id {episode_id!r} appears twice (episodes "
                             f"{seen[episode_id]} and {i}): a report holds each episode once")
    for name in ("config", "environment", "summary"):
        if not isinstance(data.setdefault(name, {}), dict):
            raise ValueError(f"{path}: {name!r} must be an object")
    return data
