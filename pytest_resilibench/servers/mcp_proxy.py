"""A fault-injecting MCP proxy: a team's own MCP server behind our fault model (docs/CHAOS.md).

    resilibench proxy-mcp --upstream "mcp-server-git --repository /repo" --faults realistic \\
        --seed 7 --trace-dir traces/

serves, over stdio or streamable HTTP, exactly the upstream server's tools (the upstream's
`tools/list` answer, names, schemas and descriptions untouched) and forwards every call,
deciding first with `core/tool_faults.FaultSession` whether it fails and how. An injected
error is an `isError` result whose text is `"<CODE>: <message>"`, as our simulator's MCP server
says it (mcp_environment.parse_error_text reads it back); a rate limit adds `retry_after` (in
calls) under `_meta["resilibench/call"]`. A silent fault returns the upstream's success with
its content emptied or cut to half, and says nothing.

Sessions: the 2026-07-28 revision of MCP has no protocol sessions, so a call names its fault
session in `_meta["resilibench/session"]` (any string); a call naming none belongs to the
proxy's own session (`--session`, default "0"). Each session has its own call counts and
draws: the same seed, session and calls meet the same faults, whatever else the proxy serves.

With a trace folder, each session appends one JSON line per call to `<session>.jsonl`: the
call's sequence number in the session, tool, call index, arguments, injected fault (or null)
and what the upstream answered (or null where it was not called), credentials redacted. No
clock goes in, so two runs of the same calls against the same upstream write the same bytes.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError, StdioServerParameters
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from pytest_resilibench import __version__
from pytest_resilibench.base.redact import redact_json
from pytest_resilibench.core.tool_faults import Fault, FaultConfig, FaultSession, silent_value
from pytest_resilibench.servers.mcp_environment import McpConnection
from pytest_resilibench.servers.mcp_server import META_KEY, _pipes

__all__ = [
    "SESSION_META_KEY",
    "FaultProxy",
    "build_proxy",
    "parse_overrides",
    "parse_rate",
    "serve_proxy_http",
    "serve_proxy_stdio",
    "spoil",
    "upstream_target",
]

SESSION_META_KEY = "resilibench/session"
_TRACE_TEXT = 2000  # characters of an upstream answer kept in the trace
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def upstream_target(command: str | None = None, url: str | None = None) -> Any:
    """What McpConnection opens: a URL, or a command line split as a shell would."""
    import shlex

    if (command is None) == (url is None):
        raise ValueError("give exactly one of --upstream \"CMD ARGS\" and --upstream-url URL")
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--upstream-url must be an http(s) URL, got {url!r}")
        return url
    argv = shlex.split(command or "")
    if not argv:
        raise ValueError("--upstream needs a command")
    return StdioServerParameters(command=argv[0], args=argv[1:])


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def spoil(result: types.CallToolResult, mode: str) -> types.CallToolResult:
    """A success silently emptied or cut: texts and structured values (keys kept, so an
    output schema's shape holds); other content blocks dropped when emptied."""
    structured = result.structured_content
    if structured is not None:
        structured = {k: silent_value(v, mode) for k, v in structured.items()}
    content: list[Any] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            text = block.text
            if structured is not None and _json_equal(text, result.structured_content):
                text = json.dumps(structured)
            else:
                text = silent_value(text, mode)
            content.append(block.model_copy(update={"text": text}))
        elif mode == "truncate":
            content.append(block)
    return result.model_copy(update={"content": content, "structured_content": structured})


def _json_equal(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def error_result(fault: Fault) -> types.CallToolResult:
    meta: dict[str, Any] = {"error_code": fault.code}
    if fault.retry_after is not None:
        meta["retry_after"] = fault.retry_after
    return types.CallToolResult(content=[types.TextContent(type="text", text=fault.message)],
                                is_error=True, _meta={META_KEY: meta})


class FaultProxy:
    """The proxy's state: the upstream connection (opened on first use, on the serving loop),
    the fault sessions and their trace files."""

    def __init__(self, target: Any, config: FaultConfig, *, session: str = "0",
                 trace_dir: Path | None = None, timeout_s: float = 30.0) -> None:
        self.target = target
        self.config = config
        self.default_session = session
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        self.timeout_s = timeout_s
        self.sessions: dict[str, FaultSession] = {}
        self._seq: dict[str, int] = {}
        self._upstream: McpConnection | None = None
        self._opening: asyncio.Lock | None = None

    async def upstream(self) -> McpConnection:
        if self._upstream is None:
            self._opening = self._opening or asyncio.Lock()
            async with self._opening:
                if self._upstream is None:
                    self._upstream = await McpConnection.open(
                        self.target, timeout_s=self.timeout_s, check_outputs=False)
        return self._upstream

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()

    async def tools(self) -> list[types.Tool]:
        return list((await self.upstream()).tools.values())

    def session(self, meta: Mapping[str, Any] | None) -> FaultSession:
        name = (meta or {}).get(SESSION_META_KEY, self.default_session)
        if not isinstance(name, (str, int)) or isinstance(name, bool) or not str(name):
            raise ValueError(f"_meta[{SESSION_META_KEY!r}] must be a non-empty string")
        name = str(name)
        found = self.sessions.get(name)
        if found is None:
            found = self.sessions[name] = FaultSession(self.config, name)
        return found

    async def call(self, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            session = self.session(params.meta)
        except ValueError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        name, arguments = params.name, dict(params.arguments or {})
        n, fault = session.decide(name, arguments)
        answer: types.CallToolResult | None = None
        if fault is None or fault.upstream:
            upstream = await self.upstream()
            meta = {k: v for k, v in (params.meta or {}).items() if k != SESSION_META_KEY}
            try:
                answer = await upstream.call_tool(name, arguments, meta or None)
            except MCPError:
                self._trace(session.session, name, n, arguments, fault, None)
                raise  # the upstream's own protocol error, passed on as it is
            except Exception as exc:  # the upstream is gone: a tool error, not a crash
                answer = types.CallToolResult(content=[types.TextContent(
                    type="text", text=f"NETWORK_ERROR: the upstream server failed: "
                                      f"{type(exc).__name__}")], is_error=True)
        ok = answer is not None and not answer.is_error
        session.settle(name, ok and (fault is None or not fault.is_error))
        self._trace(session.session, name, n, arguments, fault, answer)
        if fault is not None and fault.is_error:
            return error_result(fault)
        assert answer is not None
        if fault is not None and ok:  # silent: only a success can be spoiled
            return spoil(answer, fault.mode or "empty")
        return answer

    def _trace(self, session: str, tool: str, n: int, arguments: Any, fault: Fault | None,
               answer: types.CallToolResult | None) -> None:
        seq = self._seq[session] = self._seq.get(session, 0) + 1
        if self.trace_dir is None:
            return
        upstream = None if answer is None else {
            "is_error": bool(answer.is_error), "text": text_of(answer)[:_TRACE_TEXT]}
        line = {"session": session, "seq": seq, "tool": tool, "call_index": n,
                "arguments": arguments, "fault": None if fault is None else fault.to_json(),
                "upstream": upstream}
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        path = self.trace_dir / f"{_SAFE.sub('_', session)}.jsonl"
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(redact_json(line), sort_keys=True) + "\n")


def build_proxy(proxy: FaultProxy, *, name: str = "resilibench-proxy") -> Server[Any]:
    """A low-level MCP server listing the upstream's tools as they are and forwarding calls
    through the proxy's fault sessions."""

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await proxy.tools())

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await proxy.call(params)

    return Server(name, version=__version__,
                  instructions="ResiliBench fault-injecting proxy: the upstream server's tools, "
                               "some calls failing as a real service's would.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve_proxy_stdio(proxy: FaultProxy) -> None:
    async def run() -> None:
        try:  # a broken upstream fails here, before any client waits
            await proxy.upstream()
        except ConnectionError as exc:  # a usage error (the CLI's message), not a listen error
            raise ValueError(str(exc)) from None
        try:
            server = build_proxy(proxy)
            pipes = await _pipes()
            streams = stdio_server() if pipes is None else stdio_server(*pipes)  # type: ignore[arg-type]
            async with streams as (read_stream, write_stream):
                await server.run(read_stream, write_stream,
                                 server.create_initialization_options())
        finally:
            await proxy.aclose()

    anyio.run(run)


def serve_proxy_http(proxy: FaultProxy, *, port: int = 0, host: str | None = None,
                     api_key: str | None = None) -> None:
    """Streamable HTTP (`/mcp`) in the foreground; the upstream opens on the first request."""
    from pytest_resilibench.servers.mcp_server import serve_http

    serve_http(build_proxy(proxy), port=port, host=host, api_key=api_key)


def parse_rate(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def parse_overrides(pairs: Sequence[str], *, what: str) -> dict[str, str]:
    """`NAME=VALUE` pairs (the CLI's repeated options) as a mapping; ValueError says which."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{what} wants NAME=VALUE, got {pair!r}")
        out[name] = value
    return out
