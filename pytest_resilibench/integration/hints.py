"""The one line a user's run gets when it looks for the benchmark without asking for it:
`pytest -k semantic_drift` in a repository where no `--resili-*` option or `resili_*` ini key
is given collects none of the benchmark's items (the plugin does nothing until asked)."""

from __future__ import annotations

import re

from pytest_resilibench.base.names import FLAWS, VARIANT_KINDS

__all__ = ["keyword_hint"]

_BENCHMARK_WORDS = frozenset((*FLAWS, *VARIANT_KINDS, "resilibench"))


def keyword_hint(keyword: str) -> str | None:
    """The hint for a `-k` expression that names a flaw, a variant or the benchmark, else
    None."""
    named = [w for w in re.findall(r"[A-Za-z_]\w*", keyword) if w in _BENCHMARK_WORDS]
    if not named:
        return None
    return (f"resilibench: -k names {named[0]!r}, but the benchmark runs only when asked: add "
            "--resili-model=MODEL (or any --resili-* option, or a resili_* ini key) to "
            "collect its items")
