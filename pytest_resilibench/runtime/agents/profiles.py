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

A value the user set explicitly that the family refuses is a `ValueError` naming the option,
raised when the agent is built (start-up), not one refused request per episode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AUTO", "Family", "family_of", "request_params"]

AUTO = "auto"  # --resili-temperature unset: the family's own default


@dataclass(frozen=True)
class Family:
    name: str
    reasoning: bool
    refuses: frozenset[str]  # top-level request fields the API answers with a 400
    temperature: float | None  # sent when the user set none (None: not sent)
    token_limit: str  # the field that caps the reply's tokens


_SAMPLING = frozenset({"top_p", "presence_penalty", "frequency_penalty", "logprobs",
                       "top_logprobs", "logit_bias", "max_tokens"})
REASONING = Family("reasoning", True, _SAMPLING | {"temperature"}, None, "max_completion_tokens")
CHAT = Family("chat", False, frozenset({"reasoning_effort"}), 0.0, "max_tokens")

# First match wins. gpt-5-chat-latest is the non-reasoning gpt-5 (it takes temperature).
_TABLE: tuple[tuple[re.Pattern[str], Family], ...] = (
    (re.compile(r"^gpt-5[^/]*-chat"), CHAT),
    (re.compile(r"^(o\d|gpt-5)"), REASONING),
)


def family_of(model: str) -> Family:
    """The family of an API model name; a vendor prefix (`openai/o3`, `openai:o3`) is ignored."""
    name = model.removeprefix("openai:").rsplit("/", 1)[-1].lower()
    for pattern, family in _TABLE:
        if pattern.match(name):
            return family
    return CHAT


def request_params(model: str, *, temperature: float | str | None = AUTO,
                   seed: int | None = None,
                   model_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The generation fields of every request for `model`.

    `temperature`: `AUTO` for the family's default, None for the server's own (not sent), or
    a number. `model_args` are passed through unchanged and win over the rest. Raises
    `ValueError` naming the option when the family refuses what the user set."""
    family = family_of(model)
    args = dict(model_args or {})
    refused = sorted(k for k in args if k in family.refuses
                     and not (k == "temperature" and args[k] == 1))
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
    if seed is not None:
        params["seed"] = seed
    params.update(args)
    return params


def _hint(family: Family) -> str:
    if family.reasoning:
        return " (use max_completion_tokens and reasoning_effort instead)"
    return " (reasoning_effort is for reasoning models)"
