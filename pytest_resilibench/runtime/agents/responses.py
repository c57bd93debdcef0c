"""The Responses API path of the OpenAI provider: chat messages in, a `ModelReply` out.

Episodes speak chat completions (system, user, assistant with tool calls, tool). For OpenAI's
reasoning models the Responses API is the recommended route, because chat completions drop
the model's reasoning between tool turns
(https://platform.openai.com/docs/guides/reasoning#keeping-reasoning-items-in-context).
With `store=false` nothing is kept on OpenAI's side, so each turn's reasoning items come back
encrypted (`include=["reasoning.encrypted_content"]`) and are sent back as input items on the
next turn, together with the output items they belong to
(https://platform.openai.com/docs/guides/reasoning#encrypted-reasoning-items,
https://platform.openai.com/docs/api-reference/responses/create).

The conversation the episode keeps has no room for those items, so `ReasoningMemo` remembers
each reply's output items under the digest of the conversation up to and including its
assistant message; turning the next request's messages into input, an assistant message whose
prefix is remembered becomes exactly the items the API returned, reasoning first.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_resilibench.runtime.agents.profiles import family_of
from pytest_resilibench.runtime.protocol import MalformedReply, ModelReply, ToolCall

__all__ = ["ReasoningMemo", "parse_response", "responses_body"]

ENCRYPTED = "reasoning.encrypted_content"


class ReasoningMemo:
    """Output items of recent replies by conversation prefix, least recently used dropped.

    An episode in flight needs its own turns' entries only; `capacity` is far above what the
    episodes in flight at once can hold, and a forgotten entry merely degrades to sending the
    assistant message without its reasoning (still a valid request)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def remember(self, messages: Sequence[Mapping[str, Any]], reply: ModelReply) -> None:
        output = (reply.raw or {}).get("output")
        if not isinstance(output, list) or not output:
            return
        key = _prefix_digests([*messages, reply.to_message()])[-1]
        self._items[key] = [dict(item) for item in output if isinstance(item, Mapping)]
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def recall(self, key: str) -> list[dict[str, Any]] | None:
        items = self._items.get(key)
        if items is not None:
            self._items.move_to_end(key)
        return items


def _prefix_digests(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Digest of each prefix (messages[:i + 1]), chained so a request costs one pass."""
    digests, running = [], b""
    for message in messages:
        canonical = json.dumps(message, sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False, default=str).encode()
        running = hashlib.sha256(running + canonical).digest()
        digests.append(running.hex())
    return digests


def to_input(messages: Sequence[Mapping[str, Any]],
             memo: ReasoningMemo | None = None) -> list[dict[str, Any]]:
    """Chat messages as Responses input items; remembered assistant turns become the items
    the API returned for them (reasoning included)."""
    digests = _prefix_digests(messages) if memo is not None else []
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            recalled = memo.recall(digests[index]) if memo is not None else None
            if recalled is not None:
                items.extend(recalled)
                continue
            if message.get("content"):
                items.append({"role": "assistant", "content": str(message["content"])})
            for call in message.get("tool_calls") or ():
                function = call.get("function", {})
                items.append({"type": "function_call", "call_id": call.get("id", ""),
                              "name": function.get("name", ""),
                              "arguments": function.get("arguments", "")})
        elif role == "tool":
            items.append({"type": "function_call_output",
                          "call_id": message.get("tool_call_id", ""),
                          "output": str(message.get("content") or "")})
        else:  # system, developer, user
            items.append({"role": role, "content": message.get("content") or ""})
    return items


def to_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat `tools` as Responses function tools. `strict` is off: the Responses API turns it
    on by default, and strict mode demands every property required."""
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        out.append({"type": "function", "name": function.get("name"),
                    "description": function.get("description", ""),
                    "parameters": function.get("parameters", {}), "strict": False})
    return out


def responses_body(model: str, messages: Sequence[Mapping[str, Any]],
                   tools: Sequence[Mapping[str, Any]] | None, params: Mapping[str, Any],
                   memo: ReasoningMemo | None = None) -> dict[str, Any]:
    """The request body. Chat-style params are mapped (`max_completion_tokens` and
    `max_tokens` to `max_output_tokens`, `reasoning_effort` to `reasoning.effort`; `seed`,
    which the Responses API does not take, is dropped); the rest passes through."""
    body: dict[str, Any] = {"model": model, "input": to_input(messages, memo), "store": False}
    if family_of(model).reasoning:  # other models refuse encrypted reasoning
        body["include"] = [ENCRYPTED]
    for key, value in params.items():
        if key in ("max_completion_tokens", "max_tokens"):
            body["max_output_tokens"] = value
        elif key == "reasoning_effort":
            body["reasoning"] = {**body.get("reasoning", {}), "effort": value}
        elif key != "seed":
            body[key] = value
    if tools:
        body["tools"] = to_tools(tools)
    return body


def parse_response(data: object) -> ModelReply:
    """A `ModelReply` from a Responses API `response` object: the text of its message items,
    its function calls, its usage (with reasoning and cached tokens). Raises
    `MalformedReply` when there is no `output` list."""
    if not isinstance(data, Mapping):
        raise MalformedReply(f"expected a JSON object, got {type(data).__name__}")
    output = data.get("output")
    if not isinstance(output, list):
        raise MalformedReply("no output in the response")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, item in enumerate(output):
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "message":
            for part in item.get("content") or ():
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        elif item.get("type") == "function_call":
            arguments = item.get("arguments")
            if not isinstance(arguments, str):
                arguments = "" if arguments is None else json.dumps(arguments)
            calls.append(ToolCall(id=str(item.get("call_id") or f"call_{index}"),
                                  name=str(item.get("name") or ""), arguments=arguments))
    usage = data.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    return ModelReply(
        content="".join(texts) if texts else None, tool_calls=tuple(calls),
        usage=usage_counts(usage.get("input_tokens"), usage.get("output_tokens"),
                           _detail(usage, "input_tokens_details", "cached_tokens"),
                           _detail(usage, "output_tokens_details", "reasoning_tokens")),
        raw=dict(data))


def usage_counts(prompt: object, completion: object, cached: object,
                 reasoning: object) -> dict[str, int]:
    """Usage as the episode counts it; the details only when the server reported them."""
    counts = {"prompt_tokens": _count(prompt), "completion_tokens": _count(completion)}
    if _count(cached):
        counts["cached_tokens"] = _count(cached)
    if _count(reasoning):
        counts["reasoning_tokens"] = _count(reasoning)
    return counts


def _detail(usage: Mapping[str, Any], group: str, name: str) -> object:
    details = usage.get(group)
    return details.get(name) if isinstance(details, Mapping) else None


MAX_TOKENS = 10 ** 9  # per reply; a larger "count" is a broken server's, not a usage


def _count(value: object) -> int:
    return value if isinstance(value, int) and 0 <= value <= MAX_TOKENS else 0
