"""The regression gate's pairing and verdicts."""

from __future__ import annotations

from typing import Any

from pytest_resilibench.integration.gate import compare_with_baseline, fail_under


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
    worse = episodes(["failed"] * 100 + ["full"] * 100, model="new")
    result = compare_with_baseline(old, worse, max_drop_pp=5)
    assert result.failed and result.kind == "regression"
    same = compare_with_baseline(old, episodes(["full"] * 200, model="new"), max_drop_pp=5)
    assert not same.failed and same.kind == "pass"
    few = compare_with_baseline(episodes(["full"] * 10), episodes(["full"] * 9 + ["failed"]),
                                max_drop_pp=5)
    assert few.kind == "inconclusive" and "more paired episodes" in few.line


def test_unpaired_runs_are_an_error_not_a_pass() -> None:
    result = compare_with_baseline(episodes(["full"] * 5, variant="cot"),
                                   episodes(["full"] * 5), max_drop_pp=5)
    assert result.failed and "no episode" in result.line


def test_several_models_pair_only_with_the_same_models() -> None:
    old = episodes(["full"] * 20, model="a") + episodes(["full"] * 20, model="b")
    same = compare_with_baseline(old, old, max_drop_pp=5)
    assert "over 40 pairs" in same.line
    other = episodes(["full"] * 20, model="a") + episodes(["full"] * 20, model="c")
    result = compare_with_baseline(old, other, max_drop_pp=5)
    assert result.failed and result.kind == "error" and "cannot pair" in result.line
