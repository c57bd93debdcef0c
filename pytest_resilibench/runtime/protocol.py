"""The agent protocols: what the episode runner asks of any agent, built-in or remote.

Two shapes. A turn-level `Agent` is asked for one reply per turn (`complete`), as a model is;
the episode owns the loop. A `LoopAgent` owns its loop (`run(episode)`) and makes its calls
through the episode handle (`Episode`; loop_episode.py implements it); the episode keeps the
same books.

This is the contract an agent author reads: types, and the few pure helpers on them. It
imports nothing of the runtime's behaviour: the modules that run agents (episode.py,
loop_episode.py, agent_boundary.py) depend on it, never the reverse.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import (
    Any,
    Literal,
    Protocol,
    TypeAlias,
    TypedDict,
    cast,
    runtime_checkable,
)

from pytest_resilibench.base.jsontext import json_text
from pytest_resilibench.base.names import MODEL_LIMITS, ModelLimit

__all__ = [
    "Agent",
    "AnyAgent",
    "Episode",
    "InfrastructureError",
    "LoopAgent",
    "MalformedReply",
    "ModelLimitError",
    "ModelReply",
    "ModelRequest",
    "Observation",
    "Progress",
    "ToolCall",
    "agent_shape",
    "error_cause",
    "format_observation",
    "observation_json",
    "read_observation",
    "task_text",
]


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
    """One turn's request: `messages` (OpenAI chat messages: the prompt and the conversation
    so far) and `tools` (OpenAI function schemas; None in text mode), the `task_id` and the
    `repeat`. `context` holds the task itself (its required tools, inputs, the variant, the
    base success rate): it is filled only for the privileged built-in agent (`builtin:oracle`,
    `agent_boundary.is_privileged`) and empty for every other agent, yours included."""

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
    """A turn-level agent: asked for one reply per turn, as a model is. `name` shows in the
    tables; an `async def aclose(self)`, when it has one, is awaited once at the end."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...


@runtime_checkable
class Episode(Protocol):
    """The episode handle a loop-level agent's `run` gets (docs/API.md: `Episode`): one call
    is one turn; the episode keeps the same books as a model's."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The variant's prompt as OpenAI chat messages (system, user); yours to extend."""

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function schemas; a copy, yours to modify."""

    @property
    def task_id(self) -> str: ...

    @property
    def repeat(self) -> int: ...

    @property
    def max_turns(self) -> int:
        """The turn budget: at most this many calls are executed."""

    @property
    def over(self) -> bool:
        """Whether the episode has ended (budget, early stop or `finish()`)."""

    @property
    def stop_reason(self) -> str:
        """Why the episode ended ("" while it runs)."""

    async def call(self, name: str, arguments: Mapping[str, Any] | str | None = None
                   ) -> Observation:
        """Call a tool (one turn); the observation a model would see."""

    def add_usage(self, usage: Mapping[str, int], *, model: str | None = None) -> None:
        """Count the tokens your model spent (OpenAI `usage` keys)."""

    def finish(self) -> None:
        """The completion signal: the agent says the task is done."""


@runtime_checkable
class LoopAgent(Protocol):
    """An agent that owns its loop: `run` plays one episode through the handle it is given
    (any number of episodes may run at once, each with its own handle). `aclose` as for
    `Agent`: optional."""

    name: str

    async def run(self, episode: Episode) -> None: ...


AnyAgent: TypeAlias = "Agent | LoopAgent"
# The entry point of each shape: what `agent_shape` checks.
_SHAPES: dict[str, str] = {"turn": "complete", "loop": "run"}


def agent_shape(agent: object) -> Literal["turn", "loop"]:
    """Which shape `agent` has: "turn" (`async complete(request)`) or "loop"
    (`async run(episode)`); both need `name`, and `aclose`, when there is one, must be
    `async def`. Raises ValueError saying what is missing, so a bad agent stops a run at
    start-up, not in every episode."""
    shapes = [shape for shape, entry in _SHAPES.items() if hasattr(agent, entry)]
    what = f"{type(agent).__name__} object"
    if len(shapes) != 1:
        have = "both" if shapes else "neither"
        raise ValueError(f"{what} has {have} of `async def complete(self, request)` (a turn-level "
                         "agent) and `async def run(self, episode)` (a loop-level agent)")
    shape = shapes[0]
    members = [_SHAPES[shape]] + (["aclose"] if getattr(agent, "aclose", None) is not None
                                  else [])
    for member in members:
        if not inspect.iscoroutinefunction(getattr(agent, member, None)):
            raise ValueError(f"{what}: `{member}` must be an `async def` method")
    if not isinstance(getattr(agent, "name", None), str):
        raise ValueError(f"{what} has no `name` string attribute")
    return "turn" if shape == "turn" else "loop"


class Progress(TypedDict):
    """The episode's counts so far, in every observation."""

    turn: int
    turns_left: int
    calls: int
    succeeded: int
    failed: int


class Observation(TypedDict, total=False):
    """What the environment answers to a call, as the model sees it: `status` ("success" or
    "error"), `output` on success, `error_code` and `message` on an error (`retry_after`
    turns for a rate limit of the realistic faults), `progress`, a `note` on how the reply
    was read, and on the last turn `budget`. `tool` is None for a reply with no usable call."""

    tool: str | None
    status: str
    output: dict[str, Any]
    error_code: str
    message: str
    retry_after: int
    note: str
    progress: Progress
    budget: str


# --- the observation format -------------------------------------------------------------------
# What the environment's answer to a call looks like to the model: in text mode a user message
# `<tool_response>{json}</tool_response>`, natively a `role: tool` message of the JSON alone.
_OPEN, _CLOSE = "<tool_response>", "</tool_response>"
# json.dumps(payload): default separators, ", " and ": " (built once: base/jsontext.py).
observation_json = json_text()


def format_observation(payload: Mapping[str, Any]) -> str:
    """The text-mode observation message."""
    return f"{_OPEN}{observation_json(payload)}{_CLOSE}"


def task_text(source: ModelRequest | Episode) -> str:
    """The task an agent is asked to do, from a turn's request or a loop-level episode: the
    prompt's first user message (the task, its inputs, expected outputs and constraints, and
    the execution plan in the variants that show one). Later user messages are observations
    (text mode), so the first one is the task. ValueError where there is no user message."""
    for message in source.messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    raise ValueError("the messages hold no user message: no task to read")


def read_observation(message: Mapping[str, Any]) -> Observation | None:
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
    return cast(Observation, value) if isinstance(value, dict) else None
