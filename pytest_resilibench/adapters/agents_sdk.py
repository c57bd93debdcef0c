"""OpenAI Agents SDK agents (`openai-agents`, the `[agents-sdk]` extra) in the benchmark.

`AgentsSdkAgent(agent)` is a loop-level agent: each episode runs a copy of your SDK `Agent`
through `Runner.run`, with the episode's tools added to its own as function tools
(`function_tools`: each invocation is one `episode.call`, one turn), the benchmark's system
prompt after your instructions and the task as the input. The run stops as soon as the
episode is over (budget, early stop); a final answer saying TASK_COMPLETED is the completion
signal; the tokens the SDK counted go to the episode's record. Tracing is off unless you pass
a `run_config` of your own.

    from agents import Agent, OpenAIChatCompletionsModel
    from pytest_resilibench.adapters.agents_sdk import AgentsSdkAgent

    def make_agent():
        return AgentsSdkAgent(Agent(name="planner", model=...))

The SDK: https://openai.github.io/openai-agents-python/ (FunctionTool, tool_use_behavior,
Runner.run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_resilibench.adapters.common import (
    end_episode,
    observation_text,
    prompt_of,
    usage_counts,
)
from pytest_resilibench.base.extras import require

if TYPE_CHECKING:
    from agents import Agent, FunctionTool, RunConfig

    from pytest_resilibench.runtime.loop_episode import LoopEpisode

__all__ = ["AgentsSdkAgent", "function_tools"]

_FEATURE = "pytest_resilibench.adapters.agents_sdk"


def function_tools(episode: LoopEpisode) -> list[FunctionTool]:
    """The episode's tools as SDK function tools: each invocation is one `episode.call` (one
    turn); it returns the observation's JSON, and once the episode is over, says so without
    a call."""
    require("agents-sdk", "agents", _FEATURE)
    from agents import FunctionTool

    def invoke(name: str) -> Any:
        async def on_invoke(_context: Any, arguments: str) -> str:
            if episode.over:
                return f"The episode is over ({episode.stop_reason}): no call was made."
            return observation_text(await episode.call(name, arguments))

        return on_invoke

    tools = []
    for schema in episode.tools:
        function = schema["function"]
        tools.append(FunctionTool(
            name=function["name"], description=function.get("description", ""),
            params_json_schema=dict(function.get("parameters") or {"type": "object"}),
            on_invoke_tool=invoke(function["name"]),
            # Our schemas have optional parameters, which the SDK's strict mode refuses.
            strict_json_schema=False))
    return tools


class AgentsSdkAgent:
    """A loop-level agent that plays each episode with a copy of an SDK `Agent`."""

    def __init__(self, agent: Agent[Any], *, run_config: RunConfig | None = None,
                 name: str | None = None) -> None:
        require("agents-sdk", "agents", _FEATURE)
        import agents  # noqa: F401  # here, on pytest's thread, not in the episode thread

        self.agent = agent
        self.run_config = run_config
        self.name = name or agent.name

    async def run(self, episode: LoopEpisode) -> None:
        from agents import RunConfig, Runner, ToolsToFinalOutputResult

        def stop_when_over(_context: Any, _results: Any) -> ToolsToFinalOutputResult:
            return ToolsToFinalOutputResult(is_final_output=episode.over)

        prompt = prompt_of(episode)
        instructions = self.agent.instructions
        own = instructions if isinstance(instructions, str) and instructions else ""
        agent = self.agent.clone(
            instructions="\n\n".join(part for part in (own, prompt.system) if part),
            tools=[*self.agent.tools, *function_tools(episode)],
            tool_use_behavior=stop_when_over)
        result = await Runner.run(
            agent, prompt.task, max_turns=episode.max_turns + 2,
            run_config=self.run_config or RunConfig(tracing_disabled=True))
        usage = result.context_wrapper.usage
        episode.add_usage(usage_counts(
            usage.input_tokens, usage.output_tokens,
            cached=_detail(usage.input_tokens_details, "cached_tokens"),
            reasoning=_detail(usage.output_tokens_details, "reasoning_tokens")))
        end_episode(episode, result.final_output)


def _detail(details: object, key: str) -> int:
    value = (details.get(key) if isinstance(details, Mapping)
             else getattr(details, key, 0))
    return value if isinstance(value, int) else 0
