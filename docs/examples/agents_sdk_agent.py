"""An OpenAI Agents SDK agent in the benchmark: your SDK `Agent`, as it is, behind a factory.
Needs the `[agents-sdk]` extra (`pip install "pytest-resilibench[agents-sdk]"`).

The adapter gives the agent the episode's tools as function tools, runs it through `Runner`
and scores it like a model. Here the model is any OpenAI-compatible server: the `openai`
client reads OPENAI_API_KEY and OPENAI_BASE_URL, AGENT_MODEL names the model. Offline,
against the test server scripting a model that follows the plan:

    resilibench serve-openai --port 18766 &
    OPENAI_BASE_URL=http://127.0.0.1:18766/v1 OPENAI_API_KEY=sk-test \\
    AGENT_MODEL=builtin:follower PYTHONPATH=docs/examples \\
        pytest suites --resili-model=py:agents_sdk_agent:make_agent --resili-variants=optimal
"""

from __future__ import annotations

import os

from agents import Agent, OpenAIChatCompletionsModel
from openai import AsyncOpenAI

from pytest_resilibench.adapters.agents_sdk import AgentsSdkAgent


def make_agent() -> AgentsSdkAgent:
    """The factory `py:agents_sdk_agent:make_agent` names: called once per pytest process."""
    model = OpenAIChatCompletionsModel(model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
                                       openai_client=AsyncOpenAI())
    return AgentsSdkAgent(Agent(name="sdk-agent", model=model))
