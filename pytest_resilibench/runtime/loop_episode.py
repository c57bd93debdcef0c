"""The episode handle of a loop-level agent: an agent that owns its loop (a LangGraph graph, an
OpenAI Agents SDK runner, a planner) plays an episode through it.

`await agent.run(episode)` gets a `LoopEpisode`: `messages` (the variant's prompt as chat
messages), `tools` (the OpenAI function schemas), `await call(name, arguments)` (one call is
one turn; the answer is the observation payload a model would see), `finish()` (the
completion signal) and `add_usage(usage)` (the tokens its own model spent). Each call and
`finish()` stands for the reply a model would have sent, in the run's tool mode, and goes
through the episode's own books (`episode.TurnKeeper`): the same turn accounting, early stops,
messages and scoring as a model's episode, so the record of a loop-level agent equals that of
a model making the same calls.

Past the budget a call is not executed: it answers with a `BUDGET_EXHAUSTED` error and ends
the episode (stop reason `max_turns`). Once the episode is over (`over`: the budget, an early
stop, `finish()`), `call` raises `EpisodeOver`, which ends `run` quietly; a `run` that returns
without `finish()` ends the episode unfinished (stop reason `run_returned`).

Whose failure an exception is (agent_boundary.py): one that comes out of a user's `run` is the
agent's (stop reason `agent_error`), but for `InfrastructureError`, `ModelLimitError` and
`EpisodeOver`. `call`, `finish` and `add_usage` are our code running inside `run`: what they
raise is kept (`fault`) and ends the episode as a harness error (or an infra error), whether
`run` lets it through, catches it and goes on, or raises something else. With limits
(`AgentClock`), a turn is the time from the start of `run`, or from the start of its last call,
to its next call or the end of `run`; past a limit `run` is left behind (agent_boundary.py),
and the episode is over for any call it still makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, cast

from pytest_resilibench.base.names import COMPLETION_SIGNAL, StopReason
from pytest_resilibench.runtime.agent_boundary import AgentClock, from_agent, is_own_agent
from pytest_resilibench.runtime.protocol import ModelReply, Observation, Progress, ToolCall

if TYPE_CHECKING:
    from pytest_resilibench.core.prompts import Prompt
    from pytest_resilibench.core.registry import ToolRegistry
    from pytest_resilibench.runtime.episode import TurnKeeper
    from pytest_resilibench.runtime.protocol import LoopAgent

__all__ = ["BUDGET_EXHAUSTED", "EpisodeOver", "LoopEpisode", "play_loop"]

BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"


class EpisodeOver(Exception):
    """`call` on an episode that is over; `run_episode` catches it as the end of `run`."""


class LoopEpisode:
    """One episode, for an agent that owns its loop. Calls are turns, played one at a time in
    the order they are made (concurrent calls wait for each other)."""

    def __init__(self, keeper: TurnKeeper, prompt: Prompt, registry: ToolRegistry,
                 clock: AgentClock | None = None) -> None:
        self._keeper = keeper
        self._clock = clock
        # The prompt's messages and tools only: never the plan's injection record, which is
        # the answer key of a flawed variant.
        self._messages = prompt.messages
        self._tools = prompt.tools
        self._registry = registry
        self._lock = asyncio.Lock()
        self._replies = 0
        # The first exception our own code raised inside the agent's `run` (a harness bug, or
        # an infra error of the environment): it ends the episode, whatever `run` does.
        self.fault: Exception | None = None
        self._closed = False  # `run` has ended, or was left behind (play_loop)

    @cached_property
    def messages(self) -> list[dict[str, Any]]:
        """The variant's prompt as OpenAI chat messages (system, user); yours to extend."""
        return [dict(message) for message in self._messages]

    @cached_property
    def tools(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function schemas (`{"type": "function", "function": ...}`),
        in either tool mode; a copy, yours to modify."""
        tools = self._tools
        return copy.deepcopy(tools) if tools is not None else self._registry.to_openai()

    @property
    def task_id(self) -> str:
        """The task's id, and below the repeat: what a model request carries too."""
        return self._keeper.record.task_id

    @property
    def repeat(self) -> int:
        return self._keeper.record.repeat

    @property
    def max_turns(self) -> int:
        """The turn budget: at most this many calls are executed (the prompt says it too)."""
        return self._keeper.record.max_turns

    @property
    def over(self) -> bool:
        """Whether the episode has ended (budget, early stop or `finish()`)."""
        return self._keeper.over

    @property
    def stop_reason(self) -> StopReason | Literal[""]:
        """Why the episode ended ("" while it runs); the record's `stop_reason`."""
        return self._keeper.record.stop_reason

    async def call(self, name: str, arguments: Mapping[str, Any] | str | None = None
                   ) -> Observation:
        """Call a tool: one turn. `arguments` is an object, or the raw JSON string a model
        sent (what agent SDKs hand over); what is no call (no tool name, arguments that are
        not JSON) costs the turn with an error, as a model's broken call does. Returns the
        observation a model would see (`status`, `output` or `error_code` and `message`,
        `progress`, and on the last turn `budget`)."""
        async with self._lock:
            keeper = self._keeper
            if keeper.over or self._closed:
                raise EpisodeOver(f"the episode is over ({keeper.record.stop_reason})")
            if self._clock is not None:  # the agent's turn ended with this call
                self._clock.next_turn()
            try:
                reply = self._reply(name, arguments)
                parsed = keeper.receive(reply)
                if parsed is None:  # a call once the budget is spent: not executed
                    refused: Observation = {"tool": _tool_name(name), "status": "error",
                        "error_code": BUDGET_EXHAUSTED,
                        "message": "no turns left: the call was not executed and the episode "
                                   "is over", "progress": cast(Progress, keeper.progress())}
                    return refused
                payload = await keeper.answer(reply, parsed)
                # What the model would read: a copy, so the record stays the agent's to keep.
                observation: Observation = json.loads(json.dumps(payload))
            except Exception as exc:
                self._keep(exc)
                raise
            return observation

    def add_usage(self, usage: Mapping[str, int], *, model: str | None = None) -> None:
        """Count the tokens your model spent (OpenAI `usage` keys: `prompt_tokens`,
        `completion_tokens`, and where known `reasoning_tokens`, `cached_tokens`), as a
        model's reply's usage is counted: the record's `tokens` and cost come from them.
        `model`, the name of the model that spent them, prices them (`--resili-prices`) when
        the agent itself has no price. Anything else (counts that are not numbers, an SDK
        object, a model that is no name) raises ValueError."""
        if model is not None and not (isinstance(model, str) and model.strip()):
            raise ValueError(f"add_usage(model=) takes a model name, got {model!r}"[:400])
        if self._closed:  # a `run` left behind: its episode is scored already
            return
        try:
            self._keeper.count_usage(usage, model)
        except (TypeError, ValueError, AttributeError):  # not usage counts: the agent's error
            raise ValueError(f"add_usage takes OpenAI usage counts (a mapping of token counts), "
                             f"got {usage!r}"[:400]) from None
        except Exception as exc:
            self._keep(exc)
            raise

    def finish(self) -> None:
        """The completion signal (`TASK_COMPLETED`): the agent says the task is done. Ignored
        once the episode is over."""
        if not (self._keeper.over or self._closed):
            try:
                self._keeper.receive(ModelReply(content=COMPLETION_SIGNAL))
            except Exception as exc:
                self._keep(exc)
                raise

    def _keep(self, exc: Exception) -> None:
        if self.fault is None:
            self.fault = exc

    def _reply(self, name: str, arguments: Mapping[str, Any] | str | None) -> ModelReply:
        """The reply a model would send for this call in the run's tool mode."""
        self._replies += 1
        tool = _tool_name(name)
        raw = _raw_arguments(arguments)
        if self._keeper.native:
            return ModelReply(content=None,
                              tool_calls=(ToolCall(f"call_{self._replies}", tool, raw),))
        body = json.dumps({"name": tool, "arguments": _decoded(raw)})
        return ModelReply(content=f"<tool_call>{body}</tool_call>")


def _tool_name(name: Any) -> str:
    """The tool name as a model could send it: a string (none when it is not one)."""
    return name if isinstance(name, str) else ""


def _raw_arguments(arguments: Any) -> str:
    """Arguments as the JSON text a model would send; what is not JSON-able stays unreadable
    text, so it costs the turn the way a model's broken arguments do."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    try:
        return json.dumps(arguments)
    except (TypeError, ValueError):
        return repr(arguments)


def _decoded(raw: str) -> Any:
    """The JSON value of the arguments text; the text itself when it is not JSON (a text-mode
    call then carries it as a string, which the environment refuses)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


async def play_loop(keeper: TurnKeeper, prompt: Prompt, agent: LoopAgent, *,
                    registry: ToolRegistry, clock: AgentClock | None = None) -> None:
    """Let a loop-level agent play the episode; the episode ends when `run` returns. What our
    own code raised inside `run` (`LoopEpisode.fault`) wins over what `run` made of it."""
    episode = LoopEpisode(keeper, prompt, registry, clock)
    try:
        with contextlib.suppress(EpisodeOver):  # a call after the end: the agent's loop is over
            if is_own_agent(agent):
                await agent.run(episode)
            else:  # what the agent's own code raises is its failure (AgentError)
                await from_agent(agent.run(episode), EpisodeOver, clock=clock,
                                 waiting_for="call")
    except Exception as exc:
        # An agent framework may wrap the end of the episode (`raise ... from`, a task group):
        # still the end of `run`, not the agent's error.
        if episode.fault is None and not (keeper.over and _ended_by_over(exc)):
            raise
    finally:  # a `run` left behind past a limit may call no more: the record is scored
        episode._closed = True
    if episode.fault is not None:
        raise episode.fault
    keeper.end("run_returned")


def _ended_by_over(exc: BaseException | None) -> bool:
    """Whether `exc` is `EpisodeOver` wrapped: as the cause of another (`raise ... from`,
    followed down to the exception `AgentError` wraps), or as every exception of a group."""
    while exc is not None:
        if isinstance(exc, EpisodeOver):
            return True
        group = getattr(exc, "exceptions", None)
        if isinstance(group, tuple) and group:
            return all(_ended_by_over(inner) for inner in group)
        exc = exc.__cause__
    return False
