"""Built-in scripted agents (`builtin:NAME`): deterministic, offline, cheap.

- `oracle` plays the exact DP policy of the task (`core/optimum/dp.py`); the one agent that
  reads the privileged `request.context` (the task, base success, turn budget). Its full-success
  rate estimates the DP value: the check that the simulator, the episode loop and the MDP agree.
- `follower` executes the plan in the prompt literally, retrying each step until it succeeds
  (the plan copier). Without a plan it derives one from the task text.
- `adaptive` checks the plan against what a model can see (the task text and inputs, the tool
  schemas and their dependencies) and repairs it before and while running it.
- `random` calls random tools with plausible arguments and stops at random.

All but the oracle read only the rendered messages (so they exercise the prompts: the plan and
inputs are read back with `prompts.parse_plan` / `parse_task_inputs`) and the public registry.
Agents keep no state between calls: each reply is a pure function of the request, so one agent
object serves any number of concurrent episodes. Replies are text (`<tool_call>` / the signal) in
text mode and native `tool_calls` when the request offers tools.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, TypeVar

from pytest_resilibench.base.jsontext import json_text
from pytest_resilibench.base.names import COMPLETION_SIGNAL, FLOW_PARAMS
from pytest_resilibench.base.plainkey import plain_key
from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.registry import (
    EXPLICIT_FLOW,
    Role,
    ToolRegistry,
    ToolSpec,
    default_registry,
)
from pytest_resilibench.core.wording import read_worded
from pytest_resilibench.runtime.agents.prompt_reader import ShownTool, ShownTools, shown_tools
from pytest_resilibench.runtime.protocol import (
    ModelReply,
    ModelRequest,
    ToolCall,
    read_observation,
)

__all__ = ["BUILTIN_AGENTS", "BuiltinAgent", "make_builtin"]

_MEMO_SIZE = 8192
# Memos of what one episode re-reads every turn (its task text, its observations) need only
# hold the episodes in flight (16 by default, a batch of 32 at most inline); a miss merely
# recomputes. Small, so that what they hold stays in the processor's caches: with 4096 the
# suite's episodes took 2-7% longer (alternating runs, docs/REPRODUCTION.md).
_EPISODE_MEMO_SIZE = 256
_T = TypeVar("_T")
# The follower and the adaptive agent give up on a step after this many failures in a row
# and move on (a model would, too, rather than burn the whole budget on one tool).
_MAX_TRIES = 6
_sorted_json = json_text(sort_keys=True)  # json.dumps(..., sort_keys=True) (base/jsontext.py)


# Views and observations are made every turn and never changed once made: plain slotted
# classes (a frozen dataclass's __init__ costs 3 us on this hot path, a slotted one 0.7 us).
@dataclass(slots=True)
class _Observed:
    tool: str | None
    ok: bool
    output: Mapping[str, Any]
    message: str


@dataclass(slots=True)
class _View:
    """What a model sees: the task text, the observations so far, the reply mode (and the
    conversation's length in characters, for the token estimate)."""

    text: str
    history: tuple[_Observed, ...]
    native: bool
    replies: int
    budget_spent: bool
    chars: int
    text_read: bool = False  # whether a user message (the task text) has been read

    @property
    def successes(self) -> list[_Observed]:
        return [o for o in self.history if o.ok]


# The last view read of each conversation in flight, by its first message: the episode loop
# sends the same message objects again each turn with the new ones appended, so a view is
# extended from the messages it has read instead of re-reading the whole conversation (the
# entry holds those messages, so the id stays theirs; a bounded memo, a miss re-reads).
_VIEWS: dict[int, tuple[list[Mapping[str, Any]], _View]] = {}


# The view of no messages yet, text and native (shared: a view is never changed).
_UNREAD = {native: _View("", (), native, 0, False, 0) for native in (False, True)}


def _view(request: ModelRequest) -> _View:
    messages = request.messages
    native = request.tools is not None
    view = _UNREAD[native]
    read = 0
    if messages:
        entry = _VIEWS.get(id(messages[0]))
        if entry is not None:
            seen, known = entry
            if (known.native == native and len(seen) <= len(messages)
                    and all(map(operator.is_, seen, messages))):
                view, read = known, len(seen)
    if read < len(messages):
        view = _extend(view, messages[read:])
        if len(_VIEWS) >= _EPISODE_MEMO_SIZE:
            _VIEWS.clear()
        _VIEWS[id(messages[0])] = (list(messages), view)
    return view


def _extend(view: _View, messages: Sequence[Mapping[str, Any]]) -> _View:
    """The view after reading more messages of its conversation."""
    text = view.text if view.text_read else None
    history = list(view.history)
    budget_spent = view.budget_spent
    replies, chars = view.replies, view.chars
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif content:
            chars += len(str(content))
        if role == "assistant":
            replies += 1
            continue
        if role == "user" and text is None:
            text = str(content or "")
        if role not in ("user", "tool") or not isinstance(content, str):
            continue
        observed = _observed(role, content)
        if observed is not None:
            seen, budget_spent = observed
            history.append(seen)
    return _View(text or "", tuple(history), view.native, replies, budget_spent, chars,
                 text is not None)


@lru_cache(maxsize=_EPISODE_MEMO_SIZE)
def _observed(role: str, content: str) -> tuple[_Observed, bool] | None:
    """An observation message read back, and whether it says the turn budget is spent; None
    for other messages and calls that were not executed. Memoised on the message itself: the
    conversation is re-read every turn and its messages never change."""
    payload = read_observation({"role": role, "content": content})
    if payload is None or payload.get("error_code") == "NOT_EXECUTED":
        return None
    tool = payload.get("tool")
    output = payload.get("output")
    seen = _Observed(
        tool=tool if isinstance(tool, str) else None,
        ok=payload.get("status") == "success",
        output=output if isinstance(output, dict) else {},
        message=str(payload.get("message") or ""),
    )
    return seen, "budget" in payload


def _usage(view: _View, reply_text: str) -> dict[str, int]:
    """A deterministic token estimate (4 characters a token) so token reports have figures."""
    return {"prompt_tokens": view.chars // 4 + 1, "completion_tokens": len(reply_text) // 4 + 1}


def _call(view: _View, tool: str, arguments: Mapping[str, Any]) -> ModelReply:
    text, body, encoded = _encoded(tool, arguments)
    if view.native:
        call = ToolCall(id=f"call_{view.replies + 1}", name=tool, arguments=encoded)
        return ModelReply(content=None, tool_calls=(call,), usage=_usage(view, body))
    return ModelReply(content=text, usage=_usage(view, text))


# A call's texts by what it says: agents send the same calls every turn (a retry) and every
# variant of a task (the same plan steps); bounded, a miss encodes (base/plainkey.py).
_ENCODED: dict[tuple[Any, ...], tuple[str, str, str]] = {}


def _encoded(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str, str]:
    """(the text-mode reply, its JSON body, the native call's arguments JSON)."""
    key = plain_key(tool, arguments)
    texts = _ENCODED.get(key) if key is not None else None
    if texts is not None:
        return texts
    body = _sorted_json({"name": tool, "arguments": dict(arguments)})
    texts = (f"<tool_call>{body}</tool_call>", body, _sorted_json(dict(arguments)))
    if key is not None:
        if len(_ENCODED) >= _MEMO_SIZE:
            _ENCODED.clear()
        _ENCODED[key] = texts
    return texts


def _done(view: _View) -> ModelReply:
    return ModelReply(content=COMPLETION_SIGNAL, usage=_usage(view, COMPLETION_SIGNAL))


class BuiltinAgent:
    """Base of the built-in agents: `decide` maps what the model sees to a call or None."""

    kind = ""

    def __init__(self, *, registry: ToolRegistry | None = None, seed: int = 0) -> None:
        self.name = f"builtin:{self.kind}"
        self.registry = registry or default_registry()
        self.seed = seed

    async def complete(self, request: ModelRequest) -> ModelReply:
        view = _view(request)
        if view.budget_spent:
            return _done(view)
        decision = self.decide(request, view)
        if decision is None:
            return _done(view)
        return _call(view, *decision)

    def decide(
        self, request: ModelRequest, view: _View
    ) -> tuple[str, Mapping[str, Any]] | None:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


# --- the oracle -------------------------------------------------------------------------------
class OracleAgent(BuiltinAgent):
    """Plays the task's exact DP policy, tracking the MDP state from the observations."""

    kind = "oracle"
    # Reads the task itself from `request.context`: the one agent that gets it
    # (agent_boundary.is_privileged).
    privileged = True

    def decide(
        self, request: ModelRequest, view: _View
    ) -> tuple[str, Mapping[str, Any]] | None:
        from pytest_resilibench.core.optimum.dp import solve_task

        task = request.context.get("task")
        if task is None:
            raise ValueError("builtin:oracle needs the task in request.context")
        registry = request.context.get("registry") or self.registry
        if request.context.get("faults", "paper") != "paper":
            return _realistic_oracle(task, registry, request, view)
        solution = solve_task(task, registry=registry,
                              base_success=float(request.context.get("base_success", 0.8)),
                              max_turns=int(request.context.get("max_turns", 10)))
        state = solution.initial_state()
        for seen in view.history:
            if seen.tool is not None:
                state = solution.observe(state, seen.tool, seen.ok)
        tool = solution.action(state)
        if tool is None:
            return None
        arguments = dict(task.step_arguments.get(tool, {}))
        if task.data_flow == "explicit" and tool in registry:
            arguments.update(_registry_flow(registry[tool], task.inputs, view,
                                            task.required_tools, registry))
        return tool, arguments


def _error_code(message: str) -> str | None:
    code, sep, _ = message.partition(":")
    return code if sep and code.isupper() else None


def _realistic_oracle(
    task: Any, registry: ToolRegistry, request: ModelRequest, view: _View
) -> tuple[str, Mapping[str, Any]] | None:
    """The realistic profile's exact policy (`core/optimum/realistic.py`), tracking its state from
    the observations (each event is observable: `faults.observed_event`)."""
    from pytest_resilibench.core.faults import observed_event, task_faults
    from pytest_resilibench.core.optimum.realistic import realistic_solution

    faults = task_faults(task, registry)
    solution = realistic_solution(task, registry=registry,
                                  base_success=float(request.context.get("base_success", 0.8)))
    state = solution.initial_state()
    for seen in view.history:
        if seen.tool is not None:
            event = observed_event(faults, registry, seen.tool, seen.ok,
                                   _error_code(seen.message), seen.output)
            state = solution.observe(state, seen.tool, seen.ok, event)
    tool = solution.action(state)
    if tool is None:
        return None
    return tool, dict(faults.arguments.get(tool, {}))


# --- reading the prompt -----------------------------------------------------------------------
@dataclass(slots=True)  # made per plan step of every episode, never changed (as _View)
class _Step:
    tool: str
    arguments: Mapping[str, Any]


# The prompt readers below are memoised on the task text, which every turn of an episode
# shows again; what they return is shared between calls and never modified.
@lru_cache(maxsize=_EPISODE_MEMO_SIZE)
def _plan_steps(text: str) -> tuple[_Step, ...] | None:
    from pytest_resilibench.core.prompts import parse_plan

    plan = parse_plan(text)
    if plan is None or not plan.steps:
        return None
    return tuple(_Step(s.tool, s.arguments) for s in plan.steps)  # the parse's own dicts


@lru_cache(maxsize=_EPISODE_MEMO_SIZE)
def _inputs(text: str) -> dict[str, Any]:
    """The task's values: the Inputs block's, and the options the description states in
    words (core/wording.py: this agent's reading of the text)."""
    from pytest_resilibench.core.prompts import parse_task_inputs

    shown = parse_task_inputs(text)
    return {**{k: v for k, v in read_worded(_description(text)).items() if k not in shown},
            **shown}


def _description(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first.removeprefix("Task: ")


# How a task text puts a step under a condition on its data (the default set's wordings,
# docs/BENCHMARK.md "Tasks"): the format it names, then the clause it governs.
_CONDITION = re.compile(
    r"if the data arrive as (\w+), (.*?); otherwise skip that step"
    r"|only when the incoming data are (\w+): (.*?) \(not needed for any other format\)"
    r"|should the incoming data turn out to be (\w+), (.*?); any other format needs no such"
    r" step", re.IGNORECASE)


@lru_cache(maxsize=_EPISODE_MEMO_SIZE)
def _unmet(text: str) -> tuple[str, frozenset[str]]:
    """This agent's reading of the task's conditions: the description without the clauses
    whose condition the data do not meet (a format other than theirs), and the input keys
    whose values only those clauses state (steps the text declines)."""
    description, inputs = _description(text), _inputs(text)
    fmt = str(inputs.get("format", ""))
    skipped: list[str] = []

    def cut(match: re.Match[str]) -> str:
        named, clause = next((match[i], match[i + 1]) for i in (1, 3, 5) if match[i])
        if named == fmt:
            return clause
        skipped.append(clause)
        return ""

    kept = _CONDITION.sub(cut, description)

    def stated(value: Any, text: str) -> bool:  # as a whole value, not a part of a longer one
        return re.search(rf"(?<![\w-]){re.escape(str(value))}(?![\w-])", text) is not None

    declined = frozenset(k for k, v in inputs.items() if k != "format"
                         and stated(v, " ".join(skipped)) and not stated(v, kept))
    return kept, declined


_CLAUSE = re.compile(r"[.;]|,\s*|\bthen\b|\band\b|\bfinally\b")
# BM25 scores of a clause that clearly names a tool ("break the raw content into typed
# fields": parser 8.3, reader 6.3) against background ("a text dump of the levels": 4.2).
_STRONG_MATCH, _MATCH_MARGIN = 6.0, 1.0


def _fits(spec: ToolSpec, inputs: Collection[str]) -> bool:
    """Whether the task's inputs (their names) supply every required value of the tool."""
    return all(p in FLOW_PARAMS or p in inputs for p in spec.required_parameters)


def _input_bound(spec: ToolSpec, inputs: Collection[str]) -> set[str]:
    return {p for p in spec.required_parameters if p not in FLOW_PARAMS and p in inputs}


# Memoised per (prompt text or another immutable value, registry): episodes ask the same thing
# every turn. What is returned is shared: callers only read it.
_memo = lru_cache(maxsize=_MEMO_SIZE)


@cache
def _matcher(registry: ToolRegistry) -> Any:
    """The BM25 matcher over a registry."""
    from pytest_resilibench.core.matcher import ToolMatcher

    return ToolMatcher.default() if registry is default_registry() else ToolMatcher(registry)


@_memo
def _described_tools(description: str, registry: ToolRegistry) -> tuple[str, ...]:
    """The tools the task text clearly asks for, in the order it mentions them: each clause
    matched to its best tool by BM25 (as the task generator matched operations), kept only on
    a strong, unambiguous match (task texts carry background sentences and distractors)."""
    return tuple(_mentions(description, registry))


@_memo
def _mentions(description: str, registry: ToolRegistry) -> dict[str, int]:
    """Clearly described tools -> where the text first mentions them (character offset)."""
    return _clause_mentions(description, lambda clause: _clause_tool(clause, registry))


def _clause_mentions(description: str, tool_of: Callable[[str], str | None]) -> dict[str, int]:
    """Tools -> the offset of the first clause of the text that `tool_of` names one for."""
    found: dict[str, int] = {}
    cursor = 0
    for clause in _CLAUSE.split(description):
        at = description.find(clause, cursor)
        cursor = max(cursor, at)
        if len(clause.split()) < 2:
            continue
        best = tool_of(clause)
        if best is not None:
            found.setdefault(best, at)
    return found


@_memo
def _clause_tool(clause: str, registry: ToolRegistry) -> str | None:
    """The tool a clause clearly names, or None (memoised: task texts are written from
    templates, so clauses recur across tasks)."""
    ranked = _matcher(registry).rank(clause, top=2)
    best, score = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    return best if score >= _STRONG_MATCH and score - runner_up >= _MATCH_MARGIN else None


@_memo
def _derived_plan(text: str, registry: ToolRegistry) -> tuple[_Step, ...]:
    """A plan for a prompt without one: the described tools, ordered by their dependencies."""
    tools = _described_tools(_description(text), registry)
    return tuple(_Step(t, {}) for t in _dependency_order(registry.closure(tools), registry))


@_memo
def _dependency_order(tools: tuple[str, ...], registry: ToolRegistry) -> tuple[str, ...]:
    """The registry's dependency order, with role dependencies taken among the task's own
    steps, not the prerequisites a step pulls in (as the simulator does), so that a monitor
    run for a router's sake does not have to precede the processors."""
    return registry.dependency_order(tools, _own_steps(tools, registry))


@_memo
def _own_steps(tools: tuple[str, ...], registry: ToolRegistry) -> tuple[str, ...]:
    """A plan's tools less the prerequisites its steps pull in: the task's own steps as far
    as the registry tells (a token is no step's data)."""
    pulled_in = {p for t in tools if t in registry for p in registry[t].prerequisites}
    return tuple(t for t in dict.fromkeys(tools) if t not in pulled_in)


# --- running a plan ---------------------------------------------------------------------------
def _next_step(
    steps: Sequence[_Step], history: Sequence[_Observed],
    stand_ins: Mapping[str, tuple[str, dict[str, Any]]] | None = None,
    down: Collection[str | None] = (),
) -> tuple[int, int]:
    """The index of the step to run (len(steps) when all are done) and its failures so far:
    a step is done when its tool succeeds while it is the current step, or when it failed
    `_MAX_TRIES` times in a row (given up). With `stand_ins` (realistic profile) a step's
    listed stand-in does it too, a success with no records does not, and failures of a tool
    that is `down` are not counted as tries."""
    index = tries = 0
    for seen in history:
        if index >= len(steps):
            break
        if stand_ins is not None:
            tool = steps[index].tool
            if seen.tool != tool and seen.tool != stand_ins.get(tool, ("",))[0]:
                continue
            if seen.ok and seen.output.get("records") == 0:
                continue  # empty data: run it again
            if not seen.ok and seen.tool in down:
                continue
        elif seen.tool != steps[index].tool:
            continue
        if seen.ok:
            index, tries = index + 1, 0
        else:
            tries += 1
            if tries >= _MAX_TRIES:
                index, tries = index + 1, 0
    return index, tries


class FollowerAgent(BuiltinAgent):
    """Runs the prompt's plan step by step with the plan's own arguments; retries failures."""

    kind = "follower"

    def decide(
        self, request: ModelRequest, view: _View
    ) -> tuple[str, Mapping[str, Any]] | None:
        shown = _plan_steps(view.text)
        literal = shown is not None
        steps = shown if shown is not None else _derived_plan(view.text, self.registry)
        index, _ = _next_step(steps, view.history)
        if index >= len(steps):
            return None
        step = steps[index]
        if literal:
            return step.tool, step.arguments
        return step.tool, _arguments(self.registry.get(step.tool), {}, _inputs(view.text),
                                     view, [s.tool for s in steps], self.registry,
                                     explicit=_explicit_flow(request))


def _explicit_flow(request: ModelRequest) -> bool:
    """Whether the request's tools say a call that names no `source` reads the latest output
    of any tool (the explicit data flow, registry.py `EXPLICIT_FLOW`): then an agent names
    every step's data flow, as the words it is shown tell it to."""
    return _says_explicit(_request_tools(request))


@lru_cache(maxsize=8)  # per tool view (shown_tools memoises those)
def _says_explicit(tools: ShownTools) -> bool:
    return any(EXPLICIT_FLOW["source"] == t.properties.get("source", {}).get("description")
               for t in tools.tools)


def _arguments(
    spec: ToolSpec | None, given: Mapping[str, Any], inputs: Mapping[str, Any], view: _View,
    plan_tools: Sequence[str], registry: ToolRegistry, format_hint: str | None = None, *,
    explicit: bool = False,
) -> dict[str, Any]:
    """Arguments a careful model would send: the task's values for its inputs, the plan's
    values where they are valid, `format` read off the data the tool will consume, no
    `source` (the default input is the right one). Under the explicit data flow, the
    step's data flow named (`_registry_flow`)."""
    if spec is None:
        return dict(given)
    if explicit:
        plain = _arguments(spec, given, inputs, view, plan_tools, registry, format_hint)
        # The plan's own steps: the prerequisites it pulls in are no step's data.
        return {**plain, **_registry_flow(spec, inputs, view, _own_steps(tuple(plan_tools),
                                                                        registry),
                                          registry, format_hint)}
    props = spec.parameters.get("properties", {})
    args: dict[str, Any] = {}
    for param, value in given.items():
        if param in FLOW_PARAMS or param not in props:
            continue
        args[param] = inputs.get(param, value)
    for param in spec.required_parameters:
        if param not in args and param in inputs and param not in FLOW_PARAMS:
            args[param] = inputs[param]
    if "format" in props and ("format" in spec.required_parameters or "format" in given):
        args["format"] = format_hint or _consumed_format(spec, inputs, view, plan_tools,
                                                         registry)
    # Optional values the schema refuses (an encoding that does not exist) are dropped.
    for param in [p for p in args if p not in spec.required_parameters and p not in inputs]:
        if registry.argument_errors(spec.name, args):
            del args[param]
    return args


def _consumed_format(
    spec: ToolSpec, inputs: Mapping[str, Any], view: _View, plan_tools: Sequence[str],
    registry: ToolRegistry,
) -> str:
    """The format of the output the tool will read by default (`ToolRegistry.default_source`
    over the outputs seen), else the task's input data's. The agents still weigh every
    dependency alike, data and prerequisites (the rule before issue 13's `input_groups`):
    passing `groups` keeps their episodes as they were; dropping it is a behaviour change."""
    outputs = [o for o in view.successes if o.output.get("format")]
    # An output of no named tool ("") is nobody's dependency but may be the latest of all.
    latest = {o.tool or "": i for i, o in enumerate(outputs)}
    plan = tuple(plan_tools)
    producer = registry.default_source(spec.name, plan, latest,
                                       groups=(registry.dependencies(spec.name, plan),))
    if producer is not None and spec.role is not Role.SOURCE:
        return str(outputs[latest[producer]].output["format"])
    return str(inputs.get("format", "json"))


def _registry_flow(
    spec: ToolSpec, inputs: Mapping[str, Any], view: _View, task_tools: Sequence[str],
    registry: ToolRegistry, format_hint: str | None = None,
) -> dict[str, Any]:
    """The data flow an agent that knows the registry names under the explicit data flow:
    the `source` of the data the step needs (`ToolRegistry.default_source` over the outputs
    seen: the latest of its data dependencies among `task_tools`, else of its
    prerequisites) and that output's `format`, where the tool takes them."""
    props = spec.parameters.get("properties", {})
    if not spec.reads_input:
        return {}
    outputs = [o for o in view.successes if o.tool and o.output.get("format")]
    latest = {str(o.tool): i for i, o in enumerate(outputs)}
    groups = registry.input_groups(spec.name, tuple(task_tools))
    producer = registry.default_source(spec.name, task_tools, latest, groups=groups)
    named: dict[str, Any] = {}
    fmt = str(inputs.get("format", "json"))
    if producer is not None and any(producer in g for g in groups):
        named["source"] = producer
        fmt = str(outputs[latest[producer]].output["format"])
    elif outputs:  # no dependency made data yet: the latest output is what it reads
        fmt = str(outputs[-1].output["format"])
    if "format" in props:
        named["format"] = format_hint or fmt
    return named


# --- the adaptive agent -----------------------------------------------------------------------
_FORMAT_HINT = re.compile(r"does not match the input data, which is (\w+)")


class PrivilegedAgent(BuiltinAgent):
    """Repairs the plan it is shown, then runs it, fixing arguments and switching on errors,
    with registry knowledge no prompt shows (the privileged reference: what `adaptive` was
    before issue 13).

    Repairs: unknown and repeated steps are dropped; a step whose tool needs values the task
    does not have (a URL for a task that has only a path) is swapped for a similar tool the
    inputs do fit (the flaw injector's similarity ranking); tools the task text (BM25 over
    descriptions and the registry's keywords) or an unused task input calls for are added
    with their hidden prerequisites; the steps are reordered by the registry's dependencies.
    At run time the arguments come from the task inputs and the observed data formats."""

    kind = "privileged"

    def decide(
        self, request: ModelRequest, view: _View
    ) -> tuple[str, Mapping[str, Any]] | None:
        inputs = _inputs(view.text)
        steps = self._plan_steps(request, view.text)
        stand_ins = _stand_ins(view.text)
        if stand_ins or any(_event_seen(o) for o in view.history):
            return self._realistic(request, steps, stand_ins, inputs, view)
        index, tries = _next_step(steps, view.history)
        if index >= len(steps):
            return None
        step = steps[index]
        hint = None
        if tries and view.history and view.history[-1].tool == step.tool:
            match = _FORMAT_HINT.search(view.history[-1].message)
            hint = match.group(1) if match else None
        return step.tool, self._arguments_for(request, step.tool, step.arguments, inputs, view,
                                              steps, hint)

    def _plan_steps(self, request: ModelRequest, text: str) -> tuple[_Step, ...]:
        """The plan it follows: the prompt's, repaired with the registry's facts."""
        return _repaired_plan(text, self.registry)

    def _arguments_for(
        self, request: ModelRequest, tool: str, given: Mapping[str, Any],
        inputs: Mapping[str, Any], view: _View, steps: Sequence[_Step], hint: str | None = None,
    ) -> dict[str, Any]:
        return _arguments(self.registry.get(tool), given, inputs, view,
                          [s.tool for s in steps], self.registry, hint,
                          explicit=_explicit_flow(request))


    def _realistic(
        self, request: ModelRequest, steps: Sequence[_Step],
        stand_ins: Mapping[str, tuple[str, dict[str, Any]]], inputs: Mapping[str, Any],
        view: _View,
    ) -> tuple[str, Mapping[str, Any]] | None:
        """The realistic profile's events, read off the observations (docs/FAULTS.md): a tool
        that is down is replaced by the step's listed stand-in, expired credentials are
        renewed, a rate limit is waited out with another call, and a source that returns
        no records is run again."""
        down = {o.tool for o in view.history
                if not o.ok and _error_code(o.message) == "SERVICE_UNAVAILABLE"}
        index, _ = _next_step(steps, view.history, stand_ins, down)
        if index >= len(steps):
            return None
        step = steps[index]
        tool, args = step.tool, step.arguments
        if tool in down and tool in stand_ins:
            tool, args = stand_ins[tool]
        last = view.history[-1] if view.history else None
        if last is not None and not last.ok:
            code = _error_code(last.message)
            if code == "AUTH_EXPIRED":
                service = inputs.get("service") or _host(inputs) or "identity"
                return "integration_authenticator", {"service": service}
            if code == "RATE_LIMITED" and last.tool == tool and _RETRY_AFTER in last.message:
                return "utility_logger", {"message": "waiting for the rate limit to pass"}
        return tool, self._arguments_for(request, tool, args, inputs, view, steps)


_STAND_IN = re.compile(r"^- (\w+): (\w+) with arguments (\{.*\})$", re.MULTILINE)
_RETRY_AFTER = "retry after 1 turn"
_EVENT_CODES = ("SERVICE_UNAVAILABLE", "AUTH_EXPIRED")


def _event_seen(seen: _Observed) -> bool:
    return (not seen.ok and _error_code(seen.message) in _EVENT_CODES) or \
        _RETRY_AFTER in seen.message or (seen.ok and seen.output.get("records") == 0)


@lru_cache(maxsize=_EPISODE_MEMO_SIZE)
def _stand_ins(text: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The stand-ins the task lists (realistic profile): step -> (tool, arguments)."""
    if "Stand-ins (" not in text:
        return {}
    section = text.split("Stand-ins (", 1)[1].split("\n\n", 1)[0]
    return {m[1]: (m[2], json.loads(m[3])) for m in _STAND_IN.finditer(section)}


def _host(inputs: Mapping[str, Any]) -> str | None:
    from urllib.parse import urlparse

    url = inputs.get("url") or inputs.get("target_url")
    return urlparse(str(url)).hostname if url else None


@_memo
def _repaired_plan(text: str, registry: ToolRegistry) -> tuple[_Step, ...]:
    inputs = _inputs(text)
    shown = _plan_steps(text)
    description, declined = _unmet(text)
    described = _described_tools(description, registry)
    steps: list[_Step] = []
    for step in shown if shown is not None else [_Step(t, {}) for t in described]:
        spec = registry.get(step.tool)
        if spec is None:
            continue
        if not _fits(spec, inputs):
            replacement = _replacement(spec, inputs, described, registry,
                                       exclude={s.tool for s in steps} | {step.tool})
            if replacement is None:
                continue
            step = _Step(replacement, {})
        if step.tool not in {s.tool for s in steps}:
            steps.append(step)
    wanted = {k: v for k, v in inputs.items() if k not in declined}
    for tool in _missing_tools([s.tool for s in steps], wanted, described, registry):
        _insert(steps, _Step(tool, {}), description, inputs, registry)
    # Where the text tells the order (it names the steps as they happen), follow the text:
    # the steps it mentions are re-sequenced among the places they hold, the others stay.
    at = {s.tool: _mention_at(s.tool, description, inputs, registry) for s in steps}
    slots = [i for i, s in enumerate(steps) if at[s.tool] is not None]
    mentioned = sorted((steps[i] for i in slots), key=lambda s: at[s.tool] or 0)
    for i, step in zip(slots, mentioned, strict=True):
        steps[i] = step
    order = _dependency_order(registry.closure([s.tool for s in steps]), registry)
    by_tool = {s.tool: s for s in steps}
    return tuple(by_tool.get(t, _Step(t, {})) for t in order)


def _missing_tools(
    have: Sequence[str], inputs: Mapping[str, Any], described: Sequence[str],
    registry: ToolRegistry,
) -> list[str]:
    """Tools the task needs that the plan lacks: a task input no step consumes (a destination
    nobody writes to) calls for the tool that takes it; a clear mention in the text calls for
    a tool that takes no task value (a parser, a validator, a compressor)."""
    missing: list[str] = []
    used_inputs = set().union(*(_input_bound(registry[t], inputs) for t in have))
    for name, bound in _value_takers(frozenset(inputs), registry):
        unused = bound - used_inputs
        if unused and name not in have:
            missing.append(name)
            used_inputs |= unused
    for tool in described:
        found = registry.get(tool)
        if (found is not None and tool not in have and tool not in missing
                and _fits(found, inputs) and not _input_bound(found, inputs)):
            missing.append(tool)
    return missing


@_memo
def _value_takers(
    inputs: frozenset[str], registry: ToolRegistry
) -> tuple[tuple[str, frozenset[str]], ...]:
    """The tools that take some task value and need none the task lacks, in registry order,
    with the values each takes (a function of the input names alone: tasks share them)."""
    return tuple((spec.name, frozenset(_input_bound(spec, inputs))) for spec in registry
                 if _input_bound(spec, inputs) and _fits(spec, inputs))


def _mention_at(
    tool: str, description: str, inputs: Mapping[str, Any], registry: ToolRegistry
) -> int | None:
    """Where the task text speaks of a tool: its task values, else its clear mention."""
    spots = [description.find(str(inputs[p])) for p in _input_bound(registry[tool], inputs)]
    spots = [i for i in spots if i >= 0]
    if spots:
        return min(spots)
    return _mentions(description, registry).get(tool)


def _insert(
    steps: list[_Step], step: _Step, description: str, inputs: Mapping[str, Any],
    registry: ToolRegistry,
) -> None:
    """Put a restored step where the task text places it among the plan's steps (before the
    first step the text mentions later); unplaced, before the final output step."""
    at = _mention_at(step.tool, description, inputs, registry)
    if at is not None:
        for i, other in enumerate(steps):
            other_at = _mention_at(other.tool, description, inputs, registry)
            if other_at is not None and other_at > at:
                steps.insert(i, step)
                return
        steps.append(step)
        return
    last = registry.get(steps[-1].tool) if steps else None
    steps.insert(len(steps) - 1 if last is not None and last.produces_output else len(steps),
                 step)


def _replacement(
    spec: ToolSpec, inputs: Mapping[str, Any], described: Sequence[str], registry: ToolRegistry,
    exclude: set[str],
) -> str | None:
    """The tool to run instead of one the inputs do not fit: a described tool of the same
    role first, else the most similar fitting tool."""
    from pytest_resilibench.core.flaws import similar_tools

    for name in described:
        other = registry.get(name)
        if other is not None and other.role is spec.role and name not in exclude \
                and _fits(other, inputs):
            return name
    for name in similar_tools(registry, spec.name, exclude=sorted(exclude)):
        if _fits(registry[name], inputs) and _input_bound(registry[name], inputs):
            return name
    return None


# --- the prompt-only adaptive agent -----------------------------------------------------------
class AdaptiveAgent(PrivilegedAgent):
    """Repairs the plan it is shown from what the prompt shows alone, then runs it.

    It reads only its request (`agents.prompt_reader`): the task text, the plan, the tools'
    names, descriptions and parameter schemas. Repairs: unknown and repeated steps are
    dropped; a step whose tool needs values the task does not have is swapped for a tool the
    text describes (or the one whose shown words are nearest) that the inputs fit; a task
    input no step takes, or a tool the text clearly describes, adds a step; the steps are
    ordered as the shown facts say: the steps the text mentions in the order it mentions
    them, a step marked "prerequisite of X" before X, the tool that makes the expected
    deliverable last. At run time: the task's values, `format` read off
    the latest output (or an error message naming the format), no `source` (the default
    input is the step it depends on); where the shown tools say an omitted `source` reads
    the latest output of any tool (the explicit data flow), every step's `source` and
    `format` named (`_shown_flow`)."""

    kind = "adaptive"

    def _plan_steps(self, request: ModelRequest, text: str) -> tuple[_Step, ...]:
        """The plan it follows: the prompt's, checked against the request's tool schemas."""
        return _read_plan(text, _request_tools(request))

    def _arguments_for(
        self, request: ModelRequest, tool: str, given: Mapping[str, Any],
        inputs: Mapping[str, Any], view: _View, steps: Sequence[_Step], hint: str | None = None,
    ) -> dict[str, Any]:
        tools = _request_tools(request)
        args = _shown_arguments(tools.get(tool), given, inputs, view, hint)
        if _says_explicit(tools):
            args.update(_shown_flow(tools, tool, given, inputs, view, steps, hint))
        return args


def _request_tools(request: ModelRequest) -> ShownTools:
    system = next((str(m.get("content") or "") for m in request.messages
                   if m.get("role") == "system"), "")
    return shown_tools(system, request.tools)


def _shown_fits(tool: ShownTool, inputs: Collection[str]) -> bool:
    return all(p in FLOW_PARAMS or p in inputs for p in tool.required)


def _shown_bound(tool: ShownTool, inputs: Collection[str]) -> set[str]:
    return {p for p in tool.required if p not in FLOW_PARAMS and p in inputs}


def _shown_arguments(
    tool: ShownTool | None, given: Mapping[str, Any], inputs: Mapping[str, Any], view: _View,
    hint: str | None,
) -> dict[str, Any]:
    """The task's values for the task's parameters, the plan's other values where the shown
    schema allows them, `format` from the data the tool will read; no `source`."""
    if tool is None:
        return dict(given)
    props = tool.properties
    args: dict[str, Any] = {}
    for param, value in given.items():
        if param in FLOW_PARAMS or param not in props:
            continue
        value = inputs.get(param, value)
        enum = props[param].get("enum")
        if param in tool.required or param in inputs or enum is None or value in enum:
            args[param] = value
    for param in tool.required:
        if param not in args and param in inputs and param not in FLOW_PARAMS:
            args[param] = inputs[param]
    if "format" in props and ("format" in tool.required or "format" in given):
        outputs = [o for o in view.successes if o.output.get("format")]
        args["format"] = hint or (str(outputs[-1].output["format"]) if outputs and
                                  tool.takes_data else str(inputs.get("format", "json")))
    return args


_BRINGS_DATA = re.compile(r"\b(data|records|files)\b")


def _shown_flow(
    tools: ShownTools, name: str, given: Mapping[str, Any], inputs: Mapping[str, Any],
    view: _View, steps: Sequence[_Step], hint: str | None,
) -> dict[str, Any]:
    """The data flow a prompt-only agent names under the explicit data flow: the plan's
    `source` where that tool has made an output and no step of its plan between them works
    on data (a `source` that skips one is a slip to repair), else the latest output of an
    earlier step of its plan that works on data (a shown `source` parameter), else of one
    whose description says it brings data, records or files (not a token, a log entry or
    health metrics), else of any earlier step, else the latest output; and that output's
    `format` (or the one an error named)."""
    tool = tools.get(name)
    if tool is None or not tool.takes_data:
        return {}
    outputs: dict[str, _Observed] = {}  # each tool's latest output, latest last
    for seen in view.successes:
        if seen.tool and seen.output.get("format"):
            outputs.pop(seen.tool, None)
            outputs[seen.tool] = seen
    order = [s.tool for s in steps]
    earlier = order[:order.index(name)] if name in order else []
    source = given.get("source")
    if source in earlier and any(tools.by_name[t].takes_data
                                 for t in earlier[earlier.index(source) + 1:] if t in tools):
        source = None  # it would skip a step that works on the data: the plan's slip
    if source not in outputs:
        made = [t for t in outputs if t in earlier and t in tools]
        workers = [t for t in made if tools.by_name[t].takes_data]
        bringers = [t for t in made if _BRINGS_DATA.search(tools.by_name[t].description)]
        source = next(reversed(workers or bringers or made or list(outputs)), None)
    named: dict[str, Any] = {} if source is None else {"source": source}
    if "format" in tool.properties:
        fmt = outputs[source].output["format"] if source is not None else inputs.get("format")
        named["format"] = hint or str(fmt or "json")
    return named


_PLAN_MEMO: dict[tuple[str, int], tuple[ShownTools, tuple[_Step, ...]]] = {}


def _read_plan(text: str, tools: ShownTools) -> tuple[_Step, ...]:
    """The plan to run, memoised per (prompt text, tool view)."""
    key = (text, id(tools))
    found = _PLAN_MEMO.get(key)
    if found is None or found[0] is not tools:
        if len(_PLAN_MEMO) >= _EPISODE_MEMO_SIZE:
            _PLAN_MEMO.clear()
        found = _PLAN_MEMO[key] = (tools, _repaired_from_prompt(text, tools))
    return found[1]


# A clause names a tool when its best BM25 score over the shown words is this high and this
# far ahead of the runner-up (calibrated on the shipped task texts, as for `_STRONG_MATCH`).
_SHOWN_MATCH, _SHOWN_MARGIN = 5.0, 1.0


def _shown_mentions(description: str, tools: ShownTools) -> dict[str, int]:
    """Tools a clause of the text clearly describes -> where the text first mentions them."""

    def clear_best(clause: str) -> str | None:
        ranked = tools.rank(clause)
        if not ranked:
            return None
        best, score = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
        return best if score >= _SHOWN_MATCH and score - runner_up >= _SHOWN_MARGIN else None

    return _clause_mentions(description, clear_best)


def _repaired_from_prompt(text: str, tools: ShownTools) -> tuple[_Step, ...]:
    from pytest_resilibench.core.prompts import parse_plan

    inputs = _inputs(text)
    description, declined = _unmet(text)
    mentions = _shown_mentions(description, tools)
    described = list(mentions)
    plan = parse_plan(text)
    shown = [(_Step(s.tool, dict(s.arguments)), s.purpose) for s in plan.steps] \
        if plan is not None and plan.steps else [(_Step(t, {}), "") for t in described]
    steps: list[_Step] = []
    marks: dict[str, list[str]] = {}
    for step, purpose in shown:
        tool = tools.get(step.tool)
        if tool is None:
            continue
        if not _shown_fits(tool, inputs):
            replacement = _shown_replacement(tool, inputs, described, tools,
                                             {s.tool for s in steps} | {step.tool})
            if replacement is None:
                continue
            step, purpose = _Step(replacement, {}), ""
        if step.tool in {s.tool for s in steps}:
            continue
        steps.append(step)
        if purpose.startswith("prerequisite of "):
            marks[step.tool] = purpose.removeprefix("prerequisite of ").split(":")[0].split(", ")
    have = {s.tool for s in steps}
    used = set().union(*(_shown_bound(tools.by_name[s.tool], inputs) for s in steps))
    for key in sorted(k for k in inputs
                      if k not in FLOW_PARAMS and k not in used and k not in declined):
        takers = [t for t in tools.tools if key in _shown_bound(t, inputs)
                  and _shown_fits(t, inputs) and t.name not in have]
        if takers:
            best = next((t for t in takers if t.name in described), None) or \
                _nearest(str(inputs[key]), description, takers, tools)
            steps.append(_Step(best.name, {}))
            have.add(best.name)
            used |= _shown_bound(best, inputs)
    for name in described:
        tool = tools.by_name[name]
        if name not in have and _shown_fits(tool, inputs) and not _shown_bound(tool, inputs):
            steps.append(_Step(name, {}))
            have.add(name)
    return _shown_order(steps, tools, inputs, description, mentions, text, marks)


def _nearest(value: str, description: str, takers: Sequence[ShownTool],
             tools: ShownTools) -> ShownTool:
    """The taker whose shown words best match the sentence of the text that holds `value`."""
    at = description.find(value)
    if at < 0:
        return takers[0]
    start = description.rfind(".", 0, at) + 1
    end = description.find(".", at + len(value))
    sentence = description[start:end if end >= 0 else len(description)].replace(value, " ")
    scores = dict(tools.rank(sentence))
    return max(takers, key=lambda t: scores.get(t.name, 0.0))


def _shown_replacement(
    tool: ShownTool, inputs: Mapping[str, Any], described: Sequence[str], tools: ShownTools,
    exclude: set[str],
) -> str | None:
    """A tool to run instead of one the inputs do not fit: a described tool the inputs fit,
    else the fitting tool whose shown words are nearest the step's description."""
    for name in described:
        other = tools.by_name[name]
        if name not in exclude and _shown_fits(other, inputs):
            return name
    for name, _ in tools.rank(tool.description):
        other = tools.by_name[name]
        if name not in exclude and _shown_fits(other, inputs) and _shown_bound(other, inputs):
            return name
    return None


def _shown_order(
    steps: list[_Step], tools: ShownTools, inputs: Mapping[str, Any], description: str,
    mentions: Mapping[str, int], text: str, marks: Mapping[str, list[str]],
) -> tuple[_Step, ...]:
    """Steps in the order the shown facts give (see `AdaptiveAgent`)."""
    deliverable = _expected_deliverable(text)

    def mentioned(step: _Step) -> int | None:
        tool = tools.by_name[step.tool]
        spots = [description.find(str(inputs[p])) for p in _shown_bound(tool, inputs)]
        spots = [i for i in spots if i >= 0]
        return min(spots) if spots else mentions.get(step.tool)

    # Steps the text mentions run in the order it mentions them (a task's text tells its
    # steps in order); a step marked as a prerequisite keeps its place before its users.
    at = {s.tool: mentioned(s) for s in steps if s.tool not in marks}
    slots = [i for i, s in enumerate(steps) if at.get(s.tool) is not None]
    for i, step in zip(slots, sorted((steps[i] for i in slots), key=lambda s: at[s.tool] or 0),
                       strict=True):
        steps[i] = step

    def makes_deliverable(step: _Step) -> bool:
        tool = tools.by_name[step.tool]
        return deliverable is not None and any(inputs.get(p) == deliverable
                                               for p in _shown_bound(tool, inputs))

    ordered = sorted(steps, key=makes_deliverable)
    for tool, users in marks.items():
        later = [ordered.index(s) for s in ordered if s.tool in users]
        here = next(i for i, s in enumerate(ordered) if s.tool == tool)
        if later and min(later) < here:
            ordered.insert(min(later), ordered.pop(here))
    return tuple(ordered)


def _expected_deliverable(text: str) -> Any:
    for line in text.split("\n"):
        if line.startswith("Expected outputs: "):
            try:
                value = json.loads(line.removeprefix("Expected outputs: "))
            except json.JSONDecodeError:
                return None
            return value.get("deliverable") if isinstance(value, dict) else None
    return None


# --- the random agent -------------------------------------------------------------------------
class RandomAgent(BuiltinAgent):
    """Calls a random tool with arguments from the task inputs; finishes with chance 1/8."""

    kind = "random"

    def decide(
        self, request: ModelRequest, view: _View
    ) -> tuple[str, Mapping[str, Any]] | None:
        draws = DrawStream("builtin:random", self.seed, request.task_id, request.repeat,
                           view.replies)
        if view.history and draws.random() < 0.125:
            return None
        tool = draws.choice(self.registry.names)
        inputs = _inputs(view.text)
        return tool, _arguments(self.registry[tool], {}, inputs, view, [tool], self.registry)


BUILTIN_AGENTS: dict[str, type[BuiltinAgent]] = {
    cls.kind: cls
    for cls in (OracleAgent, FollowerAgent, AdaptiveAgent, PrivilegedAgent, RandomAgent)
}


def make_builtin(name: str, **options: Any) -> BuiltinAgent:
    """The built-in agent `name` (`oracle`, `follower`, `adaptive`, `privileged`, `random`)."""
    cls = BUILTIN_AGENTS.get(name)
    if cls is None:
        raise ValueError(f"unknown built-in agent {name!r}; choose from "
                         + ", ".join(f"builtin:{n}" for n in BUILTIN_AGENTS))
    unknown = set(options) - {"registry", "seed"}
    if unknown:
        raise ValueError(f"builtin:{name} takes no option(s) {', '.join(sorted(unknown))}")
    return cls(**options)
