"""The simulator of one task as an MCP tool server, so any MCP-capable agent can be benchmarked.

`resilibench serve-mcp --task t0421 --seed 7` (or `python -m pytest_resilibench.mcp_server
...`) serves the registry's MCP tool definitions over stdio or streamable HTTP. Every call goes
through one `Simulator` keyed exactly as the episode runner keys it, (seed, task, repeat), so the
same sequence of calls meets the same seeded failures as in process. One server is one episode:
its history and luck are shared by every connection it accepts.

Results: a success is the output as structured content plus the same JSON as text; a failure is
an `isError` result whose text is `"<CODE>: <message>"` (the simulator's own message). `_meta`
carries the call's bookkeeping (`resilibench/call`: call index, simulated latency and clock),
never its hidden probability.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from pytest_resilibench import __version__
from pytest_resilibench.registry import default_registry
from pytest_resilibench.simulator import (
    DEFAULT_BASE_SUCCESS,
    CallResult,
    EpisodeKey,
    Simulator,
)
from pytest_resilibench.tasks import FIXTURES_DIR, Task, load_tasks

__all__ = [
    "META_KEY",
    "build_server",
    "error_text",
    "serve_http",
    "serve_stdio",
    "task_simulator",
    "to_mcp_result",
]

META_KEY = "resilibench/call"


def error_text(result: CallResult) -> str:
    """`"<CODE>: <message>"`: what our MCP servers say on failure (parsed back by clients)."""
    code = result.error_code or "OPERATION_FAILED"
    return result.message if result.message.startswith(f"{code}:") else f"{code}: {result.message}"


def to_mcp_result(result: CallResult) -> types.CallToolResult:
    meta = {META_KEY: {"call_index": result.call_index, "latency_s": result.latency_s,
                       "clock_s": result.clock_s, "deterministic": result.deterministic}}
    if result.ok:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result.output))],
            structured_content=result.output, _meta=meta)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error_text(result))], is_error=True,
        _meta=meta)


def build_server(simulator: Simulator, *, name: str = "resilibench") -> Server[Any]:
    """A low-level MCP server whose tools are the simulator's registry, with our own schemas."""
    tools = [types.Tool.model_validate(d) for d in simulator.registry.to_mcp()]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # Synchronous and await-free: calls are atomic on the event loop, in arrival order.
        return to_mcp_result(simulator.call(params.name, params.arguments))

    return Server(
        name, version=__version__,
        instructions=f"ResiliBench simulated tools for task {simulator.key.task_id}: tools fail "
                     "at random; errors carry a code and a message.",
        on_list_tools=list_tools, on_call_tool=call_tool)


def find_task(task_id: str, fixtures: Path = FIXTURES_DIR) -> Task:
    task = load_tasks(Path(fixtures)).by_id.get(task_id)
    if task is None:
        raise KeyError(f"no task {task_id!r} in {fixtures}")
    return task


def task_simulator(task: Task, *, seed: int = 0, repeat: int = 0,
                   base_success: float = DEFAULT_BASE_SUCCESS) -> Simulator:
    """The simulator of one episode, built exactly as the episode runner builds it."""
    return Simulator(default_registry(), EpisodeKey(seed, task.id, repeat),
                     task_tools=task.required_tools, inputs=task.inputs,
                     base_success=base_success)


def serve_stdio(server: Server[Any]) -> None:
    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


def serve_http(server: Server[Any], *, port: int = 0) -> None:
    """Streamable HTTP on 127.0.0.1 (`/mcp`), in the foreground; port 0 picks a free one."""
    import socket
    import sys

    import uvicorn

    from pytest_resilibench.live.server import LOOPBACK

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    print(f"resilibench MCP server on http://{LOOPBACK}:{sock.getsockname()[1]}/mcp",
          file=sys.stderr, flush=True)
    app = server.streamable_http_app(host=LOOPBACK)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    """`python -m pytest_resilibench.mcp_server ARGS` is `resilibench serve-mcp ARGS`."""
    import sys

    from pytest_resilibench.cli import main as cli_main

    return cli_main(["serve-mcp", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
