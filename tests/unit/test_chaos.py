"""`ResiliFaults.wrap` (integration/chaos.py) around each kind of tool a team has: plain and
async callables, OpenAI Agents SDK function tools run by the SDK's Runner, LangChain tools run
by a LangGraph ToolNode (both with their model our loopback server, servers/testserver.py,
through the real openai client), a real `mcp.ClientSession` over stdio to `mcp-server-git`;
the marker's runs and the ids the pairing reads.

Every wrapper calls a tool named `git_status` with the same arguments, so the same seed must
give the same fault decisions whichever wrapper the calls went through."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.core.tool_faults import FaultConfig
from pytest_resilibench.integration.chaos import (
    ChaosRun,
    ResiliFaults,
    ToolFault,
    base_id,
    marker_runs,
)

ALWAYS = FaultConfig(profile="paper", rate=1.0)


def faults(config: FaultConfig = ALWAYS, seed: int | None = 0) -> ResiliFaults:
    return ResiliFaults(ChaosRun(config, seed), session="test_x")


def add(a: int, b: int) -> int:
    return a + b


async def aadd(a: int, b: int) -> int:
    return a + b


def test_plain_and_async_callables() -> None:
    clean = faults(seed=None).wrap(add)
    assert clean(1, 2) == 3 and clean.__name__ == "add"
    broken = faults().wrap({"add": add, "aadd": aadd})
    with pytest.raises(ToolFault) as info:
        broken["add"](1, 2)
    assert info.value.message.startswith(f"{info.value.code}: ")
    with pytest.raises(ToolFault):
        asyncio.run(broken["aadd"](a=1, b=2))


def test_the_trace_says_what_happened() -> None:
    run = faults(FaultConfig(profile="realistic", rate=0.3, seed=0), seed=3)
    tool = run.wrap(add)
    for i in range(40):
        with contextlib.suppress(ToolFault):
            tool(i, 1)
    assert [line["call_index"] for line in run.trace] == list(range(1, 41))
    kinds = {(line["fault"] or {}).get("kind") for line in run.trace}
    assert None in kinds and len(kinds) > 1
    again = faults(FaultConfig(profile="realistic", rate=0.3, seed=0), seed=3)
    tool = again.wrap(add)
    for i in range(40):
        with contextlib.suppress(ToolFault):
            tool(i, 1)
    assert again.trace == run.trace


def test_what_cannot_be_wrapped_says_so() -> None:
    with pytest.raises(TypeError, match="cannot wrap int"):
        faults().wrap(3)


def test_marker_runs_and_ids() -> None:
    mark = pytest.mark.resili_faults(profile="paper", seeds=3).mark
    runs = marker_runs(mark)
    assert [r.id for r in runs] == ["paper-clean", "paper-s0", "paper-s1", "paper-s2"]
    assert base_id("t.py::test[careful-realistic-s3]", "realistic-s3") == "t.py::test[careful]"
    assert base_id("t.py::test[realistic-clean]", "realistic-clean") == "t.py::test"
    with pytest.raises(ValueError, match="keyword arguments only"):
        marker_runs(pytest.mark.resili_faults("realistic").mark)


# --- the frameworks' tools ---------------------------------------------------------------------
# Between them, these seeds' 16 calls meet every fault a session without an auth tool can:
# errors, timeouts, a rate limit (held on the same tool called again at once), silent faults
# emptying and cutting (test_the_reference_meets_every_kind_of_fault).
REALISTIC = FaultConfig(profile="realistic", rate=0.3)
SEEDS = (1, 2, 4)
CALLS = 16
STATUS = "On branch main\nnothing to commit, working tree clean"
GIT_SERVER = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent)) \
    or shutil.which("mcp-server-git")


def git_status(repo_path: str) -> str:
    """Shows the working tree status."""
    return STATUS


def decisions(run: ResiliFaults) -> list[Any]:
    return [(line["call_index"], line["fault"]) for line in run.trace]


def callable_decisions(seed: int, repo_path: str = "/repo") -> list[Any]:
    """The reference: the same calls through a wrapped plain callable."""
    run = faults(REALISTIC, seed)
    tool = run.wrap(git_status)
    for _ in range(CALLS):
        with contextlib.suppress(ToolFault):
            tool(repo_path=repo_path)
    return decisions(run)


def test_the_reference_meets_every_kind_of_fault() -> None:
    kinds = {(fault or {}).get("kind") for seed in SEEDS for _, fault in callable_decisions(seed)}
    assert {None, "error", "timeout", "rate_limited", "silent"} <= kinds
    modes = {fault.get("mode") for seed in SEEDS for _, fault in callable_decisions(seed) if fault}
    assert {"empty", "truncate"} <= modes
    assert callable_decisions(1) != callable_decisions(2)


def spoilt(fault: dict[str, Any], text: str) -> str:
    return "" if fault["mode"] == "empty" else text[: len(text) // 2]


def assert_answers(run: Any, read: Sequence[str],
                   error_answer: Callable[[dict[str, Any]], str]) -> None:
    """What the agent read for each traced call: the tool's answer, its spoilt form under a
    silent fault, or the framework's form of the injected error."""
    for line, answer in zip(run.trace, read, strict=True):
        fault = line["fault"]
        if fault is None:
            assert answer == STATUS
        elif fault["kind"] == "silent":
            assert answer == spoilt(fault, STATUS)
        else:
            assert answer == error_answer(fault)


