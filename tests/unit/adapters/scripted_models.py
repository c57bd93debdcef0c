"""Models the adapters' tests script behind the loopback test server (servers/testserver.py),
and the episode they play: the unit tests' two-tool task (tests/unit/test_episode.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest, ToolCall
from tests.unit.test_episode import READER, TASK, lucky_seed

READ_ARGS = {"path": "/data/in.csv"}


def calls_forever(request: ModelRequest) -> ModelReply:
    """A model that calls the reader with the same arguments every turn."""
    turn = len(request.messages)
    return ModelReply(content=None, tool_calls=(
        ToolCall(f"call_{turn}", READER, json.dumps(READ_ARGS)),),
        usage={"prompt_tokens": 100, "completion_tokens": 10})


def gives_up(request: ModelRequest) -> ModelReply:
    """A model that answers in prose, no call and no completion signal."""
    return ModelReply(content="I would rather not.",
                      usage={"prompt_tokens": 50, "completion_tokens": 5})


def play(agent: Any, *, tool_mode: str = "native") -> EpisodeRecord:
    """One episode of the two-tool task on the optimal plan, with a lucky seed."""
    return asyncio.run(run_episode(TASK, Variant("optimal"), agent, seed=lucky_seed(),
                                   tool_mode=tool_mode))  # type: ignore[arg-type]
