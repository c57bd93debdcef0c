"""The one way this package serves HTTP: an ASGI app under uvicorn on a pre-bound socket.

The OpenAI test server, the live services and the MCP server's HTTP transport all serve
through here, so each gets the same socket (bound before uvicorn starts: port 0 gives a free
port known at once; 127.0.0.1 unless told otherwise), the same TCP_NODELAY fix, the same
deadlines on what a client sends (its request head, then its body, each in total: a client
that sends either slowly, or not at all, is cut off; uvicorn bounds idle keep-alive connections
but neither), the same optional API key, and the same start and stop. Imports uvicorn only
when a server is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import secrets
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocketClose

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

__all__ = [
    "BODY_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "LOOPBACK",
    "BearerKey",
    "LoopbackServer",
    "TruncatedResponse",
    "http_url",
    "is_loopback",
    "loopback_socket",
    "serve",
]

LOOPBACK = "127.0.0.1"
HEADER_TIMEOUT_S = 10.0  # how long a connection may take to send a request's whole head
# ... and then its whole body (a request here is JSON of at most a few MB, sent at once)
BODY_TIMEOUT_S = 30.0


def is_loopback(host: str) -> bool:
    """Whether a server bound to `host` is reachable from this machine only: 127.0.0.0/8,
    ::1 or `localhost`. Any other name counts as reachable from elsewhere (no DNS asked)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_url(host: str, port: int) -> str:
    """The base URL of a server on `host`:`port` (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def loopback_socket(port: int = 0, *, host: str = LOOPBACK, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket. Listening at once lets early connections wait in the backlog
    until uvicorn starts. Proto IPPROTO_TCP, not 0: asyncio only sets TCP_NODELAY on accepted
    sockets of an explicit TCP protocol, and without it Nagle + delayed ACK add 40 ms to each
    reply."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # only IPv6 literals hold ':'
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


class BearerKey:
    """ASGI middleware: a request without `Authorization: Bearer <key>` gets a 401 with a JSON
    error body (a WebSocket is closed, code 1008) and never reaches the app."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        if not key:
            raise ValueError("an API key cannot be empty")
        self.app = app
        self._key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
            # compare_digest: how long the check takes says nothing about the key.
            if scheme.lower() != "bearer" \
                    or not secrets.compare_digest(given.strip().encode(), self._key):
                refusal: ASGIApp = WebSocketClose(code=1008) if scope["type"] == "websocket" \
                    else JSONResponse({"error": "missing or wrong API key: send "
                                                "'Authorization: Bearer <key>'"},
                                      status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _h11_with_deadlines(header_timeout_s: float, body_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class with a deadline on each phase of a request that the
    client controls. The head: all in `header_timeout_s` after the connection opened or, on a
    kept-alive connection, after the next request's first bytes came. The body: all in
    `body_timeout_s` after the head, in total (bytes dribbled in do not extend it); past it
    the client gets a 408 with `Connection: close` when no response has started (else the
    connection is just closed), and the app reading the body sees the client gone. A body
    nobody reads counts too: after the key middleware's 401, uvicorn keeps taking the body,
    and each byte cancels its keep-alive timer. Idle kept-alive connections are uvicorn's
    (`timeout_keep_alive`)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    limits = {"head": header_timeout_s, "body": body_timeout_s}

    class DeadlinedH11(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _phase: str | None = None  # "head", "body", or None (nothing awaited of the client)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_the_timer()
            super().connection_lost(exc)

        def _watch(self) -> None:
            # h11 keeps the client IDLE until a request's whole head is in, then SEND_BODY
            # until its body is; a deadline starts with its phase, once.
            state = self.conn.their_state
            phase = None if self.transport.is_closing() else \
                "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
            if phase != self._phase:
                self._stop_the_timer()
                self._phase = phase
                if phase is not None:
                    self._timer = self.loop.call_later(limits[phase], self._expire)

        def _expire(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            if self._phase == "body" and self.conn.our_state is h11.SEND_RESPONSE:
                self._send_408()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                # As connection_lost does, now: the app's reads end, its replies are dropped.
                cycle.disconnected = True
                cycle.message_event.set()
            self.transport.close()

        def _send_408(self) -> None:
            body = json.dumps({"error": f"request body not received within "
                                        f"{body_timeout_s:g} s"}).encode()
            for event in (h11.Response(status_code=408, reason=b"Request Timeout", headers=[
                              (b"content-type", b"application/json"),
                              (b"content-length", str(len(body)).encode()),
                              (b"connection", b"close")]),
                          h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")

        def _stop_the_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    return DeadlinedH11


class _ClientGone:
    """ASGI middleware: an app whose client went away mid-body (cut off by a deadline, or
    gone by itself) ends quietly; there is no one to answer, and uvicorn would log a
    traceback for Starlette's `ClientDisconnect`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with contextlib.suppress(ClientDisconnect):
            await self.app(scope, receive, send)


def _config(app: ASGIApp, *, api_key: str | None, header_timeout_s: float,
            body_timeout_s: float, **config: Any) -> uvicorn.Config:
    """uvicorn's config of every server here: h11 with the head and body deadlines, the key
    checked when there is one, warnings logged; `config` adds to or overrides the rest."""
    import uvicorn

    for name, value in (("header_timeout_s", header_timeout_s),
                        ("body_timeout_s", body_timeout_s)):
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    if config.pop("http", "h11") != "h11":
        raise ValueError("these servers speak h11, on which the deadlines are built")
    app = _ClientGone(app)
    if api_key is not None:
        app = BearerKey(app, api_key)
    return uvicorn.Config(app, http=_h11_with_deadlines(header_timeout_s, body_timeout_s),
                          **{"log_level": "warning", **config})


def serve(app: ASGIApp, sock: socket.socket, *, api_key: str | None = None,
          header_timeout_s: float = HEADER_TIMEOUT_S, body_timeout_s: float = BODY_TIMEOUT_S,
          **config: Any) -> None:
    """Serve `app` on `sock` in the foreground until interrupted (the CLI's `serve-*`); with
    `api_key`, only requests bearing it."""
    import uvicorn

    config_ = _config(app, api_key=api_key, header_timeout_s=header_timeout_s,
                      body_timeout_s=body_timeout_s, **config)
    uvicorn.Server(config_).run(sockets=[sock])


class LoopbackServer:
    """An ASGI app served by uvicorn on a socket of its own (127.0.0.1 unless `host` says
    otherwise) in a background thread. With `api_key`, only requests bearing it reach the
    app; a connection still sending its request head `header_timeout_s` on is closed, one
    still sending its body `body_timeout_s` after the head answered 408 and closed.
    `config` goes to `uvicorn.Config` (default: warnings logged, one second of graceful
    shutdown)."""

    def __init__(self, app: ASGIApp, *, port: int = 0, host: str = LOOPBACK,
                 name: str = "loopback-server", api_key: str | None = None,
                 header_timeout_s: float = HEADER_TIMEOUT_S,
                 body_timeout_s: float = BODY_TIMEOUT_S, **config: Any) -> None:
        import uvicorn

        options = _config(app, api_key=api_key, header_timeout_s=header_timeout_s,
                          body_timeout_s=body_timeout_s,
                          **{"timeout_graceful_shutdown": 1, **config})
        self._socket = loopback_socket(port, host=host)
        self.host, self.port = self._socket.getsockname()[:2]
        self._name = name
        self._server = uvicorn.Server(options)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return http_url(self.host, self.port)

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def uvicorn_server(self) -> Any:
        """uvicorn's server (its `server_state` lists the open connections)."""
        return self._server

    def wait(self) -> None:
        """Block until the server's thread ends (in slices, so Ctrl-C gets through)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def start(self, *, timeout_s: float = 10.0) -> None:
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[self._socket])),
            name=f"{self._name}-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server on {self.url} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread = None
        self._socket.close()

    def __enter__(self) -> LoopbackServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TruncatedResponse(Response):
    """Promises the whole body in Content-Length, sends half, then stops: uvicorn closes the
    connection, and the client reads a body cut short."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2],
                    "more_body": True})
