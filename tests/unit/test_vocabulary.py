"""The outcome words: plurals, the fixed count order, and pytest's last line put in order."""

from __future__ import annotations

from typing import Any

from pytest_resilibench.reporting import vocabulary


def test_plurals() -> None:
    assert vocabulary.plural(1, "episode") == "1 episode"
    assert vocabulary.plural(2, "episode") == "2 episodes"
    assert vocabulary.plural(0, "infra error") == "0 infra errors"
    assert vocabulary.plural(1, "infra error") == "1 infra error"
    assert vocabulary.plural(7, "failed") == "7 failed"  # adjectives take no plural
    assert vocabulary.plural(3, "full episode") == "3 full episodes"


def test_counts_are_always_in_one_order() -> None:
    line = vocabulary.counts_line({"infra_error": 1, "failed": 469, "full": 307,
                                   "partial": 724})
    assert line == "307 full, 724 partial, 469 failed, 1 infra error"
    assert vocabulary.counts_line({"partial": 2}, zeros=False) == "2 partial"


def test_tally_counts_anything_unscored_as_an_infra_error() -> None:
    counts = vocabulary.tally(["failed", "full", "error", "full", "exploded"])
    assert counts == {"full": 2, "partial": 0, "failed": 1, "agent_error": 0, "infra_error": 2}
    assert list(counts) == list(vocabulary.COUNT_ORDER)


def test_agent_errors_are_their_own_key_shown_when_there_are_some() -> None:
    keys = [vocabulary.status_key("failed", "agent_error"), vocabulary.status_key("failed"),
            vocabulary.status_key("error", "harness_error"), vocabulary.status_key("full")]
    assert keys == ["agent_error", "failed", "infra_error", "full"]
    counts = vocabulary.tally(keys)
    assert vocabulary.counts_line(counts) == (
        "1 full, 0 partial, 1 failed, 1 agent error, 1 infra error")
    counts["agent_error"] = 0
    assert vocabulary.counts_line(counts) == "1 full, 0 partial, 1 failed, 1 infra error"


class _Reporter:
    """What `order_stats` uses of pytest's TerminalReporter."""

    def __init__(self, stats: dict[str, list[Any]]) -> None:
        self.stats = stats
        self._main_color: str | None = "yellow"


def test_last_line_categories_are_renamed_and_reordered() -> None:
    cat = vocabulary.run_category
    # The order the reports happened to arrive in, and pytest's own categories among them.
    tr = _Reporter({cat("failed"): [1] * 469, "passed": [0] * 3, cat("partial"): [1] * 724,
                    cat("infra_error"): [1], cat("full"): [1] * 307})
    vocabulary.order_stats(tr)
    assert list(tr.stats) == ["passed", "full", "partial", "episodes failed", "infra error"]
    assert tr._main_color is None  # pytest recomputes its category order
    one = _Reporter({cat("full"): [1], cat("failed"): [1]})
    vocabulary.order_stats(one)
    assert list(one.stats) == ["full", "episode failed"]


def test_no_category_reads_as_one_of_pytests_own() -> None:
    # pytest lists every report under "failed" or "error" as a test failure, and tools read
    # its last line as "N noun" (pytester's parseoutcomes).
    own = ("failed", "error", "errors", "passed")
    for key in vocabulary.COUNT_ORDER:
        assert vocabulary.run_category(key).split()[0] not in own
        for n in (1, 2):
            assert vocabulary._final_category(key, n).split()[0] not in own
