"""docs/CHAOS.md's Agents SDK and LangGraph examples run as written, each a real pytest run of
the marked test over the framework's own agent, its model a scripted one on our loopback
server (servers/testserver.py) through the real openai client: every run reported, the clean
one passing, faults met."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The team's conftest: the models the examples take, scripted. The model calls the one tool
# until an answer says "sunny" (four tries at most), then answers with the last result.
CONFTEST = '''
import json

import pytest

from pytest_resilibench.runtime.protocol import ModelReply, ToolCall
from pytest_resilibench.servers.testserver import OpenAITestServer


def careful(request):
    results = [str(m["content"]) for m in request.messages if m["role"] == "tool"]
    if len(results) < 4 and not any("sunny" in r for r in results):
        name = request.tools[0]["function"]["name"]
        call = ToolCall(f"call_{len(results)}", name, json.dumps({"city": "Paris"}))
        return ModelReply(content=None, tool_calls=(call,))
    return ModelReply(content=results[-1])


@pytest.fixture(scope="session")
def server():
    with OpenAITestServer({"careful": careful}) as running:
        yield running


@pytest.fixture
def model(server):
    from agents import OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    return OpenAIChatCompletionsModel(
        model="careful", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="sk-test"))


@pytest.fixture
def chat_model(server):
    import httpx
    from langchain_openai import ChatOpenAI

    # A client of its own: LangChain shares one between models, and each test's asyncio.run
    # closes the loop the last one was bound to.
    return ChatOpenAI(model="careful", base_url=server.base_url, api_key="sk-test",
                      http_async_client=httpx.AsyncClient())
'''


def example(marker: str) -> str:
    text = (ROOT / "docs" / "CHAOS.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if marker in b]
    return block


@pytest.mark.parametrize(("marker", "needs"), [
    ("from agents import", ("agents",)),
    ("from langgraph_agent import", ("langgraph", "langchain_openai")),
])
def test_the_framework_examples_run_as_written(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch, marker: str,
                                               needs: tuple[str, ...]) -> None:
    for module in needs:
        pytest.importorskip(module, reason=f"{module} (an optional extra) is not installed")
    path = os.pathsep.join([str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_team=example(marker))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 6, result.stdout.str()
    assert "errors" not in outcomes
    result.stdout.fnmatch_lines(["PASSED *realistic-clean*"])
    lines = [json.loads(line) for trace in (pytester.path / ".resilibench" / "chaos").rglob(
        "*.jsonl") for line in trace.read_text().splitlines()]
    assert len(lines) >= 6 and any(line["fault"] for line in lines)  # faults were met
