"""`McpEnvironment`: an episode's tool calls sent to any MCP tool server (ours or another).

    env = await McpEnvironment.open("http://127.0.0.1:8000/mcp")            # streamable HTTP
    env = await McpEnvironment.open([sys.executable, "-m", "pytest_resilibench.mcp_server",
                                     "--task", "t0421"])                   # stdio subprocess
    record = await run_episode(task, variant, agent, ..., environment=env)
    await env.aclose()

Results map onto `CallResult`: an `isError` result from our servers reads `"<CODE>: <message>"`,
so the code is parsed back; a foreign server's failure is OPERATION_FAILED. Protocol and
transport trouble become error results, never exceptions into the episode: a request timeout is
TIMEOUT, a JSON-RPC invalid-params error INVALID_INPUT, a dead or unreachable server
NETWORK_ERROR.

The MCP client lives in a task of its own, so the environment may be opened, used and closed
from different asyncio tasks (the SDK's transports must be entered and left in one task).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters

from pytest_resilibench.simulator import CallResult

__all__ = ["McpEnvironment", "parse_error_text"]

_CODE = re.compile(r"^([A-Z][A-Z0-9_]{2,}):\s*")
_META_KEY = "resilibench/call"  # mcp_server.META_KEY, kept here to avoid importing the server
# JSON-RPC error codes (mcp_types) as our error codes; other protocol errors: OPERATION_FAILED.
_PROTOCOL_ERRORS = {
    types.INVALID_PARAMS: "INVALID_INPUT",
    types.REQUEST_TIMEOUT: "TIMEOUT",
    types.CONNECTION_CLOSED: "NETWORK_ERROR",
}

McpTarget = str | Sequence[str] | StdioServerParameters


def parse_error_text(text: str) -> tuple[str, str]:
    """(code, message) of an error result: our servers' `"<CODE>: ..."`, else
    OPERATION_FAILED with the text as its message."""
    match = _CODE.match(text)
    if match:
        return match.group(1), text
    return "OPERATION_FAILED", f"OPERATION_FAILED: {text or 'the tool reported an error'}"


def _client(target: McpTarget, timeout_s: float) -> Client:
    if isinstance(target, str):
        server: str | StdioServerParameters = target
    elif isinstance(target, StdioServerParameters):
        server = target
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


class McpEnvironment:
    """A connected MCP tool server as an `Environment`. Build it with `await open(...)`."""

    def __init__(self, target: McpTarget, *, timeout_s: float = 30.0) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self.tools: dict[str, types.Tool] = {}
        self.clock_s = 0.0
        self.history: list[CallResult] = []
        self._client: Client | None = None
        self._calls: dict[str, int] = {}
        self._closing = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, target: McpTarget, *, timeout_s: float = 30.0) -> McpEnvironment:
        """Connect, list the tools, and return the environment (raises `ConnectionError`
        when the server cannot be reached: that is a setup failure, not an episode's)."""
        env = cls(target, timeout_s=timeout_s)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        env._holder = asyncio.create_task(env._hold(ready))
        try:
            await ready
        except BaseException as exc:
            await env.aclose()
            raise ConnectionError(
                f"could not open MCP server {target!r}: {_describe(exc)}") from exc
        return env

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        """Own the client's context for the environment's lifetime (one task enters and
        leaves it, as anyio requires)."""
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

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(self.tools)

    async def aclose(self) -> None:
        self._closing.set()
        if self._holder is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._holder), timeout=10)
            except (asyncio.TimeoutError, Exception):
                self._holder.cancel()
            self._holder = None

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
        client = self._client
        try:
            if client is None:
                raise ConnectionError("the MCP server connection is closed")
            reply = await client.call_tool(name, arguments)
        except MCPError as exc:
            code = _PROTOCOL_ERRORS.get(exc.code, "OPERATION_FAILED")
            return self._record(self._failure(name, arguments, n, code, exc.message, start))
        except Exception as exc:  # the transport: a dead process, a dropped connection
            detail = _describe(exc)
            return self._record(self._failure(
                name, arguments, n, "NETWORK_ERROR", f"MCP server unreachable ({detail})",
                start))
        return self._record(self._from_reply(name, arguments, n, reply, start))

    def _from_reply(self, name: str, arguments: Any, n: int, reply: types.CallToolResult,
                    start: float) -> CallResult:
        meta = (reply.meta or {}).get(_META_KEY) or {}
        latency = float(meta.get("latency_s", round(time.perf_counter() - start, 4)))
        self.clock_s = float(meta.get("clock_s", round(self.clock_s + latency, 4)))
        index = int(meta.get("call_index", n))
        deterministic = bool(meta.get("deterministic", False))
        text = "\n".join(c.text for c in reply.content if isinstance(c, types.TextContent))
        if reply.is_error:
            code, message = parse_error_text(text)
            return self._result(name, arguments, index, None, code, message, latency,
                                deterministic=deterministic)
        output = reply.structured_content
        if not isinstance(output, dict):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            output = decoded if isinstance(decoded, dict) else {"content": text}
        return self._result(name, arguments, index, output, None, "ok", latency,
                            deterministic=False)

    def _failure(self, name: str, arguments: Any, n: int, code: str, message: str,
                 start: float) -> CallResult:
        latency = round(time.perf_counter() - start, 4)
        self.clock_s = round(self.clock_s + latency, 4)
        return self._result(name, arguments, n, None, code, f"{code}: {message}", latency,
                            deterministic=False)

    def _result(self, name: Any, arguments: Any, n: int, output: dict[str, Any] | None,
                code: str | None, message: str, latency: float, *,
                deterministic: bool) -> CallResult:
        return CallResult(
            tool=str(name), arguments=arguments, call_index=n, ok=code is None, output=output,
            error_code=code, message=message, latency_s=latency, clock_s=self.clock_s,
            success_probability=None, deterministic=deterministic)

    def _record(self, result: CallResult) -> CallResult:
        self.history.append(result)
        return result
