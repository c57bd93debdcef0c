"""One outcome vocabulary across the terminal, the JSON report, the markdown and the HTML:
full / partial / failed / infra error, counted in that order, with correct plurals."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pytest_resilibench.cli import main
from pytest_resilibench.reporting import vocabulary
from tests.plugin.conftest import load

RETIRED = ("unsolved", "UNSOLVED", "infrastructure error", "1 infra errors", "1 episodes")


def test_one_vocabulary_in_terminal_json_markdown_and_html(suite: pytest.Pytester) -> None:
    report = suite.path / "run.json"
    result = suite.runpytest(
        "--resili-sample=1", "-p", "no:cacheprovider", "--resili-variants=optimal,flawed",
        "--resili-flaws=missing_step", "--resili-model=builtin:follower,builtin:random",
        f"--resili-report={report}")
    result.assert_outcomes()  # outcomes are statuses, never pytest failures
    terminal = result.stdout.str()
    counts = load(report)["summary"]["counts"]["outcomes"]

    # JSON: every key (a JSON object has no order; the report sorts its keys); they add up.
    assert set(counts) == set(vocabulary.COUNT_ORDER)
    assert sum(counts.values()) == 60
    assert {k for k, n in counts.items() if n} >= {"full", "failed"}, counts
    line = vocabulary.counts_line(counts)  # "a full, b partial, c failed, d infra errors"

    # Terminal: the progress letters, the summary's headline and pytest's last line.
    progress = "".join(re.findall(r"^(?:test_resilibench\.py )?([.pfI]+) +\[ *\d+%\]$",
                                  terminal, re.M))
    assert (progress.count("."), progress.count("p"), progress.count("f")) == (
        counts["full"], counts["partial"], counts["failed"])
    assert f"60 episodes: {line}" in terminal
    scored = [k for k in vocabulary.SCORED if counts[k]]
    parts = [f"{counts[k]} {vocabulary.WORDS[k]}" if k != "failed" else
             vocabulary.plural(counts[k], "episode") + " failed" for k in scored]
    assert re.search(re.escape(", ".join(parts)) + r" in [\d.]+s", result.outlines[-1]), \
        result.outlines[-1]

    # Markdown and HTML of the same report.
    md, html = suite.path / "run.md", suite.path / "run.html"
    assert main(["report", str(report), "--markdown", str(md), "--html", str(html)]) == 0
    markdown, document = md.read_text(), html.read_text()
    assert f"60 episodes: {line}" in markdown and f"60 episodes: {line}" in document
    headers = [t.content for t in _inline_in_headers(markdown)]
    assert {"full % [95% CI]", "partial %", "failed %", "infra errors"} <= set(headers)
    for text in (terminal, markdown, document):
        for word in RETIRED:  # whole words: "41 episodes failed" holds "1 episodes"
            assert not re.search(rf"(?<!\w){re.escape(word)}", text), word


def _inline_in_headers(markdown: str) -> list[Token]:
    """The inline tokens of every table header cell, as a GFM renderer reads them."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    out, in_head = [], False
    for tok in tokens:
        if tok.type == "thead_open":
            in_head = True
        elif tok.type == "thead_close":
            in_head = False
        elif in_head and tok.type == "inline":
            out.append(tok)
    return out
