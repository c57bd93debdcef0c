"""The hand-written OTLP encoding (integration/otlp_wire.py) read back by the official
protobuf bindings (opentelemetry-proto): every field, value type and the request around."""

from __future__ import annotations

import pytest

from pytest_resilibench.integration.otlp_wire import (
    CLIENT,
    encode_request,
    encode_span,
    encoder,
    field,
    key_values,
)

trace_service = pytest.importorskip(
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    reason="opentelemetry-proto (the [dev] extra) is not installed")


def _value(any_value: object) -> object:
    kind = any_value.WhichOneof("value")  # type: ignore[attr-defined]
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]  # type: ignore[attr-defined]
    return getattr(any_value, kind)


def test_a_request_decodes_as_written() -> None:
    attributes = {"s": "héllo", "t": True, "f": False, "i": 7, "big": 2**40, "neg": -3,
                  "x": 0.25, "list": ["stop", "tool_calls"], "gone": None, "long": "a" * 300}
    span = encode_span(trace_id=bytes(range(16)), span_id=b"\x01" * 8, parent_id=b"\x02" * 8,
                       name="chat o3", kind=CLIENT, start_ns=1_700_000_000_000_000_000,
                       end_ns=1_700_000_000_000_000_123, attributes=key_values(attributes),
                       events=[("gen_ai.evaluation.result", 5, {"score": 1.0})], error=True)
    root = encode_span(trace_id=bytes(range(16)), span_id=b"\x02" * 8, parent_id=None,
                       name="invoke_agent a", kind=1, start_ns=1, end_ns=2, attributes=b"")
    resource = key_values({"service.name": "resilibench"}, b"\x0a")
    scope = field(b"\x0a", b"pytest_resilibench") + field(b"\x12", b"0.1")
    body = encode_request(resource, scope, "https://opentelemetry.io/schemas/1.38.0",
                          [span, root])
    request = trace_service.ExportTraceServiceRequest.FromString(body)
    (resource_spans,) = request.resource_spans
    assert {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes} == \
        {"service.name": "resilibench"}
    (scope_spans,) = resource_spans.scope_spans
    assert scope_spans.scope.name == "pytest_resilibench" and scope_spans.scope.version == "0.1"
    assert scope_spans.schema_url.endswith("/1.38.0")
    first, second = scope_spans.spans
    assert first.trace_id == bytes(range(16)) and first.span_id == b"\x01" * 8
    assert first.parent_span_id == b"\x02" * 8 and second.parent_span_id == b""
    assert first.name == "chat o3" and first.kind == CLIENT
    assert first.start_time_unix_nano == 1_700_000_000_000_000_000
    assert first.end_time_unix_nano == 1_700_000_000_000_000_123
    decoded = {kv.key: _value(kv.value) for kv in first.attributes}
    assert decoded == {k: v for k, v in attributes.items() if v is not None}
    (event,) = first.events
    assert event.name == "gen_ai.evaluation.result" and event.time_unix_nano == 5
    assert {kv.key: _value(kv.value) for kv in event.attributes} == {"score": 1.0}
    assert first.status.code == 2 and second.status.code == 0


def test_encoders_concatenate_into_one_span() -> None:
    """Attributes joined from constants encoded once, each key's encoder (ints of every
    varint length, floats, bools, arrays, texts too long to remember) and `key_values` read
    back as one span's attributes, whatever each encoder saw before."""
    constant = key_values({"gen_ai.operation.name": "chat", "gen_ai.request.model": "o3"})
    ints = [0, 1, 127, 128, 300, 2**14, 2**21 + 5, 2**40, -1, -(2**40)]
    long_text = "x" * 5000
    for _ in range(2):  # the second time from the encoders' caches
        for number in ints:
            extra = {"x": 0.5, "flag": number % 2 == 0, "reasons": ["stop"], "text": long_text}
            attributes = constant + encoder("n", int)(number) + encoder("x", float)(0.5) \
                + encoder("flag", bool)(number % 2 == 0) + encoder("reasons", tuple)(("stop",)) \
                + encoder("text", str)(long_text)
            span = encode_span(trace_id=bytes(16), span_id=bytes(8), parent_id=None,
                               name="chat o3", kind=CLIENT, start_ns=1, end_ns=2,
                               attributes=attributes)
            body = encode_request(b"", b"", "", [span])
            request = trace_service.ExportTraceServiceRequest.FromString(body)
            (decoded,) = request.resource_spans[0].scope_spans[0].spans
            assert decoded.name == "chat o3" and decoded.kind == CLIENT
            assert {kv.key: _value(kv.value) for kv in decoded.attributes} == {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "o3", "n": number,
                **extra}
