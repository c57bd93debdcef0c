"""The summary's tokens, cost and infrastructure causes per model (real models)."""

from __future__ import annotations

from pytest_resilibench.reporting import summarize, tables
from pytest_resilibench.runtime.protocol import error_cause


def ep(model: str, outcome: str = "full", **extra: object) -> dict[str, object]:
    return {"model": model, "variant": "optimal", "outcome": outcome, "task_id": "t0000",
            "repeat": 0, "seed": 0, "base_success": 0.8, **extra}


def test_tokens_and_cost_per_model() -> None:
    tokens = {"prompt": 100, "cached": 40, "completion": 10, "reasoning": 4, "replayed": 0}
    eps = [ep("o3", tokens=tokens, cost_usd=0.25), ep("o3", tokens=tokens, cost_usd=0.5),
           ep("qwen", tokens=tokens, cost_usd=None), ep("builtin:oracle")]
    usage = {r["model"]: r for r in summarize.summary(eps)["usage"]}
    assert usage["o3"]["tokens"] == {"prompt": 200, "cached": 80, "completion": 20,
                                     "reasoning": 8, "replayed": 0}
    assert usage["o3"]["cost_usd"] == 0.75 and usage["qwen"]["cost_usd"] is None
    titles = [t.title for t in tables.tables(summarize.summary(eps))]
    assert "Tokens and cost by model" in titles


def test_infra_errors_are_grouped_by_cause() -> None:
    refused = "model 'o3' at http://127.0.0.1:8000/v1: HTTP 400: bad field (after 1 attempt)"
    down = "model 'o3' at https://api.openai.com/v1: HTTP 500: oops (after 7 attempts)"
    eps = [ep("o3", "error", infra_error=refused)] * 3 + [ep("o3", "error", infra_error=down)]
    assert summarize.summary(eps)["infra_causes"] == [
        {"model": "o3", "cause": "HTTP 400: bad field", "count": 3},
        {"model": "o3", "cause": "HTTP 500: oops", "count": 1}]
    assert error_cause("not sent: cap") == "not sent: cap"


def test_the_html_report_shows_tokens_cost_and_requests_per_model() -> None:
    from pytest_resilibench.reporting.report_html import render_html

    tokens = {"prompt": 1000, "cached": 0, "completion": 100, "reasoning": 16, "replayed": 0}
    report = {"episodes": [ep("o3", tokens=tokens, cost_usd=0.0028)],
              "summary": {"providers": {"o3": {"requests": 1, "api_calls": 2, "retries": 1,
                                               "faults": {"rate_limit": 1}}}}}
    html = render_html(report)
    assert "Tokens and cost by model" in html and "0.0028" in html
    assert "Model requests" in html
