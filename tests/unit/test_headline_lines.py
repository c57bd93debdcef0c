"""The headline's provider line: a real model's throughput and rate limits, the summary's
own figures word for word."""

from __future__ import annotations

from typing import Any, cast

from pytest_resilibench.reporting import headline


def _summary(providers: dict[str, Any]) -> Any:
    return cast(Any, {
        "counts": {"episodes": 2, "models": ["o3", "builtin:adaptive"],
                   "outcomes": {"full": 2}},
        "by_model": [], "providers": providers})


def test_a_real_models_line_says_its_rate_in_flight_429s_wait_and_limit() -> None:
    built = headline.build(_summary({"o3": {
        "api_calls": 1006, "requests_per_s": 28.849, "concurrency": 14.76,
        "faults": {"rate_limit": 139}, "limit_wait_s": 1457.3, "window": 10}}))
    o3, scripted = built["models"]
    assert o3["requests"] == ("1,006 requests at 28.8/s, 14.8 in flight; 139 429s, waited "
                              "1457.3 s on rate limits, limit settled at 10")
    assert "requests" not in scripted  # a built-in agent sends none
    assert f"  {o3['requests']}" in headline.lines(built)
    assert o3["requests"] in headline.render_markdown(built)


def test_without_a_span_the_rate_is_left_out() -> None:
    built = headline.build(_summary({"o3": {"api_calls": 0, "requests_per_s": None,
                                            "concurrency": None, "faults": {}}}))
    assert built["models"][0]["requests"] == ("0 requests; 0 429s, waited 0.0 s on rate "
                                              "limits, limit settled at 0")
