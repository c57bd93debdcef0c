"""Recovery measures from a call trace (reporting/recovery.py), and the episode's "why"
that quotes them (reporting/why.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.core.recovery import (
    calls_measures,
    episode_measures,
    episode_trace,
    measures,
)
from pytest_resilibench.reporting import why


def call(tool: str, kind: str | None = None, *, args: Any = None,
         upstream_error: bool = False) -> dict[str, Any]:
    fault = None if kind is None else {"kind": kind}
    upstream = None if kind not in (None, "silent") else {"is_error": upstream_error}
    return {"tool": tool, "arguments": args or {}, "fault": fault, "upstream": upstream}


def test_retries_recoveries_and_rate_limits() -> None:
    m = measures([call("a", "error"), call("a"), call("b", "rate_limited"), call("c"),
                  call("b"), call("d", "rate_limited"), call("d", "rate_limited")])
    assert m["failures"] == 4
    assert m["retried"] == 3 and m["recovered"] == 2
    assert m["retry_after_honoured"] == 1 and m["retry_after_ignored"] == 1
    assert m["gave_up"] == 1  # d's last call was a rate limit, never tried again
    assert m["fabricated"] is None  # no claim


def test_storms_count_each_run_once() -> None:
    storm = [call("a", "error", args={"x": 1})] * 5 + [call("b")] + [call("a", args={"x": 1})] * 3
    assert measures(storm)["storms"] == 1
    assert measures([call("a", "error", args={"x": i}) for i in range(6)])["storms"] == 0


def test_fabricated_success_needs_a_claim_over_a_bad_last_call() -> None:
    trace = [call("fetch", "silent"), call("save")]
    assert measures(trace, {"claimed": True, "needed": ["fetch", "save"]})["fabricated"] == 1
    assert measures(trace, {"claimed": False, "needed": None})["fabricated"] == 0
    assert measures(trace, {"claimed": True, "needed": ["save"]})["fabricated"] == 0
    assert measures(trace, {"claimed": True, "needed": ["save", "audit"]})["fabricated"] == 1
    outage = [call("fetch", "outage"), call("save")]
    assert measures(outage)["gave_up"] == 0  # a retry cannot fix an outage


def test_a_benchmark_episode_s_why_quotes_its_recovery() -> None:
    episode = {"outcome": "failed", "stop_reason": "completed", "turns": 4, "tool_calls": 3,
               "conditions": {"coverage": True, "order": True, "output": False,
                              "completion": True},
               "calls": [{"tool": "a", "ok": False, "error_code": "TIMEOUT", "turn": 1},
                         {"tool": "a", "ok": True, "turn": 2},
                         {"tool": "b", "ok": True, "event": "silent", "turn": 3}]}
    m = episode_measures(episode)
    assert m is not None and m["failures"] == 1 and m["recovered"] == 1
    assert m["fabricated"] == 1
    assert "fabricated success" in why.reasons(episode)
    assert "after its failures: 1 failed call, 1 retried, 1 recovered" in why.sentence(episode)
    assert episode_measures({"calls": []}) is None
    assert "failures" not in why.sentence({**episode, "calls": []})


def test_the_summary_adds_each_model_s_recovery_over_its_scored_episodes() -> None:
    from pytest_resilibench.reporting.summarize import summary

    def episode(model: str, outcome: str, recovery: dict[str, int] | None) -> dict[str, Any]:
        ep = {"id": f"{model}-{len(eps)}", "model": model, "variant": "optimal",
              "task_id": "t1", "outcome": outcome, "stop_reason": "completed"}
        return {**ep, "recovery": recovery} if recovery is not None else ep

    eps: list[dict[str, Any]] = []
    for model, outcome, recovery in (
            ("a", "full", {"failures": 2, "retried": 2, "recovered": 2, "fabricated": 0}),
            ("a", "failed", {"failures": 1, "gave_up": 1, "fabricated": 1}),
            ("a", "full", None),  # nothing failed
            ("a", "error", {"failures": 5}),  # an infra error counts in no figure
            ("b", "full", None)):
        eps.append(episode(model, outcome, recovery))
    rows = {r["model"]: r for r in summary(eps)["recovery"]}
    assert rows["a"]["episodes"] == 3 and rows["a"]["met_failure"] == 2
    assert rows["a"]["measures"]["failures"] == 3 and rows["a"]["measures"]["fabricated"] == 1
    assert rows["a"]["measures"]["gave_up"] == 1 and rows["a"]["measures"]["storms"] == 0
    assert rows["b"]["met_failure"] == 0 and not any(rows["b"]["measures"].values())
    assert "recovery" not in summary([ep for ep in eps if "recovery" not in ep])


@given(st.lists(st.tuples(st.sampled_from("abc"), st.booleans(),
                          st.sampled_from([None, "silent", "tainted", "outage",
                                           "rate_limited", "auth_expired"]),
                          st.integers(0, 1)), max_size=14),
       st.booleans())
def test_an_episode_s_own_count_is_its_trace_s(calls: list[Any], completed: bool) -> None:
    """`calls_measures` (what every episode counts as it is scored) reads its calls as
    `measures` reads their trace lines (`episode_trace`), the claim's tools every tool
    called."""
    records = [{"tool": tool, "ok": ok, "event": event, "arguments": {"x": x},
                **({} if ok else {"error_code": "TIMEOUT"})}
               for tool, ok, event, x in calls]
    counted = calls_measures(records, completed=completed)
    traced = measures(episode_trace(records), {"claimed": completed, "needed": None})
    if counted is None:  # nothing failed or was spoilt: every measure would be 0
        assert not any(traced.values())
    else:
        assert counted == traced
