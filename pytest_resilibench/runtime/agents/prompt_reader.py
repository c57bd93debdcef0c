"""What a model can read from its request, and nothing else: the tools as the prompt shows them.

A prompt-only agent (`builtin:adaptive`) may use the tools' names, descriptions and parameter
schemas (the system prompt's "Available tools" list in text mode, the `tools` list in native
mode), the task text and the plan: never the registry's keywords, roles, categories, hidden
prerequisites or the flaw injector's similarity ranking. `ShownTools` is that view, with a BM25
index over what is shown (the tool's name words and description), so that matching a clause of
the task text to a tool uses the words a model sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["ShownTool", "ShownTools", "shown_tools"]


@dataclass(frozen=True)
class ShownTool:
    """One tool as shown: name, description, parameter schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    @property
    def properties(self) -> Mapping[str, Any]:
        props: Mapping[str, Any] = self.parameters.get("properties", {})
        return props

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(self.parameters.get("required", ()))

    @property
    def takes_data(self) -> bool:
        """Whether it consumes an earlier output (it has a `source` parameter)."""
        return "source" in self.properties


class ShownTools:
    """The tools a prompt shows, in the order shown, with a BM25 index of their words."""

    def __init__(self, tools: Sequence[ShownTool]) -> None:
        from rank_bm25 import BM25Okapi

        from pytest_resilibench.core.matcher import TermScores, tokenize

        self.tools = tuple(tools)
        self.by_name = {t.name: t for t in self.tools}
        self._tokenize = tokenize
        documents = [tokenize(f"{t.name.replace('_', ' ')} {t.description}") or ["tool"]
                     for t in self.tools]
        self._bm25 = TermScores(BM25Okapi(documents)) if documents else None
        self._memo: dict[str, list[tuple[str, float]]] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def get(self, name: str) -> ShownTool | None:
        return self.by_name.get(name)

    def rank(self, phrase: str) -> list[tuple[str, float]]:
        """Every tool with its BM25 score for the phrase, best first (ties: shown order)."""
        found = self._memo.get(phrase)
        if found is None:
            if self._bm25 is None:
                return []
            scores = self._bm25(self._tokenize(phrase))
            order = sorted(range(len(self.tools)), key=lambda i: (-scores[i], i))
            found = [(self.tools[i].name, round(float(scores[i]), 6)) for i in order]
            if len(self._memo) < 16384:
                self._memo[phrase] = found
        return found


_TOOL_LINE = re.compile(
    r"^- (?P<name>[\w.\-]+): (?P<description>.*?) Parameters: (?P<schema>\{.*\})$", re.MULTILINE)


def shown_tools(system_text: str, native_tools: Sequence[Mapping[str, Any]] | None) -> ShownTools:
    """The tools of a request: its native `tools`, else the system prompt's tool list."""
    if native_tools:
        return _from_native(json.dumps(list(native_tools), sort_keys=True))
    return _from_text(system_text)


@lru_cache(maxsize=8)
def _from_text(system_text: str) -> ShownTools:
    tools = []
    for match in _TOOL_LINE.finditer(system_text):
        try:
            schema = json.loads(match["schema"])
        except json.JSONDecodeError:
            continue
        if isinstance(schema, dict):
            tools.append(ShownTool(match["name"], match["description"], schema))
    return ShownTools(tools)


@lru_cache(maxsize=8)
def _from_native(encoded: str) -> ShownTools:
    tools = []
    for entry in json.loads(encoded):
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            tools.append(ShownTool(function["name"], str(function.get("description") or ""),
                                   parameters if isinstance(parameters, dict) else {}))
    return ShownTools(tools)
