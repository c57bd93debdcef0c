"""The agent protocol: what the episode runner asks of any model, built-in or remote."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Agent", "InfrastructureError", "MalformedReply", "ModelReply", "ModelRequest",
           "ToolCall", "error_cause"]


class InfrastructureError(Exception):
    """The model could not be reached (retries exhausted, 5xx, timeouts, bad bodies).

    Not the agent's failure: the episode's outcome becomes `error`, kept out of the rates.
    `status` is the HTTP status of the last answer, when there was one; `retryable` whether
    that failure was worth another try (False for a refusal: 400, 401, 404 ...)."""

    def __init__(self, message: str, *, status: int | None = None,
                 retryable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


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
