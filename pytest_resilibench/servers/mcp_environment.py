"""`McpEnvironment`: an episode's tool calls sent to any MCP tool server (ours or another).

    env = await McpEnvironment.open("http://127.0.0.1:8000/mcp")            # streamable HTTP
    env = await McpEnvironment.open([sys.executable, "-m", "pytest_resilibench.cli", "serve-mcp",
                                     "--task", "t0421"])                   # stdio subprocess
    record = await run_episode(task, variant, agent, ..., environment=env)
    await env.aclose()

Many episodes share one server through `SharedMcpServer`: one server process and one
connection, each episode named in its calls' `_meta` (the protocol is in mcp_server.py):

    shared = SharedMcpServer()                     # our server over stdio, started on first use
    env = await shared.environment(task, episode_id="e0", seed=0, repeat=0, base_success=0.8)
    ...; await env.aclose()                        # the server drops that episode
    await shared.aclose()                          # at the end of the run

Results map onto `CallResult`: an `isError` result from our servers reads `"<CODE>: <message>"`,
so the code is parsed back; a foreign server's failure is OPERATION_FAILED. Protocol and
transport trouble become error results, never exceptions into the episode: a request timeout is
TIMEOUT, a JSON-RPC invalid-params error INVALID_INPUT, a dead or unreachable server
NETWORK_ERROR.

A connection (`McpConnection`) lives on the loop that opened it, in a task of its own, so the
environment may be opened, used and closed from different asyncio tasks (the SDK's transports
must be entered and left in one task).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.server.lowlevel import Server
from pydantic import BaseModel

from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS, CallResult
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.servers.mcp_server import (
    EPISODE_META_KEY,
    META_KEY,
    CloseEpisode,
    CloseEpisodeParams,
    ServedEpisode,
    server_command,
)

__all__ = ["McpConnection", "McpEnvironment", "SharedMcpServer", "parse_error_text"]

_CODE = re.compile(r"^([A-Z][A-Z0-9_]{2,}):\s*")
# JSON-RPC error codes (mcp_types) as our error codes; other protocol errors: OPERATION_FAILED.
_PROTOCOL_ERRORS = {
    types.INVALID_PARAMS: "INVALID_INPUT",
    types.REQUEST_TIMEOUT: "TIMEOUT",
    types.CONNECTION_CLOSED: "NETWORK_ERROR",
}

# A URL (streamable HTTP), a command (stdio), or an in-process `Server` (tests).
McpTarget = str | Sequence[str] | StdioServerParameters | Server[Any]
T = TypeVar("T")
R = TypeVar("R", bound=BaseModel)


def parse_error_text(text: str) -> tuple[str, str]:
    """(code, message) of an error result: our servers' `"<CODE>: ..."`, else
    OPERATION_FAILED with the text as its message."""
    match = _CODE.match(text)
    if match:
        return match.group(1), text
    return "OPERATION_FAILED", f"OPERATION_FAILED: {text or 'the tool reported an error'}"


def _client(target: McpTarget, timeout_s: float) -> Client:
    if isinstance(target, (str, StdioServerParameters, Server)):
        server: str | StdioServerParameters | Server[Any] = target
    else:
        argv = list(target)
        if not argv:
            raise ValueError("an MCP server command needs at least the executable")
        server = StdioServerParameters(command=argv[0], args=argv[1:])
    # Our results are plain data: no response caching, so every call reaches the server.
    return Client(server, read_timeout_seconds=timeout_s, cache=None)


def _describe(exc: BaseException) -> str:
    """The innermost cause, readable: task groups wrap the real error in a group."""
    while getattr(exc, "exceptions", None):  # an exception group (3.11+ or the backport)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class McpConnection:
    """One connected MCP client, shared by any number of episodes; JSON-RPC request ids keep
    their concurrent calls apart. Build it with `await McpConnection.open(...)`.

    The client lives on the loop that opened it, held by a task of its own (the SDK's
    transports must be entered and left in one task, and their streams belong to one loop).
    Episodes on that loop call it directly: a thread of its own would cost a GIL hand-over on
    every pipe read and write while the episodes' loop is busy. A call from another loop is
    handed over with `asyncio.run_coroutine_threadsafe` (the owner loop must be running in its
    thread). Close it with `aclose` on any loop, or `close` from a thread that is not the
    owner loop's."""

    def __init__(self, target: McpTarget, *, timeout_s: float = 30.0,
                 check_outputs: bool = True) -> None:
        self.target = target
        self.timeout_s = timeout_s
        # The SDK's `Client.call_tool` checks each structured result against the tool's output
        # schema (`ClientSession.validate_tool_result`), as the spec says clients SHOULD; for a
        # server whose outputs are checked by its own tests that is a quarter of the client's
        # CPU per call, so `check_outputs=False` sends the bare request instead.
        self.check_outputs = check_outputs
        self.tools: dict[str, types.Tool] = {}
        self._client: Client | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._holder: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()  # set on the owner loop: leave the client
        self._left = threading.Event()  # the holder has left the client
        self._lost = False

    @classmethod
    async def open(cls, target: McpTarget, *, timeout_s: float = 30.0,
                   check_outputs: bool = True) -> McpConnection:
        """Connect and list the tools (raises `ConnectionError` when the server cannot be
        reached: that is a setup failure, not an episode's)."""
        connection = cls(target, timeout_s=timeout_s, check_outputs=check_outputs)
        connection._loop = loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        connection._holder = loop.create_task(connection._hold(ready))
        try:
            await ready
        except BaseException as exc:
            await connection.aclose()
            if not isinstance(exc, Exception):
                raise
            raise ConnectionError(
                f"could not open MCP server {target!r}: {_describe(exc)}") from exc
        return connection

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with _client(self.target, self.timeout_s) as client:
                listing = await client.list_tools()
                self.tools = {t.name: t for t in listing.tools}
                self._client = client
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # a failed start, or the server went away
            if not ready.done():
                ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None
            self._lost = True
            self._left.set()

    @property
    def lost(self) -> bool:
        """The transport failed or the connection was closed: no call can get through."""
        return self._lost or self._client is None

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        meta: Mapping[str, Any] | None = None) -> types.CallToolResult:
        """The server's reply; raises `MCPError` (protocol) or the transport's exception."""
        client = self._client
        if client is None:
            raise ConnectionError("the MCP server connection is closed")
        sent: Any = dict(meta) if meta else None  # an open map (RequestParamsMeta)
        if self.check_outputs:
            call = client.call_tool(name, arguments, meta=sent)
        else:
            call = client.session.send_request(types.CallToolRequest(
                params=types.CallToolRequestParams(name=name, arguments=arguments, _meta=sent)),
                types.CallToolResult)
        try:
            return await self._on_loop(call)
        except MCPError as exc:
            self._lost |= exc.code == types.CONNECTION_CLOSED
            raise
        except Exception:
            self._lost = True
            raise

    async def request(self, request: Any, result_type: type[R]) -> R:
        """Send a request of a method the SDK has no call for (an extension's)."""
        client = self._client
        if client is None:
            raise ConnectionError("the MCP server connection is closed")
        return await self._on_loop(client.session.send_request(request, result_type))

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        if asyncio.get_running_loop() is self._loop:
            return await coro
        assert self._loop is not None
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the owner loop is closed
            coro.close()
            raise ConnectionError("the MCP server connection is closed") from None
        return await asyncio.wrap_future(future)

    async def aclose(self) -> None:
        """Leave the client (which ends a stdio server); never raises."""
        if asyncio.get_running_loop() is not self._loop:
            await asyncio.to_thread(self.close)
            return
        self._closing.set()
        if self._holder is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._holder), timeout=self.timeout_s)
            except (asyncio.TimeoutError, Exception):
                self._holder.cancel()

    def close(self) -> None:
        """`aclose` from a thread that is not running the owner loop (there it raises
        RuntimeError: it would wait on itself). With the owner loop closed already there is
        nothing left to run the exit on: a stdio server then ends when it reads end-of-file,
        at the latest when this process exits."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._left.is_set():
            return
        if _running_loop() is loop:
            raise RuntimeError("close() on the connection's own loop would wait on itself: "
                               "await aclose()")
        if loop.is_running():
            loop.call_soon_threadsafe(self._closing.set)
            if not self._left.wait(self.timeout_s) and self._holder is not None:
                loop.call_soon_threadsafe(self._holder.cancel)
        else:
            loop.run_until_complete(self.aclose())


class McpEnvironment:
    """One episode's calls through an MCP connection, as an `Environment`: its own call
    counts, clock and history. `meta` goes into every call's request `_meta`; `on_close` runs
    once, at `aclose`. Build it with `await open(...)`, or from a `SharedMcpServer`."""

    def __init__(self, connection: McpConnection, *, meta: Mapping[str, Any] | None = None,
                 on_close: Callable[[], Awaitable[Any]] | None = None) -> None:
        self.connection = connection
        self.meta = dict(meta) if meta else None
        self.clock_s = 0.0
        self.history: list[CallResult] = []
        self._calls: dict[str, int] = {}
        self._on_close = on_close

    @classmethod
    async def open(cls, target: McpTarget, *, timeout_s: float = 30.0) -> McpEnvironment:
        """A connection of the episode's own, closed with it (raises `ConnectionError`)."""
        connection = await McpConnection.open(target, timeout_s=timeout_s)
        return cls(connection, on_close=connection.aclose)

    @property
    def tools(self) -> dict[str, types.Tool]:
        return self.connection.tools

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(self.tools)

    async def aclose(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            with contextlib.suppress(Exception):  # a lost connection: nothing left to tell
                await on_close()

    async def call(self, name: str, arguments: Any) -> CallResult:
        if not isinstance(name, str) or name not in self.tools:
            return self._result(name, arguments, 0, None, "UNKNOWN_TOOL",
                                f"unknown tool {name!r}", 0.0, deterministic=True)
        n = self._calls[name] = self._calls.get(name, 0) + 1
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return self._record(self._result(
                name, arguments, n, None, "INVALID_INPUT",
                f"INVALID_INPUT: arguments must be a JSON object, got {type(arguments).__name__}",
                0.0, deterministic=True))
        start = time.perf_counter()
        try:
            reply = await self.connection.call_tool(name, arguments, self.meta)
        except MCPError as exc:
            code = _PROTOCOL_ERRORS.get(exc.code, "OPERATION_FAILED")
            return self._record(self._failure(name, arguments, n, code, exc.message, start))
        except Exception as exc:  # the transport: a dead process, a dropped connection
            detail = _describe(exc)
            return self._record(self._failure(
                name, arguments, n, "NETWORK_ERROR", f"MCP server unreachable ({detail})",
                start))
        self._replied()
        return self._record(self._from_reply(name, arguments, n, reply, start))

    def _replied(self) -> None:
        """The server answered a call (a subclass may send less from now on)."""

    def _from_reply(self, name: str, arguments: Any, n: int, reply: types.CallToolResult,
                    start: float) -> CallResult:
        meta = (reply.meta or {}).get(META_KEY) or {}
        latency = float(meta.get("latency_s", round(time.perf_counter() - start, 4)))
        self.clock_s = float(meta.get("clock_s", round(self.clock_s + latency, 4)))
        index = int(meta.get("call_index", n))
        deterministic = bool(meta.get("deterministic", False))
        event = meta.get("event") if isinstance(meta.get("event"), str) else None
        deviations = meta.get("deviations")
        text = "\n".join(c.text for c in reply.content if isinstance(c, types.TextContent))
        if reply.is_error:
            code, message = parse_error_text(text)
            return self._result(name, arguments, index, None, code, message, latency,
                                deterministic=deterministic, event=event)
        output = reply.structured_content
        if not isinstance(output, dict):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            output = decoded if isinstance(decoded, dict) else {"content": text}
        result = self._result(name, arguments, index, output, None, "ok", latency,
                              deterministic=False, event=event)
        if isinstance(deviations, list):
            result.deviations = tuple(str(d) for d in deviations)
        return result

    def _failure(self, name: str, arguments: Any, n: int, code: str, message: str,
                 start: float) -> CallResult:
        latency = round(time.perf_counter() - start, 4)
        self.clock_s = round(self.clock_s + latency, 4)
        return self._result(name, arguments, n, None, code, f"{code}: {message}", latency,
                            deterministic=False)

    def _result(self, name: Any, arguments: Any, n: int, output: dict[str, Any] | None,
                code: str | None, message: str, latency: float, *,
                deterministic: bool, event: str | None = None) -> CallResult:
        return CallResult(
            tool=str(name), arguments=arguments, call_index=n, ok=code is None, output=output,
            error_code=code, message=message, latency_s=latency, clock_s=self.clock_s,
            success_probability=None, deterministic=deterministic, event=event)

    def _record(self, result: CallResult) -> CallResult:
        self.history.append(result)
        return result


class SharedMcpServer:
    """Our many-episode MCP server (mcp_server.py) for a whole run: one server and one
    connection, opened by the first episode that asks, on its loop (the runner's), and shared
    by every episode after it. Each episode is its own simulator on the server, named by the
    episode's own id (a run's case id, the record's), one episode at a time. Close it with
    `aclose` on that loop, or `close` from another thread while that loop still runs
    (`ResiliSession.stop` does, before it stops the runner)."""

    def __init__(self, target: McpTarget | None = None, *, timeout_s: float = 30.0) -> None:
        self.target: McpTarget = server_command() if target is None else target
        self.timeout_s = timeout_s
        self.episodes_opened = 0
        self._lock = threading.Lock()
        self._connection: concurrent.futures.Future[McpConnection] | None = None
        self._opening: asyncio.Future[None] | None = None
        self._open_ids: set[str] = set()  # episodes open on the server now

    async def connection(self) -> McpConnection:
        """The connection, opened once, on the loop of the first episode that asks (raises
        `ConnectionError`, to every caller alike, when the server cannot be reached)."""
        with self._lock:
            future = self._connection
            first = future is None
            if future is None:
                future = self._connection = concurrent.futures.Future()
                # Running before anyone can wait on it: a cancelled waiter cannot cancel it.
                future.set_running_or_notify_cancel()
        if first:  # a task of its own, so that a cancelled first episode cancels nothing
            self._opening = asyncio.ensure_future(self._open(future))
        return await asyncio.shield(asyncio.wrap_future(future))

    async def _open(self, future: concurrent.futures.Future[McpConnection]) -> None:
        try:
            # Our server's outputs are the registry's, checked against its output schemas in
            # tests/unit/test_mcp_server.py: no second check per call here.
            future.set_result(await McpConnection.open(self.target, timeout_s=self.timeout_s,
                                                       check_outputs=False))
        except BaseException as exc:
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def environment(self, task: Task, *, episode_id: str, seed: int, repeat: int = 0,
                          base_success: float = DEFAULT_BASE_SUCCESS,
                          faults: str = "paper") -> McpEnvironment:
        """A new episode of `task`, keyed as in process; close it with `aclose`.

        `episode_id` names it on the server (its luck comes from the key): the episode's own
        id, deterministic like every id of a run. Two episodes may share a key (two variants
        of a task), so the server tells them apart by id alone, and an id already open here is
        refused (ValueError) rather than joined to the other episode's simulator."""
        with self._lock:
            if episode_id in self._open_ids:
                raise ValueError(f"MCP episode {episode_id!r} is open already")
            self._open_ids.add(episode_id)
        try:
            connection = await self.connection()
            if connection.lost:  # never run episodes against a server that is gone
                raise ConnectionError(f"the MCP server {self.target!r} went away")
        except BaseException:
            self._closed(episode_id)
            raise
        episode = ServedEpisode(episode_id, task, seed=seed, repeat=repeat,
                                base_success=base_success, faults=faults)
        self.episodes_opened += 1
        return _ServedEpisodeEnvironment(connection, episode,
                                         closed=functools.partial(self._closed, episode_id))

    def _closed(self, episode_id: str) -> None:
        with self._lock:
            self._open_ids.discard(episode_id)

    def close(self) -> None:
        """Close the connection (and so a stdio server), waiting for one being opened."""
        with self._lock:
            future, self._connection = self._connection, None
        if future is None:
            return
        try:
            connection = future.result(timeout=self.timeout_s)
        except Exception:  # never opened: nothing to close
            return
        connection.close()

    async def aclose(self) -> None:
        with self._lock:
            future, self._connection = self._connection, None
        if future is None:
            return
        try:
            connection = await asyncio.shield(asyncio.wrap_future(future))
        except Exception:
            return
        await connection.aclose()


class _ServedEpisodeEnvironment(McpEnvironment):
    """An episode on our many-episode server: its first calls carry the whole key (the
    first one the server answers opens the episode there), the later ones its id alone, and
    closing it tells the server to drop it."""

    def __init__(self, connection: McpConnection, episode: ServedEpisode, *,
                 closed: Callable[[], None]) -> None:
        close = CloseEpisode(params=CloseEpisodeParams(id=episode.id))

        async def on_close() -> None:
            try:
                await connection.request(close, types.EmptyResult)
            finally:  # told or not (a lost server), the id is free again
                closed()

        super().__init__(connection, meta={EPISODE_META_KEY: episode.to_meta()},
                         on_close=on_close)
        self._named = {EPISODE_META_KEY: {"id": episode.id}}

    def _replied(self) -> None:
        self.meta = self._named
