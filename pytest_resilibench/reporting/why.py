"""Why an episode ended as it did, from its record alone: the conditions it missed, why it
stopped, and where it first left the plan it was shown. `reasons` is the episode table's short
"why" cell, `sentence` the plain sentence atop the episode view; the HTML report computes both
here and carries them with the episodes, so the viewer only displays them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["reasons", "sentence"]

Episode = Mapping[str, Any]

# Stop reasons in words (runtime/episode.py lists them).
_STOPS = {
    "completed": "said it was done",
    "max_turns": "ran out of turns",
    "repeated_call": "stopped: the same call again and again",
    "consecutive_errors": "stopped: too many unusable turns in a row",
    "run_returned": "its run returned without finishing",
    "agent_error": "the agent's own code raised",
    "infra_error": "the model could not be reached",
    "harness_error": "the harness failed",
    "context_overflow": "the conversation outgrew the model's context",
    "refusal": "the model refused",
    "length": "the model's reply was cut off",
}


def _missed(ep: Episode) -> list[str]:
    conditions = ep.get("conditions")
    if not isinstance(conditions, Mapping):
        return []
    return [str(name) for name, ok in conditions.items() if not ok]


def _stop(ep: Episode) -> str:
    reason = str(ep.get("stop_reason") or "")
    words = _STOPS.get(reason, reason)
    if reason == "max_turns" and ep.get("max_turns"):
        words += f" ({ep.get('turns')}/{ep.get('max_turns')})"
    return words


def _departure(ep: Episode) -> tuple[int, bool] | None:
    """The first plan step (1-based) the agent did not follow, and whether that step was a
    wrong one (skipping it was right); None when it followed every step or had no plan."""
    deviation = ep.get("deviation")
    if not isinstance(deviation, Mapping):
        return None
    skipped = [i for i in deviation.get("not_followed") or () if isinstance(i, int)]
    if not skipped:
        return None
    first = min(skipped)
    return first + 1, first in set(deviation.get("wrong_steps") or ())


def _first_error(ep: Episode) -> str | None:
    for call in ep.get("calls") or ():
        if isinstance(call, Mapping) and not call.get("ok"):
            return f"turn {call.get('turn')}: {call.get('tool')} {call.get('error_code')}"
    return None


def _recovery(ep: Episode) -> dict[str, int | None] | None:
    from pytest_resilibench.core.recovery import episode_measures

    return episode_measures(ep)


def _recovery_clause(m: Mapping[str, int | None]) -> str | None:
    """What the agent did after its failed calls (docs/CHAOS.md: Recovery measures)."""
    if not m.get("failures"):
        return None
    parts = [f"{m['failures']} failed call{'s' if m['failures'] != 1 else ''}",
             f"{m.get('retried') or 0} retried", f"{m.get('recovered') or 0} recovered"]
    for name, words in (("storms", "retry storm"), ("gave_up", "given up with retries left"),
                        ("retry_after_ignored", "retry_after ignored")):
        if m.get(name):
            parts.append(f"{m[name]} {words}")
    return "after its failures: " + ", ".join(parts)


def reasons(ep: Episode) -> str:
    """`✗ order, output · ran out of turns (10/10) · left plan at step 3 (a wrong step)`."""
    if ep.get("outcome") == "error":
        return "infra error: " + str(ep.get("infra_error") or ep.get("stop_reason") or "")
    parts = []
    missed = _missed(ep)
    if missed:
        parts.append("✗ " + ", ".join(missed))
    parts.append(_stop(ep))
    departure = _departure(ep)
    if departure is not None:
        step, wrong = departure
        parts.append(f"left plan at step {step}" + (" (a wrong step)" if wrong else ""))
    recovery = _recovery(ep)
    if recovery is not None and recovery.get("fabricated") and ep.get("outcome") != "full":
        parts.append("fabricated success")
    return " · ".join(p for p in parts if p)


def sentence(ep: Episode) -> str:
    """One plain sentence: what the outcome was and why."""
    outcome = ep.get("outcome")
    if outcome == "error":
        return ("An infra error: " + str(ep.get("infra_error") or ep.get("stop_reason"))
                + "; the episode counts in no rate.")
    if ep.get("stop_reason") == "agent_error":
        return f"Failed because the agent's own code raised: {ep.get('agent_error')}."
    missed = _missed(ep)
    head = {"full": "Full success: every condition was met",
            "partial": "Partial success",
            "failed": "Failed"}.get(str(outcome), str(outcome).capitalize())
    clauses = []
    if missed:
        clauses.append(f"the {_join(missed)} condition{'s' if len(missed) > 1 else ''} "
                       f"{'were' if len(missed) > 1 else 'was'} not met")
    clauses.append(f"the agent {_stop(ep)} after {ep.get('turns')} turns and "
                   f"{ep.get('tool_calls')} tool calls")
    departure = _departure(ep)
    if departure is not None:
        step, wrong = departure
        clauses.append(f"it first left the plan at step {step}, "
                       + ("a step the flaw made wrong (skipping it was right)" if wrong
                          else "a correct step"))
    elif isinstance(ep.get("deviation"), Mapping):
        clauses.append("it followed every step of the plan")
    first_error = _first_error(ep)
    if first_error is not None and outcome != "full":
        clauses.append(f"its first failed call was at {first_error}")
    recovery = _recovery(ep)
    if recovery is not None and outcome != "full":
        clause = _recovery_clause(recovery)
        if clause is not None:
            clauses.append(clause)
        if recovery.get("fabricated"):
            clauses.append("it said it was done while the last call of a tool it used had "
                           "failed or came back empty (fabricated success)")
    return f"{head}: " + "; ".join(clauses) + "."


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
