"""The OpenAI Agents SDK adapter (adapters/agents_sdk.py): an SDK `Agent`, its model our
loopback test server, plays episodes scored like a model's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("agents", reason="the [agents-sdk] extra (openai-agents) is not installed")

from agents import Agent, OpenAIChatCompletionsModel
from openai import AsyncOpenAI

from pytest_resilibench.adapters.agents_sdk import AgentsSdkAgent, function_tools
from pytest_resilibench.runtime.agents.pricing import Price, episode_cost
from pytest_resilibench.servers.testserver import OpenAITestServer
from tests.unit.adapters.scripted_models import (
    FAST,
    FAULTS,
    calls_forever,
    direct,
    gives_up,
    outcomes,
    overflows,
    play,
)

Policy = Callable[..., Any]


def sdk_agent(server: OpenAITestServer, model: str) -> AgentsSdkAgent:
    # The client's own retries as the SDK's users leave them (2): the adapter's copy has none.
    client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    return AgentsSdkAgent(Agent(name="sdk", model=OpenAIChatCompletionsModel(
        model=model, openai_client=client)), request_options=FAST)


@pytest.mark.parametrize("tool_mode", ["native", "text"])
def test_an_sdk_agent_follows_the_plan_to_full_success(tool_mode: str) -> None:
    with OpenAITestServer() as server:
        record = play(sdk_agent(server, "builtin:follower"), tool_mode=tool_mode)
        requests = server.stats.requests
    assert (record.outcome, record.stop_reason) == ("full", "completed")
    assert record.model == "sdk" and record.tool_calls == 2
    assert requests == 3  # two calls and the completion signal, one request each
    assert record.tokens["prompt"] > 0 and record.tokens["completion"] > 0


def test_an_early_stop_ends_the_sdk_run_quietly() -> None:
    with OpenAITestServer({"stubborn": calls_forever}) as server:
        record = play(sdk_agent(server, "stubborn"))
    assert record.stop_reason == "repeated_call" and record.agent_error is None
    assert record.tool_calls == 3
    assert record.tokens["prompt"] == 300  # every request the SDK made was counted


def test_an_answer_without_the_signal_leaves_the_episode_unfinished() -> None:
    with OpenAITestServer({"prose": gives_up}) as server:
        record = play(sdk_agent(server, "prose"))
    assert (record.stop_reason, record.tool_calls, record.outcome) == ("run_returned", 0,
                                                                       "failed")


def test_function_tools_are_the_episodes_tools() -> None:
    seen: list[list[str]] = []

    class Probe:
        name = "probe"

        async def run(self, episode: Any) -> None:
            tools = function_tools(episode)
            seen.append([tool.name for tool in tools])
            assert [t.params_json_schema for t in tools] == [
                t["function"]["parameters"] for t in episode.tools]
            episode.finish()

    play(Probe())
    assert len(seen[0]) == 30


def test_at_30_percent_429s_and_500s_the_sdk_path_loses_what_the_direct_path_loses() -> None:
    """Issue 45: the SDK's model requests go through the direct path's retries and limiter,
    so the same faults cost both paths the same infra errors: none at the default retries."""
    with OpenAITestServer(faults=FAULTS, seed=7) as server:
        through_sdk = outcomes(lambda: sdk_agent(server, "builtin:follower"), 30)
        sdk_faults = sum(server.stats.faults.values())
    with OpenAITestServer(faults=FAULTS, seed=7) as server:
        straight = outcomes(lambda: direct(server, "builtin:follower"), 30)
        direct_faults = sum(server.stats.faults.values())
    assert sdk_faults >= 10 and direct_faults >= 10  # 30% of >= 90 requests each
    errors = [sum(n for (outcome, _), n in counts.items() if outcome == "error")
              for counts in (through_sdk, straight)]
    assert errors == [0, 0]
    assert through_sdk == straight


def test_the_sdk_runs_requests_are_counted_by_the_provider() -> None:
    with OpenAITestServer(faults=FAULTS, seed=7) as server:
        agent = sdk_agent(server, "builtin:follower")
        play(agent)
        injected = sum(server.stats.faults.values())
    stats = agent.stats
    assert stats is not None and agent.limiter is not None
    assert stats.retries == injected and stats.infra_errors == 0
    assert stats.requests == 3 and stats.api_calls == 3 + injected
    assert stats.prompt_tokens > 0


@pytest.mark.parametrize("model", ["overflowing", "no-such-model"])
def test_a_model_400_or_404_is_scored_as_on_the_direct_path(model: str) -> None:
    """A prompt over the model's context: the model's failure (context_overflow, scored), as
    on the direct path; an unknown model: the refusal the direct path makes an infra error.
    Neither is a harness error or the agent's own."""
    with OpenAITestServer({"overflowing": overflows}) as server:
        through_sdk = outcomes(lambda: sdk_agent(server, model), 2)
        straight = outcomes(lambda: direct(server, model), 2)
    assert through_sdk == straight
    expected = ("failed", "context_overflow") if model == "overflowing" else \
        ("error", "infra_error")
    assert through_sdk == {expected: 2}


def test_the_model_failures_line_is_the_direct_paths() -> None:
    with OpenAITestServer({"overflowing": overflows}) as server:
        unknown = play(sdk_agent(server, "no-such-model"))
    assert unknown.infra_error is not None and unknown.agent_error is None
    assert "'no-such-model'" in unknown.infra_error and "HTTP 404" in unknown.infra_error
    assert "after 1 attempt" in unknown.infra_error  # refused at once, as the direct path


def test_a_sdk_models_tokens_carry_its_name_and_are_priced_by_it_or_by_the_agents() -> None:
    with OpenAITestServer() as server:
        record = play(sdk_agent(server, "builtin:follower"))
    assert record.tokens_by_model == {"builtin:follower": {
        "prompt": record.tokens["prompt"], "completion": record.tokens["completion"],
        "cached": record.tokens["cached"]}}
    per_million = Price(1e6, 1e6, 2e6)  # $1 a prompt token, $2 a completion token
    priced = record.tokens["prompt"] + 2 * record.tokens["completion"]
    spec = ["py:my_agents:make_agent", "sdk"]
    assert episode_cost(record.tokens, record.tokens_by_model, spec, {}) is None
    assert episode_cost(record.tokens, record.tokens_by_model, spec,
                        {"builtin:follower": per_million}) == priced
    assert episode_cost(record.tokens, record.tokens_by_model, spec,
                        {"sdk": per_million}) == priced


def test_a_bad_request_option_is_one_line_at_construction() -> None:
    with OpenAITestServer() as server, pytest.raises(ValueError, match="max_retries >= 0"):
        AgentsSdkAgent(Agent(name="sdk", model=OpenAIChatCompletionsModel(
            model="m", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="k"))),
            request_options={"max_retries": -1})

