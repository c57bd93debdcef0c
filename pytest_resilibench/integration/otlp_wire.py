"""OTLP's protobuf wire format for spans, written by hand: the SDK's span objects and its
pure-Python encoder cost ~50 us a span (bench/bench_otel.py), over a tenth of a built-in
agent's episode for its ~15 spans; these bytes cost a few microseconds. Only what the
exporter sends is encoded: spans (ids, parent, name, kind, times, attributes, events, status),
and the request around a batch of them. The field numbers are those of
opentelemetry/proto/trace/v1/trace.proto and common.proto (v1.x); tests/unit/test_otlp_wire.py
decodes every form with the official bindings (opentelemetry-proto).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["CLIENT", "INTERNAL", "encode_request", "encode_span", "field", "key_values"]

INTERNAL, CLIENT = 1, 3  # Span.SpanKind
_STATUS_ERROR = b"\x7a\x02\x18\x02"  # Span.status (15) = Status{code (3): STATUS_CODE_ERROR}
_FIXED64 = struct.Struct("<Q").pack
_DOUBLE = struct.Struct("<d").pack
_INT64 = (1 << 64) - 1


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag + _varint(len(payload)) + payload


def _any_value(value: Any) -> bytes:
    """An AnyValue: string (1), bool (2), int (3), double (4), array of them (5)."""
    if isinstance(value, str):
        return field(b"\x0a", value.encode())
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value & _INT64)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if isinstance(value, list | tuple):
        return field(b"\x2a", b"".join(field(b"\x0a", _any_value(v)) for v in value))
    return field(b"\x0a", str(value).encode())


def key_values(attributes: Mapping[str, Any], tag: bytes) -> bytes:
    """Attributes as repeated KeyValue fields under `tag` (None values left out). Most pairs
    recur (an operation's name, a model, a tool, a flag, a turn, a count), so each hashable
    pair is encoded once and remembered (up to `_MEMO_SIZE`); a float, mostly new (times,
    probabilities), gets its fixed-size header from a cache and only its 8 bytes packed."""
    out = []
    memo = _PAIRS
    for key, value in attributes.items():
        if value is None:
            continue
        kind = type(value)
        if kind is float:
            header = _DOUBLE_HEADERS.get((tag, key))
            if header is None:
                header = _DOUBLE_HEADERS[(tag, key)] = _pair(key, 0.0, tag)[:-8]
            out.append(header + _DOUBLE(value))
            continue
        if kind is list:
            value = tuple(value)
        found = memo.get((tag, key, value, kind))
        if found is None:
            if len(memo) >= _MEMO_SIZE:
                memo.clear()
            found = memo[(tag, key, value, kind)] = _pair(key, value, tag)
        out.append(found)
    return b"".join(out)


_PAIRS: dict[tuple[bytes, str, Any, type], bytes] = {}
_DOUBLE_HEADERS: dict[tuple[bytes, str], bytes] = {}  # a double's KeyValue but its 8 bytes
_MEMO_SIZE = 1 << 14
_KEYS: dict[str, bytes] = {}  # an attribute's key, as KeyValue's field 1


def _pair(key: str, value: Any, tag: bytes) -> bytes:
    prefix = _KEYS.get(key)
    if prefix is None:
        prefix = _KEYS[key] = field(b"\x0a", key.encode())
    return field(tag, prefix + field(b"\x12", _any_value(value)))


def encode_span(*, trace_id: bytes, span_id: bytes, parent_id: bytes | None, name: str,
                kind: int, start_ns: int, end_ns: int, attributes: Mapping[str, Any],
                events: Sequence[tuple[str, int, Mapping[str, Any]]] = (),
                error: bool = False) -> bytes:
    """One Span message's bytes."""
    parts = [b"\x0a\x10", trace_id, b"\x12\x08", span_id]
    if parent_id is not None:
        parts += [b"\x22\x08", parent_id]
    parts += [field(b"\x2a", name.encode()), b"\x30", _varint(kind),
              b"\x39", _FIXED64(start_ns), b"\x41", _FIXED64(end_ns),
              key_values(attributes, b"\x4a")]
    for event_name, time_ns, event_attributes in events:  # Span.events (11)
        parts.append(field(b"\x5a", b"\x09" + _FIXED64(time_ns) + field(
            b"\x12", event_name.encode()) + key_values(event_attributes, b"\x1a")))
    if error:
        parts.append(_STATUS_ERROR)
    return b"".join(parts)


def encode_request(resource: bytes, scope: bytes, schema_url: str,
                   spans: Iterable[bytes]) -> bytes:
    """An ExportTraceServiceRequest: one ResourceSpans holding one ScopeSpans of `spans`;
    `resource` and `scope` are encoded Resource and InstrumentationScope messages."""
    scope_spans = field(b"\x0a", scope) + b"".join(field(b"\x12", span) for span in spans) \
        + field(b"\x1a", schema_url.encode())
    resource_spans = field(b"\x0a", resource) + field(b"\x12", scope_spans) \
        + field(b"\x1a", schema_url.encode())
    return field(b"\x0a", resource_spans)
