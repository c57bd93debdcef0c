"""The prefix every request of a run shares, so providers' automatic prompt caching applies.

OpenAI caches prompts of 1024 tokens or more automatically, and "cache hits are only possible
for exact prefix matches within a prompt": static content first, variable content last, and
tools "must be identical between requests" (developers.openai.com/api/docs/guides/
prompt-caching). Groq's, Cerebras' and vLLM's prefix caches match the same way. Our prompts
are built for it: the system message (rules, tool list) is the same for every variant and task
of a tool mode, the native `tools` list too, and everything task- or variant-specific comes
after, in the user message.
`shared_prefix` measures that prefix over rendered prompts; the run's report states it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["CHARS_PER_TOKEN", "estimate_tokens", "shared_prefix"]

CHARS_PER_TOKEN = 4  # OpenAI's rule of thumb for English text; no tokenizer ships offline


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def shared_prefix(prompts: Iterable[tuple[Sequence[dict[str, Any]], Any]]) -> dict[str, Any]:
    """The common prefix of (messages, tools) request bodies, in request order: the messages
    equal in all of them, then the common start of the first message that differs. `tools`
    count when every prompt has the same list (they follow the messages in the body, but
    providers cache them with the static part: tools are part of the cached prefix)."""
    bodies = [(list(messages), tools) for messages, tools in prompts]
    if not bodies:
        return {"prompts": 0, "messages": 0, "chars": 0, "tokens_estimate": 0, "tools": False}
    first_messages, first_tools = bodies[0]
    same_messages = 0
    for i, message in enumerate(first_messages):
        if all(i < len(m) and m[i] == message for m, _ in bodies):
            same_messages += 1
        else:
            break
    chars = sum(len(str(m.get("content") or "")) for m in first_messages[:same_messages])
    if same_messages < len(first_messages):
        texts = [str(m[same_messages].get("content") or "") if same_messages < len(m) else ""
                 for m, _ in bodies]
        chars += len(os.path.commonprefix(texts))  # noqa: RUF071 (characters are meant)
    same_tools = first_tools is not None and all(tools == first_tools for _, tools in bodies)
    if same_tools:
        chars += len(json.dumps(first_tools, separators=(",", ":")))
    return {"prompts": len(bodies), "messages": same_messages, "chars": chars,
            "tokens_estimate": estimate_tokens(chars), "tools": same_tools}
