"""LangGraph and LangChain tool-calling agents (the `[langgraph]` extra) in the benchmark.

`LangGraphAgent(build)` is a loop-level agent: for each episode it calls `build(tools)` with
the episode's tools as LangChain tools (`langchain_tools`: each invocation is one
`episode.call`, one turn) and runs the graph it returns (a compiled LangGraph graph, or any
runnable that takes and returns `{"messages": [...]}`) on the benchmark's system prompt and
task. A last AI message saying TASK_COMPLETED is the completion signal; the tokens of every
model call (LangChain's `usage_metadata`, by model name: what prices them) go to the
episode's record. Once the episode is over a tool call raises `EpisodeOver`, which ends the
graph's run (ToolNode lets it through) and the episode quietly.

The `ChatOpenAI` models named in `models` get the direct path's retries and limiter: the
adapter gives each a copy of its client that goes through them (`common.ModelRoute`, the
run's --resili-* request options, `request_options` over them) and sets its own retries to
0. A model request that fails is read as the direct path reads it: a 400 saying the context
overflowed ends the episode as the model's failure (`context_overflow`), a refusal or a
transport failure after the retries as an infra error; any other exception out of the graph
is the agent's own (`agent_error`).

    from langchain_openai import ChatOpenAI
    from pytest_resilibench.adapters.langgraph import LangGraphAgent

    def make_agent():
        model = ChatOpenAI(model=...)
        return LangGraphAgent(lambda tools: my_graph(model, tools), models=[model])

LangChain tools from JSON schemas: https://python.langchain.com/docs/how_to/custom_tools/
(StructuredTool); the tool-calling loop: https://langchain-ai.github.io/langgraph/ (ToolNode,
tools_condition).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_resilibench.adapters.common import (
    ModelRoute,
    RoutedAgent,
    end_episode,
    observation_text,
    prompt_of,
    usage_counts,
)
from pytest_resilibench.base.extras import require

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from pytest_resilibench.runtime.loop_episode import LoopEpisode

__all__ = ["LangGraphAgent", "langchain_tools"]

_FEATURE = "pytest_resilibench.adapters.langgraph"


def langchain_tools(episode: LoopEpisode) -> list[BaseTool]:
    """The episode's tools as LangChain tools (JSON-schema arguments): each invocation is one
    `episode.call` and returns the observation's JSON."""
    require("langgraph", "langchain_core", _FEATURE)
    from langchain_core.tools import StructuredTool

    def invoke(name: str) -> Callable[..., Any]:
        async def call(**arguments: Any) -> str:
            return observation_text(await episode.call(name, arguments))

        return call

    tools: list[BaseTool] = []
    for schema in episode.tools:
        function = schema["function"]
        tools.append(StructuredTool(
            name=function["name"], description=function.get("description", ""),
            args_schema=dict(function.get("parameters") or {"type": "object"}),
            coroutine=invoke(function["name"])))
    return tools


class LangGraphAgent(RoutedAgent):
    """A loop-level agent that builds a graph per episode around the episode's tools."""

    def __init__(self, build: Callable[[list[BaseTool]], Any], *, name: str = "langgraph",
                 recursion_limit: int | None = None, models: Sequence[Any] = (),
                 request_options: Mapping[str, Any] | None = None) -> None:
        require("langgraph", "langgraph", _FEATURE)
        # Here, on pytest's thread, not in the episode thread (integration/preload.py).
        import langchain_core.callbacks
        import langchain_core.messages
        import langchain_core.tools  # noqa: F401

        self.build = build
        self.name = name
        self.recursion_limit = recursion_limit
        self.route = ModelRoute(request_options)
        for model in models:
            self._route(model)

    def _route(self, model: Any) -> None:
        """A ChatOpenAI's async clients replaced by a copy through the route, its own
        retries off (langchain-openai keeps them in `root_async_client`, `async_client`)."""
        import openai

        client = getattr(model, "root_async_client", None)
        if not isinstance(client, openai.AsyncOpenAI):
            raise ValueError(f"LangGraphAgent(models=...) takes ChatOpenAI models, got "
                             f"{type(model).__name__}")
        routed = self.route.client(client, str(getattr(model, "model_name", "") or "unknown"))
        model.root_async_client = routed
        model.async_client = routed.chat.completions
        model.max_retries = 0

    async def run(self, episode: LoopEpisode) -> None:
        from langchain_core.callbacks import UsageMetadataCallbackHandler
        from langchain_core.messages import HumanMessage, SystemMessage

        prompt = prompt_of(episode)
        graph = self.build(langchain_tools(episode))
        # Two graph steps per turn (the model, the tools), and the last answer.
        limit = self.recursion_limit or 2 * episode.max_turns + 5
        usage = UsageMetadataCallbackHandler()  # counts every model call, even of a cut run
        try:
            state = await graph.ainvoke(
                {"messages": [SystemMessage(prompt.system), HumanMessage(prompt.task)]},
                config={"recursion_limit": limit, "callbacks": [usage]})
        except Exception as exc:
            failure = self.route.failure(exc, next(iter(usage.usage_metadata), ""))
            if failure is None:
                raise
            raise failure from exc
        finally:
            for model, counts in usage.usage_metadata.items():
                _count_usage(episode, model, counts)
        messages = state.get("messages") if isinstance(state, Mapping) else None
        last = messages[-1] if messages else None
        end_episode(episode, getattr(last, "content", None)
                    if getattr(last, "type", None) == "ai" else None)

    async def aclose(self) -> None:
        await self.route.aclose()


def _count_usage(episode: LoopEpisode, model: str, usage: Mapping[str, Any]) -> None:
    """One model's LangChain token counts (`usage_metadata`) in OpenAI's keys, with its
    name (what prices them)."""
    counts = usage_counts(
        int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
        cached=int((usage.get("input_token_details") or {}).get("cache_read") or 0),
        reasoning=int((usage.get("output_token_details") or {}).get("reasoning") or 0))
    if counts["prompt_tokens"] or counts["completion_tokens"]:
        episode.add_usage(counts, model=model or None)
