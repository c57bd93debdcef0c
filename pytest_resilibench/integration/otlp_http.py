"""Sending encoded spans (otlp_wire.py) over OTLP/HTTP, batched, from a thread of their own.

Where and how, from the standard variables (the OpenTelemetry SDK's exporter reads the same):
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the URL as given) or `OTEL_EXPORTER_OTLP_ENDPOINT` (+
`/v1/traces`; default http://localhost:4318), `OTEL_EXPORTER_OTLP_TRACES_HEADERS` or
`OTEL_EXPORTER_OTLP_HEADERS` (`key=value,...`, their values registered as secrets: no report or
line shows them), `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (through the SDK's
`Resource.create`). A batch goes when 1024 spans wait or a second passed since the last; a
failed send is retried 3 times (408, 429, 5xx, a broken connection), then dropped and counted:
`close` says how many spans were lost and why, never raises.
"""

from __future__ import annotations

import http.client
import os
import queue
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.util.re import parse_env_headers

from pytest_resilibench.base.redact import redact, register_secret
from pytest_resilibench.integration.otlp_wire import encode_request, field, key_values

__all__ = ["OtlpSender", "checked_endpoint", "traces_endpoint"]

BATCH_SPANS = 1024
BATCH_SECONDS = 1.0
TIMEOUT_S = 10.0
_RETRIES = (0.5, 1.0, 2.0)
_RETRY_STATUSES = {408, 429, 500, 502, 503, 504}


def traces_endpoint() -> str:
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def checked_endpoint() -> str:
    """The traces URL, or a ValueError for one that is no http(s) URL (at start-up)."""
    url = traces_endpoint()
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018  # raises for a port that is none
    except ValueError:
        parts = parts._replace(scheme="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--resili-otel: {redact(url)!r} is not an http(s) URL (from "
                         "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT)")
    return url


def _headers() -> dict[str, str]:
    text = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or \
        os.environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    headers = dict(parse_env_headers(text, liberal=True))
    for value in headers.values():
        register_secret(value)
    return headers


class OtlpSender:
    """`add(spans)` from the exporting thread; `close()` once, at the end."""

    def __init__(self, *, scope: str, version: str, schema_url: str,
                 resource: dict[str, Any]) -> None:
        self.url = checked_endpoint()
        self._parts = urlsplit(self.url)
        self._headers = {"Content-Type": "application/x-protobuf", **_headers()}
        attributes = dict(Resource.create(resource).attributes)
        self._resource = key_values(attributes, b"\x0a")  # Resource.attributes (1)
        # InstrumentationScope: name (1), version (2)
        self._scope = field(b"\x0a", scope.encode()) + field(b"\x12", version.encode())
        self._schema_url = schema_url
        self._pending: list[bytes] = []  # encoded spans, an episode's in each item
        self._count = 0  # spans pending
        self._last = time.monotonic()
        self._queue: queue.Queue[tuple[list[bytes], int] | None] = queue.Queue()
        self._connection: http.client.HTTPConnection | None = None
        self.sent = 0
        self.lost = 0
        self.problem: str | None = None
        self._thread = threading.Thread(target=self._send_all, name="resilibench-otlp",
                                        daemon=True)
        self._thread.start()

    def add(self, spans: bytes, count: int) -> None:
        """`count` spans encoded together (otlp_wire.encode_span's, joined)."""
        self._pending.append(spans)
        self._count += count
        now = time.monotonic()
        if self._count >= BATCH_SPANS or now - self._last >= BATCH_SECONDS:
            self._flush()
            self._last = now

    def _flush(self) -> None:
        self._queue.put((self._pending, self._count))
        self._pending, self._count = [], 0

    def close(self, timeout_s: float = 60.0) -> str | None:
        """Send what waits, stop the thread; a line saying what was lost, else None."""
        if self._pending:
            self._flush()
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return (f"resilibench: --resili-otel: {redact(self.url)} did not take the last "
                    f"spans within {timeout_s:.0f} s ({self.sent} sent)")
        if self.lost:
            return (f"resilibench: --resili-otel: {self.lost} spans could not be sent to "
                    f"{redact(self.url)} ({self.problem}); {self.sent} sent")
        return None

    def _send_all(self) -> None:
        while (batch := self._queue.get()) is not None:
            spans, count = batch
            body = encode_request(self._resource, self._scope, self._schema_url, spans)
            if self._post(body):
                self.sent += count
            else:
                self.lost += count
        if self._connection is not None:
            self._connection.close()

    def _post(self, body: bytes) -> bool:
        for wait in (*_RETRIES, None):
            try:
                connection = self._connect()
                connection.request("POST", self._parts.path or "/v1/traces", body,
                                   self._headers)
                reply = connection.getresponse()
                reply.read()
                if 200 <= reply.status < 300:
                    return True
                self.problem = f"HTTP {reply.status}"
                if reply.status not in _RETRY_STATUSES:
                    return False
            except (OSError, http.client.HTTPException) as exc:
                self.problem = redact(f"{type(exc).__name__}: {exc}")
                if self._connection is not None:
                    self._connection.close()
                self._connection = None
            if wait is None:
                return False
            time.sleep(wait)
        return False

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            kind = http.client.HTTPSConnection if self._parts.scheme == "https" \
                else http.client.HTTPConnection
            self._connection = kind(self._parts.hostname or "", self._parts.port,
                                    timeout=TIMEOUT_S)
        return self._connection

