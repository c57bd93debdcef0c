"""The one way this package serves HTTP: an ASGI app under uvicorn on a loopback socket.

The OpenAI test server, the live services and the MCP server's HTTP transport all serve
through here, so each gets the same socket (bound before uvicorn starts: port 0 gives a free
port known at once, and nothing but 127.0.0.1 listens), the same TCP_NODELAY fix, and the
same start and stop. Imports uvicorn only when a server is built.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = ["LOOPBACK", "LoopbackServer", "TruncatedResponse", "loopback_socket", "serve"]

LOOPBACK = "127.0.0.1"


def loopback_socket(port: int = 0, *, host: str = LOOPBACK, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket. Listening at once lets early connections wait in the backlog
    until uvicorn starts. Proto IPPROTO_TCP, not 0: asyncio only sets TCP_NODELAY on accepted
    sockets of an explicit TCP protocol, and without it Nagle + delayed ACK add 40 ms to each
    reply."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


def serve(app: ASGIApp, sock: socket.socket, **config: Any) -> None:
    """Serve `app` on `sock` in the foreground until interrupted (the CLI's `serve-*`)."""
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, **{"log_level": "warning", **config})).run(sockets=[sock])


class LoopbackServer:
    """An ASGI app served by uvicorn on a loopback socket in a background thread; `config`
    goes to `uvicorn.Config` (default: warnings logged, one second of graceful shutdown)."""

    def __init__(self, app: ASGIApp, *, port: int = 0, host: str = LOOPBACK,
                 name: str = "loopback-server", **config: Any) -> None:
        import uvicorn

        self._socket = loopback_socket(port, host=host)
        self.host, self.port = self._socket.getsockname()[:2]
        self._name = name
        options = {"log_level": "warning", "timeout_graceful_shutdown": 1, **config}
        self._server = uvicorn.Server(uvicorn.Config(app, **options))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

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
