"""The headline says what the JSON report says: a real run's terminal, and the markdown and
HTML of its report, print each model's numbers exactly as the report stores them."""

from __future__ import annotations

import html as html_
import re
import urllib.parse
from typing import Any

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.reporting import stats
from tests.plugin.conftest import load

MODELS = ("builtin:adaptive", "builtin:follower")
# `full success 78.7% [71.4, 84.5] of 150`, `optimal → flawed drop +19.0 pp [+9.5, +29.5] over
# 15 pairs`, `worst flaw missing_step +40.0 pp [+11.3, +64.3]`
RATE = re.compile(r"full success (\d+\.\d)% \[(\d+\.\d), (\d+\.\d)\] of (\d+)")
DROP = re.compile(r"optimal → flawed drop ([+-]\d+\.\d) pp \[([+-]\d+\.\d), ([+-]\d+\.\d)\] "
                  r"over (\d+) pairs")
WORST = re.compile(r"worst flaw (\w+) ([+-]\d+\.\d) pp \[([+-]\d+\.\d), ([+-]\d+\.\d)\]")


def _blocks(text: str) -> dict[str, str]:
    """Each model's part of a rendered headline: from its name to the next model's."""
    starts = sorted((text.index(m), m) for m in MODELS)
    ends = [s for s, _ in starts[1:]] + [len(text)]
    return {m: text[s:e] for (s, m), e in zip(starts, ends, strict=True)}


def _pp(x: float | None) -> str:
    assert x is not None
    return f"{x:+.1f}"


def _expected(report: dict[str, Any], model: str) -> dict[str, tuple[str, ...]]:
    """What the report says of `model`, recounted from its episodes where it can be."""
    s = report["summary"]
    (row,) = [r for r in s["by_model"] if r["model"] == model]
    mine = [ep for ep in report["episodes"] if ep["model"] == model
            and ep["outcome"] in ("full", "partial", "failed")]
    full = sum(ep["outcome"] == "full" for ep in mine)
    # The stored row is the recount, its interval Wilson's.
    assert (row["n"], row["full"]) == (len(mine), full)
    assert row["full_ci"] == list(stats.wilson(full, len(mine)))
    (drop,) = [d for d in s["drops"]["by_model"] if d["model"] == model]
    flaws = [d for d in s["drops"]["by_flaw"] if d["model"] == model]
    worst = max(flaws, key=lambda d: d["drop_pp"])
    return {
        "rate": (f"{100 * row['full_rate']:.1f}", f"{100 * row['full_ci'][0]:.1f}",
                 f"{100 * row['full_ci'][1]:.1f}", str(row["n"])),
        "drop": (_pp(drop["drop_pp"]), _pp(drop["ci_pp"][0]), _pp(drop["ci_pp"][1]),
                 str(drop["pairs"])),
        "worst": (worst["flaw"], _pp(worst["drop_pp"]), _pp(worst["ci_pp"][0]),
                  _pp(worst["ci_pp"][1])),
    }


def _check(text: str, report: dict[str, Any], where: str) -> None:
    blocks = _blocks(text)
    for model in MODELS:
        want = _expected(report, model)
        block = blocks[model]
        for name, pattern in (("rate", RATE), ("drop", DROP), ("worst", WORST)):
            found = pattern.search(block)
            assert found is not None, (where, model, name, block)
            assert found.groups() == want[name], (where, model, name)


def test_the_headline_in_terminal_markdown_and_html_equals_the_json_report(
        suite: pytest.Pytester) -> None:
    report_path = suite.path / "run.json"
    result = suite.runpytest(
        "--resili-sample=1", "-p", "no:cacheprovider", "--resili-variants=optimal,flawed",
        "--resili-flaws=missing_step,sequence_disorder,tool_misuse",
        f"--resili-model={','.join(MODELS)}", f"--resili-report={report_path}")
    result.assert_outcomes()
    report = load(report_path)
    terminal = result.stdout.str()
    summary_part = terminal[terminal.index("ResiliBench results"):]
    # The default terminal: the headline, no table.
    assert "-- Outcomes by model and variant --" not in summary_part
    assert "(every table: -v or --resili-summary=full)" in summary_part
    assert len(summary_part.splitlines()) <= 16
    _check(summary_part, report, "terminal")

    md, page = suite.path / "run.md", suite.path / "run.html"
    assert main(["report", str(report_path), "--markdown", str(md), "--html", str(page)]) == 0
    markdown = md.read_text()
    assert markdown.index("**ResiliBench: ") < markdown.index("## ")  # the headline first
    _check(markdown, report, "markdown")
    document = page.read_text()
    section = document[document.index('<section id="headline">'):]
    section = html_.unescape(re.sub(r"<[^>]+>", " ", section[:section.index("</section>")]))
    _check(section, report, "html")
    # Each model's failing examples link to episodes the report holds.
    ids = {ep["id"] for ep in report["episodes"]}
    linked = re.findall(r'class="example" href="#view=episode&amp;ep=([^"]+)"', document)
    assert len(linked) == 2 * 3 and {urllib.parse.unquote(x) for x in linked} <= ids


def test_the_full_tables_with_verbose_or_the_option(suite: pytest.Pytester) -> None:
    args = ("--resili-sample=1", "-p", "no:cacheprovider", "--resili-variants=optimal",
            "--resili-task-types=simple_task", "--resili-model=builtin:oracle")
    for extra in ("-v", "--resili-summary=full"):
        terminal = suite.runpytest(*args, extra).stdout.str()
        summary_part = terminal[terminal.index("ResiliBench results"):]
        assert "-- Outcomes by model and variant --" in summary_part
        # The headline stays last, beside pytest's own line.
        assert summary_part.index("-- Outcomes") < summary_part.index("ResiliBench: ")
