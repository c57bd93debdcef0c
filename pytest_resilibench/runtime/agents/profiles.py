"""Request profiles per model family: which generation fields a model takes.

OpenAI's reasoning models (the o-series and gpt-5, gpt-5-mini ...) refuse the sampling fields
chat models take: `temperature` other than 1, `top_p`, the penalties, `logprobs`, `logit_bias`
and `max_tokens` (use `max_completion_tokens`); they take `reasoning_effort` instead
(https://platform.openai.com/docs/guides/reasoning,
https://platform.openai.com/docs/api-reference/chat/create,
https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/reasoning). Inspect AI
(`src/inspect_ai/model/_providers/openai.py`: `is_o_series`, `is_gpt_5`) and LiteLLM
(`litellm/llms/openai/chat/o_series_transformation.py`, `gpt_5_transformation.py`) decide the
family from the model name the same way. Every other model (gpt-4o, vLLM, Ollama, llama.cpp)
keeps the chat defaults.

Other vendors' OpenAI-compatible endpoints, by model name:
- Anthropic (`claude-*`, base URL https://api.anthropic.com/v1/): chat completions only, no
  Responses API; `n` must be exactly 1; `temperature` is capped at 1; `seed`, the penalties,
  `logprobs`, `logit_bias`, `response_format`, `store`, `metadata` and `user` are ignored
  (so replies are not reproducible from a seed)
  (https://docs.claude.com/en/api/openai-sdk, "Important OpenAI compatibility limitations"
  and its request-fields table).
- Google Gemini (`gemini-*`, base URL https://generativelanguage.googleapis.com/v1beta/openai/):
  chat completions only; a top-level field the endpoint does not know is a 400 "Invalid JSON
  payload received. Unknown name ...: Cannot find field.", `seed` and `frequency_penalty`
  among them (https://ai.google.dev/gemini-api/docs/openai lists the fields it takes; the
  refusals as users met them: github.com/Vali-98/ChatterUI/issues/227,
  github.com/mcpchecker/mcpchecker/pull/188), so no `seed` is sent to it.
- Azure OpenAI serves OpenAI's models under deployment names: a deployment is profiled by
  its name (name deployments after their model, or pass the fields through
  `--resili-model-args`).

A value the user set explicitly that the family refuses is a `ValueError` naming the option,
raised when the agent is built (start-up), not one refused request per episode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AUTO", "GEMINI_FIELDS", "REQUEST_OPTIONS", "Family", "check_api", "family_of",
           "request_params"]

AUTO = "auto"  # --resili-temperature unset: the family's own default


@dataclass(frozen=True)
class Family:
    name: str
    reasoning: bool
    refuses: frozenset[str]  # top-level request fields the API answers with a 400
    temperature: float | None  # sent when the user set none (None: not sent)
    token_limit: str  # the field that caps the reply's tokens
    # The top-level chat fields the endpoint knows (None: OpenAI's); any other is a 400.
    fields: frozenset[str] | None = None
    responses: bool = True  # whether it serves the Responses API
    seed: bool = True  # whether `seed` may be sent
    one_choice: bool = False  # `n` must be 1
    docs: str = "https://platform.openai.com/docs/api-reference/chat/create"


_SAMPLING = frozenset({"top_p", "presence_penalty", "frequency_penalty", "logprobs",
                       "top_logprobs", "logit_bias", "max_tokens"})
REASONING = Family("reasoning", True, _SAMPLING | {"temperature"}, None, "max_completion_tokens")
CHAT = Family("chat", False, frozenset({"reasoning_effort"}), 0.0, "max_tokens")
ANTHROPIC = Family("anthropic", False, frozenset(), 0.0, "max_tokens", responses=False,
                   one_choice=True, docs="https://docs.claude.com/en/api/openai-sdk")
# The fields Gemini's OpenAI compatibility takes (https://ai.google.dev/gemini-api/docs/openai).
GEMINI_FIELDS = frozenset({
    "model", "messages", "tools", "tool_choice", "temperature", "top_p", "n", "stream",
    "stream_options", "stop", "max_tokens", "max_completion_tokens", "response_format",
    "reasoning_effort"})
GEMINI = Family("gemini", False, frozenset(), 0.0, "max_tokens", fields=GEMINI_FIELDS,
                responses=False, seed=False, docs="https://ai.google.dev/gemini-api/docs/openai")

# First match wins. gpt-5-chat-latest is the non-reasoning gpt-5 (it takes temperature).
_TABLE: tuple[tuple[re.Pattern[str], Family], ...] = (
    (re.compile(r"^gpt-5[^/]*-chat"), CHAT),
    (re.compile(r"^(o\d|gpt-5)"), REASONING),
    (re.compile(r"^claude-"), ANTHROPIC),
    (re.compile(r"^gemini-"), GEMINI),
)


def family_of(model: str) -> Family:
    """The family of an API model name; a vendor prefix (`openai/o3`, `openai:o3`) is ignored."""
    name = model.removeprefix("openai:").rsplit("/", 1)[-1].lower()
    for pattern, family in _TABLE:
        if pattern.match(name):
            return family
    return CHAT


# The `openai` client's per-request options, not request fields (openai-python's README,
# "Undocumented request params"): `create(..., extra_headers=, extra_query=, extra_body=)`
# sends them as HTTP headers, URL query parameters and fields merged into the body.
# `model_args` takes them by those names (the provider sends them so); no family's field list
# applies to them.
REQUEST_OPTIONS = ("extra_headers", "extra_query", "extra_body")


def _check_request_options(args: Mapping[str, Any]) -> None:
    for name in REQUEST_OPTIONS:
        if name not in args:
            continue
        value = args[name]
        strings = name == "extra_headers"
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and (isinstance(v, str) or not strings)
                for k, v in value.items()):
            shape = "names to strings" if strings else "names to values"
            raise ValueError(f"--resili-model-args: {name} must be an object of {shape}, "
                             f"got {json.dumps(value, default=repr)[:80]}")


def request_params(model: str, *, temperature: float | str | None = AUTO,
                   seed: int | None = None,
                   model_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The generation fields of every request for `model`.

    `temperature`: `AUTO` for the family's default, None for the server's own (not sent), or
    a number. `model_args` are passed through unchanged and win over the rest (with the
    client's `REQUEST_OPTIONS`, which the provider sends as such). Raises `ValueError` naming
    the option when the family refuses what the user set."""
    family = family_of(model)
    args = dict(model_args or {})
    _check_request_options(args)
    fields = {k: v for k, v in args.items() if k not in REQUEST_OPTIONS}
    refused = sorted(k for k in fields if (k in family.refuses
                                           and not (k == "temperature" and args[k] == 1))
                     or (family.fields is not None and k not in family.fields)
                     or (family.one_choice and k == "n" and args[k] != 1))
    if refused:
        raise ValueError(f"--resili-model-args: {model} ({family.name} model) does not take "
                         f"{', '.join(refused)}" + _hint(family))
    params: dict[str, Any] = {}
    if temperature == AUTO:
        if family.temperature is not None:
            params["temperature"] = family.temperature
    elif temperature is not None:
        if family.reasoning and temperature != 1:
            raise ValueError(f"--resili-temperature: {model} is a reasoning model; it only "
                             f"takes the default temperature (leave the option unset or "
                             f"use 'default')")
        params["temperature"] = temperature
    if seed is not None and family.seed:
        params["seed"] = seed
    params.update(args)
    return params


def check_api(model: str, api: str) -> None:
    """Raise ValueError naming `--resili-api` when the model's endpoint lacks that API."""
    family = family_of(model)
    if api == "responses" and not family.responses:
        raise ValueError(f"--resili-api=responses: {model} ({family.name}) is served through "
                         f"chat completions only ({family.docs}); use --resili-api=chat")


def _hint(family: Family) -> str:
    if family.reasoning:
        return " (use max_completion_tokens and reasoning_effort instead)"
    if family.fields is not None or family.one_choice:
        return f" (see {family.docs})"
    return " (reasoning_effort is for reasoning models)"
