"""Fail fast: the start-up probe's usage errors, and provider counters merged across processes."""

from __future__ import annotations

import asyncio

import pytest

from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
from pytest_resilibench.runtime.agents.probe import hint_for, merge_stats, probe_agent
from pytest_resilibench.runtime.protocol import InfrastructureError
from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer


def test_hints_name_the_option_to_change() -> None:
    assert "OPENAI_API_KEY" in hint_for(InfrastructureError("x", status=401, retryable=False))
    assert "--resili-model " in hint_for(InfrastructureError("x", status=404, retryable=False))
    assert "--resili-model-args" in hint_for(
        InfrastructureError("x", status=400, retryable=False))
    assert "--resili-retries" in hint_for(InfrastructureError("x", status=500))


def test_a_refused_probe_is_a_usage_error_quoting_the_server() -> None:
    with OpenAITestServer({"o3": make_builtin("adaptive")}, strict=True) as server:
        agent = OpenAIAgent("o3", base_url=server.base_url, api_key="sk-x",
                            model_args={"frobnicate": 1})
        with pytest.raises(ValueError, match=r"^--resili-model o3: the start-up request failed"
                                             r".*Unrecognized request argument supplied: "
                                             r"frobnicate.*check --resili-model-args"):
            asyncio.run(probe_agent(agent, "o3"))
        assert server.stats.requests == 1


def test_a_server_that_always_fails_is_retried_then_reported() -> None:
    with OpenAITestServer(faults=FaultConfig(rate=1.0, kinds=("500",))) as server:
        agent = OpenAIAgent("builtin:follower", base_url=server.base_url, max_retries=2,
                            backoff_base_s=0.001, backoff_max_s=0.002)
        with pytest.raises(ValueError, match=r"HTTP 500: The server had an error .*after 3 "
                                             r"attempts.*did not answer after every retry"):
            asyncio.run(probe_agent(agent, "builtin:follower"))
        assert server.stats.requests == 3


def test_builtin_agents_are_not_probed() -> None:
    asyncio.run(probe_agent(make_agent("builtin:oracle"), "builtin:oracle"))


def test_merge_stats_adds_counts_and_faults() -> None:
    a = {"requests": 3, "faults": {"timeout": 1}, "cost_usd": None}
    b = {"requests": 2, "faults": {"timeout": 2, "rate_limit": 1}, "cost_usd": 0.5}
    assert merge_stats(merge_stats(None, a), b) == {
        "requests": 5, "faults": {"rate_limit": 1, "timeout": 3}, "cost_usd": 0.5}


def test_merged_stats_keep_the_span_and_the_shared_window() -> None:
    """Two workers' limiter figures: the span is the earliest first request to the latest
    reply, the window they share the largest seen, time in flight adds up; `throughput`
    makes requests per second and the mean in flight of them."""
    from pytest_resilibench.runtime.agents.probe import merge_stats, throughput

    a = {"api_calls": 30, "first_at": 100.0, "last_at": 110.0, "window": 8, "busy_s": 40.0,
         "limit_wait_s": 1.5, "faults": {"rate_limit": 2}}
    b = {"api_calls": 10, "first_at": 101.0, "last_at": 120.0, "window": 6, "busy_s": 40.0,
         "limit_wait_s": 0.5, "faults": {"rate_limit": 1}}
    merged = merge_stats(merge_stats(None, a), b)
    assert (merged["first_at"], merged["last_at"], merged["window"]) == (100.0, 120.0, 8)
    assert merged["busy_s"] == 80.0 and merged["limit_wait_s"] == 2.0
    assert merged["faults"] == {"rate_limit": 3}
    shown = throughput(merged)
    assert shown["requests_per_s"] == 2.0 and shown["concurrency"] == 4.0
    assert throughput({"api_calls": 0, "first_at": None, "last_at": None})["requests_per_s"] \
        is None
