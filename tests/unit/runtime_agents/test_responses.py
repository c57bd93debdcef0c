"""The Responses API path: conversions, the reasoning memo, and the provider against the strict
test server (the real `openai` client, never mocked)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pytest_resilibench.base.names import ToolMode
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.agents.cache import ModelCallCache
from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
from pytest_resilibench.runtime.agents.responses import (
    ReasoningMemo,
    parse_response,
    responses_body,
    to_input,
)
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.runtime.protocol import MalformedReply, ModelReply, ToolCall
from pytest_resilibench.servers.testserver import OpenAITestServer

KEY = "sk-test-responses-0123456789"
CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"status\": \"ok\"}"},
]


def test_chat_messages_become_input_items() -> None:
    assert to_input(CHAT) == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "task"},
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "{\"status\": \"ok\"}"},
    ]


def test_a_remembered_turn_is_sent_back_as_the_items_returned() -> None:
    output = [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
              {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "read_file",
               "arguments": "{}"}]
    reply = parse_response({"output": output, "usage": {
        "input_tokens": 50, "output_tokens": 20,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 16}}})
    assert reply.tool_calls == (ToolCall("c1", "read_file", "{}"),) and reply.content is None
    assert reply.usage == {"prompt_tokens": 50, "completion_tokens": 20, "reasoning_tokens": 16}
    memo = ReasoningMemo()
    memo.remember(CHAT[:2], reply)
    assert CHAT[2] == reply.to_message()
    items = to_input(CHAT, memo)
    assert items[2:4] == output  # reasoning first, verbatim
    assert items[4]["type"] == "function_call_output"


def test_memo_forgets_the_least_recently_used() -> None:
    memo = ReasoningMemo(capacity=2)
    for i in range(3):
        memo.remember([{"role": "user", "content": str(i)}],
                      ModelReply(content=str(i), raw={"output": [{"type": "message"}]}))
    assert len(memo) == 2


def test_body_maps_chat_params_and_drops_seed() -> None:
    body = responses_body("o3", CHAT[:2], [{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": {"type": "object"}}}],
        {"seed": 1, "reasoning_effort": "low", "max_completion_tokens": 99, "text": {}})
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "low"} and body["max_output_tokens"] == 99
    assert "seed" not in body and body["text"] == {}
    assert body["tools"] == [{"type": "function", "name": "f", "description": "d",
                              "parameters": {"type": "object"}, "strict": False}]
    assert "include" not in responses_body("gpt-4o", CHAT[:2], None, {"temperature": 0})


def test_malformed_responses() -> None:
    bad: object
    for bad in (None, [], {"id": "resp_1"}, {"output": "text"}):
        with pytest.raises(MalformedReply):
            parse_response(bad)


def play(api: str, mode: ToolMode, *, cache: ModelCallCache | None = None,
         server: OpenAITestServer | None = None) -> tuple[list[dict[str, Any]], OpenAIAgent]:
    tasks = list(load_tasks())[:4]
    variants = [Variant("optimal"), Variant("flawed", flaw="missing_step", severity="medium")]
    assert server is not None
    agent = OpenAIAgent("o3", base_url=server.base_url, api_key=KEY, api=api, max_retries=0,
                        cache=cache)

    async def all_episodes() -> list[Any]:
        try:
            return list(await asyncio.gather(*(
                run_episode(t, v, agent, seed=1, repeat=0, tool_mode=mode)
                for t in tasks for v in variants)))
        finally:
            await agent.aclose()

    records = asyncio.run(all_episodes())
    return [r.to_json() for r in records], agent


def outcomes(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["outcome"], r["turns"], json.dumps(r["calls"])) for r in rows]


@pytest.mark.parametrize("mode", ["text", "native"])
def test_o3_over_both_apis_plays_the_same_episodes_and_keeps_its_reasoning(mode: ToolMode) -> None:
    policy = {"o3": make_builtin("adaptive")}
    with OpenAITestServer(policy, strict=True, api_key=KEY) as chat_server:
        chat, _ = play("chat", mode, server=chat_server)
    with OpenAITestServer(policy, strict=True, api_key=KEY) as server:
        responses, agent = play("responses", mode, server=server)
        reasoning = server.stats.to_json()["reasoning"]
        assert server.stats.refused == {}
    assert all(r["outcome"] != "error" for r in chat + responses)
    assert outcomes(responses) == outcomes(chat)
    # every later turn sent back the reasoning items of the turns before it
    assert reasoning["missing"] == 0
    assert reasoning["returned"] == agent.stats.reasoning_items_sent > 0
    later_turns = sum(len([m for m in r["messages"] if m["role"] == "assistant"]) - 1
                      for r in responses)
    assert reasoning["issued"] == later_turns + len(responses)
    assert all(r["tokens"]["reasoning"] > 0 for r in responses)
    assert any(r["tokens"]["cached"] > 0 for r in responses)


def test_responses_are_cached_and_replayed_with_their_reasoning(tmp_path: Any) -> None:
    policy = {"o3": make_builtin("adaptive")}
    cache = ModelCallCache(tmp_path / "calls.sqlite")
    with OpenAITestServer(policy, strict=True, api_key=KEY) as server:
        first, _ = play("responses", "native", cache=cache, server=server)
        sent = server.stats.requests
        again, agent = play("responses", "native", cache=cache, server=server)
        assert server.stats.requests == sent  # the cache answered everything
    assert outcomes(again) == outcomes(first)
    assert agent.stats.cache_hits == agent.stats.requests > 0
    assert all(r["tokens"]["prompt"] == 0 and r["tokens"]["replayed"] > 0 for r in again)
