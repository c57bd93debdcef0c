"""`--resili-otel`: every episode as an OpenTelemetry trace, sent over OTLP/HTTP to the
collector the standard variables name (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`: the SDK reads them itself). docs/OTEL.md lists every span and
attribute.

The spans follow the OpenTelemetry semantic conventions for generative AI, v1.38.0
(gen-ai-agent-spans.md, gen-ai-spans.md, gen-ai-events.md; status Development): one
`invoke_agent {agent}` span per episode, a `chat {model}` span per model reply under it, an
`execute_tool {tool}` span per executed tool call, and the episode's scores as
`gen_ai.evaluation.result` events on the agent span. What the conventions do not name is under
`resilibench.*`. Message contents only with `--resili-otel-content` (or the GenAI
instrumentations' switch, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true), redacted
as every output is (base/redact.py); free text (errors) is redacted too.

Spans are made from the finished record, in the process that ran its item (each xdist worker
exports its own), with the times the turn keeper kept (runtime/episode.py `trace_turns`),
encoded by hand (otlp_wire.py) and sent in batches from a thread (otlp_http.py).
This module is imported only when the option is on: nothing here loads opentelemetry
otherwise.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from pytest_resilibench import __version__
from pytest_resilibench.base.redact import redact
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.integration.otlp_http import OtlpSender
from pytest_resilibench.integration.otlp_wire import (
    CLIENT,
    INTERNAL,
    encode_span,
    encoder,
    key_values,
)
from pytest_resilibench.runtime.episode import TURN_TRACE

__all__ = ["SEMCONV_VERSION", "EpisodeTracer"]

SEMCONV_VERSION = "1.38.0"
_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
_SCORES = ("coverage", "order_adherence")  # evaluation events besides the outcome
# The report's fields on the agent span, as `resilibench.<field>` (scalars only).
_EPISODE_FIELDS = ("id", "model", "variant", "flaw", "severity", "task_id", "task_type",
                   "difficulty", "repeat", "seed", "base_success", "tool_mode", "max_turns",
                   "outcome", "coverage", "order_adherence", "turns", "tool_calls",
                   "errors_met", "errors_recovered", "protocol_errors", "stop_reason",
                   "sim_time_s", "cost_usd", "faults")
_FIELD_KEYS = tuple((name, f"resilibench.{name}") for name in _EPISODE_FIELDS)
# What the chat and tool spans may carry besides their model's constants: each key's encoder,
# made once (otlp_wire.py).
_FINISH = encoder("gen_ai.response.finish_reasons", tuple)
_RESPONSE = (("model", encoder("gen_ai.response.model", str)),
             ("id", encoder("gen_ai.response.id", str)))
_REPLAYED = encoder("resilibench.replayed", bool)
_REPLAYED_TOKENS = encoder("resilibench.usage.replayed_tokens", int)
_USAGE = tuple((key, encoder(name, int)) for key, name in (
    ("prompt_tokens", "gen_ai.usage.input_tokens"),
    ("completion_tokens", "gen_ai.usage.output_tokens"),
    ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens")))
_INPUT_MESSAGES = encoder("gen_ai.input.messages", str)
_OUTPUT_MESSAGES = encoder("gen_ai.output.messages", str)
_TOOL = key_values({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"})
_TOOL_NAME = encoder("gen_ai.tool.name", str)
_CALL_ID = encoder("gen_ai.tool.call.id", str)
_OK = encoder("resilibench.tool.ok", bool)
_TURN = encoder("resilibench.tool.turn", int)
_CALL_INDEX = encoder("resilibench.tool.call_index", int)
_LATENCY = encoder("resilibench.tool.latency_s", float)
_CLOCK = encoder("resilibench.tool.clock_s", float)
_PROBABILITY = encoder("resilibench.tool.success_probability", float)
_ERROR_TYPE = encoder("error.type", str)
_INJECTED = encoder("resilibench.fault.injected", str)
_PRECURSOR = encoder("resilibench.fault.precursor", bool)
_DEVIATIONS = encoder("resilibench.tool.deviations", int)
_ARGUMENTS = encoder("gen_ai.tool.call.arguments", str)
_RESULT = encoder("gen_ai.tool.call.result", str)


class _Model(NamedTuple):
    """What every episode of one model spec shares, its attributes encoded once."""

    root_name: str
    root: bytes  # the agent span's attributes that are the same in each episode
    chat_name: str
    chat: bytes  # a chat span's


class EpisodeTracer:
    """This process's exporter: `export(record)` per episode, `close()` at the end (sends
    what waits; a line saying what was lost, else None)."""

    def __init__(self, *, content: bool, agent_names: Mapping[str, str] | None = None) -> None:
        resource: dict[str, Any] = {"service.version": __version__}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            resource["service.name"] = "resilibench"
        self._sender = OtlpSender(scope="pytest_resilibench", version=__version__,
                                  schema_url=_SCHEMA_URL, resource=resource)
        self._content = content
        self._agent_names = dict(agent_names or {})
        self._ids = random.Random(int.from_bytes(os.urandom(16), "big"))
        self._models: dict[str, _Model] = {}
        self.exported = 0

    def close(self) -> str | None:
        return self._sender.close()

    def export(self, record: EpisodeRecord) -> None:
        """One trace: the agent span, its chat and tool spans, its evaluation events."""
        trace_events: Sequence[tuple[Any, ...]] = record.__dict__.get(TURN_TRACE) or ()
        end = _now()
        start = trace_events[0][1] if trace_events else end - int(record.wall_time_s * 1e9)
        model = self._models.get(record.model) or self._model(record.model)
        bits = self._ids.getrandbits
        trace_id = bits(128).to_bytes(16, "big")
        root_id = bits(64).to_bytes(8, "big")
        spans = [encode_span(
            trace_id=trace_id, span_id=root_id, parent_id=None, name=model.root_name,
            kind=INTERNAL, start_ns=start, end_ns=end,
            attributes=model.root + _agent_attributes(record),
            events=[("gen_ai.evaluation.result", end, event) for event in _evaluations(record)],
            error=record.outcome == "error" or record.stop_reason == "agent_error")]
        for name, kind, t0, t1, attributes, error in self._children(record, trace_events,
                                                                     model, start):
            spans.append(encode_span(
                trace_id=trace_id, span_id=bits(64).to_bytes(8, "big"), parent_id=root_id,
                name=name, kind=kind, start_ns=t0, end_ns=t1, attributes=attributes,
                error=error))
        self._sender.add(b"".join(spans), len(spans))
        self.exported += 1

    def _model(self, spec: str) -> _Model:
        """A model spec's names and constant attributes, encoded at its first episode."""
        name, provider = _model_name(spec), _provider(spec)
        agent = self._agent_names.get(spec, spec)
        self._models[spec] = model = _Model(
            root_name=f"invoke_agent {agent}",
            root=key_values({"gen_ai.operation.name": "invoke_agent",
                             "gen_ai.provider.name": provider, "gen_ai.agent.name": agent,
                             "gen_ai.agent.id": spec, "gen_ai.request.model": name}),
            chat_name=f"chat {name}",
            chat=key_values({"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                             "gen_ai.request.model": name}))
        return model

    def _children(self, record: EpisodeRecord, events: Sequence[tuple[Any, ...]],
                  model: _Model, start: int) -> Iterator[tuple[str, int, int, int, bytes, bool]]:
        """(name, kind, start, end, attributes, failed) of each chat and tool span, in order:
        from the turn keeper's events, without reading the trajectory (but for contents)."""
        if len(events) <= 1:  # no times kept: the trajectory, every span at the start
            events = _events_of(record, start)
        assistants = [i for i, m in enumerate(record.messages) if m.get("role") == "assistant"] \
            if self._content else []
        previous_end, replies, call_id = start, 0, None
        for event in events:
            if event[0] == "reply":
                _, t1, usage, raw, tool_calls = event
                attributes = model.chat + _chat_attributes(bool(tool_calls), usage or {}, raw)
                if self._content and replies < len(assistants):
                    at = assistants[replies]
                    before = assistants[replies - 1] + 1 if replies else 0
                    attributes += _INPUT_MESSAGES(_messages(record.messages[before:at])) + \
                        _OUTPUT_MESSAGES(_messages([record.messages[at]]))
                call_id = _call_id(tool_calls[0]) if tool_calls else None
                replies += 1
                yield model.chat_name, CLIENT, previous_end, t1, attributes, False
                previous_end = t1
            elif event[0] == "call":
                _, t0, t1, index, call = event
                tool, attributes = self._tool_attributes(
                    record, index, call, call_id or f"turn-{call.get('turn')}")
                yield f"execute_tool {tool}", INTERNAL, t0, t1, attributes, not call.get("ok")
                previous_end = t1

    def _tool_attributes(self, record: EpisodeRecord, index: int, call: Mapping[str, Any],
                         call_id: str) -> tuple[str, bytes]:
        """(the tool's name as shown, the span's attributes) of `record.calls[index]`, from
        `call`: its scalars (the trajectory read only for contents)."""
        ok = bool(call.get("ok"))
        code = call.get("error_code")
        tool = str(call.get("tool"))
        if code == "UNKNOWN_TOOL":
            tool = redact(tool)
        parts = [_TOOL, _TOOL_NAME(tool), _CALL_ID(call_id), _OK(ok),
                 _TURN(int(call.get("turn") or 0)), _CALL_INDEX(int(call.get("call_index") or 0)),
                 _LATENCY(float(call.get("latency_s") or 0.0)),
                 _CLOCK(float(call.get("clock_s") or 0.0))]
        p = call.get("success_probability")
        if p is not None:
            parts.append(_PROBABILITY(float(p)))
        if not ok:
            # A failure of the run's luck or of the profile's events (not a refused call):
            # the fault the benchmark injected.
            injected = not call.get("deterministic")
            parts += [_ERROR_TYPE(str(code)), _INJECTED(str(call.get("event") or (
                "random_failure" if injected else "none"))),
                # Its odds lowered by the episode's history (a prerequisite unmet or failed,
                # recent failures: the simulator's precursor rule).
                _PRECURSOR(injected and p is not None and p < record.base_success)]
        if call.get("deviations"):
            parts.append(_DEVIATIONS(len(call["deviations"])))
        if self._content:
            call = record.calls[index]
            result = call.get("output") if ok else call.get("message")
            parts += [_ARGUMENTS(redact(_json(call.get("arguments")))),
                      _RESULT(redact(_json(result)))]
        return tool, b"".join(parts)


def _agent_attributes(record: EpisodeRecord) -> bytes:
    """The agent span's attributes but its model's constants (`_Model.root`)."""
    attributes: dict[str, Any] = {
        "gen_ai.conversation.id": record.id,
        "gen_ai.usage.input_tokens": record.tokens.get("prompt", 0),
        "gen_ai.usage.output_tokens": record.tokens.get("completion", 0),
    }
    for name, key in _FIELD_KEYS:
        attributes[key] = getattr(record, name)  # (None: left out)
    attributes["resilibench.fault_profile"] = record.faults or "paper"
    for kind, counts in (record.events or {}).items():
        for what, n in counts.items():
            attributes[f"resilibench.events.{kind}.{what}"] = n
    for kind, n in record.tokens.items():
        attributes[f"resilibench.tokens.{kind}"] = n
    for name, met in record.conditions.items():
        attributes[f"resilibench.conditions.{name}"] = met
    error = _error_type(record)
    if error is not None:
        attributes["error.type"] = error
        why = record.infra_error or record.agent_error
        if why:
            attributes["resilibench.error"] = redact(why)
    return key_values(attributes)


def _events_of(record: EpisodeRecord, at: int) -> list[tuple[Any, ...]]:
    """The turn keeper's events rebuilt from the trajectory, all at `at` (a record that ran
    without them)."""
    events: list[tuple[Any, ...]] = [("start", at)]
    calls = {int(c.get("turn") or 0): (i, c) for i, c in enumerate(record.calls)}
    replies = [m for m in record.messages if m.get("role") == "assistant"]
    for n, message in enumerate(replies):
        events.append(("reply", at, None, None, message.get("tool_calls")))
        if (call := calls.get(n + 1)) is not None:
            events.append(("call", at, at, *call))
    return events


def _call_id(call: Any) -> str:
    """A reply's tool call id: a `ToolCall`'s, or an assistant message's."""
    return str(call["id"] if isinstance(call, Mapping) else call.id)


def _chat_attributes(calls: bool, usage: Mapping[str, Any],
                     raw: Mapping[str, Any] | None) -> bytes:
    """A chat span's attributes but its model's constants (`_Model.chat`)."""
    finish, response = None, []
    if raw:  # a real model's response (a built-in agent's is empty)
        choices = raw.get("choices") if isinstance(raw, Mapping) else None
        first = choices[0] if isinstance(choices, list) and choices and \
            isinstance(choices[0], Mapping) else {}
        finish = first.get("finish_reason")
        response = [encode(raw[key]) for key, encode in _RESPONSE
                    if isinstance(raw.get(key), str)]
    parts = [_FINISH((str(finish or ("tool_calls" if calls else "stop")),)), *response]
    replayed = int(usage.get("replayed_tokens") or 0)
    parts.append(_REPLAYED(replayed))  # from the model-call cache
    if replayed:
        parts.append(_REPLAYED_TOKENS(replayed))
    for key, encode in _USAGE:
        if usage.get(key) is not None:
            parts.append(encode(int(usage[key])))
    return b"".join(parts)


def _evaluations(record: EpisodeRecord) -> Iterator[dict[str, Any]]:
    yield {"gen_ai.evaluation.name": "resilibench.outcome",
           "gen_ai.evaluation.score.label": record.outcome,
           "gen_ai.evaluation.score.value": {"full": 1.0, "partial": 0.5}.get(record.outcome,
                                                                              0.0),
           "gen_ai.evaluation.explanation": f"stop reason {record.stop_reason}",
           **({"error.type": _error_type(record) or ""} if record.outcome == "error" else {})}
    for name in _SCORES:
        yield {"gen_ai.evaluation.name": f"resilibench.{name}",
               "gen_ai.evaluation.score.value": float(getattr(record, name))}


def _error_type(record: EpisodeRecord) -> str | None:
    if record.stop_reason == "agent_error":
        return "agent_error"
    if record.outcome == "error":
        return "harness_error" if record.stop_reason == "harness_error" else "infra_error"
    return None


def _provider(spec: str) -> str:
    """`gen_ai.provider.name`: openai for an OpenAI-compatible model, else this package."""
    family, colon, _ = spec.partition(":")
    return "openai" if not colon or family == "openai" else f"resilibench.{family}"


def _model_name(spec: str) -> str:
    return spec.removeprefix("openai:")


def _messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """Chat messages as the conventions' JSON (role and parts), redacted."""
    out = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        if message.get("content"):
            parts.append({"type": "text", "content": message["content"]})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append({"type": "tool_call", "id": call.get("id"),
                          "name": function.get("name"), "arguments": function.get("arguments")})
        role = "tool" if message.get("role") == "tool" else message.get("role")
        out.append({"role": role, "parts": parts})
    return redact(_json(out))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _now() -> int:
    import time

    return time.time_ns()
