"""The simulator as an MCP server, driven by the official SDK's own client over stdio (a real
subprocess), streamable HTTP (a real loopback socket) and in process: one episode (`--task`),
or many, each named in its calls' `_meta`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from jsonschema import Draft202012Validator
from mcp import Client, MCPError, StdioServerParameters

from pytest_resilibench.cli import main as cli_main
from pytest_resilibench.core.registry import EXPLICIT_FLOW, default_registry
from pytest_resilibench.core.simulator import Simulator
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.servers.live.server import LOOPBACK, LoopbackServer
from pytest_resilibench.servers.mcp_server import (
    EPISODE_META_KEY,
    CloseEpisode,
    CloseEpisodeParams,
    EpisodeTable,
    ServedEpisode,
    build_server,
    server_command,
    task_simulator,
)

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


def expected(sim: Simulator | None = None) -> list[tuple[bool, str | None, Any]]:
    sim = sim or task_simulator(TASK, seed=SEED, base_success=BASE)
    out = []
    for name, args in CALLS:
        r = sim.call(name, args)
        out.append((r.ok, r.error_code, r.output))
    return out


def episode(episode_id: str, *, seed: int = SEED, repeat: int = 0,
            faults: str = "paper") -> ServedEpisode:
    return ServedEpisode(episode_id, TASK, seed=seed, repeat=repeat, base_success=BASE,
                         faults=faults)


async def observed(client: Client, served: ServedEpisode | None = None, *, slim: bool = False
                   ) -> list[tuple[bool, str | None, Any]]:
    """The outcomes of CALLS; `served`: in that episode (`slim`: the whole key on the first
    call only, then the id alone)."""
    meta = {EPISODE_META_KEY: served.to_meta()} if served else None
    out = []
    for name, args in CALLS:
        reply = await client.call_tool(name, args, meta=meta)  # type: ignore[arg-type]
        if served and slim:
            meta = {EPISODE_META_KEY: {"id": served.id}}
        await asyncio.sleep(0)  # let the other episodes' calls interleave with this one's
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


def test_a_one_task_server_words_its_task_s_data_flow() -> None:
    """Issue 50: serving one task of the explicit data flow, the `source` and `format`
    parameters say what an omitted one reads (registry.py `EXPLICIT_FLOW`)."""
    explicit = dataclasses.replace(TASK, data_flow="explicit")

    async def sources(task: Task) -> set[str]:
        async with Client(build_server(task_simulator(task, seed=SEED))) as client:
            listing = await client.list_tools()
        return {t.input_schema["properties"]["source"]["description"] for t in listing.tools
                if "source" in t.input_schema["properties"]}

    assert asyncio.run(sources(explicit)) == {EXPLICIT_FLOW["source"]}
    assert EXPLICIT_FLOW["source"] not in asyncio.run(sources(TASK))


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


def test_stdio_subprocess_meets_the_same_failures(fixtures_dir: Path) -> None:
    """The server's entry point (the CLI's serve-mcp) with --task, over stdio."""
    command = [*server_command(), "--task", TASK.id, "--seed", str(SEED),
               "--base-success", str(BASE), "--fixtures", str(fixtures_dir)]

    async def run() -> list[tuple[bool, str | None, Any]]:
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(params, cache=None) as client:
            return await observed(client)

    assert asyncio.run(run()) == expected()


def test_one_stdio_server_keeps_concurrent_episodes_apart() -> None:
    """Without --task: episodes named in `_meta`, interleaved over one connection, two of
    them with the same key (two variants of a task), each from a fresh simulator."""
    keys = [(SEED, 0), (SEED, 0), (SEED, 1), (SEED + 1, 0)]

    async def run() -> list[list[tuple[bool, str | None, Any]]]:
        command = server_command()
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(params, cache=None) as client:
            return list(await asyncio.gather(*[
                observed(client, episode(f"e{i}", seed=seed, repeat=repeat), slim=i % 2 == 0)
                for i, (seed, repeat) in enumerate(keys)]))

    got = asyncio.run(run())
    want = [expected(task_simulator(TASK, seed=seed, repeat=repeat, base_success=BASE))
            for seed, repeat in keys]
    assert got == want
    assert want[0] != want[2] and want[0] != want[3]  # the keys do change the luck


def test_episodes_open_on_first_call_and_close_on_request() -> None:
    table = EpisodeTable()

    async def run() -> tuple[int, int, list[Any]]:
        async with Client(build_server(table)) as client:
            first = await observed(client, episode("a"))
            await observed(client, episode("b", repeat=1))
            opened = len(table)
            await client.session.send_request(
                CloseEpisode(params=CloseEpisodeParams(id="a")), types.EmptyResult)
            closed = len(table)
            again = await observed(client, episode("a"))  # a new episode under an old id
        return opened, closed, [first, again]

    opened, closed, (first, again) = asyncio.run(run())
    assert (opened, closed) == (2, 1)
    assert first == again == expected()


def test_realistic_profile_episodes_carry_their_events() -> None:
    """The fault profile travels in the key; each result's event comes back in `_meta`."""
    served = episode("r", faults="realistic")

    async def run() -> list[Any]:
        async with Client(build_server(EpisodeTable())) as client:
            meta = {EPISODE_META_KEY: served.to_meta()}
            replies = [await client.call_tool(n, a, meta=meta)  # type: ignore[arg-type]
                       for n, a in CALLS]
        return [(r.meta or {})["resilibench/call"].get("event") for r in replies]

    sim = served.simulator(default_registry())
    want = [sim.call(n, a).event for n, a in CALLS]
    assert asyncio.run(run()) == want


