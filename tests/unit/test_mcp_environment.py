"""`McpEnvironment` against our MCP server (stdio subprocess) and a foreign one (streamable
HTTP on loopback): results, codes, and transport failures as error results; `SharedMcpServer`:
many concurrent episodes through one server, each equal to its in-process twin."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.server.lowlevel import Server

from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.record import episode_id
from pytest_resilibench.core.tasks import Task, load_tasks
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.environment import Environment, SimulatedEnvironment
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.servers.live.server import LOOPBACK, LoopbackServer
from pytest_resilibench.servers.mcp_environment import (
    McpEnvironment,
    SharedMcpServer,
    parse_error_text,
)
from pytest_resilibench.servers.mcp_server import (
    EpisodeTable,
    build_server,
    server_command,
    task_simulator,
)

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


def _key(r: Any) -> tuple[Any, ...]:
    return (r.tool, r.ok, r.error_code, r.message, r.output, r.call_index, r.latency_s,
            r.clock_s, r.deterministic)


def test_our_server_over_stdio_gives_the_simulated_environments_results(fixtures_dir: Path
                                                                         ) -> None:
    command = [*server_command(), "--task", TASK.id, "--seed", str(SEED),
               "--base-success", str(BASE), "--fixtures", str(fixtures_dir)]

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


async def _play(env: Any) -> list[tuple[Any, ...]]:
    results = []
    for name, args in CALLS:
        results.append(_key(await env.call(name, args)))
        await asyncio.sleep(0)  # let the other episodes' calls interleave with this one's
    return results


def test_one_shared_stdio_server_keeps_concurrent_episodes_apart() -> None:
    """Episodes at once over one connection to one server process; some share a key (as two
    variants of a task do), and each meets exactly its in-process twin's results."""
    keys = [(SEED, 0), (SEED, 0), (SEED, 1), (SEED + 1, 0), (SEED, 0), (SEED + 1, 2)]
    shared = SharedMcpServer()

    async def run() -> tuple[list[Any], set[int]]:
        envs = await asyncio.gather(*[shared.environment(TASK, episode_id=f"e{i}", seed=seed,
                                                         repeat=repeat, base_success=BASE)
                                      for i, (seed, repeat) in enumerate(keys)])
        try:
            got = await asyncio.gather(*[_play(env) for env in envs])
        finally:
            for env in envs:
                await env.aclose()
            await shared.aclose()
        return list(got), {id(env.connection) for env in envs}

    got, connections = asyncio.run(run())
    want = [asyncio.run(_play(SimulatedEnvironment(task_simulator(
        TASK, seed=seed, repeat=repeat, base_success=BASE)))) for seed, repeat in keys]
    assert got == want
    assert len(connections) == 1 and shared.episodes_opened == len(keys)
    assert want[0] != want[2] != want[3]  # the keys do change the luck


def test_an_episode_id_names_one_open_episode_at_a_time() -> None:
    """Ids are the episodes' own (deterministic), so a second episode under an id still open
    is refused, never joined to the first one's simulator; once closed, the id is free."""
    table = EpisodeTable()
    shared = SharedMcpServer(build_server(table))

    async def run() -> tuple[list[Any], list[Any], int]:
        first = await shared.environment(TASK, episode_id="t/optimal/m/r0/s7", seed=SEED)
        try:
            with pytest.raises(ValueError, match="open already"):
                await shared.environment(TASK, episode_id="t/optimal/m/r0/s7", seed=SEED)
            played = await _play(first)
        finally:
            await first.aclose()
        again = await shared.environment(TASK, episode_id="t/optimal/m/r0/s7", seed=SEED)
        replayed = await _play(again)
        await again.aclose()
        await shared.aclose()
        return played, replayed, len(table)

    played, replayed, still_open = asyncio.run(run())
    assert played == replayed  # a fresh simulator for the same key: the same luck
    assert still_open == 0 and shared.episodes_opened == 2


