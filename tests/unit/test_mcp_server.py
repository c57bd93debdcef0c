"""The simulator as an MCP server, driven by the official SDK's own client over stdio (a real
subprocess) and streamable HTTP (a real loopback socket)."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

from pytest_resilibench.cli import main as cli_main
from pytest_resilibench.live.server import LOOPBACK, LoopbackServer
from pytest_resilibench.mcp_server import build_server, task_simulator
from pytest_resilibench.registry import default_registry
from pytest_resilibench.tasks import Task

TASK = Task(
    id="t9001", type="simple_task", difficulty="easy", description="read a csv, write it back",
    inputs={"path": "/data/in.csv", "format": "csv", "destination": "/data/out.csv"},
    expected_outputs={}, required_tools=("file_operations_reader", "file_operations_writer"))
SEED, BASE = 11, 0.6
# Dependents before their source, retries, a bad argument, an unknown tool: a mix that meets
# seeded failures and successes alike.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("file_operations_writer", {"destination": "/data/out.csv"}),
    *[("file_operations_reader", {"path": "/data/in.csv"})] * 4,
    ("file_operations_reader", {"path": "/elsewhere.csv"}),
    ("no_such_tool", {}),
    *[("file_operations_writer", {"destination": "/data/out.csv", "format": "csv"})] * 5,
]


@pytest.fixture
def fixtures_dir(tmp_path: Path) -> Path:
    with gzip.open(tmp_path / "tasks.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(TASK.to_json()) + "\n")
    return tmp_path


def expected() -> list[tuple[bool, str | None, Any]]:
    sim = task_simulator(TASK, seed=SEED, base_success=BASE)
    out = []
    for name, args in CALLS:
        r = sim.call(name, args)
        out.append((r.ok, r.error_code, r.output))
    return out


async def observed(client: Client) -> list[tuple[bool, str | None, Any]]:
    out = []
    for name, args in CALLS:
        reply = await client.call_tool(name, args)
        text = reply.content[0].text  # type: ignore[union-attr]
        if reply.is_error:
            out.append((False, text.split(":", 1)[0], None))
        else:
            assert json.loads(text) == reply.structured_content
            out.append((True, None, reply.structured_content))
    return out


def test_the_luck_is_mixed_enough_to_compare() -> None:
    outcomes = expected()
    assert any(ok for ok, _, _ in outcomes)
    assert len({code for ok, code, _ in outcomes if not ok}) >= 3


def test_lists_the_registry_tools_with_our_schemas() -> None:
    registry = default_registry()

    async def run() -> None:
        async with Client(build_server(task_simulator(TASK, seed=SEED))) as client:
            listing = await client.list_tools()
        assert [t.name for t in listing.tools] == list(registry.names)
        for tool in listing.tools:
            assert tool.input_schema == registry.to_mcp([tool.name])[0]["inputSchema"]
            assert tool.output_schema == registry[tool.name].returns

    asyncio.run(run())


def test_in_process_results_are_the_simulators_with_outputs_and_coded_errors() -> None:
    registry = default_registry()

    async def run() -> list[tuple[bool, str | None, Any]]:
        async with Client(build_server(task_simulator(TASK, seed=SEED, base_success=BASE))) as c:
            return await observed(c)

    results = asyncio.run(run())
    assert results == expected()
    for (ok, code, output), (name, _) in zip(results, CALLS, strict=True):
        if ok:
            assert not list(Draft202012Validator(registry[name].returns).iter_errors(output))
        else:
            assert code is not None and code.isupper()


@pytest.mark.parametrize("entry", ["module", "cli"])
def test_stdio_subprocess_meets_the_same_failures(fixtures_dir: Path, entry: str) -> None:
    module = "pytest_resilibench.mcp_server" if entry == "module" else "pytest_resilibench.cli"
    args = ["-m", module, *(["serve-mcp"] if entry == "cli" else []), "--task", TASK.id,
            "--seed", str(SEED), "--base-success", str(BASE), "--fixtures", str(fixtures_dir)]

    async def run() -> list[tuple[bool, str | None, Any]]:
        params = StdioServerParameters(command=sys.executable, args=args)
        async with Client(params, cache=None) as client:
            return await observed(client)

    assert asyncio.run(run()) == expected()


def test_streamable_http_on_loopback_meets_the_same_failures() -> None:
    server = build_server(task_simulator(TASK, seed=SEED, base_success=BASE))
    with LoopbackServer(server.streamable_http_app(host=LOOPBACK)) as http:
        assert http.host == LOOPBACK

        async def run() -> list[tuple[bool, str | None, Any]]:
            async with Client(f"{http.url}/mcp", cache=None) as client:
                return await observed(client)

        assert asyncio.run(run()) == expected()


def test_unknown_task_is_a_clear_error(fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    assert cli_main(["serve-mcp", "--task", "t0000", "--fixtures", str(fixtures_dir)]) == 2
    assert "no task 't0000'" in capsys.readouterr().err
