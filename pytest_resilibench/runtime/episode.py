"""The episode: one model, one task, one prompt variant, one turn loop (docs/BENCHMARK.md: Episode).

Turns. A turn is one model reply that is not the completion signal; at most `max_turns` of
them. The reply that says `TASK_COMPLETED` (with no tool call) ends the episode and costs no
turn, so a model may spend the whole budget on calls and still say it is done: when the budget
is spent the last observation says so, and the model's next reply is read only for the
signal (a call in it is not executed; the episode stops with `max_turns`).

Each turn executes at most one call, the first the reply contains; the observation says when
others were dropped. The environment's answer goes back with the progress so far: turns used
and left, calls made, how many succeeded and failed. The progress never says which required
tools are still missing nor any probability: tracking the workflow is the model's job.
Text-mode observations are user messages `<tool_response>{json}</tool_response>`; native calls
are answered by `role: tool` messages carrying the `tool_call_id` (every call id of the reply
gets one, as the OpenAI API requires).

Early stops (stop_reason):
- `repeated_call`: the same call (tool and arguments) for the `REPEAT_LIMIT`-th time in a
  row, where none of the earlier ones failed at random, i.e. repeating could not change
  anything (a retry after a random failure is what the benchmark wants, never stopped);
- `consecutive_errors`: `MAX_CONSECUTIVE_ERRORS` turns in a row that failed through the
  model's own fault: no usable call (format errors), an unknown tool, or arguments refused
  deterministically. Random failures do not count: they are the luck under test and the turn
  budget already bounds them; stopping on them would cut a sound retry policy short.
Other stop reasons: `completed` (the signal with turns left), `max_turns` (every turn spent,
whether or not the reply after the last one said done), `infra_error` (the provider gave up,
or a user's agent raised `InfrastructureError`: outcome `error`), `harness_error` (a bug here, in a
built-in agent or a provider: outcome `error` with the traceback's last frames),
`agent_error` (a user's agent's own code raised: outcome `failed`, the agent's failure, with
the exception and the agent's line in `agent_error`; agent_boundary.py: anything it raises,
`SystemExit` and a `CancelledError` of its own included, or going past `AgentLimits`: a turn
or the episode taking too long), `run_returned` (a
loop-level agent's `run` returned without `finish()`), and the model's own limits
(`protocol.ModelLimitError`): `context_overflow`, `refusal`, `length`; those episodes are
scored as they stand (the model's failure, never `error`).

Agents of both shapes (protocol.py) share these books (`TurnKeeper`): a turn-level agent's
replies go in as they are, a loop-level agent's calls as the replies they stand for
(loop_episode.py); `_play` is where the two part.
"""

from __future__ import annotations

import asyncio
import functools
import time
import traceback
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pytest_resilibench.base.jsontext import json_text
from pytest_resilibench.base.names import (
    COMPLETION_SIGNAL,
    DEFAULT_CONCURRENCY,
    TOOL_MODES,
    StopReason,
    ToolMode,
)
from pytest_resilibench.base.plainkey import plain_key
from pytest_resilibench.base.redact import redact
from pytest_resilibench.core.plan_extras import genuine_workflow
from pytest_resilibench.core.record import EpisodeRecord, episode_id
from pytest_resilibench.core.recovery import calls_measures
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.scoring import Deliverable, deliverable_of, deviation, score_calls
from pytest_resilibench.core.simulator import (
    DEFAULT_BASE_SUCCESS,
    CallResult,
    EpisodeKey,
    Simulator,
)
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.runtime.agent_boundary import (
    NO_LIMITS,
    AgentClock,
    AgentError,
    AgentLimits,
    from_agent,
    is_own_agent,
    is_privileged,
)
from pytest_resilibench.runtime.environment import Environment, SimulatedEnvironment
from pytest_resilibench.runtime.parsing import (
    ParsedReply,
    mentions_completion,
    parse_native,
    parse_text,
)
from pytest_resilibench.runtime.protocol import (
    Agent,
    AnyAgent,
    InfrastructureError,
    LoopAgent,
    ModelLimitError,
    ModelReply,
    ModelRequest,
    ToolCall,
    agent_shape,
    format_observation,
    observation_json,
)

