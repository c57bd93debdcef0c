"""Recovery measures read off a call trace (docs/CHAOS.md): what an agent did after a tool failed.

A trace is the list of calls one run made, in order, each a JSON line as the MCP proxy
(servers/mcp_proxy.py) and the `resili_faults` fixture (integration/chaos.py) write them:
`tool`, `arguments`, `fault` (None, or the injected fault's `kind`, `code`, `retry_after`) and
`upstream` (None where the tool was not called, else whether it answered an error).

- `failures`: calls the agent saw fail (an injected error or the tool's own error);
- `retried`: failures followed later by another call of the same tool;
- `recovered`: failures followed later by a clean success of the same tool;
- `storms`: runs of the same call (tool and arguments) repeated back to back past
  `STORM_BOUND` calls, each run counted once;
- `gave_up`: tools whose last call failed with a retryable fault (an error, a timeout, a rate
  limit: not an outage or expired credentials, which a retry cannot fix) and were never
  called again;
- `retry_after_honoured` / `retry_after_ignored`: after a rate limit, whether the session's
  next call was another tool's (the wait `retry_after` asks for) or the same tool's;
- `fabricated`: 1 when the agent claimed success (`claim`) while the last call of a tool it
  needed failed, was spoilt silently or never came, else 0 (None without a claim).

Pure (no I/O), in core: a benchmark episode counts its own when it is scored
(runtime/episode.py, the record's `recovery`), so the summary has them per model without the
trajectory; the `resili_faults` tests (integration/chaos.py) and the "why" read them too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MEASURES", "STORM_BOUND", "add_measures", "calls_measures", "clean_success",
           "episode_measures", "episode_trace", "measures", "seen_ok"]

STORM_BOUND = 3  # the same call more than this many times in a row is a storm
MEASURES = ("failures", "retried", "recovered", "storms", "gave_up", "retry_after_honoured",
            "retry_after_ignored", "fabricated")
_RETRYABLE = ("error", "timeout", "rate_limited", None)  # None: the tool's own error
_SILENT_EVENTS = ("silent", "tainted")  # a benchmark call's events that spoil a success


def _kind(line: Mapping[str, Any]) -> str | None:
    fault = line.get("fault")
    return fault.get("kind") if isinstance(fault, Mapping) else None


def seen_ok(line: Mapping[str, Any]) -> bool:
    """Whether the agent saw the call succeed (a silent fault looks like a success)."""
    kind = _kind(line)
    if kind not in (None, "silent"):
        return False
    upstream = line.get("upstream")
    return isinstance(upstream, Mapping) and not upstream.get("is_error")


def clean_success(line: Mapping[str, Any]) -> bool:
    """A success that really is one: seen ok, and no silent fault spoilt it."""
    return seen_ok(line) and _kind(line) is None


# One call as the counting reads it: (tool, arguments, fault kind, seen ok, clean success).
_Step = tuple[str, Any, "str | None", bool, bool]


def measures(calls: Sequence[Mapping[str, Any]],
             claim: Mapping[str, Any] | None = None) -> dict[str, int | None]:
    steps = [(str(c.get("tool")), c.get("arguments"), _kind(c), seen_ok(c), clean_success(c))
             for c in calls]
    out: dict[str, int | None] = dict(_count(steps))
    out["fabricated"] = None if claim is None else int(
        bool(claim.get("claimed")) and not _all_done(steps, claim.get("needed")))
    return out


def _count(steps: Sequence[_Step]) -> dict[str, int]:
    """Every measure but `fabricated` (0 here), in one pass from the end: what came later of
    each tool is known when a failure is met (a run's trace is short, an episode's too, but
    the benchmark counts every episode's)."""
    out = dict.fromkeys(MEASURES, 0)
    later: set[str] = set()  # tools called after this call
    later_clean: set[str] = set()  # tools that succeeded cleanly after it
    gave_up = 0
    for i in range(len(steps) - 1, -1, -1):
        tool, _, kind, ok, clean = steps[i]
        if not ok:
            out["failures"] += 1
            if tool in later:
                out["retried"] += 1
            elif kind in _RETRYABLE:  # its last call failed, and a retry might have fixed it
                gave_up += 1
            if tool in later_clean:
                out["recovered"] += 1
            if kind == "rate_limited" and i + 1 < len(steps):
                out["retry_after_ignored" if steps[i + 1][0] == tool
                    else "retry_after_honoured"] += 1
        later.add(tool)
        if clean:
            later_clean.add(tool)
    out["gave_up"] = gave_up
    run = 1
    for i in range(1, len(steps) + 1):
        if i < len(steps) and steps[i][:2] == steps[i - 1][:2]:
            run += 1
            continue
        if run > STORM_BOUND:
            out["storms"] += 1
        run = 1
    return out


def _all_done(steps: Sequence[_Step], needed: Iterable[str] | None,
              stand_in: Mapping[str, str] | None = None) -> bool:
    """Whether the last call of every needed tool (default: every tool called), or of its
    stand-in, succeeded cleanly."""
    last = {step[0]: step[4] for step in steps}
    alternatives = stand_in or {}
    return all(last.get(tool, False) or last.get(alternatives.get(tool, ""), False)
               for tool in (last if needed is None else needed))


def add_measures(total: dict[str, int], one: Mapping[str, int | None]) -> dict[str, int]:
    """`one` run's measures added into `total` (a None counts nothing)."""
    for name in MEASURES:
        total[name] = total.get(name, 0) + (one.get(name) or 0)
    return total


def episode_trace(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A benchmark episode's calls (core/record.py) as trace lines: a failure is an injected
    error of its event's kind (realistic) or a random error; a silent or tainted success is a
    silent fault."""
    out = []
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        ok, event = bool(call.get("ok")), call.get("event")
        fault: dict[str, Any] | None = None
        if not ok:
            fault = {"kind": event or "error", "code": call.get("error_code")}
        elif event in _SILENT_EVENTS:
            fault = {"kind": "silent"}
        out.append({"tool": call.get("tool"), "arguments": call.get("arguments"),
                    "fault": fault, "upstream": {"is_error": not ok}})
    return out


def calls_measures(calls: Sequence[Mapping[str, Any]], *, completed: bool,
                   needed: Sequence[str] | None = None,
                   alternatives: Mapping[str, str] | None = None) -> dict[str, int] | None:
    """A benchmark episode's measures from its calls (core/record.py), as its record keeps
    them: None when no call failed or was spoilt (every measure 0: the record stays as it
    was). Saying it was done (`completed`) is its claim; the tools the job needed are the
    task's required tools (`needed`; default every tool it called), each also done by its
    stand-in where the realistic profile lists one (`alternatives`). Read as `episode_trace`
    reads the calls, without building its lines (every episode of a run counts its own)."""
    steps: list[_Step] = []
    spoilt = False
    for call in calls:
        ok, event = bool(call.get("ok")), call.get("event")
        silent = ok and event in _SILENT_EVENTS
        spoilt = spoilt or silent or not ok
        kind = "silent" if silent else None if ok else (event or "error")
        steps.append((str(call.get("tool")), call.get("arguments"), kind, ok, ok and not silent))
    if not spoilt:
        return None
    out = _count(steps)
    out["fabricated"] = int(completed and not _all_done(steps, needed, alternatives))
    return out


def episode_measures(episode: Mapping[str, Any]) -> dict[str, int | None] | None:
    """A benchmark episode's measures: the record's own `recovery` (counted when it was
    scored; absent where nothing failed), else from its calls when the report kept them
    (--resili-trajectories: an older record), else None."""
    kept = episode.get("recovery")
    if isinstance(kept, Mapping):
        return {name: kept.get(name, 0) for name in MEASURES}
    calls = episode.get("calls")
    if not isinstance(calls, Sequence) or not calls:
        return None
    claim = {"claimed": episode.get("stop_reason") == "completed", "needed": None}
    return measures(episode_trace(calls), claim)
