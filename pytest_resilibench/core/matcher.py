"""BM25 tool matching: an operation phrase ("parse the raw records") -> ranked tools
(docs/BENCHMARK.md: Tasks).

Each tool is one document: its description, usage keywords, operation and category words. Words
are lower-cased, stop words dropped and Snowball-stemmed, so "parsing", "parse" and "parsed"
meet. Scores are Okapi BM25 (`rank-bm25`); ties break by registry order, so a ranking is a pure
function of the phrase and the registry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import numpy as np
import snowballstemmer
from rank_bm25 import BM25Okapi

from pytest_resilibench.core.registry import ToolRegistry, ToolSpec, default_registry

__all__ = ["TermScores", "ToolMatcher", "tokenize"]

_WORD = re.compile(r"[a-z]+")
_STOP_WORDS = frozenset(re.findall(r"\w+", """
    a an and any are as at be by each for from in into is it its of on onto or our so
    that the their them then these this those to up use using via we with you your"""))
_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def tokenize(text: str) -> list[str]:
    """The BM25 terms of a text: lower-case words, no stop words, stemmed."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS]


def _document(tool: ToolSpec) -> list[str]:
    words = [tool.description, " ".join(tool.keywords), tool.operation,
             tool.category.replace("_", " ")]
    return tokenize(" ".join(words))


class TermScores:
    """`BM25Okapi.get_scores`, one term's scores at a time, kept: a query's scores are the sum
    of its terms' (the library adds them up in query order from zeros, as this does, so the
    sums are the same floats), and a run's queries reuse a few hundred terms, where the
    library recomputes each over every document (~30 us a term)."""

    def __init__(self, bm25: BM25Okapi) -> None:
        self._bm25 = bm25
        self._terms: dict[str, Any] = {}

    def __call__(self, query: Iterable[str]) -> Any:
        total = np.zeros(self._bm25.corpus_size)
        for term in query:
            scores = self._terms.get(term)
            if scores is None:
                scores = self._terms[term] = self._bm25.get_scores([term])
            total += scores
        return total


class ToolMatcher:
    """Ranks a registry's tools against an operation phrase."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self._names = registry.names
        self._bm25 = TermScores(BM25Okapi([_document(tool) for tool in registry]))
        self._memo: dict[str, tuple[float, ...]] = {}

    @classmethod
    def default(cls) -> ToolMatcher:
        """The matcher over the default registry (built once per process)."""
        return _default_matcher()

    def scores(self, phrase: str) -> tuple[float, ...]:
        """BM25 score of every tool, in registry order (memoised: generation repeats phrases)."""
        cached = self._memo.get(phrase)
        if cached is None:
            raw = self._bm25(tokenize(phrase))
            cached = tuple(round(float(s), 6) for s in raw)
            if len(self._memo) < 65536:
                self._memo[phrase] = cached
        return cached

    def rank(
        self, phrase: str, *, top: int = 5, exclude: Iterable[str] = ()
    ) -> list[tuple[str, float]]:
        """The `top` best tools for the phrase with their scores, best first; `exclude` names
        tools that may not be chosen (those a task already uses)."""
        if top < 1:
            raise ValueError(f"top must be at least 1, got {top}")
        banned = set(exclude)
        scores = self.scores(phrase)
        # Best first; a stable sort keeps registry order among equal scores.
        order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        ranked = [(self._names[i], scores[i]) for i in order if self._names[i] not in banned]
        return ranked[:top]

    def best(self, phrase: str, *, exclude: Iterable[str] = ()) -> str:
        """The single best tool for the phrase (registry order breaks ties)."""
        ranked = self.rank(phrase, top=1, exclude=exclude)
        if not ranked:
            raise ValueError("every tool is excluded")
        return ranked[0][0]


@lru_cache(maxsize=1)
def _default_matcher() -> ToolMatcher:
    return ToolMatcher(default_registry())
