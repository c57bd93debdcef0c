"""The simulator as an MCP tool server, so any MCP-capable agent can be benchmarked.

`resilibench serve-mcp --task t0421 --seed 7` (or `python -m pytest_resilibench.cli serve-mcp
...`) serves the registry's MCP tool definitions over stdio or streamable HTTP. Every call goes
through a `Simulator` keyed exactly as the episode runner keys it, (seed, task, repeat), so the
same sequence of calls meets the same seeded failures as in process.

One server serves many episodes. A call names its episode in its request `_meta`: the MCP
specification (Basic protocol, "General fields: _meta") lets implementations add keys of their
own under a prefix, and since the 2026-07-28 revision, which removed protocol sessions, every
request carries its own context there (its version and client capabilities too):

    "_meta": {"resilibench/episode": {"id": "<the episode's id>", "seed": 0, "repeat": 0,
              "base_success": 0.8, "faults": "paper", "task": {<the task's JSON>}}}

The first call with a new id opens that episode: a fresh simulator built from the key and the
task it carries (so the server needs no fixtures), exactly as the episode runner builds its own.
Later calls are matched by id; they may carry the id alone (`{"id": ...}`), as our client's
do once the server has answered one. The `resilibench/episodes/close` request (`{"id": ...}`, a
method of our own: the SDK routes methods outside the spec to `Server.add_request_handler`)
drops the episode. Episodes never share state, whatever their keys: two variants of one task
meet the same luck, each from a fresh simulator, even at the same time. A call without the
key goes to the server's own episode, the one `--task` names (single-episode mode, for a
user's MCP agent); without `--task` such a call is an invalid-params error.

Results: a success is the output as structured content plus the same JSON as text; a failure is
an `isError` result whose text is `"<CODE>: <message>"` (the simulator's own message). `_meta`
carries the call's bookkeeping (`resilibench/call`: call index, simulated latency and clock,
the realistic profile's event, the task values it deviated from), never its hidden probability.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from pytest_resilibench import __version__
from pytest_resilibench.base.names import DATA_FLOWS
from pytest_resilibench.core.faults import FAULT_PROFILES, task_faults
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.simulator import (
    DEFAULT_BASE_SUCCESS,
    CallResult,
    EpisodeKey,
    Simulator,
)
from pytest_resilibench.core.tasks import Task

__all__ = [
    "CLOSE_EPISODE",
    "EPISODE_META_KEY",
    "META_KEY",
    "CloseEpisode",
    "CloseEpisodeParams",
    "EpisodeTable",
    "ServedEpisode",
    "build_server",
    "error_text",
    "serve_http",
    "serve_stdio",
    "server_command",
    "task_simulator",
    "to_mcp_result",
]

META_KEY = "resilibench/call"
EPISODE_META_KEY = "resilibench/episode"
CLOSE_EPISODE = "resilibench/episodes/close"


def server_command() -> list[str]:
    """The argv of a many-episode server on stdio, in this interpreter: the CLI's `serve-mcp`,
    the one entry point of the server (the servers never import the application)."""
    return [sys.executable, "-m", "pytest_resilibench.cli", "serve-mcp"]


@dataclass(frozen=True)
class ServedEpisode:
    """What a call's `_meta` says about its episode: its id (the client's name for it, unique
    among the episodes open on the server), and the task and key its simulator is built from
    (as `episode.run_episode` builds its in-process one)."""

    id: str
    task: Task
    seed: int
    repeat: int = 0
    base_success: float = DEFAULT_BASE_SUCCESS
    faults: str = "paper"  # the fault profile (faults.FAULT_PROFILES)

    def to_meta(self) -> dict[str, Any]:
        return {"id": self.id, "seed": self.seed, "repeat": self.repeat,
                "base_success": self.base_success, "faults": self.faults,
                "task": self.task.to_json(), "data_flow": self.task.data_flow}

    @classmethod
    def from_meta(cls, meta: Any) -> ServedEpisode:
        """Raises ValueError, saying what is wrong, on anything but a well-formed key."""
        if not isinstance(meta, Mapping):
            raise ValueError(f"_meta[{EPISODE_META_KEY!r}] must be an object")
        want: dict[str, Any] = {"id": str, "seed": int, "repeat": int,
                                "base_success": (int, float), "faults": str, "task": Mapping}
        for name, kind in want.items():
            value = meta.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"_meta[{EPISODE_META_KEY!r}].{name} is missing or malformed")
        if meta["faults"] not in FAULT_PROFILES:
            raise ValueError(f"unknown fault profile {meta['faults']!r}")
        # Its set's, which the task's JSON does not hold (tasks.py `data_flow_of`); a client
        # that sends none (before issue 50) meant the inferred one.
        data_flow = meta.get("data_flow", "inferred")
        if data_flow not in DATA_FLOWS:
            raise ValueError(f"unknown data flow {data_flow!r}")
        try:
            task = Task.from_json(meta["task"], data_flow=data_flow)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"_meta[{EPISODE_META_KEY!r}].task is not a task: {exc!r}") from None
        return cls(id=meta["id"], task=task, seed=meta["seed"], repeat=meta["repeat"],
                   base_success=float(meta["base_success"]), faults=meta["faults"])

    def simulator(self, registry: ToolRegistry) -> Simulator:
        task = self.task
        profile = None if self.faults == "paper" else task_faults(task, registry)
        return Simulator(registry, EpisodeKey(self.seed, task.id, self.repeat),
                         task_tools=task.required_tools, inputs=task.inputs,
                         base_success=self.base_success, faults=profile,
                         data_flow=task.flow_under(self.faults))


class CloseEpisodeParams(types.RequestParams):
    id: str


class CloseEpisode(types.Request[CloseEpisodeParams, Literal["resilibench/episodes/close"]]):
    """Client to server: the episode `params.id` is over; its simulator can go. A request,
    not a notification: the 2026-07-28 revision defines no client notifications, and the
    SDK's in-process transport drops them."""

    method: Literal["resilibench/episodes/close"] = "resilibench/episodes/close"


