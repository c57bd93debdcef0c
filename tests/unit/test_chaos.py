"""`ResiliFaults.wrap` (integration/chaos.py) around each kind of tool a team has: plain and
async callables, an OpenAI Agents SDK function tool, a LangChain tool; the marker's runs and
the ids the pairing reads."""

from __future__ import annotations

import asyncio
import contextlib
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


def test_an_agents_sdk_tool_answers_the_fault_as_text() -> None:
    agents = pytest.importorskip("agents")

    @agents.function_tool
    def lookup(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    from agents.tool_context import ToolContext

    args = '{"city": "Paris"}'
    ctx = ToolContext(context=None, tool_name="lookup", tool_call_id="c1", tool_arguments=args)
    wrapped = faults().wrap(lookup)
    assert wrapped.name == "lookup"
    assert wrapped.params_json_schema == lookup.params_json_schema
    answer: Any = asyncio.run(wrapped.on_invoke_tool(ctx, args))
    assert isinstance(answer, str) and answer.split(":")[0].isupper()
    clean = faults(seed=None).wrap(lookup)
    assert asyncio.run(clean.on_invoke_tool(ctx, args)) == "sunny in Paris"


def test_a_langchain_tool_keeps_its_schema_and_reports_the_fault() -> None:
    tools = pytest.importorskip("langchain_core.tools")

    @tools.tool
    def lookup(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    wrapped = faults().wrap(lookup)
    assert wrapped.name == "lookup" and wrapped.description == lookup.description
    assert wrapped.args == lookup.args
    answer = wrapped.invoke({"city": "Paris"})
    assert answer.split(":")[0].isupper()  # handed to the model, not raised
    assert faults(seed=None).wrap(lookup).invoke({"city": "Paris"}) == "sunny in Paris"


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
