"""The regression gate: one verdict per model, against its own partner in the baseline, and
the rules that set the exit status (integration/gate.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_resilibench.integration.gate import compare_with_baseline, fail_under, infra_errors
from pytest_resilibench.integration.gate_policy import (
    GatePolicy,
    InfraTolerance,
    parse_infra_tolerance,
)

POLICY = GatePolicy(max_drop_pp=5.0)


def episodes(outcomes: list[str], *, model: str = "m", variant: str = "optimal"
             ) -> list[dict[str, Any]]:
    return [{"id": f"{model}-{i}", "model": model, "task_id": f"t{i:04d}", "variant": variant,
             "flaw": None, "severity": None, "repeat": 0, "seed": 0, "base_success": 0.8,
             "outcome": o} for i, o in enumerate(outcomes)]


def test_fail_under_per_model_and_errors_left_out() -> None:
    eps = episodes(["full"] * 6 + ["failed"] * 2 + ["error"] * 2, model="a")
    eps += episodes(["full"] * 3 + ["failed"] * 7, model="b")
    results = fail_under(eps, 0.5)
    assert [(r.kind, r.failed) for r in results] == [("pass", False), ("below", True)]
    assert "75.0% over 8 episodes" in results[0].line


def test_only_errors_cannot_pass() -> None:
    [result] = fail_under(episodes(["error"] * 3), 0.1)
    assert result.failed and "infrastructure" in result.line


def test_a_model_with_only_errors_counts_its_own_episodes() -> None:
    eps = episodes(["error"] * 2, model="down") + episodes(["full"] * 10, model="up")
    down, up = fail_under(eps, 0.5)
    assert "all 2 hit infrastructure errors" in down.line and down.failed and not up.failed


def test_paired_regression_pass_and_inconclusive() -> None:
    old = episodes(["full"] * 200)
    _, [worse] = compare_with_baseline(old, episodes(["failed"] * 100 + ["full"] * 100,
                                                     model="new"), POLICY)
    assert worse.failed and worse.kind == "regression"
    assert "baseline new (against m): regression" in worse.line
    _, [same] = compare_with_baseline(old, episodes(["full"] * 200, model="new"), POLICY)
    assert not same.failed and same.kind == "pass"
    _, [few] = compare_with_baseline(episodes(["full"] * 10),
                                     episodes(["full"] * 9 + ["failed"]), POLICY)
    assert few.kind == "inconclusive" and "more paired episodes" in few.line
    assert not few.failed and "[--resili-inconclusive=pass: passes]" in few.line


def test_an_inconclusive_verdict_fails_when_the_policy_says_so() -> None:
    strict = GatePolicy(max_drop_pp=5.0, inconclusive="fail")
    _, [few] = compare_with_baseline(episodes(["full"] * 10),
                                     episodes(["full"] * 9 + ["failed"]), strict)
    assert few.failed and few.line.endswith("[--resili-inconclusive=fail: fails]")


def test_every_verdict_prints_its_thresholds() -> None:
    policy = GatePolicy(max_drop_pp=3.0, confidence=0.9)
    _, [result] = compare_with_baseline(episodes(["full"] * 50), episodes(["full"] * 50), policy)
    assert "allowed 3 pp at 90% confidence" in result.line


def test_unpaired_runs_are_an_error_not_a_pass() -> None:
    _, [result] = compare_with_baseline(episodes(["full"] * 5, variant="cot"),
                                        episodes(["full"] * 5), POLICY)
    assert result.failed and "no episode" in result.line


def test_one_regressed_model_fails_beside_unchanged_ones() -> None:
    """The pooled drop of four models hides one model's regression; the gate judges each."""
    unchanged = [episodes(["full"] * 150 + ["failed"] * 50, model=m) for m in ("a", "b", "c")]
    old = [ep for eps in unchanged for ep in eps] + episodes(["full"] * 200, model="agent")
    new = [ep for eps in unchanged for ep in eps] + episodes(
        ["failed"] * 30 + ["full"] * 170, model="agent")
    comparison, results = compare_with_baseline(old, new, GatePolicy(max_drop_pp=3.0))
    assert comparison is not None and comparison["overall"]["kind"] != "regression"
    verdicts = {r.line.split(":")[0]: (r.kind, r.failed) for r in results}
    assert verdicts == {"baseline a": ("pass", False), "baseline b": ("pass", False),
                        "baseline c": ("pass", False), "baseline agent": ("regression", True)}
    _, passing = compare_with_baseline(old, old, GatePolicy(max_drop_pp=3.0))
    assert not any(r.failed for r in passing)


def test_models_pair_by_name_and_one_left_on_each_side_pairs_across_names() -> None:
    old = episodes(["full"] * 20, model="a") + episodes(["full"] * 20, model="v1")
    new = episodes(["full"] * 20, model="a") + episodes(["full"] * 20, model="v2")
    comparison, results = compare_with_baseline(old, new, POLICY)
    assert comparison is not None
    assert [(v["model"], v["old_model"], v["n"]) for v in comparison["by_model"]] == [
        ("a", "a", 20), ("v2", "v1", 20)]
    assert "baseline v2 (against v1)" in results[1].line


