"""OTLP's protobuf wire format for spans, written by hand: the SDK's span objects and its
pure-Python encoder cost ~50 us a span (bench/bench_otel.py), over a tenth of a built-in
agent's episode for its ~15 spans; these bytes cost about a microsecond. Only what the
exporter sends is encoded: spans (ids, parent, name, kind, times, attributes, events, status),
and the request around a batch of them. The field numbers are those of
opentelemetry/proto/trace/v1/trace.proto and common.proto (v1.x); tests/unit/test_otlp_wire.py
decodes every form with the official bindings (opentelemetry-proto).

Attributes are repeated KeyValue fields, and repeated fields concatenate: a span's attributes
are any bytes joined from `key_values` and `encoder(...)` results, so what is the same in
every span of a run (an operation's name, the model, the provider) is encoded once.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["ATTRIBUTES", "CLIENT", "INTERNAL", "encode_request", "encode_span", "encoder",
           "field", "key_values"]

INTERNAL, CLIENT = 1, 3  # Span.SpanKind
ATTRIBUTES = b"\x4a"  # Span.attributes (9)
_STATUS_ERROR = b"\x7a\x02\x18\x02"  # Span.status (15) = Status{code (3): STATUS_CODE_ERROR}
_TIMES = struct.Struct("<BQBQ").pack  # start (7) and end (8) time, fixed64 each
_FIXED64 = struct.Struct("<Q").pack
_DOUBLE = struct.Struct("<d").pack
_INT64 = (1 << 64) - 1
_MEMO_SIZE = 4096  # values remembered per key (ids are new in every episode: bounded)
_MEMO_TEXT = 256  # a longer text (messages, errors) is mostly new: encoded, never kept


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


def encoder(key: str, kind: type, tag: bytes = ATTRIBUTES) -> Callable[[Any], bytes]:
    """The function that encodes `key`'s KeyValue field (under `tag`) for a value of type
    `kind`, made once per (key, kind, tag): a bool's two forms are made once, an int and a
    float get their header from a cache and only their own bytes encoded, a short text or an
    array (as a tuple) is encoded once per value and remembered (up to `_MEMO_SIZE` a key)."""
    found = _ENCODERS.get((key, kind, tag))
    if found is None:
        found = _ENCODERS[(key, kind, tag)] = _make_encoder(key, kind, tag)
    return found


_ENCODERS: dict[tuple[str, type, bytes], Callable[[Any], bytes]] = {}


def _make_encoder(key: str, kind: type, tag: bytes) -> Callable[[Any], bytes]:
    prefix = field(b"\x0a", key.encode())  # KeyValue.key (1)

    def pair(any_value: bytes) -> bytes:  # KeyValue.value (2)
        return field(tag, prefix + field(b"\x12", any_value))

    if kind is bool:
        no, yes = pair(b"\x10\x00"), pair(b"\x10\x01")
        return lambda value: yes if value else no
    if kind is float:
        header = pair(_any_value(0.0))[:-8]
        return lambda value: header + _DOUBLE(value)
    if kind is int:
        headers: dict[int, bytes] = {}  # by the varint's length: it sets the field lengths

        def encode_int(value: int) -> bytes:
            number = _SMALL[value] if 0 <= value < 0x80 else _varint(value & _INT64)
            header = headers.get(len(number))
            if header is None:
                header = headers[len(number)] = pair(b"\x18" + number)[:-len(number)]
            return header + number

        return encode_int
    if kind is str or kind is tuple:
        memo: dict[Any, bytes] = {}

        def encode_memo(value: Any) -> bytes:
            found = memo.get(value)
            if found is None:
                found = pair(_any_value(value))
                if kind is tuple or len(value) <= _MEMO_TEXT:
                    if len(memo) >= _MEMO_SIZE:
                        memo.clear()
                    memo[value] = found
            return found

        return encode_memo
    return lambda value: pair(_any_value(value))


def key_values(attributes: Mapping[str, Any], tag: bytes = ATTRIBUTES) -> bytes:
    """Attributes as repeated KeyValue fields under `tag` (None values left out), each through
    its key's `encoder`."""
    out = []
    encoders = _ENCODERS
    for key, value in attributes.items():
        if value is None:
            continue
        kind = type(value)
        if kind is list:
            value, kind = tuple(value), tuple
        encode = encoders.get((key, kind, tag)) or encoder(key, kind, tag)
        out.append(encode(value))
    return b"".join(out)


def encode_span(*, trace_id: bytes, span_id: bytes, parent_id: bytes | None, name: str,
                kind: int, start_ns: int, end_ns: int, attributes: bytes,
                events: Sequence[tuple[str, int, Mapping[str, Any]]] = (),
                error: bool = False) -> bytes:
    """One Span message, as the ScopeSpans.spans field (2) `encode_request` takes a run of;
    `attributes` are encoded KeyValue fields under ATTRIBUTES (`key_values`, `encoder`)."""
    head = _NAMES.get((name, kind))
    if head is None:  # a run has few span names (its models, agents, tools)
        if len(_NAMES) >= _MEMO_SIZE:
            _NAMES.clear()
        head = _NAMES[(name, kind)] = field(b"\x2a", name.encode()) + b"\x30" + _varint(kind)
    parts = [b"\x0a\x10", trace_id, b"\x12\x08", span_id]
    if parent_id is not None:
        parts += [b"\x22\x08", parent_id]
    parts += [head, _TIMES(0x39, start_ns, 0x41, end_ns), attributes]
    for event_name, time_ns, event_attributes in events:  # Span.events (11)
        parts.append(field(b"\x5a", b"\x09" + _FIXED64(time_ns) + field(
            b"\x12", event_name.encode()) + key_values(event_attributes, b"\x1a")))
    if error:
        parts.append(_STATUS_ERROR)
    span = b"".join(parts)
    return b"\x12" + _varint(len(span)) + span


_NAMES: dict[tuple[str, int], bytes] = {}  # a span's name (5) and kind (6), encoded


def encode_request(resource: bytes, scope: bytes, schema_url: str,
                   spans: Iterable[bytes]) -> bytes:
    """An ExportTraceServiceRequest: one ResourceSpans holding one ScopeSpans of `spans`
    (`encode_span`'s, any number in each item); `resource` and `scope` are encoded Resource
    and InstrumentationScope messages."""
    scope_spans = field(b"\x0a", scope) + b"".join(spans) + field(b"\x1a", schema_url.encode())
    resource_spans = field(b"\x0a", resource) + field(b"\x12", scope_spans) \
        + field(b"\x1a", schema_url.encode())
    return field(b"\x0a", resource_spans)