class EpisodeTable:
    """The simulators of the episodes a server is serving, by the id their client gave them;
    `default` (single-episode mode) takes the calls that name no episode."""

    def __init__(self, registry: ToolRegistry | None = None, *,
                 default: Simulator | None = None) -> None:
        self.registry = registry or (default.registry if default else default_registry())
        self.default = default
        self._open: dict[str, Simulator] = {}

    def __len__(self) -> int:
        """Episodes open now (the default one not counted)."""
        return len(self._open)

    def simulator(self, meta: Mapping[str, Any] | None) -> Simulator:
        """The simulator of the episode a call's `_meta` names (raises ValueError)."""
        key = (meta or {}).get(EPISODE_META_KEY)
        if key is None:
            if self.default is None:
                raise ValueError("this server serves many episodes: every tools/call needs "
                                 f"_meta[{EPISODE_META_KEY!r}] "
                                 "(pytest_resilibench/servers/mcp_server.py)")
            return self.default
        episode_id = key.get("id") if isinstance(key, Mapping) else None
        simulator = self._open.get(episode_id) if isinstance(episode_id, str) else None
        if simulator is None:
            if isinstance(key, Mapping) and set(key) == {"id"}:
                raise ValueError(f"no open episode {episode_id!r}: the first call of an "
                                 "episode carries its whole key")
            episode = ServedEpisode.from_meta(key)
            simulator = self._open[episode.id] = episode.simulator(self.registry)
        return simulator

    def close(self, episode_id: str) -> None:
        self._open.pop(episode_id, None)


def error_text(result: CallResult) -> str:
    """`"<CODE>: <message>"`: what our MCP servers say on failure (parsed back by clients)."""
    code = result.error_code or "OPERATION_FAILED"
    return result.message if result.message.startswith(f"{code}:") else f"{code}: {result.message}"


def to_mcp_result(result: CallResult) -> types.CallToolResult:
    call: dict[str, Any] = {"call_index": result.call_index, "latency_s": result.latency_s,
            "clock_s": result.clock_s, "deterministic": result.deterministic}
    if result.event is not None:
        call["event"] = result.event
    if result.deviations:  # bookkeeping for the output condition (scoring.py)
        call["deviations"] = list(result.deviations)
    meta = {META_KEY: call}
    if result.ok:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result.output))],
            structured_content=result.output, _meta=meta)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error_text(result))], is_error=True,
        _meta=meta)


