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

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "langgraph_agent.py"


def example_graph() -> Any:
    """`tool_calling_graph` of docs/examples/langgraph_agent.py."""
    spec = importlib.util.spec_from_file_location("langgraph_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("langgraph_example", module)
    spec.loader.exec_module(module)
    return module.tool_calling_graph


def graph_agent(server: OpenAITestServer, model: str, *, routed: bool = True) -> LangGraphAgent:
    """The example's graph; `routed`: its model named in `models` (through the direct path's
    retries), else left with its own client (no retries here)."""
    chat = ChatOpenAI(model=model, base_url=server.base_url, api_key="sk-test",  # type: ignore[arg-type]
                      max_retries=None if routed else 0)
    build = example_graph()
    return LangGraphAgent(lambda tools: build(chat, tools), name="graph",
                          models=[chat] if routed else (), request_options=FAST)


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


def test_at_30_percent_429s_and_500s_the_graph_loses_what_the_direct_path_loses() -> None:
    """Issue 45: the models named in `models` go through the direct path's retries and
    limiter: the same faults cost both paths the same infra errors, none at the defaults."""
    with OpenAITestServer(faults=FAULTS, seed=7) as server:
        through_graph = outcomes(lambda: graph_agent(server, "builtin:follower"), 30)
        injected = sum(server.stats.faults.values())
    with OpenAITestServer(faults=FAULTS, seed=7) as server:
        straight = outcomes(lambda: direct(server, "builtin:follower"), 30)
    assert injected >= 10
    assert through_graph == straight and ("error", "infra_error") not in through_graph


@pytest.mark.parametrize("routed", [True, False])
@pytest.mark.parametrize("model", ["overflowing", "no-such-model"])
def test_a_model_400_or_404_is_scored_as_on_the_direct_path(model: str, routed: bool) -> None:
    """Through the route or the model's own client alike: a context overflow is the model's
    failure, an unknown model the direct path's infra error; never the agent's nor ours."""
    # One episode: langchain-openai shares its default httpx client across event loops, so
    # an unrouted model's second asyncio.run would meet a closed loop.
    with OpenAITestServer({"overflowing": overflows}) as server:
        through_graph = outcomes(lambda: graph_agent(server, model, routed=routed), 1)
        straight = outcomes(lambda: direct(server, model), 1)
    assert through_graph == straight
    expected = ("failed", "context_overflow") if model == "overflowing" else \
        ("error", "infra_error")
    assert through_graph == {expected: 1}


def test_a_graphs_tokens_carry_the_models_name_and_are_priced_by_it() -> None:
    with OpenAITestServer() as server:
        record = play(graph_agent(server, "builtin:follower"))
    assert record.tokens_by_model is not None
    assert list(record.tokens_by_model) == ["builtin:follower"]
    per_million = Price(1e6, 1e6, 2e6)
    priced = record.tokens["prompt"] + 2 * record.tokens["completion"]
    assert episode_cost(record.tokens, record.tokens_by_model, ["py:g:make", "graph"],
                        {"builtin:follower": per_million}) == priced


def test_models_that_are_not_chat_openai_are_one_line() -> None:
    with pytest.raises(ValueError, match="takes ChatOpenAI models, got str"):
        LangGraphAgent(lambda tools: None, models=["gpt-4o"])
