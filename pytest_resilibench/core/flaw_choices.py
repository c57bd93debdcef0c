"""Which candidate injection a task set shows per (task, flaw, severity): the fixture file
`flaw_choices.json.gz` that the generator's adversarial filter writes (issue 50;
solver/adversarial_filter.py), read when the set loads (`tasks.load_tasks`).

`inject_flaw(..., candidate=k)` draws candidate k from the stream keyed (task id, flaw, k); a set
without the file (the paper set) shows candidate 0, the plans it always showed. The file holds
`{"schema", "filter": {how the choices were made}, "choices": {"flaw/severity": {task id: k}}}`
with only the k that are not 0, canonical JSON gzip'd without a name or time, so the same
choices give the same bytes. It is checked by its content as it loads (`choice_problems`).
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from pytest_resilibench.base.names import FLAWS, SEVERITIES
from pytest_resilibench.core.fixture_files import FixtureError, verified_bytes

__all__ = ["FLAW_CHOICES_FILE", "FLAW_CHOICES_SCHEMA", "choice_problems", "choices_bytes",
           "read_choices"]

FLAW_CHOICES_FILE = "flaw_choices.json.gz"
FLAW_CHOICES_SCHEMA = "resilibench.flaw_choices/1"
_KEYS = frozenset(f"{flaw}/{severity}" for flaw in FLAWS for severity in SEVERITIES)
_MAX_LISTED = 10

Choices = dict[str, dict[str, int]]  # task id -> {"flaw/severity": k}, k != 0


def choices_bytes(choices: Mapping[str, Mapping[str, int]], made_by: Mapping[str, Any]) -> bytes:
    """The file's bytes for `{"flaw/severity": {task id: k}}` (zeros left out) and the
    filter's settings `made_by` (which must give `candidates`)."""
    kept = {key: {t: k for t, k in sorted(by_task.items()) if k != 0}
            for key, by_task in sorted(choices.items())}
    data = {"schema": FLAW_CHOICES_SCHEMA, "filter": dict(made_by), "choices": kept}
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(raw)
    return buffer.getvalue()


def choice_problems(data: Any, task_ids: Collection[str]) -> list[str]:
    """What is wrong with a parsed choices file for a set of `task_ids` (empty: sound)."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    problems = []
    if data.get("schema") != FLAW_CHOICES_SCHEMA:
        problems.append(f"schema {data.get('schema')!r}, not {FLAW_CHOICES_SCHEMA!r}")
    made_by = data.get("filter")
    count = made_by.get("candidates") if isinstance(made_by, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        problems.append("filter.candidates is not a count of candidates")
        count = None
    choices = data.get("choices")
    if not isinstance(choices, dict):
        return [*problems, "choices is not an object"]
    for key, by_task in choices.items():
        if key not in _KEYS:
            problems.append(f"choices[{key!r}]: not a flaw/severity")
        elif not isinstance(by_task, dict):
            problems.append(f"choices[{key!r}]: not an object")
        else:
            problems += [f"choices[{key!r}][{t!r}]: " + (
                "no such task in the set" if t not in task_ids
                else f"{k!r} is not a candidate index in 1..{(count or 1) - 1}")
                for t, k in by_task.items()
                if t not in task_ids or not isinstance(k, int) or isinstance(k, bool)
                or k < 1 or (count is not None and k >= count)]
    return problems


def read_choices(directory: Path, manifest: Mapping[str, Any],
                 task_ids: Collection[str]) -> Choices:
    """Per task id, its chosen candidates (`{}` when the manifest lists no choices file: every
    flaw shows candidate 0); a file that is not sound is a `FixtureError` naming each
    problem."""
    if FLAW_CHOICES_FILE not in manifest.get("files", {}):
        return {}
    path = Path(directory) / FLAW_CHOICES_FILE
    try:
        data = json.loads(gzip.decompress(verified_bytes(directory, manifest,
                                                         FLAW_CHOICES_FILE)))
    except (OSError, EOFError, zlib.error, ValueError, RecursionError) as exc:
        raise FixtureError(f"{path} is not gzip'd JSON ({exc})") from None
    problems = choice_problems(data, task_ids)
    if problems:
        listed = problems[:_MAX_LISTED] + ([f"... and {len(problems) - _MAX_LISTED} more"]
                                           if len(problems) > _MAX_LISTED else [])
        raise FixtureError(f"{path} is not a sound choices file (`resilibench generate` "
                           "writes it):\n" + "\n".join(f"  {p}" for p in listed))
    by_task: Choices = {}
    for key, chosen in data["choices"].items():
        for task_id, k in chosen.items():
            by_task.setdefault(task_id, {})[key] = k
    return by_task
