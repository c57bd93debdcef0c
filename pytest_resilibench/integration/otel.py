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
from typing import Any

from pytest_resilibench import __version__
from pytest_resilibench.base.redact import redact
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.integration.otlp_http import OtlpSender
from pytest_resilibench.integration.otlp_wire import CLIENT, INTERNAL, encode_span
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
        self.exported = 0

    def close(self) -> str | None:
        return self._sender.close()

    def export(self, record: EpisodeRecord) -> None:
        """One trace: the agent span, its chat and tool spans, its evaluation events."""
        trace_events: Sequence[tuple[Any, ...]] = record.__dict__.get(TURN_TRACE) or ()
        end = _now()
        start = trace_events[0][1] if trace_events else end - int(record.wall_time_s * 1e9)
        model = _model_name(record.model)
        agent = self._agent_names.get(record.model, record.model)
        bits = self._ids.getrandbits
        trace_id = bits(128).to_bytes(16, "big")
        root_id = bits(64).to_bytes(8, "big")
        spans = [encode_span(
            trace_id=trace_id, span_id=root_id, parent_id=None, name=f"invoke_agent {agent}",
            kind=INTERNAL, start_ns=start, end_ns=end,
            attributes=self._agent_attributes(record, agent, model),
            events=[("gen_ai.evaluation.result", end, event) for event in _evaluations(record)],
            error=record.outcome == "error" or record.stop_reason == "agent_error")]
        for name, kind, t0, t1, attributes, error in self._children(record, trace_events,
                                                                     model, start):
            spans.append(encode_span(
                trace_id=trace_id, span_id=bits(64).to_bytes(8, "big"), parent_id=root_id,
                name=name, kind=kind, start_ns=t0, end_ns=t1, attributes=attributes,
                error=error))
        self._sender.add(spans)
        self.exported += 1

    def _agent_attributes(self, record: EpisodeRecord, agent: str,
                          model: str) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": _provider(record.model),
            "gen_ai.agent.name": agent,
            "gen_ai.agent.id": record.model,
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": record.id,
            "gen_ai.usage.input_tokens": record.tokens.get("prompt", 0),
            "gen_ai.usage.output_tokens": record.tokens.get("completion", 0),
        }
        for name in _EPISODE_FIELDS:
            value = getattr(record, name)
            if value is not None:
                attributes[f"resilibench.{name}"] = value
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
        return attributes

    def _children(self, record: EpisodeRecord, events: Sequence[tuple[Any, ...]], model: str,
                  start: int) -> Iterator[tuple[str, int, int, int, dict[str, Any], bool]]:
        """(name, kind, start, end, attributes, failed) of each chat and tool span, in order:
        from the turn keeper's events, without reading the trajectory (but for contents)."""
        if len(events) <= 1:  # no times kept: the trajectory, every span at the start
            events = _events_of(record, start)
        provider = _provider(record.model)
        assistants = [i for i, m in enumerate(record.messages) if m.get("role") == "assistant"] \
            if self._content else []
        previous_end, replies, call_id = start, 0, None
        for event in events:
            if event[0] == "reply":
                _, t1, usage, raw, tool_calls = event
                attributes = _chat_attributes(bool(tool_calls), usage or {}, raw or {}, model,
                                              provider)
                if self._content and replies < len(assistants):
                    at = assistants[replies]
                    before = assistants[replies - 1] + 1 if replies else 0
                    attributes["gen_ai.input.messages"] = _messages(record.messages[before:at])
                    attributes["gen_ai.output.messages"] = _messages([record.messages[at]])
                call_id = _call_id(tool_calls[0]) if tool_calls else None
                replies += 1
                yield f"chat {model}", CLIENT, previous_end, t1, attributes, False
                previous_end = t1
            elif event[0] == "call":
                _, t0, t1, call = event
                attributes = self._tool_attributes(
                    record, call, call_id or f"turn-{call.get('turn')}")
                yield (f"execute_tool {attributes['gen_ai.tool.name']}", INTERNAL, t0, t1,
                       attributes, not call.get("ok"))
                previous_end = t1

    def _tool_attributes(self, record: EpisodeRecord, call: Mapping[str, Any],
                         call_id: str) -> dict[str, Any]:
        ok = bool(call.get("ok"))
        code = call.get("error_code")
        tool = str(call.get("tool"))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": redact(tool) if code == "UNKNOWN_TOOL" else tool,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call_id,
            "resilibench.tool.ok": ok,
            "resilibench.tool.turn": int(call.get("turn") or 0),
            "resilibench.tool.call_index": int(call.get("call_index") or 0),
            "resilibench.tool.latency_s": float(call.get("latency_s") or 0.0),
            "resilibench.tool.clock_s": float(call.get("clock_s") or 0.0),
        }
        p = call.get("success_probability")
        if p is not None:
            attributes["resilibench.tool.success_probability"] = p
        if not ok:
            attributes["error.type"] = str(code)
            # A failure of the run's luck or of the profile's events (not a refused call):
            # the fault the benchmark injected.
            injected = not call.get("deterministic")
            attributes["resilibench.fault.injected"] = call.get("event") or (
                "random_failure" if injected else "none")
            # Its odds lowered by the episode's history (a prerequisite unmet or failed,
            # recent failures: the simulator's precursor rule).
            attributes["resilibench.fault.precursor"] = bool(
                injected and p is not None and p < record.base_success)
        if call.get("deviations"):
            attributes["resilibench.tool.deviations"] = len(call["deviations"])
        if self._content:
            attributes["gen_ai.tool.call.arguments"] = redact(_json(call.get("arguments")))
            result = call.get("output") if ok else call.get("message")
            attributes["gen_ai.tool.call.result"] = redact(_json(result))
        return attributes