def test_a_many_episode_server_refuses_calls_that_name_no_episode() -> None:
    async def refusal(meta: dict[str, Any] | None) -> MCPError:
        async with Client(build_server()) as client:
            try:
                await client.call_tool("file_operations_reader", {},
                                       meta=meta)  # type: ignore[arg-type]
            except MCPError as exc:
                return exc
        raise AssertionError("the call was served")

    unnamed = asyncio.run(refusal(None))
    assert unnamed.code == types.INVALID_PARAMS and "every tools/call needs" in unnamed.message
    bad = {**episode("x").to_meta(), "seed": "0"}
    malformed = asyncio.run(refusal({EPISODE_META_KEY: bad}))
    assert malformed.code == types.INVALID_PARAMS
    assert "seed is missing or malformed" in malformed.message
    unopened = asyncio.run(refusal({EPISODE_META_KEY: {"id": "never-opened"}}))
    assert "no open episode 'never-opened'" in unopened.message


@pytest.mark.parametrize(("change", "message"), [
    ({"id": 3}, "id is missing"),
    ({"repeat": True}, "repeat is missing"),
    ({"faults": "chaos"}, "unknown fault profile"),
    ({"task": {"id": "t1"}}, "task is not a task"),
    ({"data_flow": "guessed"}, "unknown data flow"),
])
def test_served_episode_keys_are_checked(change: dict[str, Any], message: str) -> None:
    meta = episode("k", faults="realistic").to_meta()
    # Tasks are equal by identity (tasks.py): the round trip is checked on what it carries.
    assert ServedEpisode.from_meta(meta).to_meta() == meta
    with pytest.raises(ValueError, match=message):
        ServedEpisode.from_meta({**meta, **change})


def test_a_served_episode_keeps_its_set_s_data_flow() -> None:
    """The set's data flow (tasks.py `data_flow_of`) is no part of a task's JSON: the key
    carries it, so a served simulator reads calls as the in-process one (issue 50); a key
    without one (a client before it) is the inferred flow."""
    explicit = ServedEpisode("e", dataclasses.replace(TASK, data_flow="explicit"), seed=SEED)
    meta = explicit.to_meta()
    assert meta["data_flow"] == "explicit"
    assert ServedEpisode.from_meta(meta).simulator(default_registry()).data_flow == "explicit"
    assert ServedEpisode.from_meta(meta).to_meta() == meta
    older = {k: v for k, v in meta.items() if k != "data_flow"}
    assert ServedEpisode.from_meta(older).simulator(default_registry()).data_flow == "inferred"
    assert explicit.simulator(default_registry()).data_flow == "explicit"
    assert ServedEpisode("r", explicit.task, seed=SEED, faults="realistic"
                         ).simulator(default_registry()).data_flow == "inferred"


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


@pytest.mark.parametrize("stdin", ["pipe", "file"])
def test_stdio_wire_is_claimed_from_pipes_and_left_to_the_sdk_otherwise(
        tmp_path: Path, stdin: str) -> None:
    """On pipes the server reads and writes them itself (no thread hop per message) and moves
    stray prints off the wire, to stderr; on anything else it keeps the SDK's own handling."""
    import subprocess

    script = ("import asyncio\nfrom pytest_resilibench.servers.mcp_server import _pipes\n"
              "claimed = asyncio.run(_pipes()) is not None\nprint('stray', claimed)\n")
    source = tmp_path / "in.txt"
    source.write_text("")
    with source.open() as fh:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              stdin=subprocess.PIPE if stdin == "pipe" else fh, timeout=60)
    assert done.returncode == 0, done.stderr
    if stdin == "pipe":
        assert (done.stdout, done.stderr.strip()) == ("", "stray True")
    else:
        assert (done.stdout.strip(), done.stderr) == ("stray False", "")
