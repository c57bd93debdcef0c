"""`McpEnvironment` against our MCP server (stdio subprocess) and a foreign one (streamable
HTTP on loopback): results, codes, and transport failures as error results."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.server.lowlevel import Server

from pytest_resilibench.environment import Environment, SimulatedEnvironment
from pytest_resilibench.live.server import LOOPBACK, LoopbackServer
from pytest_resilibench.mcp_environment import McpEnvironment, parse_error_text
from pytest_resilibench.mcp_server import task_simulator
from pytest_resilibench.tasks import Task

TASK = Task(
    id="t9002", type="simple_task", difficulty="easy", description="read a csv, write it back",
    inputs={"path": "/data/in.csv", "format": "csv", "destination": "/data/out.csv"},
    expected_outputs={}, required_tools=("file_operations_reader", "file_operations_writer"))
SEED, BASE = 5, 0.6
CALLS: list[tuple[str, Any]] = [
    ("file_operations_writer", {"destination": "/data/out.csv"}),
    *[("file_operations_reader", {"path": "/data/in.csv"})] * 3,
    ("file_operations_reader", {"path": "/elsewhere.csv"}),
    ("no_such_tool", {}),
    *[("file_operations_writer", {"destination": "/data/out.csv", "format": "csv"})] * 4,
]


@pytest.fixture
def fixtures_dir(tmp_path: Path) -> Path:
    with gzip.open(tmp_path / "tasks.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(TASK.to_json()) + "\n")
    return tmp_path


def _key(r: Any) -> tuple[Any, ...]:
    return (r.tool, r.ok, r.error_code, r.message, r.output, r.call_index, r.latency_s,
            r.clock_s, r.deterministic)


def test_our_server_over_stdio_gives_the_simulated_environments_results(fixtures_dir: Path
                                                                         ) -> None:
    command = [sys.executable, "-m", "pytest_resilibench.mcp_server", "--task", TASK.id,
               "--seed", str(SEED), "--base-success", str(BASE), "--fixtures",
               str(fixtures_dir)]

    async def run() -> tuple[list[Any], list[Any]]:
        remote = await McpEnvironment.open(command)
        local = SimulatedEnvironment(task_simulator(TASK, seed=SEED, base_success=BASE))
        assert isinstance(remote, Environment)
        assert remote.tool_names == local.tool_names
        try:
            got = [await remote.call(n, a) for n, a in CALLS]
        finally:
            await remote.aclose()
        want = [await local.call(n, a) for n, a in CALLS]
        return got, want

    got, want = asyncio.run(run())
    assert [_key(r) for r in got] == [_key(r) for r in want]
    assert {r.error_code for r in got} >= {"UNKNOWN_TOOL", "INVALID_INPUT"}


def _foreign_server() -> Server[Any]:
    """Someone else's MCP server: plain-text results, errors without our codes, a slow tool."""
    tools = [types.Tool(name=n, input_schema={"type": "object"}) for n in ("echo", "fail", "slow")]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "slow":
            await asyncio.sleep(3)
        if params.name == "fail":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="disk on fire")], is_error=True)
        text = f"echo {params.arguments}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("foreign", on_list_tools=list_tools, on_call_tool=call_tool)


def test_foreign_server_results_and_failures_map_onto_our_taxonomy() -> None:
    http = LoopbackServer(_foreign_server().streamable_http_app(host=LOOPBACK))
    http.start()

    async def run() -> list[Any]:
        env = await McpEnvironment.open(f"{http.url}/mcp", timeout_s=0.5)
        try:
            results = [await env.call("echo", {"x": 1}), await env.call("fail", {}),
                       await env.call("slow", {}), await env.call("echo", "not an object"),
                       await env.call("missing", {})]
            http.stop()  # the server goes away mid-episode
            results.append(await env.call("echo", {}))
        finally:
            await env.aclose()
        return results

    try:
        echo, fail, slow, bad_args, unknown, gone = asyncio.run(run())
    finally:
        http.stop()
    assert echo.ok and echo.output == {"content": "echo {'x': 1}"} and echo.call_index == 1
    assert (fail.error_code, fail.message) == ("OPERATION_FAILED",
                                               "OPERATION_FAILED: disk on fire")
    assert slow.error_code == "TIMEOUT" and not slow.ok
    assert bad_args.error_code == "INVALID_INPUT" and bad_args.deterministic
    assert unknown.error_code == "UNKNOWN_TOOL" and unknown.call_index == 0
    assert gone.error_code == "NETWORK_ERROR" and not gone.ok, gone.message
    assert echo.clock_s <= fail.clock_s <= slow.clock_s


def test_unreachable_server_fails_at_open_with_a_clear_message() -> None:
    async def run() -> None:
        await McpEnvironment.open(f"http://{LOOPBACK}:9/mcp", timeout_s=2)

    with pytest.raises(ConnectionError, match=r"could not open MCP server .*ConnectError"):
        asyncio.run(run())


@pytest.mark.parametrize(("text", "code"), [
    ("TIMEOUT: network_fetcher did not answer within 15s", "TIMEOUT"),
    ("RATE_LIMITED: too many requests", "RATE_LIMITED"),
    ("something broke", "OPERATION_FAILED"),
    ("Error: lowercase prefix is not ours", "OPERATION_FAILED"),
    ("", "OPERATION_FAILED"),
])
def test_parse_error_text(text: str, code: str) -> None:
    parsed_code, message = parse_error_text(text)
    assert parsed_code == code and message.startswith(f"{code}:")
