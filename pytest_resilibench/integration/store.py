"""The episodes a run gathers: whole records spooled to a temporary file, slim rows in memory.

A parsed episode record is ~10 KB of Python objects; 50,400 of them would outweigh pytest's own
items five times over. The summary and the gate need only the scalar fields (`SLIM_FIELDS`),
so only those stay in memory (strings interned: a run repeats the same few models, variants
and task types); the JSON report streams the whole records back from the spool. A run that
writes no report keeps no spool (`records=False`).

Where nothing needs an episode's row at once (no sequential gate, no resumed run), its text is
parsed later, with the next ones, `PARSE_BATCH` at a time: the process gathering the reports
also runs pytest's items (or, under xdist, takes in every worker's reports), and one text
parsed between two reports costs ~5x what it costs among others.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["PARSE_BATCH", "SLIM_FIELDS", "EpisodeStore"]

PARSE_BATCH = 64

SLIM_FIELDS = (
    "id", "model", "variant", "flaw", "severity", "task_id", "task_type", "difficulty",
    "repeat", "seed", "base_success", "tool_mode", "outcome", "coverage", "order_adherence",
    "turns", "tool_calls", "errors_met", "errors_recovered", "tokens", "cost_usd", "infra_error",
    "stop_reason",
    "agent_error",  # stop reason `agent_error` only
    "faults", "events",  # realistic fault profile only (absent from paper records)
    "penalties",  # a scoring penalty only (absent where none: scoring.py `Score.penalties`)
    "recovery",  # a failed or spoilt call only (core/recovery.py)
)

_SLIM = frozenset(SLIM_FIELDS)
# The fields whose few values every row repeats: interned, so that the rows share them (an id
# is one row's own; interning it would only cost time).
_SHARED = ("model", "variant", "flaw", "severity", "task_id", "task_type", "difficulty",
           "tool_mode", "outcome", "stop_reason", "faults")


class EpisodeStore:
    def __init__(self, *, records: bool = True) -> None:
        """`records`: keep the whole records (`full_lines`), as a JSON report needs."""
        # Lives as long as the run; closed by `close()` (a with-block cannot span hooks).
        # Binary, append-only while episodes arrive: offsets are counted here, as a text
        # file's seek and tell on every add cost more than the write (they flush and reset
        # the codec).
        self._spool: IO[bytes] | None = tempfile.TemporaryFile(  # noqa: SIM115
            "w+b", prefix="resili-episodes-") if records else None
        self._end = 0
        self._reading = False  # the position is somewhere else: seek the end before a write
        self._offsets: dict[str, int] = {}
        self._rows: list[dict[str, Any]] = []
        self._later: list[str] = []  # texts `add_later` took, not parsed yet

    def __len__(self) -> int:
        return len(self._rows) + len(self._later)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The slim rows, in the order the episodes were added (until `sort`)."""
        self._parse_later()
        return self._rows

    def add(self, payload: str) -> dict[str, Any]:
        """One episode as the JSON text a report carried; returns its slim row."""
        self._parse_later()
        return self._add(payload)

    def add_later(self, payload: str) -> None:
        """One episode whose row no one needs yet: parsed with the next ones."""
        self._later.append(payload)
        if len(self._later) >= PARSE_BATCH:
            self._parse_later()

    def _parse_later(self) -> None:
        later, self._later = self._later, []
        for i, payload in enumerate(later):
            try:
                self._add(payload)
            except Exception:  # its error shows now; the texts after it stay to be parsed
                self._later = later[i + 1:] + self._later
                raise

    def _add(self, payload: str) -> dict[str, Any]:
        episode = json.loads(payload)
        if self._spool is not None:
            self._keep(episode["id"], payload)
        # A text of the slim fields alone (what workers send without a JSON report) is its
        # own row; a whole record gives up the rest.
        row: dict[str, Any] = episode if _SLIM.issuperset(episode) else {
            key: episode[key] for key in SLIM_FIELDS if key in episode}
        for key in _SHARED:
            value = row.get(key)
            if type(value) is str:
                row[key] = sys.intern(value)
        self._rows.append(row)
        return row

    def _keep(self, episode_id: str, payload: str) -> None:
        """Append the record's text to the spool, one line."""
        assert self._spool is not None
        if "\n" in payload:  # one record, one line (JSON text has newlines only between tokens)
            payload = payload.replace("\n", " ")
        line = payload.encode() + b"\n"
        if self._reading:
            self._spool.seek(self._end)
            self._reading = False
        self._offsets[episode_id] = self._end
        self._spool.write(line)
        self._end += len(line)

    def sort(self) -> None:
        """Id order: arrival order depends on the workers; everything downstream must not."""
        self.rows.sort(key=lambda row: row["id"])

    def full_lines(self) -> Iterator[str]:
        """The whole records as JSON lines, in the order of `rows`."""
        if self._spool is None:
            raise RuntimeError("this store keeps no records (made with records=False)")
        self._spool.flush()
        self._reading = True
        for row in self.rows:
            self._spool.seek(self._offsets[row["id"]])
            yield self._spool.readline().rstrip(b"\n").decode()

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