def scripted_model(tool: str, calls: int, seen: list[Any]) -> Any:
    """A model that calls `tool` once a turn, `calls` times, then answers with the JSON list
    of every tool result it read; `seen` gets the tool schemas of each request."""
    from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest, ToolCall

    def policy(request: ModelRequest) -> ModelReply:
        seen.append(request.tools)
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if len(results) < calls:
            return ModelReply(content=None, tool_calls=(ToolCall(
                f"call_{len(results)}", tool, json.dumps({"repo_path": "/repo"})),))
        return ModelReply(content=json.dumps(results))
    return policy


# --- OpenAI Agents SDK ---------------------------------------------------------------------------
def sdk_run(tool: Any, calls: int = CALLS) -> tuple[list[str], list[Any]]:
    """An SDK Agent with `tool`, run by the SDK's Runner: what its model read, and the tool
    schemas the SDK sent."""
    agents = pytest.importorskip("agents", reason="the [agents-sdk] extra is not installed")
    from openai import AsyncOpenAI

    from pytest_resilibench.servers.testserver import OpenAITestServer

    seen: list[Any] = []
    with OpenAITestServer({"scripted": scripted_model(tool.name, calls, seen)}) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        agent = agents.Agent(name="team", tools=[tool], model=agents.OpenAIChatCompletionsModel(
            model="scripted", openai_client=client))
        result = agents.Runner.run_sync(agent, "status?", max_turns=calls + 2,
                                        run_config=agents.RunConfig(tracing_disabled=True))
    return json.loads(result.final_output), seen


def sdk_tool(**options: Any) -> Any:
    agents = pytest.importorskip("agents", reason="the [agents-sdk] extra is not installed")
    return agents.function_tool(git_status, **options)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_agents_sdk_tool_meets_the_same_faults_through_the_runner(seed: int) -> None:
    tool = sdk_tool(failure_error_function=lambda ctx, exc: f"{type(exc).__name__}: {exc}")
    run = faults(REALISTIC, seed)
    wrapped = run.wrap(tool)
    assert (wrapped.name, wrapped.description, wrapped.params_json_schema,
            wrapped.strict_json_schema) == (tool.name, tool.description,
                                            tool.params_json_schema, tool.strict_json_schema)
    read, schemas = sdk_run(wrapped)
    _, clean_schemas = sdk_run(tool, calls=1)
    assert schemas[0] == clean_schemas[0]  # what the model is offered: unchanged
    assert decisions(run) == callable_decisions(seed)
    # An error goes through the tool's own failure_error_function, as its own exceptions go.
    assert_answers(run, read, lambda fault: f"ToolFault: {fault['message']}")


def test_an_agents_sdk_tool_s_default_and_absent_failure_policies_apply() -> None:
    agents = pytest.importorskip("agents", reason="the [agents-sdk] extra is not installed")
    always = FaultConfig(profile="paper", rate=1.0)
    read, _ = sdk_run(faults(always).wrap(sdk_tool()), calls=2)
    assert read == [agents.default_tool_error_function(None, Exception())] * 2
    with pytest.raises(agents.UserError) as info:  # None: the run fails, as on its own errors
        sdk_run(faults(always).wrap(sdk_tool(failure_error_function=None)), calls=1)
    assert isinstance(info.value.__cause__, ToolFault)


