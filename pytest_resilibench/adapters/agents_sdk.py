"""OpenAI Agents SDK agents (`openai-agents`, the `[agents-sdk]` extra) in the benchmark.

`AgentsSdkAgent(agent)` is a loop-level agent: each episode runs a copy of your SDK `Agent`
through `Runner.run`, with the episode's tools added to its own as function tools
(`function_tools`: each invocation is one `episode.call`, one turn), the benchmark's system
prompt after your instructions and the task as the input. The run stops as soon as the
episode is over (budget, early stop); a final answer saying TASK_COMPLETED is the completion
signal; the tokens the SDK counted go to the episode's record, with the model's name (what
prices them). Tracing is off unless you pass a `run_config` of your own.

The model's requests get the direct path's retries and limiter: an OpenAI model of the SDK
(`OpenAIChatCompletionsModel`, `OpenAIResponsesModel`, or a model name the run config's
provider resolves to one) is given a copy of its client that goes through them
(`common.ModelRoute`), with the run's --resili-* request options (`request_options` over
them). A model request that fails is read as the direct path reads it: a 400 saying the
context overflowed ends the episode as the model's failure (`context_overflow`), a refusal or
a transport failure after the retries as an infra error; any other exception out of the run
is the agent's own (`agent_error`).

    from agents import Agent, OpenAIChatCompletionsModel
    from pytest_resilibench.adapters.agents_sdk import AgentsSdkAgent

    def make_agent():
        return AgentsSdkAgent(Agent(name="planner", model=...))

The SDK: https://openai.github.io/openai-agents-python/ (FunctionTool, tool_use_behavior,
Runner.run).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
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
    from agents import Agent, FunctionTool, Model, RunConfig

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


class AgentsSdkAgent(RoutedAgent):
    """A loop-level agent that plays each episode with a copy of an SDK `Agent`."""

    def __init__(self, agent: Agent[Any], *, run_config: RunConfig | None = None,
                 name: str | None = None,
                 request_options: Mapping[str, Any] | None = None) -> None:
        require("agents-sdk", "agents", _FEATURE)
        from agents import RunConfig

        self.name = name or agent.name
        self.route = ModelRoute(request_options)
        run_config = run_config or RunConfig(tracing_disabled=True)
        # The run config's model, when it has one, is the one every agent of the run uses.
        routed = self._routed(run_config.model if run_config.model is not None
                              else agent.model, run_config)
        self.model_name = _name_of(routed)
        if run_config.model is not None:
            run_config = dataclasses.replace(run_config, model=routed)
        elif routed is not None:
            agent = agent.clone(model=routed)
        self.agent = agent
        self.run_config = run_config

    def _routed(self, model: str | Model | None, run_config: RunConfig) -> str | Model | None:
        """`model` with its OpenAI client through the route; a name resolved first by the
        run config's provider. Any other model is left as it is (its retries its own)."""
        if not isinstance(model, str) and model is not None:
            resolved: Any = model
        else:
            try:  # the SDK's default client needs OPENAI_API_KEY: without it, left as named
                resolved = run_config.model_provider.get_model(model)
            except Exception:
                return model
        client = getattr(resolved, "_client", None)  # both OpenAI models keep it there
        import openai

        if not isinstance(client, openai.AsyncOpenAI):
            return model
        routed = copy.copy(resolved)
        routed._client = self.route.client(client, _name_of(resolved) or "unknown")
        return routed  # type: ignore[no-any-return]

    async def run(self, episode: LoopEpisode) -> None:
        from agents import Runner, ToolsToFinalOutputResult

        def stop_when_over(_context: Any, _results: Any) -> ToolsToFinalOutputResult:
            return ToolsToFinalOutputResult(is_final_output=episode.over)

        prompt = prompt_of(episode)
        instructions = self.agent.instructions
        own = instructions if isinstance(instructions, str) and instructions else ""
        agent = self.agent.clone(
            instructions="\n\n".join(part for part in (own, prompt.system) if part),
            tools=[*self.agent.tools, *function_tools(episode)],
            tool_use_behavior=stop_when_over)
        try:
            result = await Runner.run(agent, prompt.task, max_turns=episode.max_turns + 2,
                                      run_config=self.run_config)
        except Exception as exc:
            failure = self.route.failure(exc, self.model_name)
            if failure is None:
                raise
            raise failure from exc
        usage = result.context_wrapper.usage
        episode.add_usage(usage_counts(
            usage.input_tokens, usage.output_tokens,
            cached=_detail(usage.input_tokens_details, "cached_tokens"),
            reasoning=_detail(usage.output_tokens_details, "reasoning_tokens")),
            model=self.model_name or None)
        end_episode(episode, result.final_output)

    async def aclose(self) -> None:
        await self.route.aclose()


def _name_of(model: object) -> str:
    """The model name an SDK model (or a name) stands for; "" when it says none."""
    name = model if isinstance(model, str) else getattr(model, "model", None)
    return name if isinstance(name, str) else ""


def _detail(details: object, key: str) -> int:
    value = (details.get(key) if isinstance(details, Mapping)
             else getattr(details, key, 0))
    return value if isinstance(value, int) else 0
