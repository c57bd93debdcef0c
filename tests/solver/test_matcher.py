"""The BM25 tool matcher: accuracy on hand-labelled phrases, and the ranking API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_resilibench.core.matcher import ToolMatcher, tokenize
from pytest_resilibench.core.registry import default_registry

PHRASES = json.loads((Path(__file__).parent / "data" / "match_phrases.json").read_text())


def _accuracy(pairs: list[list[str]]) -> tuple[float, list[str]]:
    matcher = ToolMatcher.default()
    misses = [f"{phrase!r}: got {matcher.best(phrase)}, want {tool}"
              for phrase, tool in pairs if matcher.best(phrase) != tool]
    return 1 - len(misses) / len(pairs), misses


def test_labelled_phrases_are_valid() -> None:
    names = set(default_registry().names)
    pairs = PHRASES["phrases"]
    assert len(pairs) >= 60
    assert len({p for p, _ in pairs}) == len(pairs), "duplicate phrases"
    assert {tool for _, tool in pairs} == names, "every tool is labelled at least once"
    assert all(tool in names for _, tool in PHRASES["hard_phrases"])


def test_top1_accuracy_on_labelled_phrases(capsys: pytest.CaptureFixture[str]) -> None:
    accuracy, misses = _accuracy(PHRASES["phrases"])
    hard_accuracy, _ = _accuracy(PHRASES["hard_phrases"])
    with capsys.disabled():
        print(f"\nBM25 top-1 accuracy: {accuracy:.1%} on {len(PHRASES['phrases'])} phrases; "
              f"{hard_accuracy:.1%} on {len(PHRASES['hard_phrases'])} vocabulary-mismatch "
              "phrases (reported, not required)")
    assert accuracy >= 0.90, "\n".join(misses)


def test_tokenize_stems_and_drops_stop_words() -> None:
    assert tokenize("Parsing the parsed records") == tokenize("parse a parse record")
    assert tokenize("the of and") == []
    assert tokenize("") == []


def test_rank_is_sorted_bounded_and_respects_exclusions() -> None:
    matcher = ToolMatcher.default()
    ranked = matcher.rank("validate the records against the schema", top=4)
    assert len(ranked) == 4
    assert ranked[0][0] == "data_processing_validator"
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True)
    excluded = matcher.rank("validate the records against the schema", top=4,
                            exclude=["data_processing_validator"])
    assert "data_processing_validator" not in dict(excluded)
    assert excluded[0][0] == "network_validator"
    assert matcher.best("validate the data", exclude=["data_processing_validator"]) \
        == "network_validator"


def test_rank_covers_all_tools_deterministically() -> None:
    matcher = ToolMatcher(default_registry())
    everything = matcher.rank("zzz unknown words", top=100)
    # No term matches: every score is 0 and registry order breaks the tie.
    assert [name for name, _ in everything] == list(default_registry().names)
    assert all(score == 0.0 for _, score in everything)
    assert matcher.rank("parse the raw records") == ToolMatcher.default().rank(
        "parse the raw records")


def test_bad_arguments_raise_clear_errors() -> None:
    matcher = ToolMatcher.default()
    with pytest.raises(ValueError, match="top"):
        matcher.rank("parse", top=0)
    with pytest.raises(ValueError, match="excluded"):
        matcher.best("parse", exclude=default_registry().names)


def test_default_is_cached() -> None:
    assert ToolMatcher.default() is ToolMatcher.default()