# --- LangChain / LangGraph ---------------------------------------------------------------------
def langchain_tool(**options: Any) -> Any:
    tools = pytest.importorskip("langchain_core.tools",
                                reason="the [langgraph] extra is not installed")
    return tools.StructuredTool.from_function(git_status, **options)


def graph_run(tool: Any, calls: int = CALLS, *, handle: Any = True) -> tuple[list[Any], list[Any]]:
    """LangGraph's tool-calling loop (docs/examples/langgraph_agent.py) with `tool`, its
    ToolNode's `handle_tool_errors` set to `handle`: what its model read, and the schemas."""
    pytest.importorskip("langgraph", reason="the [langgraph] extra is not installed")
    pytest.importorskip("langchain_openai", reason="the [langgraph] extra is not installed")
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from pytest_resilibench.servers.testserver import OpenAITestServer

    seen: list[Any] = []
    with OpenAITestServer({"scripted": scripted_model(tool.name, calls, seen)}) as server:
        model = ChatOpenAI(model="scripted", base_url=server.base_url,
                           api_key="sk-test", max_retries=0).bind_tools([tool])  # type: ignore[arg-type]
        graph = StateGraph(MessagesState)
        graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
        graph.add_node("tools", ToolNode([tool], handle_tool_errors=handle))
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", tools_condition)
        graph.add_edge("tools", "model")
        app: Any = graph.compile()
        state = app.invoke({"messages": [("user", "status?")]}, {"recursion_limit": 2 * calls + 3})
    return json.loads(state["messages"][-1].content), seen


@pytest.mark.parametrize("seed", SEEDS)
def test_a_langchain_tool_meets_the_same_faults_through_a_tool_node(seed: int) -> None:
    tool = langchain_tool(handle_tool_error=True)
    run = faults(REALISTIC, seed)
    wrapped = run.wrap(tool)
    assert (wrapped.name, wrapped.description, wrapped.args, wrapped.handle_tool_error,
            wrapped.response_format) == (tool.name, tool.description, tool.args,
                                         tool.handle_tool_error, tool.response_format)
    assert wrapped.tool_call_schema.model_json_schema() == \
        tool.tool_call_schema.model_json_schema()
    read, schemas = graph_run(wrapped, handle=False)
    _, clean_schemas = graph_run(tool, calls=1)
    assert schemas[0] == clean_schemas[0]
    assert decisions(run) == callable_decisions(seed)
    # An error is a ToolException the tool's handle_tool_error answered.
    assert_answers(run, read, lambda fault: fault["message"])


def test_a_langchain_tool_s_error_is_a_tool_exception_where_nothing_handles_it() -> None:
    tools = pytest.importorskip("langchain_core.tools",
                                reason="the [langgraph] extra is not installed")
    always = faults(FaultConfig(profile="paper", rate=1.0))
    wrapped = always.wrap(langchain_tool())  # handle_tool_error off, LangChain's default
    with pytest.raises(tools.ToolException, match=r"^[A-Z_]+: "):
        wrapped.invoke({"repo_path": "/repo"})
    read, _ = graph_run(always.wrap(langchain_tool()), calls=1, handle=True)
    assert read[0].startswith("Error: ToolException(") and always.trace[-1]["fault"]


def test_a_langchain_silent_fault_spoils_the_content_and_keeps_the_artifact() -> None:
    tools = pytest.importorskip("langchain_core.tools",
                                reason="the [langgraph] extra is not installed")

    @tools.tool(response_format="content_and_artifact")
    async def git_status(repo_path: str) -> tuple[str, dict[str, Any]]:
        """Shows the working tree status."""
        return STATUS, {"clean": True}

    run = faults(REALISTIC, 4)  # an emptying silent fault among the 16 calls
    wrapped = run.wrap(git_status)
    for i in range(CALLS):
        call = {"type": "tool_call", "name": "git_status", "id": f"c{i}",
                "args": {"repo_path": "/repo"}}
        try:
            message = asyncio.run(wrapped.ainvoke(call))
        except tools.ToolException:
            continue
        fault = run.trace[-1]["fault"]
        assert message.artifact == {"clean": True}
        assert message.content == (STATUS if fault is None else spoilt(fault, STATUS))
    assert decisions(run) == callable_decisions(4)
    assert any((f or {}).get("kind") == "silent" for _, f in decisions(run))