def test_models_without_a_partner_are_named_not_judged() -> None:
    old = episodes(["full"] * 20, model="a") + episodes(["full"] * 20, model="b")
    new = episodes(["full"] * 20, model="a") + episodes(["full"] * 20, model="c") + \
        episodes(["failed"] * 20, model="d")
    comparison, results = compare_with_baseline(old, new, POLICY)
    assert comparison is not None and comparison["unpartnered"] == {"old": ["b"],
                                                                     "new": ["c", "d"]}
    assert [r.kind for r in results] == ["inconclusive", "not judged"]
    assert results[-1].line.endswith("not judged: c, d") and not results[-1].failed


def test_runs_without_a_common_model_cannot_pair() -> None:
    old = episodes(["full"] * 20, model="a") + episodes(["full"] * 20, model="b")
    new = episodes(["full"] * 20, model="c") + episodes(["full"] * 20, model="d")
    comparison, [result] = compare_with_baseline(old, new, POLICY)
    assert comparison is None and result.failed and "no model" in result.line


def test_labels_name_the_models_as_the_tables_do() -> None:
    old = episodes(["full"] * 20, model="py:mod:make")
    _, [result] = compare_with_baseline(old, old, POLICY, {"py:mod:make": "my-agent"})
    assert result.line.startswith("baseline my-agent: inconclusive")
    [below] = fail_under(old, 0.5, {"py:mod:make": "my-agent"})
    assert below.line.startswith("my-agent: full-success")


@pytest.mark.parametrize(("text", "count", "share"), [("0", 0, None), ("7", 7, None),
                                                      ("2%", None, 0.02), (" 0.5% ", None, 0.005)])
def test_infra_tolerance_reads_a_count_or_a_share(text: str, count: int | None,
                                                  share: float | None) -> None:
    assert parse_infra_tolerance(text) == InfraTolerance(count=count, share=share)


@pytest.mark.parametrize("text", ["-1", "1.5", "x", "101%", "nan%", ""])
def test_a_bad_infra_tolerance_is_one_sentence(text: str) -> None:
    with pytest.raises(ValueError, match="is not a count of infra errors"):
        parse_infra_tolerance(text)


def test_infra_errors_within_or_over_the_tolerance() -> None:
    eps = episodes(["error"] * 2 + ["full"] * 98)
    assert infra_errors(episodes(["full"] * 5), POLICY) is None
    over = infra_errors(eps, POLICY)
    assert over is not None and over.failed
    assert over.line == "infra errors: 2 of 100 episodes over --resili-max-infra-errors=0"
    for tolerance in ("2", "2%"):
        within = infra_errors(eps, GatePolicy(max_infra_errors=parse_infra_tolerance(tolerance)))
        assert within is not None and not within.failed and "within" in within.line
    harness = [{**ep, "stop_reason": "harness_error"} for ep in episodes(["error"] * 3)]
    assert infra_errors(harness, POLICY) is None  # a harness bug is not an infra error


def test_a_policy_round_trips_through_the_report_and_refuses_garbage() -> None:
    policy = GatePolicy(max_drop_pp=3.0, confidence=0.9, fail_under=0.5, inconclusive="fail",
                        max_infra_errors=InfraTolerance(count=None, share=0.02))
    assert GatePolicy.from_json(policy.to_json()) == policy
    for bad in ({}, {"max_drop_pp": "x", "confidence": 0.95},
                {"max_drop_pp": 3, "confidence": 0.95, "inconclusive": "maybe"},
                {"max_drop_pp": 300, "confidence": 0.95}):
        with pytest.raises(ValueError, match="gate policy"):
            GatePolicy.from_json(bad)


def test_the_exit_status_names_its_rule() -> None:
    from pytest_resilibench.integration.gate import GateResult, exit_status

    regression = GateResult(True, "regression", "baseline a: regression: ...", "a")
    passed = GateResult(False, "pass", "baseline b: pass: ...", "b")
    infra_ok = GateResult(False, "infra", "infra errors: 2 of 100 episodes within "
                          "--resili-max-infra-errors=2")
    assert exit_status(1, failed_items=2, infra_items=2, results=[passed, infra_ok],
                       incomplete=False) == (0, "resilibench: exit 0: every gate passed (1 "
                                             "verdicts); infra errors: 2 of 100 episodes within "
                                             "--resili-max-infra-errors=2, so their items do "
                                             "not fail the run")
    status, line = exit_status(0, failed_items=0, infra_items=0,
                               results=[regression, passed], incomplete=False)
    assert (status, line) == (1, "resilibench: exit 1: a REGRESSION against the baseline")
    status, line = exit_status(1, failed_items=3, infra_items=2, results=[passed],
                               incomplete=True)
    assert status == 1 and line == ("resilibench: exit 1: 1 failed item (agent or harness "
                                    "errors, or tests of your own); the run is incomplete "
                                    "(see above)")
    assert exit_status(2, failed_items=0, infra_items=0, results=[regression],
                       incomplete=False)[0] == 2  # interrupted stays interrupted
    assert exit_status(1, failed_items=0, infra_items=0, results=[],
                       incomplete=False)[0] == 1  # set by another plugin: kept