if TYPE_CHECKING:
    from pytest_resilibench.core.faults import TaskFaults
    from pytest_resilibench.core.prompts import Prompt, Variant

__all__ = [
    "DEFAULT_CONCURRENCY",
    "MAX_CONSECUTIVE_ERRORS",
    "REPEAT_LIMIT",
    "EpisodeSlots",
    "EpisodeSpec",
    "TurnKeeper",
    "run_episode",
    "run_episodes",
]

_T = TypeVar("_T")
_NO_CONTEXT: Mapping[str, Any] = MappingProxyType({})
REPEAT_LIMIT = 3
MAX_CONSECUTIVE_ERRORS = 4
# Error codes of results that no retry with the same call can change.
_FORMAT_ERROR = "FORMAT_ERROR"
# json.dumps(value, sort_keys=True, default=str), from an encoder built once (base/jsontext.py).
_call_key_json = json_text(sort_keys=True, default=str)


class _Turns:
    """The running counts an observation reports and the early stops watch."""

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns
        self.used = 0
        self.calls = 0
        self.succeeded = 0
        self.consecutive_errors = 0
        self.streak = 0
        self.last_key: str | None = None
        self.last_random_failure = False

    def progress(self) -> dict[str, int]:
        return {"turn": self.used, "turns_left": self.max_turns - self.used,
                "calls": self.calls, "succeeded": self.succeeded,
                "failed": self.calls - self.succeeded}

    def note_error_turn(self) -> None:
        self.consecutive_errors += 1
        self.last_key = None
        self.streak = 0

    def note_call(self, key: str, result: CallResult) -> None:
        self.calls += 1
        self.succeeded += result.ok
        own_fault = not result.ok and result.deterministic
        self.consecutive_errors = self.consecutive_errors + 1 if own_fault else 0
        repeat = key == self.last_key and not self.last_random_failure
        self.streak = self.streak + 1 if repeat else 1
        self.last_key = key
        self.last_random_failure = not result.ok and not result.deterministic

    def stop_reason(self) -> StopReason | None:
        if self.streak >= REPEAT_LIMIT:
            return "repeated_call"
        if self.consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
            return "consecutive_errors"
        return None


def _call_key(name: str, arguments: Any) -> str:
    memo = plain_key(name, arguments) if type(arguments) is dict else None
    known = _CALL_KEYS.get(memo) if memo is not None else None
    if known is not None:
        return known
    try:
        key = name + _call_key_json(arguments)
    except (TypeError, ValueError):
        key = name + repr(arguments)
    if memo is not None:
        if len(_CALL_KEYS) >= _CALL_KEYS_SIZE:
            _CALL_KEYS.clear()
        _CALL_KEYS[memo] = key
    return key


# Call keys by what the call says (base/plainkey.py): calls recur across turns and variants
# (bounded: a miss encodes).
_CALL_KEYS: dict[tuple[Any, ...], str] = {}
_CALL_KEYS_SIZE = 4096


def _observation_messages(
    reply: ModelReply, payload: Mapping[str, Any], *, native: bool
) -> list[dict[str, Any]]:
    """The answer to a reply: one `tool` message per native call id (the first gets the
    payload, the others say they were not executed), else a user message."""
    if not (native and reply.tool_calls):
        return [{"role": "user", "content": format_observation(payload)}]
    out = [{"role": "tool", "tool_call_id": reply.tool_calls[0].id,
            "content": observation_json(payload)}]
    for call in reply.tool_calls[1:]:
        skipped = {"status": "error", "error_code": "NOT_EXECUTED",
                   "message": "only one tool call per turn: this call was not executed"}
        out.append({"role": "tool", "tool_call_id": call.id, "content": observation_json(skipped)})
    return out


