"""Models the adapters' tests script behind the loopback test server (servers/testserver.py),
the episode they play (the unit tests' two-tool task, tests/unit/test_episode.py), and the
direct path beside them: the same server and episodes through `OpenAIAgent`."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest, ToolCall
from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer
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


# Backoff short enough for a unit test; the retries and waits themselves the defaults'.
FAST: dict[str, Any] = {"backoff_base_s": 0.002, "backoff_max_s": 0.01, "timeout_s": 30.0}
# 30% of requests answered 429 or 500, a Retry-After of 5 ms (issue 45's figure).
FAULTS = FaultConfig(rate=0.3, kinds=("429", "500"), retry_after_s=0.005)
OVERFLOW = "This model's maximum context length is 8192 tokens"


def overflows(request: ModelRequest) -> ModelReply:
    """A model whose context the prompt overflows: the server answers 400 with OpenAI's
    wording (its `policy_error` quotes the policy's message)."""
    raise ValueError(OVERFLOW)


def outcomes(make: Callable[[], Any], episodes: int) -> Counter[tuple[str, str]]:
    """(outcome, stop reason) of `episodes` episodes (repeats 0..n-1) played by agents
    `make` builds, one per episode, each closed after its episode."""
    seed = lucky_seed()

    async def one(repeat: int) -> EpisodeRecord:
        agent = make()
        try:
            return await run_episode(TASK, Variant("optimal"), agent, seed=seed,
                                     repeat=repeat)
        finally:
            await agent.aclose()

    return Counter((r.outcome, r.stop_reason) for r in
                   (asyncio.run(one(repeat)) for repeat in range(episodes)))


def direct(server: OpenAITestServer, model: str) -> OpenAIAgent:
    """The direct path to the same server, at the default retries."""
    return OpenAIAgent(model, base_url=server.base_url, api_key="sk-test", **FAST)
