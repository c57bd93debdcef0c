"""A LangGraph tool-calling agent in the benchmark: your graph, as it is, behind a factory.
Needs the `[langgraph]` extra (`pip install "pytest-resilibench[langgraph]"`).

The graph is LangGraph's tool-calling loop (a model node, a ToolNode, `tools_condition`);
the adapter builds it per episode around the episode's tools and scores it like a model.
`ChatOpenAI` reads OPENAI_API_KEY and OPENAI_BASE_URL, AGENT_MODEL names the model. Offline,
against the test server scripting a model that follows the plan:

    resilibench serve-openai --port 18766 &
    OPENAI_BASE_URL=http://127.0.0.1:18766/v1 OPENAI_API_KEY=sk-test \\
    AGENT_MODEL=builtin:follower PYTHONPATH=docs/examples \\
        pytest suites --resili-model=py:langgraph_agent:make_agent --resili-variants=optimal
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from pytest_resilibench.adapters.langgraph import LangGraphAgent


def tool_calling_graph(model: ChatOpenAI, tools: list[BaseTool]) -> Any:
    """The graph a team writes anyway: call the model, run the tools it asks for, repeat."""
    bound = model.bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def make_agent() -> LangGraphAgent:
    """The factory `py:langgraph_agent:make_agent` names: called once per pytest process."""
    model = ChatOpenAI(model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"), temperature=0)
    # `models`: its requests get the benchmark's retries and rate limits (docs/API.md).
    return LangGraphAgent(lambda tools: tool_calling_graph(model, tools), name="langgraph-agent",
                          models=[model])
