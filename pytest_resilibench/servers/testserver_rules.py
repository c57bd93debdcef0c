"""What OpenAI's API refuses, and the Responses API's shapes, for the strict test server.

A test double that accepts any body lets a provider pass its tests against a world that does
not exist (the provider once sent `temperature: 0` to o3: every request of a real run was a
400). Each rule here cites OpenAI's documentation, and the messages are the API's own.

- Unknown top-level fields are refused: chat completions answers "Unrecognized request
  argument supplied", the Responses API "Unknown parameter"
  (https://platform.openai.com/docs/api-reference/chat/create,
  https://platform.openai.com/docs/api-reference/responses/create list the fields).
- Reasoning models (o-series, gpt-5) take no `temperature` but the default 1, no `top_p`,
  penalties, `logprobs` or `logit_bias`, and no `max_tokens` ("Use 'max_completion_tokens'
  instead"); other models take no `reasoning_effort`
  (https://platform.openai.com/docs/guides/reasoning; the family table is `agents/profiles.py`).
- Encrypted reasoning is for reasoning models only, and a reasoning item sent back with
  `store=false` must carry the `encrypted_content` the API issued
  (https://platform.openai.com/docs/guides/reasoning#encrypted-reasoning-items).
- A wrong key is a 401 `invalid_api_key` (https://platform.openai.com/docs/guides/error-codes).
- Other vendors' compatible endpoints, told by the model name (`agents/profiles.py` cites
  their docs): Gemini (`gemini-*`) refuses every top-level field outside the ones it takes,
  with Google's "Invalid JSON payload received. Unknown name" 400; Anthropic (`claude-*`)
  takes `n` = 1 only; neither serves the Responses API (a 404).
- Azure OpenAI (`/openai/deployments/DEPLOYMENT/...`) needs the `api-version` query
  parameter, else a 404 "Resource not found"
  (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference: "api-version" is a
  required query parameter of every data-plane request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_resilibench.runtime.agents.profiles import family_of
from pytest_resilibench.runtime.protocol import ModelReply

__all__ = [
    "CHAT_FIELDS",
    "RESPONSES_FIELDS",
    "Refusal",
    "check_chat",
    "check_responses",
    "input_to_messages",
    "no_api_version",
    "response_json",
    "tools_to_chat",
]

CHAT_FIELDS = frozenset({
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "functions",
    "function_call", "temperature", "top_p", "n", "stream", "stream_options", "stop",
    "max_tokens", "max_completion_tokens", "presence_penalty", "frequency_penalty",
    "logit_bias", "logprobs", "top_logprobs", "user", "seed", "response_format",
    "reasoning_effort", "service_tier", "store", "metadata", "modalities", "audio",
    "prediction", "verbosity", "web_search_options", "prompt_cache_key", "safety_identifier",
})
RESPONSES_FIELDS = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
    "temperature", "top_p", "top_logprobs", "max_output_tokens", "max_tool_calls", "reasoning",
    "store", "include", "text", "previous_response_id", "conversation", "metadata", "stream",
    "stream_options", "truncation", "user", "service_tier", "background", "prompt",
    "prompt_cache_key", "safety_identifier",
})
ENCRYPTED = "reasoning.encrypted_content"


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    param: str | None
    code: str


def no_api_version() -> Refusal:
    return Refusal(404, "Resource not found", None, "404")


def wrong_key(key: str) -> Refusal:
    shown = f"{key[:3]}*****{key[-4:]}" if len(key) > 8 else "*****"
    return Refusal(401, f"Incorrect API key provided: {shown}. You can find your API key at "
                        "https://platform.openai.com/account/api-keys.", None, "invalid_api_key")


def check_chat(body: Mapping[str, Any]) -> Refusal | None:
    family = family_of(str(body.get("model", "")))
    if family.fields is not None:  # Gemini: Google's own wording, every unknown field named
        unknown = sorted(set(body) - family.fields)
        if unknown:
            said = "\n".join(f'Invalid JSON payload received. Unknown name "{name}": Cannot '
                             "find field." for name in unknown)
            return Refusal(400, said, unknown[0], "INVALID_ARGUMENT")
    if family.one_choice and body.get("n", 1) != 1:
        return Refusal(400, "n: Must be exactly 1 (OpenAI SDK compatibility)", "n",
                       "invalid_request_error")
    unknown = sorted(set(body) - CHAT_FIELDS)
    if unknown:
        return Refusal(400, f"Unrecognized request argument supplied: {unknown[0]}",
                       unknown[0], "unknown_parameter")
    return _family_rules(str(body.get("model", "")), body, responses=False)


def check_responses(body: Mapping[str, Any]) -> Refusal | None:
    family = family_of(str(body.get("model", "")))
    if not family.responses:
        return Refusal(404, f"Not found: {family.name}'s OpenAI compatibility serves no "
                            "Responses API", None, "not_found")
    unknown = sorted(set(body) - RESPONSES_FIELDS)
    if unknown:
        return Refusal(400, f"Unknown parameter: '{unknown[0]}'.", unknown[0],
                       "unknown_parameter")
    model = str(body.get("model", ""))
    refusal = _family_rules(model, body, responses=True)
    if refusal is not None:
        return refusal
    include = body.get("include") or []
    if ENCRYPTED in include and not family_of(model).reasoning:
        return Refusal(400, "Encrypted content is not supported with this model.", "include",
                       "unsupported_parameter")
    if not isinstance(body.get("input"), (list, str)):
        return Refusal(400, "Missing required parameter: 'input'.", "input",
                       "missing_required_parameter")
    return None


def _family_rules(model: str, body: Mapping[str, Any], *, responses: bool) -> Refusal | None:
    family = family_of(model)
    if family.reasoning:
        if "temperature" in body and body["temperature"] != 1:
            return Refusal(400, f"Unsupported value: 'temperature' does not support "
                                f"{body['temperature']} with this model. Only the default (1) "
                                f"value is supported.", "temperature", "unsupported_value")
        if "max_tokens" in body:
            return Refusal(400, "Unsupported parameter: 'max_tokens' is not supported with "
                                "this model. Use 'max_completion_tokens' instead.",
                           "max_tokens", "unsupported_parameter")
        for name in sorted(family.refuses - {"temperature", "max_tokens"}):
            if name in body:
                return _unsupported(name)
    elif responses and isinstance(body.get("reasoning"), Mapping):
        return _unsupported("reasoning.effort")
    elif not responses and "reasoning_effort" in body:
        return _unsupported("reasoning_effort")
    return None


def _unsupported(name: str) -> Refusal:
    return Refusal(400, f"Unsupported parameter: '{name}' is not supported with this model.",
                   name, "unsupported_parameter")


# --- the Responses API's shapes -------------------------------------------------------------
def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def input_to_messages(items: object) -> list[dict[str, Any]]:
    """Responses input items as the chat messages a policy reads (reasoning items dropped; a
    reply's message and function calls join into one assistant message, as in chat)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    last_was_output = False
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message")
        if kind == "reasoning":
            continue
        if kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if last_was_output and messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            last_was_output = True
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": str(item.get("output", ""))})
            last_was_output = False
        else:
            role = str(item.get("role", "user"))
            messages.append({"role": role, "content": _text(item.get("content"))})
            last_was_output = role == "assistant"
    return messages


def tools_to_chat(tools: object) -> list[dict[str, Any]] | None:
    if not isinstance(tools, list):
        return None
    return [{"type": "function", "function": {
        "name": t.get("name"), "description": t.get("description", ""),
        "parameters": t.get("parameters", {})}} for t in tools if isinstance(t, Mapping)]


def response_json(reply: ModelReply, *, model: str, request_id: str,
                  reasoning: Mapping[str, Any] | None, usage: Mapping[str, int],
                  store: bool) -> dict[str, Any]:
    """A `response` object: the reasoning item first (when the model reasons), then the
    message and the function calls, with ids the server can recognise when sent back."""
    output: list[dict[str, Any]] = []
    if reasoning is not None:
        output.append(dict(reasoning))
    if reply.content:
        output.append({"type": "message", "id": f"msg_{request_id}", "status": "completed",
                       "role": "assistant", "content": [
                           {"type": "output_text", "text": reply.content, "annotations": []}]})
    for index, call in enumerate(reply.tool_calls):
        output.append({"type": "function_call", "id": f"fc_{request_id}_{index}",
                       "call_id": call.id, "name": call.name, "arguments": call.arguments,
                       "status": "completed"})
    return {
        "id": f"resp_{request_id}", "object": "response", "created_at": 0,
        "status": "completed", "model": model, "output": output, "store": store,
        "usage": {"input_tokens": usage["prompt"],
                  "input_tokens_details": {"cached_tokens": usage["cached"]},
                  "output_tokens": usage["completion"],
                  "output_tokens_details": {"reasoning_tokens": usage["reasoning"]},
                  "total_tokens": usage["prompt"] + usage["completion"]},
    }

