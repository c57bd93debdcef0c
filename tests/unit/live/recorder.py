"""A stand-in for a public API on loopback: it answers every request with a JSON object and
records the headers it got, so a test can see what reached a server that is not ours."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from pytest_resilibench.servers.loopback import LoopbackServer


@contextmanager
def header_recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """(its URL, the headers of every request it got, lower-cased names)."""
    seen: list[dict[str, str]] = []

    async def app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"forecast": "sunny"}'})

    with LoopbackServer(app, name="header-recorder", lifespan="off") as server:
        yield server.url, seen
