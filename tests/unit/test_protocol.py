"""The agent protocols (runtime/protocol.py): `aclose` is optional, privilege is this
package's to give, `task_text` reads the task alike from a request and an episode."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.core.prompts import Variant, render_prompt
from pytest_resilibench.runtime.agent_boundary import close_agent, is_privileged
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.runtime.protocol import (
    Episode,
    ModelReply,
    ModelRequest,
    agent_shape,
    task_text,
)
from tests.unit.test_episode import READER, TASK

API = Path(__file__).resolve().parents[2] / "docs" / "API.md"


class Turn:
    name = "turn"

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(content="TASK_COMPLETED")


class Closing(Turn):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


class SyncClose(Turn):
    def aclose(self) -> None:
        return None


class ClaimsPrivilege(Turn):
    privileged = True


def test_aclose_is_optional_but_async_when_present() -> None:
    assert agent_shape(Turn()) == "turn"
    assert agent_shape(Closing()) == "turn"
    with pytest.raises(ValueError, match="`aclose` must be an `async def` method"):
        agent_shape(SyncClose())


def test_close_agent_awaits_aclose_where_there_is_one() -> None:
    closing = Closing()
    asyncio.run(close_agent(closing))
    asyncio.run(close_agent(Turn()))  # nothing to close: no error
    assert closing.closed == 1


def test_only_the_oracle_is_privileged() -> None:
    assert is_privileged(make_agent("builtin:oracle"))
    for spec in ("builtin:adaptive", "builtin:privileged", "builtin:follower", "builtin:random"):
        assert not is_privileged(make_agent(spec)), spec
    assert not is_privileged(ClaimsPrivilege())  # an attribute of a user's agent is no privilege


class ReadingTurns:
    """Reads the task every turn, makes two calls, then says it is done."""

    name = "reading"

    def __init__(self) -> None:
        self.read: list[str] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.read.append(task_text(request))
        if len(self.read) > 2:
            return ModelReply(content="TASK_COMPLETED")
        return ModelReply(content=f'<tool_call>{{"name": "{READER}", "arguments": '
                                  '{"path": "/data/in.csv"}}</tool_call>')


class ReadingLoop:
    name = "reading"

    def __init__(self) -> None:
        self.read: list[str] = []

    async def run(self, episode: Episode) -> None:
        self.read.append(task_text(episode))
        episode.finish()


@pytest.mark.parametrize("agent", [ReadingTurns(), ReadingLoop()], ids=["turn", "loop"])
def test_task_text_is_the_prompt_s_task_every_turn(agent: ReadingTurns | ReadingLoop) -> None:
    """In text mode the observations come back as user messages: the task stays the first."""
    variant = Variant("optimal")
    asyncio.run(run_episode(TASK, variant, agent, seed=3))
    task = render_prompt(TASK, variant).messages[1]["content"]
    assert agent.read == [task] * (3 if isinstance(agent, ReadingTurns) else 1)
    assert task.startswith("Task: ") and "Execution plan" in task


def test_task_text_without_a_user_message_is_an_error() -> None:
    with pytest.raises(ValueError, match="no user message"):
        task_text(ModelRequest(messages=[{"role": "system", "content": "rules"}]))


def test_the_api_docs_text_mode_agent_makes_its_call_and_completes() -> None:
    """docs/API.md's example agent, run as written: one `<tool_call>` reply, then the signal."""
    block = re.search(r"```python\n(import json.*?class FirstStepOnly.*?)```", API.read_text(),
                      re.DOTALL)
    assert block is not None
    namespace: dict[str, Any] = {}
    exec(block[1], namespace)
    record = asyncio.run(run_episode(TASK, Variant("optimal"), namespace["FirstStepOnly"](),
                                     seed=3))
    assert (record.tool_calls, record.protocol_errors) == (1, 0)
    assert record.stop_reason == "completed"