def test_shared_server_lives_on_the_runners_loop_and_closes_from_another_thread() -> None:
    """As in a run: the episodes' loop runs in a thread of its own (the runner's) and opens
    the server; an episode on another loop reaches it too; pytest's thread closes it while
    that loop still runs. Closed episodes leave the server; closing leaves the client."""
    table = EpisodeTable()
    shared = SharedMcpServer(build_server(table))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    open_during: list[int] = []

    async def episode(repeat: int) -> list[Any]:
        env = await shared.environment(TASK, episode_id=f"r{repeat}", seed=SEED, repeat=repeat,
                                       base_success=BASE)
        played = await _play(env)
        open_during.append(len(table))
        await env.aclose()
        return played

    async def on_runner_loop() -> list[list[Any]]:
        return list(await asyncio.gather(*[episode(r) for r in range(3)]))

    try:
        got = asyncio.run_coroutine_threadsafe(on_runner_loop(), loop).result(timeout=60)
        got.append(asyncio.run(episode(3)))  # another loop, while the runner's runs
        connection = asyncio.run_coroutine_threadsafe(shared.connection(), loop).result()
        shared.close()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
        loop.close()
    assert got == [asyncio.run(_play(SimulatedEnvironment(task_simulator(
        TASK, seed=SEED, repeat=r, base_success=BASE)))) for r in range(4)]
    assert min(open_during) >= 1 and len(table) == 0
    assert connection.lost and shared.episodes_opened == 4


def test_a_shared_server_that_cannot_start_fails_each_episode_at_open() -> None:
    shared = SharedMcpServer([sys.executable, "-c", "raise SystemExit(3)"], timeout_s=10)

    async def run() -> list[BaseException | McpEnvironment]:
        outcomes = await asyncio.gather(*[shared.environment(TASK, episode_id=f"e{i}", seed=SEED)
                                          for i in range(3)], return_exceptions=True)
        await shared.aclose()
        return list(outcomes)

    outcomes = asyncio.run(run())
    assert all(isinstance(o, ConnectionError) for o in outcomes), outcomes
    assert len({str(o) for o in outcomes}) == 1 and shared.episodes_opened == 0


@pytest.mark.parametrize("faults", ["paper", "realistic"])
def test_episodes_through_one_shared_server_equal_the_in_process_ones(faults: str) -> None:
    """Whole episodes (agent, prompt, scoring): 24 at once through one server, every record
    the same as in process, calls included, timing aside."""
    tasks = list(load_tasks())[::420][:6]
    agents = [make_agent("builtin:follower"), make_agent("builtin:adaptive")]
    variants = [Variant("optimal"), Variant("flawed", "missing_step")]
    plan = [(t, v, a) for t in tasks for v in variants for a in agents]
    shared = SharedMcpServer()

    def comparable(record: Any) -> dict[str, Any]:
        data = record.to_json()
        data.pop("wall_time_s")
        for call in data["calls"]:
            call.pop("success_probability")  # the probability stays on the server
        return data

    async def play(remote: bool) -> list[dict[str, Any]]:
        async def one(task: Task, variant: Variant, agent: Any) -> dict[str, Any]:
            name = episode_id(model=agent.name, variant=variant.label,
                              severity=variant.severity, task_type=task.type,
                              difficulty=task.difficulty, task_id=task.id, repeat=1)
            env = (await shared.environment(task, episode_id=name, seed=3, repeat=1,
                                            faults=faults)
                   if remote else None)
            record = await run_episode(task, variant, agent, seed=3, repeat=1,
                                       environment=env, faults=faults)
            if env is not None:
                await env.aclose()
            return comparable(record)

        try:
            return list(await asyncio.gather(*[one(*p) for p in plan]))
        finally:
            await shared.aclose()

    remote = asyncio.run(play(True))
    local = asyncio.run(play(False))
    assert remote == local
    outcomes = {r["outcome"] for r in local}
    assert "error" not in outcomes and len(outcomes) >= 2  # else the comparison says little


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
