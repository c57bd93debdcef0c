"""What the framework adapters share: the prompt split into instructions and task, the
observation as the text a tool returns, the completion signal read from a final answer, and
token usage in OpenAI's keys."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_resilibench.base.names import COMPLETION_SIGNAL

if TYPE_CHECKING:
    from pytest_resilibench.runtime.loop_episode import LoopEpisode

__all__ = ["PromptParts", "end_episode", "observation_text", "prompt_of", "usage_counts"]


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
