"""The episodes as the HTML report embeds them: one gzip-compressed, base64-encoded JSON
document that the page decompresses in the browser (`DecompressionStream("gzip")`) and renders
on demand, so a report of thousands of trajectories stays a few megabytes and opens at once.

Two things make it small: every episode of a run shares a few long system prompts, kept once in
`prompts` (a system message then reads `{"role": "system", "prompt": k}`), and the episodes are
ordered task by task, so that the variants of one task, which share most of their text, lie
within gzip's 32 KB window. `unpack(pack(episodes))` gives the episodes back, in that order.

Format (`resilibench.viewer/1`): `{"schema", "prompts": [text, ...], "episodes": [...]}`.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_resilibench.reporting.summarize import variant_order

__all__ = ["VIEWER_SCHEMA", "decode", "encode", "json_utf8", "order", "pack", "unpack"]

VIEWER_SCHEMA = "resilibench.viewer/1"

Episode = Mapping[str, Any]


def order(episodes: Sequence[Episode]) -> list[Episode]:
    """Task by task (then model, variant in the paper's order, severity, base rate, repeat):
    the order the viewer lists them in, and the one that compresses best."""
    severities = {"light": 0, "medium": 1, "severe": 2}

    def key(ep: Episode) -> tuple[Any, ...]:
        return (str(ep.get("task_id")), str(ep.get("model")),
                variant_order(str(ep.get("variant"))),
                severities.get(str(ep.get("severity")), -1),
                repr(ep.get("base_success")), repr(ep.get("seed")), repr(ep.get("repeat")))

    return sorted(episodes, key=key)


def _text(content: object) -> str | None:
    return content if isinstance(content, str) else None


def pack(episodes: Sequence[Episode]) -> dict[str, Any]:
    prompts: dict[str, int] = {}
    packed = []
    for ep in order(episodes):
        messages = ep.get("messages")
        if isinstance(messages, list):
            slim = []
            for m in messages:
                text = _text(m.get("content")) if isinstance(m, Mapping) else None
                if isinstance(m, Mapping) and m.get("role") == "system" and text is not None \
                        and set(m) == {"role", "content"}:
                    slim.append({"role": "system", "prompt": prompts.setdefault(text,
                                                                                len(prompts))})
                else:
                    slim.append(m)
            ep = {**ep, "messages": slim}
        packed.append(ep)
    return {"schema": VIEWER_SCHEMA, "prompts": list(prompts), "episodes": packed}


def unpack(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The episodes of a packed document, system prompts put back (what the page does)."""
    prompts = data["prompts"]
    out = []
    for ep in data["episodes"]:
        messages = ep.get("messages")
        if isinstance(messages, list):
            ep = {**ep, "messages": [
                {"role": "system", "content": prompts[m["prompt"]]}
                if isinstance(m, Mapping) and m.get("role") == "system" and "prompt" in m
                else m for m in messages]}
        out.append(dict(ep))
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_utf8(text: str) -> str:
    """JSON text with every lone surrogate (a model's or an agent's text may hold one: JSON
    allows `"\\ud800"`) written as its escape, as `ensure_ascii` would: the text is valid
    UTF-8 and reads back the same, in Python and in the browser."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encode(data: Mapping[str, Any]) -> str:
    """base64 of the gzip-compressed compact JSON (mtime 0: the same report, the same bytes)."""
    raw = json_utf8(json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str))
    return base64.b64encode(gzip.compress(raw.encode("utf-8"), 9, mtime=0)).decode("ascii")


def decode(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(text)))
    return data
