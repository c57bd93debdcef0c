"""What the framework adapters share: the prompt split into instructions and task, the
observation as the text a tool returns, the completion signal read from a final answer, token
usage in OpenAI's keys, and the framework's model client routed through the direct path's
retries and limiter (`ModelRoute`, runtime/agents/transport.py), its errors read as the direct
path reads them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_resilibench.base.names import COMPLETION_SIGNAL

if TYPE_CHECKING:
    import openai

    from pytest_resilibench.runtime.agents.limiter import AdaptiveLimiter
    from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent, ProviderStats
    from pytest_resilibench.runtime.loop_episode import LoopEpisode

__all__ = ["ModelRoute", "PromptParts", "RoutedAgent", "end_episode", "observation_text",
           "prompt_of", "usage_counts"]


class PromptParts(NamedTuple):
    """The variant's prompt: the system message (the rules and the tools) and the user
    message (the task, and in most variants a plan)."""

    system: str
    task: str


def prompt_of(episode: LoopEpisode) -> PromptParts:
    system = "\n\n".join(str(m["content"]) for m in episode.messages if m["role"] == "system")
    task = "\n\n".join(str(m["content"]) for m in episode.messages if m["role"] == "user")
    return PromptParts(system, task)


def observation_text(observation: Mapping[str, Any]) -> str:
    """What a tool returns to the framework: the observation's JSON, as a model reads it in
    a `role: tool` message."""
    return json.dumps(observation)


def end_episode(episode: LoopEpisode, final_answer: object) -> None:
    """The framework's run is over: its final answer saying TASK_COMPLETED is the completion
    signal; any other answer leaves the episode unfinished (stop reason `run_returned`)."""
    if not episode.over and isinstance(final_answer, str) and COMPLETION_SIGNAL in final_answer:
        episode.finish()


def usage_counts(input_tokens: int, output_tokens: int, *, cached: int = 0,
                 reasoning: int = 0) -> dict[str, int]:
    """Token counts in OpenAI's chat `usage` keys (what `Episode.add_usage` takes)."""
    return {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
            "cached_tokens": cached, "reasoning_tokens": reasoning}


class ModelRoute:
    """The model requests of one adapter's agent: the framework's clients, each a copy that
    goes through one provider (`transport.provider_for`: the run's --resili-* request
    options, `options` over them), so they get the direct path's retries and limiter. The
    runner reads `limiter` (the agent keeps its requests in line) and `stats`."""

    def __init__(self, options: Mapping[str, Any] | None) -> None:
        self.options = dict(options or {})
        self.provider: OpenAIAgent | None = None
        self.model = ""  # the model name the first routed client serves
        self._clients: list[openai.AsyncOpenAI] = []

    def client(self, client: openai.AsyncOpenAI, model: str) -> openai.AsyncOpenAI:
        """A copy of `client` through this route (the first client names its provider)."""
        from pytest_resilibench.runtime.agents.transport import provider_for, retrying_client

        if self.provider is None:
            self.provider, self.model = provider_for(client, model, self.options), model
        routed = retrying_client(client, self.provider)
        self._clients.append(routed)
        return routed

    @property
    def limiter(self) -> AdaptiveLimiter | None:
        return None if self.provider is None else self.provider.limiter

    @property
    def stats(self) -> ProviderStats | None:
        return None if self.provider is None else self.provider.stats

    def failure(self, exc: BaseException, model: str) -> Exception | None:
        """What a model call's exception out of the framework is (`transport.model_failure`):
        an `InfrastructureError` or `ModelLimitError` to raise, or None (the agent's own)."""
        from pytest_resilibench.runtime.agents.transport import model_failure

        return model_failure(exc, model=model or self.model)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()
        self._clients.clear()
        if self.provider is not None:
            await self.provider.aclose()


class RoutedAgent:
    """An adapter's agent whose model requests go through its `route`: the runner reads the
    route's `limiter` and `stats` off the agent, as off a model's provider."""

    route: ModelRoute

    @property
    def limiter(self) -> AdaptiveLimiter | None:
        return self.route.limiter

    @property
    def stats(self) -> ProviderStats | None:
        return self.route.stats