def _events_of(record: EpisodeRecord, at: int) -> list[tuple[Any, ...]]:
    """The turn keeper's events rebuilt from the trajectory, all at `at` (a record that ran
    without them)."""
    events: list[tuple[Any, ...]] = [("start", at)]
    calls = {int(c.get("turn") or 0): c for c in record.calls}
    replies = [m for m in record.messages if m.get("role") == "assistant"]
    for n, message in enumerate(replies):
        events.append(("reply", at, None, None, message.get("tool_calls")))
        if (call := calls.get(n + 1)) is not None:
            events.append(("call", at, at, call))
    return events


def _call_id(call: Any) -> str:
    """A reply's tool call id: a `ToolCall`'s, or an assistant message's."""
    return str(call["id"] if isinstance(call, Mapping) else call.id)


def _chat_attributes(calls: bool, usage: Mapping[str, Any], raw: Mapping[str, Any],
                     model: str, provider: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat",
                                  "gen_ai.provider.name": provider,
                                  "gen_ai.request.model": model}
    choices = raw.get("choices") if isinstance(raw, Mapping) else None
    first = choices[0] if isinstance(choices, list) and choices and \
        isinstance(choices[0], Mapping) else {}
    finish = first.get("finish_reason") or ("tool_calls" if calls else "stop")
    attributes["gen_ai.response.finish_reasons"] = [str(finish)]
    for key, name in (("model", "gen_ai.response.model"), ("id", "gen_ai.response.id")):
        if isinstance(raw.get(key), str):
            attributes[name] = raw[key]
    replayed = int(usage.get("replayed_tokens") or 0)
    attributes["resilibench.replayed"] = bool(replayed)  # from the model-call cache
    if replayed:
        attributes["resilibench.usage.replayed_tokens"] = replayed
    for key, name in (("prompt_tokens", "gen_ai.usage.input_tokens"),
                      ("completion_tokens", "gen_ai.usage.output_tokens"),
                      ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
                      ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens")):
        if usage.get(key) is not None:
            attributes[name] = int(usage[key])
    return attributes


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