def build_server(episodes: Simulator | EpisodeTable | None = None, *,
                 name: str = "resilibench") -> Server[Any]:
    """A low-level MCP server whose tools are the registry's, with our own schemas. Given a
    `Simulator`, calls that name no episode go to it; given nothing, every call must."""
    table = episodes if isinstance(episodes, EpisodeTable) else EpisodeTable(default=episodes)
    # A one-task server says its task's data-flow rule in the schemas (registry.py
    # `EXPLICIT_FLOW`); a many-episode one lists the tools once, as the inferred flow words
    # them, and each episode's prompt says its own rule.
    flow = table.default.data_flow if table.default is not None else "inferred"
    tools = [types.Tool.model_validate(d) for d in table.registry.to_mcp(data_flow=flow)]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            simulator = table.simulator(params.meta)
        except ValueError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        # Synchronous and await-free: calls are atomic on the event loop, in arrival order.
        return to_mcp_result(simulator.call(params.name, params.arguments))

    async def close_episode(_ctx: Any, params: CloseEpisodeParams) -> types.EmptyResult:
        table.close(params.id)
        return types.EmptyResult()

    about = (f"for task {table.default.key.task_id}" if table.default is not None
             else f"for the episode each call names in _meta[{EPISODE_META_KEY!r}]")
    server: Server[Any] = Server(
        name, version=__version__,
        instructions=f"ResiliBench simulated tools {about}: tools fail at random; errors "
                     "carry a code and a message.",
        on_list_tools=list_tools, on_call_tool=call_tool)
    # SDK: "Register a request handler for `method`" (Server.add_request_handler); the runner
    # looks up a method outside the spec's list among the registered handlers.
    server.add_request_handler(CLOSE_EPISODE, CloseEpisodeParams, close_episode)
    return server


def task_simulator(task: Task, *, seed: int = 0, repeat: int = 0,
                   base_success: float = DEFAULT_BASE_SUCCESS,
                   faults: str = "paper") -> Simulator:
    """The simulator of one episode, built exactly as the episode runner builds it."""
    episode = ServedEpisode("", task, seed=seed, repeat=repeat, base_success=base_success,
                            faults=faults)
    return episode.simulator(default_registry())


class _LinesIn:
    """The wire's input as the async text lines `stdio_server` iterates over."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _LinesIn:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _LinesOut:
    """The wire's output as the async `write` / `flush` that `stdio_server` calls."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


async def _pipes() -> tuple[_LinesIn, _LinesOut] | None:
    """stdin and stdout as asyncio pipes, or None when they are not pipes (a file, a tty).

    The SDK's `stdio_server()` wraps them in anyio's thread-backed files: a worker-thread hop
    per line read and per line written, most of a call's cost on a busy machine. Given streams
    of our own it uses them as they are (mcp/server/stdio.py: "Explicit streams skip the
    claim"), so the claim is done here the same way: the wire moves to private descriptors,
    fd 0 reads the null device and fd 1 writes to stderr, so stray output misses the wire.

    Only FIFOs and sockets: asyncio also takes a character device (`< /dev/null`, a tty) as a
    pipe, and then epoll refuses it in a callback, a traceback on stderr and no EOF."""
    if not all(_is_pipe(fd) for fd in (0, 1)):
        return None
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    try:
        reader = asyncio.StreamReader(limit=2**24, loop=loop)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                                     os.fdopen(wire_in, "rb", buffering=0))
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0))
    except (OSError, ValueError):  # not a pipe: the SDK's own file handling
        for fd in (wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.close(fd)
        return None
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return _LinesIn(reader), _LinesOut(writer)


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:  # closed
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def serve_stdio(server: Server[Any]) -> None:
    async def run() -> None:
        pipes = await _pipes()
        streams = stdio_server() if pipes is None else stdio_server(*pipes)  # type: ignore[arg-type]
        async with streams as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


def serve_http(server: Server[Any], *, port: int = 0, host: str | None = None,
               api_key: str | None = None) -> None:
    """Streamable HTTP (`/mcp`) in the foreground, on 127.0.0.1 unless `host` says otherwise;
    port 0 picks a free one. With `api_key`, only requests bearing it are served."""
    from pytest_resilibench.servers.loopback import LOOPBACK, http_url, loopback_socket, serve

    host = host or LOOPBACK
    sock = loopback_socket(port, host=host)
    print(f"resilibench MCP server on {http_url(host, sock.getsockname()[1])}/mcp",
          file=sys.stderr, flush=True)
    # The SDK turns on its DNS-rebinding guard for the loopback hosts it knows.
    serve(server.streamable_http_app(host=host), sock, api_key=api_key)
