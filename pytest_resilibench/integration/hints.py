"""The one line a user's run gets when it looks for the benchmark without asking for it:
`pytest -k semantic_drift` or `pytest -m resilibench` in a repository where no `--resili-*`
option or `resili_*` ini key is given collects none of the benchmark's items (the plugin does
nothing until asked), and pytest alone would say only "N deselected"."""

from __future__ import annotations

import re
from itertools import pairwise

from pytest_resilibench.base.names import FLAWS, VARIANT_KINDS

__all__ = ["selection_hint"]

_BENCHMARK_WORDS = frozenset((*FLAWS, *VARIANT_KINDS, "resilibench"))
_WORD = re.compile(r"[A-Za-z_]\w*")


def selection_hint(keyword: str, markexpr: str) -> str | None:
    """The hint for a `-k` or `-m` expression that names a flaw, a variant or the benchmark
    (`resilibench`, the marker its items carry), else None. A name under `not` is not looked
    for: `-m "not resilibench"` leaves the benchmark out on purpose."""
    for option, expression in (("-k", keyword), ("-m", markexpr)):
        named = _looked_for(expression)
        if named is not None:
            return (f"resilibench: {option} names {named!r}, but the benchmark runs only when "
                    "asked: add --resili-model=MODEL (or any --resili-* option, or a resili_* "
                    "ini key) to collect its items")
    return None


def _looked_for(expression: str) -> str | None:
    """The first benchmark word of an expression that is not negated."""
    words: list[str] = _WORD.findall(expression or "")
    for before, word in pairwise(["", *words]):
        if word in _BENCHMARK_WORDS and before != "not":
            return word
    return None
