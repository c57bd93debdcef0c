"""The LangGraph adapter (adapters/langgraph.py): a tool-calling graph (the example's), its
model `ChatOpenAI` against our loopback test server, plays episodes scored like a model's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="the [langgraph] extra (langgraph) is not installed")
pytest.importorskip("langchain_openai",
                    reason="the [langgraph] extra (langchain-openai) is not installed")

from langchain_openai import ChatOpenAI

from pytest_resilibench.adapters.langgraph import LangGraphAgent, langchain_tools
from pytest_resilibench.servers.testserver import OpenAITestServer
from tests.unit.adapters.scripted_models import calls_forever, gives_up, play

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "langgraph_agent.py"


def example_graph() -> Any:
    """`tool_calling_graph` of docs/examples/langgraph_agent.py."""
    spec = importlib.util.spec_from_file_location("langgraph_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("langgraph_example", module)
    spec.loader.exec_module(module)
    return module.tool_calling_graph


def graph_agent(server: OpenAITestServer, model: str) -> LangGraphAgent:
    chat = ChatOpenAI(model=model, base_url=server.base_url, api_key="sk-test",  # type: ignore[arg-type]
                      max_retries=0)
    build = example_graph()
    return LangGraphAgent(lambda tools: build(chat, tools), name="graph")


@pytest.mark.parametrize("tool_mode", ["native", "text"])
def test_a_graph_follows_the_plan_to_full_success(tool_mode: str) -> None:
    with OpenAITestServer() as server:
        record = play(graph_agent(server, "builtin:follower"), tool_mode=tool_mode)
        requests = server.stats.requests
    assert (record.outcome, record.stop_reason) == ("full", "completed")
    assert record.model == "graph" and record.tool_calls == 2
    assert requests == 3  # two calls and the completion signal
    assert record.tokens["prompt"] > 0 and record.tokens["completion"] > 0


def test_an_early_stop_ends_the_graph_quietly() -> None:
    with OpenAITestServer({"stubborn": calls_forever}) as server:
        record = play(graph_agent(server, "stubborn"))
    # The third identical call ends the episode; the fourth request's call raises
    # EpisodeOver through the ToolNode, which ends the graph and the episode quietly.
    assert record.stop_reason == "repeated_call" and record.agent_error is None
    assert record.tool_calls == 3
    assert record.tokens["prompt"] == 400  # the tokens of every request, the last included


def test_an_answer_without_the_signal_leaves_the_episode_unfinished() -> None:
    with OpenAITestServer({"prose": gives_up}) as server:
        record = play(graph_agent(server, "prose"))
    assert (record.stop_reason, record.tool_calls, record.outcome) == ("run_returned", 0,
                                                                       "failed")


def test_langchain_tools_are_the_episodes_tools() -> None:
    seen: list[list[str]] = []

    class Probe:
        name = "probe"

        async def run(self, episode: Any) -> None:
            seen.append([tool.name for tool in langchain_tools(episode)])
            episode.finish()

    play(Probe())
    assert len(seen[0]) == 30
