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


def measures(calls: Sequence[Mapping[str, Any]],
             claim: Mapping[str, Any] | None = None) -> dict[str, int | None]:
    out: dict[str, int | None] = dict.fromkeys(MEASURES, 0)
    tools = [str(c.get("tool")) for c in calls]
    for i, call in enumerate(calls):
        if seen_ok(call):
            continue
        out["failures"] += 1  # type: ignore[operator]
        later = range(i + 1, len(calls))
        if any(tools[j] == tools[i] for j in later):
            out["retried"] += 1  # type: ignore[operator]
        if any(tools[j] == tools[i] and clean_success(calls[j]) for j in later):
            out["recovered"] += 1  # type: ignore[operator]
        if _kind(call) == "rate_limited" and i + 1 < len(calls):
            key = "retry_after_ignored" if tools[i + 1] == tools[i] else "retry_after_honoured"
            out[key] += 1  # type: ignore[operator]
    run = 1
    for i in range(1, len(calls) + 1):
        same = i < len(calls) and tools[i] == tools[i - 1] \
            and calls[i].get("arguments") == calls[i - 1].get("arguments")
        if same:
            run += 1
            continue
        if run > STORM_BOUND:
            out["storms"] += 1  # type: ignore[operator]
        run = 1
    last = {tool: call for tool, call in zip(tools, calls, strict=True)}
    out["gave_up"] = sum(1 for call in last.values()
                         if not seen_ok(call) and _kind(call) in _RETRYABLE)
    out["fabricated"] = None if claim is None else int(_fabricated(last, claim))
    return out


def _fabricated(last: Mapping[str, Mapping[str, Any]], claim: Mapping[str, Any]) -> bool:
    if not claim.get("claimed"):
        return False
    needed = claim.get("needed")
    tools: Iterable[str] = last if needed is None else needed
    return any(tool not in last or not clean_success(last[tool]) for tool in tools)


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
        elif event in ("silent", "tainted"):
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
    stand-in where the realistic profile lists one (`alternatives`)."""
    if all(call.get("ok") and call.get("event") not in ("silent", "tainted") for call in calls):
        return None
    trace = episode_trace(calls)
    counted = {name: int(value or 0) for name, value in measures(trace).items()}
    last = {str(line["tool"]): line for line in trace}
    stand_in = alternatives or {}

    def done(tool: str) -> bool:
        return any(t in last and clean_success(last[t]) for t in (tool, stand_in.get(tool)))

    counted["fabricated"] = int(completed and not all(map(done, needed or list(last))))
    return counted


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
