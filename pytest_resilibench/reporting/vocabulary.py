"""The words for an episode's outcome, in one place: the terminal's letters and words, the
tables, the markdown, the HTML and the JSON summary all take them from here, so a reader meets
one vocabulary (full / partial / failed / agent error / infra error) in one fixed order
everywhere.

Outcome keys are the records' (`full`, `partial`, `failed`) plus `agent_error` for an episode
whose agent's own code raised (a record with stop reason `agent_error`: outcome `failed`, so
it counts as failed in every rate, but it is counted apart and its item fails) and
`infra_error` for an episode whose model could not be reached (a record's `error` outcome,
kept out of every rate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_resilibench.base.names import SCORED

__all__ = [
    "COUNT_ORDER",
    "LEGEND",
    "LETTERS",
    "SCORED",
    "STATUSES",
    "VERBOSE_WORDS",
    "WORDS",
    "count",
    "counts_line",
    "order_stats",
    "plural",
    "run_category",
    "status_key",
    "tally",
]

COUNT_ORDER = (*SCORED, "agent_error", "infra_error")
# Counted in every summary, but shown in a line of counts only when there are some: a built-in
# agent never raises, and most runs have none.
_SHOWN_WHEN_ANY = frozenset({"agent_error"})

WORDS = {"full": "full", "partial": "partial", "failed": "failed", "agent_error": "agent error",
         "infra_error": "infra error"}
# Progress letters: pytest's own `.`, `F`, `E` stay pytest's; a failed episode is a benchmark
# result, not a failed test, hence the lower-case `f`.
LETTERS = {"full": ".", "partial": "p", "failed": "f", "agent_error": "A", "infra_error": "I"}
VERBOSE_WORDS = {"full": "FULL", "partial": "PARTIAL", "failed": "FAILED-EPISODE",
                 "agent_error": "AGENT-ERROR", "infra_error": "INFRA-ERROR"}

LEGEND = ("full = every condition met; partial = at least two of coverage, order, output, "
          "completion, one of them output or order; failed = the rest (a benchmark result: "
          "the item still passes); "
          "agent error = the agent's own code raised: failed in every rate, and the item "
          "fails; "
          "infra error = the model could not be reached, kept out of every rate.")

# Words that take no plural: the outcome adjectives.
_INVARIANT = frozenset({"full", "partial", "failed"})


def plural(n: int, noun: str) -> str:
    """`1 episode`, `2 episodes`, `1 infra error`, `3 infra errors`, `5 full`."""
    last = noun.rsplit(" ", 1)[-1]
    if n == 1 or last in _INVARIANT:
        return f"{n} {noun}"
    return f"{n} {noun}es" if last.endswith(("s", "x", "ch", "sh")) else f"{n} {noun}s"


def count(n: int, key: str) -> str:
    return plural(n, WORDS[key])


def status_key(outcome: object, stop_reason: object = None) -> str:
    """An episode's vocabulary key: `agent_error` for stop reason `agent_error`, else its
    outcome when scored, else `infra_error` (anything unscored, as in every rate)."""
    if stop_reason == "agent_error":
        return "agent_error"
    return str(outcome) if outcome in SCORED else "infra_error"


def tally(keys: Iterable[object]) -> dict[str, int]:
    """Counts per vocabulary key, in `COUNT_ORDER` (zeros included). `keys` are outcomes, or
    `status_key`s: anything but a scored outcome or `agent_error` is an infra error, as in
    every rate (analysis.py)."""
    counts = dict.fromkeys(COUNT_ORDER, 0)
    for key in keys:
        counts[str(key) if key in SCORED or key == "agent_error" else "infra_error"] += 1
    return counts


def counts_line(counts: Mapping[str, int], *, zeros: bool = True) -> str:
    """`1236 full, 249 partial, 15 failed, 0 infra errors`: always in `COUNT_ORDER` (agent
    errors only when there are some: `1236 full, 249 partial, 13 failed, 2 agent errors, 0
    infra errors`)."""
    return ", ".join(count(int(counts.get(k, 0)), k) for k in COUNT_ORDER
                     if counts.get(k) or (zeros and k not in _SHOWN_WHEN_ANY))


def run_category(key: str) -> str:
    """The terminal-stats category of an outcome while the run goes. Never pytest's own
    `failed` (that one lists its reports as test failures), nor a count that reads as it:
    pytest's last line is parsed as `N noun` (pytester's `parseoutcomes`, CI scripts), so a
    failed episode reads `N episodes failed`, never `N failed`."""
    return {"failed": "episodes failed", "agent_error": "agent errors",
            "infra_error": "infra errors"}.get(key, key)


_MARKUP = {"full": {"green": True}, "partial": {"yellow": True}, "failed": {"red": True},
           "agent_error": {"red": True, "bold": True}, "infra_error": {"red": True, "bold": True}}
# What `pytest_report_teststatus` returns per outcome: (category, letter, (word, markup)).
STATUSES = {key: (run_category(key), LETTERS[key], (VERBOSE_WORDS[key], _MARKUP[key]))
            for key in COUNT_ORDER}


def _final_category(key: str, n: int) -> str:
    if key == "failed":
        return plural(n, "episode").split(" ", 1)[1] + " failed"
    return plural(n, WORDS[key]).split(" ", 1)[1]


def order_stats(terminalreporter: Any) -> None:
    """Rename and reorder a terminal reporter's stats (in place) so that pytest's last line
    counts the episodes in `COUNT_ORDER` with correct plurals, after pytest's own categories
    (`3 passed, 1236 full, 249 partial, 15 episodes failed, 1 infra error`)."""
    stats: dict[str, list[Any]] = terminalreporter.stats
    present = [k for k in COUNT_ORDER if stats.get(run_category(k))]
    moved = {k: stats.pop(run_category(k)) for k in present}
    for key, reports in moved.items():
        stats[_final_category(key, len(reports))] = reports
    # pytest lists the categories it has not heard of in the order `_set_main_color` first saw
    # them and caches that list (_pytest/terminal.py, `_get_main_color`): drop the cache.
    if present and hasattr(terminalreporter, "_main_color"):
        terminalreporter._main_color = None
