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
from pytest_resilibench.servers.testserver import OpenAITestServer
from tests.unit.adapters.scripted_models import calls_forever, gives_up, play

Policy = Callable[..., Any]


def sdk_agent(server: OpenAITestServer, model: str) -> AgentsSdkAgent:
    client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    return AgentsSdkAgent(Agent(name="sdk", model=OpenAIChatCompletionsModel(
        model=model, openai_client=client)))


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