@pytest.mark.parametrize("own_async", [False, True])
def test_a_langchain_base_tool_subclass_stays_one_sync_and_async(own_async: bool) -> None:
    pytest.importorskip("langchain_core.tools", reason="the [langgraph] extra is not installed")
    from langchain_core.tools import BaseTool
    from pydantic import BaseModel

    class Args(BaseModel):
        repo_path: str

    managers: list[Any] = []

    class GitStatus(BaseTool):  # the class-based way: _run only
        name: str = "git_status"
        description: str = "Shows the working tree status."
        args_schema: Any = Args
        handle_tool_error: Any = True

        def _run(self, repo_path: str, run_manager: Any = None) -> str:
            managers.append(run_manager)
            return STATUS

    class AsyncGitStatus(GitStatus):  # and its own _arun
        async def _arun(self, repo_path: str, run_manager: Any = None) -> str:
            managers.append(run_manager)
            return STATUS

    run = faults(REALISTIC, 2)
    tool = AsyncGitStatus() if own_async else GitStatus()
    wrapped = run.wrap(tool)
    assert isinstance(wrapped, type(tool))
    assert (wrapped.name, wrapped.description, wrapped.args) == (tool.name, tool.description,
                                                                 tool.args)
    # invoke and ainvoke (without an _arun, BaseTool runs _run in a thread): one decision a
    # call either way
    answers = [asyncio.run(wrapped.ainvoke({"repo_path": "/repo"})) if i % 2
               else wrapped.invoke({"repo_path": "/repo"}) for i in range(CALLS)]
    assert decisions(run) == callable_decisions(2)
    for line, answer in zip(run.trace, answers, strict=True):
        fault = line["fault"]
        expected = STATUS if fault is None else (
            spoilt(fault, STATUS) if fault["kind"] == "silent" else fault["message"])
        assert answer == expected
    assert managers and all(m is not None for m in managers)  # LangChain's, passed on


# --- an MCP ClientSession ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def git_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if GIT_SERVER is None:
        pytest.skip("mcp-server-git is not installed (the dev extra installs it from PyPI)")
    pytest.importorskip("mcp", reason="the [mcp] extra is not installed")
    path = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


async def session_calls(repo: Path, seed: int | None) -> tuple[ResiliFaults, list[Any], Any]:
    """CALLS `git_status` calls through a wrapped ClientSession over stdio to mcp-server-git
    (entered, initialized, listed and called as the session itself is): the fault run, the
    results, the tool listing."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(command=str(GIT_SERVER), args=["--repository", str(repo)])
    run = faults(REALISTIC, seed)
    async with stdio_client(server) as (read, write), \
            run.wrap(ClientSession(read, write)) as session:
        await session.initialize()
        listing = await session.list_tools()
        results = [await session.call_tool("git_status", {"repo_path": str(repo)}, 30.0,
                                           meta={"team": "x"}) for _ in range(CALLS)]
    return run, results, listing


@pytest.mark.parametrize("seed", SEEDS)
def test_an_mcp_client_session_meets_the_same_faults(git_repo: Path, seed: int) -> None:
    import mcp_types as types

    run, results, listing = asyncio.run(session_calls(git_repo, seed))
    assert "repo_path" in {t.name: t for t in listing.tools}["git_status"].input_schema[
        "properties"]
    assert decisions(run) == callable_decisions(seed, str(git_repo))
    clean = run.trace[0]["upstream"]["text"] if run.trace[0]["fault"] is None else None
    for line, result in zip(run.trace, results, strict=True):
        fault = line["fault"]
        assert isinstance(result, types.CallToolResult)
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        upstream = line["upstream"]
        if fault is None:
            assert not result.is_error and "On branch" in text
            clean = text
        elif fault["kind"] == "silent":
            assert not result.is_error and text == spoilt(fault, upstream["text"])
        else:  # MCP's tool error: an isError result with the message
            assert result.is_error and text == fault["message"]
            meta = (result.meta or {})["resilibench/call"]
            assert meta["error_code"] == fault["code"]
            assert meta.get("retry_after") == fault.get("retry_after")
    assert clean is not None


def test_a_clean_mcp_run_passes_every_call_through(git_repo: Path) -> None:
    run, results, _ = asyncio.run(session_calls(git_repo, None))
    assert all(not r.is_error and "On branch" in r.content[0].text for r in results)
    assert [line["call_index"] for line in run.trace] == list(range(1, CALLS + 1))
