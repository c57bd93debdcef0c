"""The agent protocols: what the episode runner asks of any agent, built-in or remote.

Two shapes. A turn-level `Agent` is asked for one reply per turn (`complete`), as a model is;
the episode owns the loop. A `LoopAgent` owns its loop (`run(episode)`) and makes its calls
through the episode handle (`loop_episode.LoopEpisode`); the episode keeps the same books.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from pytest_resilibench.base.jsontext import json_text
from pytest_resilibench.base.names import MODEL_LIMITS, ModelLimit

if TYPE_CHECKING:
    from pytest_resilibench.runtime.loop_episode import LoopEpisode

__all__ = ["Agent", "AnyAgent", "InfrastructureError", "LoopAgent", "MalformedReply",
           "ModelLimitError", "ModelReply", "ModelRequest", "ToolCall", "agent_shape",
           "error_cause", "format_observation", "observation_json", "read_observation"]


class InfrastructureError(Exception):
    """The model could not be reached (retries exhausted, 5xx, timeouts, bad bodies).

    Not the agent's failure: the episode's outcome becomes `error`, kept out of the rates.
    `status` is the HTTP status of the last answer, when there was one; `retryable` whether
    that failure was worth another try (False for a refusal: 400, 401, 404 ...)."""

    def __init__(self, message: str, *, status: int | None = None,
                 retryable: bool = True) -> None:
        from pytest_resilibench.base.redact import redact

        super().__init__(redact(message))  # it ends up in reports, JUnit XML and the terminal
        self.status = status
        self.retryable = retryable


class ModelLimitError(Exception):
    """The model itself could not go on: its context window overflowed, it refused, or its
    reply was cut at its length limit. The model's failure, not the infrastructure's: the
    episode ends with `stop_reason` (context_overflow, refusal, length) and is scored."""

    STOP_REASONS = MODEL_LIMITS

    def __init__(self, message: str, *, stop_reason: ModelLimit) -> None:
        super().__init__(message)
        if stop_reason not in self.STOP_REASONS:
            raise ValueError(f"unknown model limit {stop_reason!r}")
        self.stop_reason = stop_reason


def error_cause(message: str) -> str:
    """An infrastructure error's cause without what differs between episodes: the provider's
    "model 'o3' at URL: " prefix and its "(after N attempts)" suffix."""
    cause = re.sub(r"\s*\(after \d+ attempts?\)$", "", message.strip())
    return re.sub(r"^model '[^']*' at \S+: ", "", cause)


class MalformedReply(ValueError):
    """The endpoint answered 200 with something that is not a completion."""


@dataclass(frozen=True)
class ToolCall:
    """A native function call as the model sent it; `arguments` is the raw JSON string."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelRequest:
    """One turn's request. `context` holds what only privileged agents (the oracle) may read:
    the task and the variant; agents that play fair read `messages` and `tools` alone."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    repeat: int = 0
    task_id: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Mapping[str, int] = field(default_factory=dict)
    raw: Mapping[str, Any] | None = None

    def to_message(self) -> dict[str, Any]:
        """The OpenAI chat `assistant` message of this reply."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


@runtime_checkable
class Agent(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class LoopAgent(Protocol):
    """An agent that owns its loop: `run` plays one episode through the handle it is given
    (any number of episodes may run at once, each with its own handle)."""

    name: str

    async def run(self, episode: LoopEpisode) -> None: ...

    async def aclose(self) -> None: ...


AnyAgent: TypeAlias = "Agent | LoopAgent"
# The members each shape needs, async ones first: what `agent_shape` checks.
_SHAPES: dict[str, tuple[str, ...]] = {"turn": ("complete", "aclose"), "loop": ("run", "aclose")}


def agent_shape(agent: object) -> Literal["turn", "loop"]:
    """Which shape `agent` has: "turn" (`async complete(request)`) or "loop"
    (`async run(episode)`); both need `name` and `async aclose()`. Raises ValueError saying
    what is missing, so a bad agent stops a run at start-up, not in every episode."""
    shapes = [shape for shape, (entry, _) in _SHAPES.items() if hasattr(agent, entry)]
    what = f"{type(agent).__name__} object"
    if len(shapes) != 1:
        have = "both" if shapes else "neither"
        raise ValueError(f"{what} has {have} of `async def complete(self, request)` (a turn-level "
                         "agent) and `async def run(self, episode)` (a loop-level agent)")
    shape = shapes[0]
    for member in _SHAPES[shape]:
        if not inspect.iscoroutinefunction(getattr(agent, member, None)):
            raise ValueError(f"{what}: `{member}` must be an `async def` method")
    if not isinstance(getattr(agent, "name", None), str):
        raise ValueError(f"{what} has no `name` string attribute")
    return "turn" if shape == "turn" else "loop"


# --- the observation format -------------------------------------------------------------------
# What the environment's answer to a call looks like to the model: in text mode a user message
# `<tool_response>{json}</tool_response>`, natively a `role: tool` message of the JSON alone.
_OPEN, _CLOSE = "<tool_response>", "</tool_response>"
# json.dumps(payload): default separators, ", " and ": " (built once: base/jsontext.py).
observation_json = json_text()


def format_observation(payload: Mapping[str, Any]) -> str:
    """The text-mode observation message."""
    return f"{_OPEN}{observation_json(payload)}{_CLOSE}"


def read_observation(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The observation payload of a message the environment sent (text or native), else None.
    Built-in agents read observations back through this."""
    content = message.get("content")
    if not isinstance(content, str):
        return None
    role = message.get("role")
    if role == "user" and content.startswith(_OPEN) and content.endswith(_CLOSE):
        content = content[len(_OPEN):-len(_CLOSE)]
    elif role != "tool":
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