def _notes(parsed: ParsedReply, reply: ModelReply) -> list[str]:
    """What the observation must say about how the reply was read (each a sentence)."""
    notes = []
    extra = max(len(parsed.calls), len(reply.tool_calls)) - 1
    if extra > 0:
        notes.append(f"One tool call per turn: only the first was executed, {extra} ignored.")
    call = parsed.call
    if call is not None and call.ignored:
        keys = ", ".join(call.ignored)
        notes.append(f"Ignored {keys} beside arguments: the call ran without {keys}; put "
                     "every argument inside arguments.")
    if call is not None and call.name == COMPLETION_SIGNAL:
        # A model that wraps the signal in a call has seen the results: say what to send.
        notes.append(f"{COMPLETION_SIGNAL} is not a tool: to finish, reply with the bare word "
                     f"{COMPLETION_SIGNAL} and no tool call.")
    elif mentions_completion(reply.content):
        notes.append("TASK_COMPLETED is only accepted in a reply without a tool call; "
                     "send it once you have seen the results.")
    return notes


def _summarise(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = " <- ".join(f"{f.name} ({f.filename.rsplit('/', 1)[-1]}:{f.lineno})"
                        for f in reversed(frames))
    return f"{type(exc).__name__}: {exc} at {where}"


async def run_episode(
    task: Task,
    variant: Variant,
    agent: AnyAgent,
    *,
    seed: int,
    repeat: int = 0,
    base_success: float = DEFAULT_BASE_SUCCESS,
    max_turns: int = 10,
    tool_mode: ToolMode = "text",
    registry: ToolRegistry | None = None,
    environment: Environment | None = None,
    model_name: str | None = None,
    prompt: Prompt | None = None,
    faults: str = "paper",
    limits: AgentLimits = NO_LIMITS,
) -> EpisodeRecord:
    """Play one episode and score it. Never raises for anything the model, the agent or the
    provider does: provider failures and harness bugs become outcome `error`, an exception of
    a user's agent's own code outcome `failed` (stop reason `agent_error`). `faults="realistic"`
    plays the realistic fault profile (docs/FAULTS.md), whose turn budget replaces
    `max_turns`. `limits` bound a user's agent's turns and whole episode in wall-clock
    seconds (agent_boundary.py); this package's agents bound their own waits."""
    if tool_mode not in TOOL_MODES:
        raise ValueError(f"tool_mode must be one of {TOOL_MODES}, got {tool_mode!r}")
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    registry = registry or default_registry()
    profile = None
    if faults != "paper":
        profile = _realistic(task, registry, faults)
        max_turns = profile.max_turns
    record = EpisodeRecord(
        id=episode_id(model=model_name or agent.name, variant=variant.label,
                      severity=variant.severity, task_type=task.type,
                      difficulty=task.difficulty, task_id=task.id, repeat=repeat),
        model=model_name or agent.name, variant=variant.label, flaw=variant.flaw,
        severity=variant.severity, task_id=task.id, task_type=task.type,
        difficulty=task.difficulty, repeat=repeat, seed=seed, base_success=base_success,
        tool_mode=tool_mode, max_turns=max_turns, faults=None if profile is None else faults,
    )
    owned = environment is None
    started = time.perf_counter()
    completed = False
    try:
        if prompt is None:
            prompt = _rendered(task, variant, tool_mode, registry,
                               "paper" if profile is None else faults, max_turns)
        if environment is None:
            environment = SimulatedEnvironment(Simulator(
                registry, EpisodeKey(seed, task.id, repeat), task_tools=task.required_tools,
                inputs=task.inputs, base_success=base_success, faults=profile,
                data_flow=task.flow_under(faults)))
        keeper = TurnKeeper(record, prompt, environment)
        await _play(keeper, prompt, agent, task=task, variant=variant, repeat=repeat,
                    base_success=base_success, registry=registry, limits=limits)
        completed = keeper.completed
    except ModelLimitError as exc:  # the model's own failure: scored like any other stop
        record.stop_reason = exc.stop_reason
    except InfrastructureError as exc:
        record.outcome, record.stop_reason = "error", "infra_error"
        record.infra_error = redact(str(exc)) or type(exc).__name__
    except AgentError as exc:  # the agent's own failure: a failed episode (`_score`)
        record.stop_reason, record.agent_error = "agent_error", redact(exc.line)
    except Exception as exc:  # a bug here must not take the other episodes down
        record.outcome, record.stop_reason = "error", "harness_error"
        record.infra_error = redact(_summarise(exc))
    finally:
        if owned and environment is not None:
            await environment.aclose()
        record.wall_time_s = round(time.perf_counter() - started, 6)
    _score(record, task, prompt, completed=completed, registry=registry, profile=profile)
    return record


@functools.lru_cache(maxsize=16)
def _rendered(task: Task, variant: Variant, tool_mode: ToolMode, registry: ToolRegistry,
              faults: str, max_turns: int) -> Prompt:
    """The prompt of an episode, memoised: a task's repeats and base-success levels follow one
    another in a run (cases.py), so the same prompt (its flaw injected) is asked back to back.
    Tasks and registries hash by identity. Read only: the turn keeper copies the messages."""
    from pytest_resilibench.core.prompts import render_prompt

    if faults != "paper":  # the profile's own budget, whatever `max_turns` says
        return render_prompt(task, variant, tool_mode=tool_mode, registry=registry,
                             faults=faults)
    return render_prompt(task, variant, tool_mode=tool_mode, registry=registry,
                         max_turns=max_turns)


def _realistic(task: Task, registry: ToolRegistry, faults: str) -> TaskFaults:
    from pytest_resilibench.core.faults import FAULT_PROFILES, task_faults

    if faults not in FAULT_PROFILES:
        raise ValueError(f"faults must be one of {FAULT_PROFILES}, got {faults!r}")
    return task_faults(task, registry)


# With `--resili-otel` (integration/otel.py) the books also keep when each reply came and what
# it reported (usage, raw response), and when each tool call ran: the spans' times and usage.
# Kept on the record outside its fields (`TURN_TRACE`), so no report changes; off, nothing is
# kept and the loop pays one test a turn.
TURN_TRACE = "_turn_trace"
_tracing = False
# What a tool span reads of a call's entry: its scalars, not its arguments and output (a
# helper's record crosses its pipe with the trajectory packed apart, record.py: the trace
# holding whole entries pickled them twice, and the parent unpickled them).
_SPAN_FIELDS = ("tool", "call_index", "ok", "error_code", "latency_s", "clock_s",
                "success_probability", "deterministic", "event", "deviations", "turn")


def trace_turns(on: bool) -> None:
    """Keep (or not) each episode's turn times from now on, in this process."""
    global _tracing
    _tracing = on


class TurnKeeper:
    """One episode's books, shared by both agent shapes: a reply goes in (a model's, or the
    one a loop-level agent's call or `finish()` stands for), its observation comes out, and
    the record gets the messages, calls, counts and stop reason."""

    def __init__(self, record: EpisodeRecord, prompt: Prompt, environment: Environment) -> None:
        self.record = record
        self.environment = environment
        self.native = record.tool_mode == "native"
        self.turns = _Turns(record.max_turns)
        self.completed = False
        self.over = False
        record.messages.extend(dict(m) for m in prompt.messages)
        # ("start", ns), then ("reply", ns, usage, raw, tool calls) and ("call", start ns,
        # end ns, the call's index in `record.calls`, its entry's `_SPAN_FIELDS`): the spans
        # need no trajectory (a helper's record keeps it packed: record.py)
        self.trace: list[tuple[Any, ...]] | None = None
        if _tracing:
            self.trace = record.__dict__[TURN_TRACE] = [("start", time.time_ns())]

    def receive(self, reply: ModelReply) -> ParsedReply | None:
        """Take a reply into the record; its parse when it asks for a turn, else None: the
        completion signal, or a call once the budget is spent (not executed), ends the
        episode."""
        record = self.record
        if self.trace is not None:
            self.trace.append(("reply", time.time_ns(), reply.usage, reply.raw,
                               reply.tool_calls))
        self.count_usage(reply.usage)
        record.messages.append(reply.to_message())
        parsed = (parse_native(reply.tool_calls, reply.content) if reply.tool_calls
                  else parse_text(reply.content))
        if parsed.completed:
            self.completed = True
            # Said done once every turn was spent: the budget ended it (the `completion`
            # condition still credits the signal), never read as a free choice to stop.
            self._end("max_turns" if self.turns.used >= record.max_turns else "completed")
            return None
        if self.turns.used >= record.max_turns:
            self._end("max_turns")
            return None
        return parsed

    async def answer(self, reply: ModelReply, parsed: ParsedReply) -> dict[str, Any]:
        """Play the turn a received reply asks for; the observation payload it gets."""
        record, turns = self.record, self.turns
        turns.used += 1
        record.turns = turns.used
        call = parsed.call
        if call is None:
            record.protocol_errors += 1
            turns.note_error_turn()
            payload: dict[str, Any] = {
                "tool": None, "status": "error", "error_code": _FORMAT_ERROR,
                "message": parsed.problem or "no tool call found"}
        else:
            started = time.time_ns() if self.trace is not None else 0
            result = await self.environment.call(call.name, call.arguments)
            entry = result.to_json()  # a new dict: the turn goes in without another copy
            entry["turn"] = turns.used
            if self.trace is not None:
                self.trace.append(("call", started, time.time_ns(), len(record.calls),
                                   {k: entry[k] for k in _SPAN_FIELDS if k in entry}))
            record.calls.append(entry)
            record.tool_calls += 1
            turns.note_call(_call_key(call.name, call.arguments), result)
            payload = {"tool": call.name, **result.observation()}
            notes = _notes(parsed, reply)
            if notes:
                payload["note"] = " ".join(notes)
        payload["progress"] = turns.progress()
        if turns.used >= record.max_turns:
            payload["budget"] = ("no turns left: reply TASK_COMPLETED if the task is done; "
                                 "further tool calls are not executed")
        record.messages.extend(_observation_messages(reply, payload, native=self.native))
        stop = turns.stop_reason()
        if stop is not None:
            self._end(stop)
        return payload

    def progress(self) -> dict[str, int]:
        """The progress an observation reports: turns used and left, calls, successes."""
        return self.turns.progress()

    def count_usage(self, usage: Mapping[str, Any] | None, model: str | None = None) -> None:
        """Add a reply's token usage (OpenAI `usage` keys) to the record; `model`, the name
        of the model that spent it, keeps them apart by model too (`tokens_by_model`)."""
        _count_tokens(self.record, usage)
        if model is not None:
            by_model = self.record.tokens_by_model
            if by_model is None:
                by_model = self.record.tokens_by_model = {}
            spent = by_model.setdefault(model, {"prompt": 0, "completion": 0, "cached": 0})
            for name, key in (("prompt", "prompt_tokens"), ("completion", "completion_tokens"),
                              ("cached", "cached_tokens")):
                spent[name] += int((usage or {}).get(key) or 0)

    def end(self, stop_reason: StopReason) -> None:
        """End the episode from outside a reply (a loop-level agent's `run` returned)."""
        if not self.over:
            self._end(stop_reason)

    def _end(self, stop_reason: StopReason) -> None:
        self.record.stop_reason = stop_reason
        self.over = True


async def _play(
    keeper: TurnKeeper, prompt: Prompt, agent: AnyAgent, *, task: Task, variant: Variant,
    repeat: int, base_success: float, registry: ToolRegistry, limits: AgentLimits,
) -> None:
    """Play the episode with the agent's own shape: the one place the two shapes part."""
    # A user's agent is timed (agent_boundary.py); ours bound their own waits (a provider's
    # request options) or do none (the scripted agents), and pay nothing for a clock.
    clock = None if is_own_agent(agent) or limits == NO_LIMITS else AgentClock(limits)
    if agent_shape(agent) == "loop":
        from pytest_resilibench.runtime.loop_episode import play_loop

        await play_loop(keeper, prompt, cast(LoopAgent, agent), registry=registry, clock=clock)
        return
    await _turn_loop(keeper, prompt, cast(Agent, agent), task=task, variant=variant,
                     repeat=repeat, base_success=base_success, registry=registry, clock=clock)


async def _turn_loop(
    keeper: TurnKeeper, prompt: Prompt, agent: Agent, *,
    task: Task, variant: Variant, repeat: int, base_success: float, registry: ToolRegistry,
    clock: AgentClock | None = None,
) -> None:
    """Ask the model for a reply each turn until the episode is over."""
    record = keeper.record
    # The task itself is the answer key: only a privileged built-in agent reads it; every
    # other agent, a user's own above all, gets the prompt alone (agent_boundary.is_privileged).
    context: Mapping[str, Any] = (
        {"task": task, "variant": variant, "base_success": base_success,
         "max_turns": record.max_turns, "tool_mode": record.tool_mode,
         "registry": registry, "faults": record.faults or "paper"}
        if is_privileged(agent) else _NO_CONTEXT)
    own = is_own_agent(agent)  # else what it raises or returns wrong is the agent's failure
    while not keeper.over:
        request = ModelRequest(messages=list(record.messages), tools=prompt.tools,
                               repeat=repeat, task_id=task.id, context=context)
        if own:
            reply = await agent.complete(request)
        else:
            if clock is not None:
                clock.next_turn()
            reply = await from_agent(agent.complete(request), clock=clock)
            _check_reply(reply)
        parsed = keeper.receive(reply)
        if parsed is not None:
            await keeper.answer(reply, parsed)


def _check_reply(reply: object) -> None:
    """A user's agent's reply is one the books can read: else the agent's error."""
    if not isinstance(reply, ModelReply):
        raise AgentError(f"TypeError: complete() returned {type(reply).__name__}, "
                         "not a ModelReply")
    if not (reply.content is None or isinstance(reply.content, str)):
        raise AgentError(f"TypeError: complete() returned a ModelReply whose content is "
                         f"{type(reply.content).__name__}, not a str or None")
    calls = reply.tool_calls
    if not isinstance(calls, (tuple, list)) or not all(
            isinstance(c, ToolCall) and isinstance(c.name, str) and isinstance(c.arguments, str)
            for c in calls):
        what = type(calls).__name__ if not isinstance(calls, (tuple, list)) else \
            ", ".join(sorted({type(c).__name__ for c in calls}))
        raise AgentError(f"TypeError: complete() returned a ModelReply whose tool_calls hold "
                         f"{what}, not a ToolCall of str name and arguments")
    usage = reply.usage
    try:
        if usage:
            for key in _USAGE_KEYS:
                int(usage.get(key) or 0)
    except (TypeError, ValueError, AttributeError):
        raise AgentError(f"TypeError: complete() returned a ModelReply whose usage is not "
                         f"OpenAI usage counts: {usage!r}"[:400]) from None


def _count_tokens(record: EpisodeRecord, usage: Mapping[str, Any] | None) -> None:
    usage = usage or {}
    tokens = record.tokens
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    completion_tokens = int(usage.get("completion_tokens") or 0)
    tokens["prompt"] += prompt_tokens
    tokens["completion"] += completion_tokens
    tokens["total"] += prompt_tokens + completion_tokens
    # Within prompt / completion (cached, reasoning), or apart from them: a cache replay's
    # tokens were paid for by an earlier run (agents/openai_provider.py).
    for name, key in _USAGE_KINDS:
        value = usage.get(key)
        if value or name not in tokens:
            tokens[name] = tokens.get(name, 0) + int(value or 0)


# Token kinds counted apart, and the usage key of each (spelled out: formatted every turn).
_USAGE_KINDS = tuple((name, f"{name}_tokens") for name in ("reasoning", "cached", "replayed"))
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", *(key for _, key in _USAGE_KINDS))


def _score(
    record: EpisodeRecord, task: Task, prompt: Prompt | None, *, completed: bool,
    registry: ToolRegistry, profile: TaskFaults | None = None,
) -> None:
    """Fill the outcome and metrics from the trajectory (errors keep outcome `error`, an
    agent error is `failed`: the agent did not finish)."""
    alternatives = None
    if profile is not None:
        from pytest_resilibench.core.faults import events_met

        alternatives = profile.alternatives
        record.events = events_met(record.calls, alternatives)
    score = score_calls(record.calls, task.required_tools, completed=completed,
                        registry=registry, alternatives=alternatives,
                        deliverable=_deliverable(task, registry))
    if record.stop_reason == "agent_error":
        record.outcome = "failed"
    elif record.outcome != "error":
        record.outcome = score.outcome
    record.conditions = score.conditions.to_json()
    record.penalties = ({name: score.excess_runs for name in score.penalties}
                        if score.penalties else None)
    record.coverage = score.coverage
    record.order_adherence = score.order_adherence
    record.errors_met = score.errors_met + record.protocol_errors
    record.errors_recovered = score.errors_recovered
    # What the agent did after failures, counted now: the summary reads it per model without
    # the trajectory (core/recovery.py). Its claim of success: the completion signal with
    # turns left (stop `completed`).
    record.recovery = calls_measures(record.calls,
                                     completed=record.stop_reason == "completed",
                                     needed=task.required_tools, alternatives=alternatives)
    record.sim_time_s = float(record.calls[-1]["clock_s"]) if record.calls else 0.0
    plan = getattr(prompt, "plan", None)
    if plan is not None:
        shown = [{"tool": s.tool, "arguments": s.arguments} for s in plan.steps]
        record.deviation = deviation(record.calls, shown, _reference(task))


# Reference steps per task, for as long as the task lives: a run scores each task under every
# variant.
_REFERENCES: weakref.WeakKeyDictionary[Task, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


def _reference(task: Task) -> list[dict[str, Any]]:
    """The task's reference steps with their full arguments, for `deviation` (read only)."""
    found = _REFERENCES.get(task)
    if found is not None:
        return found
    workflow = genuine_workflow(task, task.reference_workflow(), default_registry())
    reference = [
        {"tool": s.tool, "arguments": {**task.step_arguments.get(s.tool, {}), **s.arguments}}
        for s in workflow.steps
    ]
    _REFERENCES[task] = reference
    return reference


_DELIVERABLES: weakref.WeakKeyDictionary[Task, tuple[ToolRegistry, Deliverable]] = (
    weakref.WeakKeyDictionary())


def _deliverable(task: Task, registry: ToolRegistry) -> Deliverable:
    """The task's deliverable (memoised per task object, as `_reference`)."""
    found = _DELIVERABLES.get(task)
    if found is not None and found[0] is registry:
        return found[1]
    deliverable = deliverable_of(task, registry)
    _DELIVERABLES[task] = (registry, deliverable)
    return deliverable


# --- many episodes at once ------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: what `run_episode` takes besides the agent."""

    task: Task
    variant: Variant
    seed: int
    repeat: int = 0
    base_success: float = DEFAULT_BASE_SUCCESS
    max_turns: int = 10
    tool_mode: ToolMode = "text"
    faults: str = "paper"


class EpisodeSlots:
    """At most `concurrency` episodes in flight on one event loop: the one bound of both ways
    of running many episodes, `run_episodes` here and the plugin's runner
    (integration/runner.py). `peak` is the most that were in flight at once."""

    def __init__(self, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.concurrency = concurrency
        self.in_flight = self.peak = 0
        self._free = asyncio.Semaphore(concurrency)  # binds to the loop that first waits on it

    async def start(self, episode: Callable[[], Awaitable[_T]]) -> asyncio.Task[_T]:
        """Wait for a free slot, then run `episode()` as a task that frees it when done (the
        coroutine is made only then, so a start cancelled while waiting leaves none behind)."""
        await self._free.acquire()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        task = asyncio.ensure_future(episode())
        task.add_done_callback(self._release)
        return task

    def _release(self, _: object) -> None:
        self.in_flight -= 1
        self._free.release()


async def run_episodes(
    specs: Iterable[EpisodeSpec],
    agent: AnyAgent,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    registry: ToolRegistry | None = None,
) -> AsyncIterator[EpisodeRecord]:
    """Run episodes as asyncio tasks, at most `concurrency` at a time, yielding each record as
    it finishes (completion order; the records say which is which). A failure in one episode
    never touches another: `run_episode` turns anything that goes wrong into outcome `error`."""
    slots = EpisodeSlots(concurrency)
    registry = registry or default_registry()
    pending: set[asyncio.Task[EpisodeRecord]] = set()
    for spec in specs:
        if len(pending) >= concurrency:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                yield finished.result()
        pending.add(await slots.start(functools.partial(
            run_episode, spec.task, spec.variant, agent, seed=spec.seed, repeat=spec.repeat,
            base_success=spec.base_success, max_turns=spec.max_turns,
            tool_mode=spec.tool_mode, registry=registry, faults=spec.faults)))
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                yield finished.result()
    finally:  # the consumer stopped early: do not leave episodes running
        for task in pending:
            task.cancel()
