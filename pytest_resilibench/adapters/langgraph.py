"""LangGraph and LangChain tool-calling agents (the `[langgraph]` extra) in the benchmark.

`LangGraphAgent(build)` is a loop-level agent: for each episode it calls `build(tools)` with
the episode's tools as LangChain tools (`langchain_tools`: each invocation is one
`episode.call`, one turn) and runs the graph it returns (a compiled LangGraph graph, or any
runnable that takes and returns `{"messages": [...]}`) on the benchmark's system prompt and
task. A last AI message saying TASK_COMPLETED is the completion signal; the tokens of every
model call (LangChain's `usage_metadata`) go to the episode's record. Once the episode is
over a tool call raises `EpisodeOver`, which ends the graph's run (ToolNode lets it through)
and the episode quietly.

    from langchain_openai import ChatOpenAI
    from pytest_resilibench.adapters.langgraph import LangGraphAgent

    def make_agent():
        return LangGraphAgent(lambda tools: my_graph(ChatOpenAI(model=...), tools))

LangChain tools from JSON schemas: https://python.langchain.com/docs/how_to/custom_tools/
(StructuredTool); the tool-calling loop: https://langchain-ai.github.io/langgraph/ (ToolNode,
tools_condition).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pytest_resilibench.adapters.common import (
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


class LangGraphAgent:
    """A loop-level agent that builds a graph per episode around the episode's tools."""

    def __init__(self, build: Callable[[list[BaseTool]], Any], *, name: str = "langgraph",
                 recursion_limit: int | None = None) -> None:
        require("langgraph", "langgraph", _FEATURE)
        # Here, on pytest's thread, not in the episode thread (integration/preload.py).
        import langchain_core.callbacks
        import langchain_core.messages
        import langchain_core.tools  # noqa: F401

        self.build = build
        self.name = name
        self.recursion_limit = recursion_limit

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
        finally:
            _count_usage(episode, usage.usage_metadata.values())
        messages = state.get("messages") if isinstance(state, Mapping) else None
        last = messages[-1] if messages else None
        end_episode(episode, getattr(last, "content", None)
                    if getattr(last, "type", None) == "ai" else None)


def _count_usage(episode: LoopEpisode, usages: Iterable[Mapping[str, Any]]) -> None:
    """LangChain's token counts (`usage_metadata`, per model), summed into OpenAI's keys."""
    total = {"input": 0, "output": 0, "cached": 0, "reasoning": 0}
    for usage in usages:
        total["input"] += int(usage.get("input_tokens") or 0)
        total["output"] += int(usage.get("output_tokens") or 0)
        total["cached"] += int((usage.get("input_token_details") or {}).get("cache_read") or 0)
        total["reasoning"] += int(
            (usage.get("output_token_details") or {}).get("reasoning") or 0)
    if total["input"] or total["output"]:
        episode.add_usage(usage_counts(total["input"], total["output"],
                                       cached=total["cached"], reasoning=total["reasoning"]))
