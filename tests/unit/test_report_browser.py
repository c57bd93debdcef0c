"""The HTML report in a real browser: headless Chromium (Debian's package) driven by Playwright
opens a report and a comparison page from file:// and checks that the viewer runs without a
console error, the headline is there, a chart's bar filters the episode table to exactly its
episodes, an episode says why it ended, and a flipped pair opens old and new side by side.

`make test` installs Chromium when it is missing (apt-get, as root); elsewhere the test skips
with the reason. Never `playwright install`: its CDN is out of reach; the system's Chromium is
used through `executable_path`. Screenshots go to $RESILI_SCREENSHOTS when set (else the
test's temporary folder).
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.reporting import comparison, summarize, why

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MODELS = ("builtin:adaptive", "builtin:follower")
# One worker runs both tests: the episodes and the browser start once.
pytestmark = pytest.mark.xdist_group("browser")


def _episodes(max_turns: int) -> list[dict[str, Any]]:
    """Both built-in agents on a few tasks under four variants (real episodes)."""
    from pytest_resilibench.core.prompts import Variant
    from pytest_resilibench.core.tasks import load_tasks
    from pytest_resilibench.runtime.agent_boundary import close_agent
    from pytest_resilibench.runtime.agents import make_agent
    from pytest_resilibench.runtime.episode import EpisodeSpec, run_episodes

    tasks = list(load_tasks())[::700][:6]
    variants = [Variant("baseline"), Variant("optimal"),
                Variant("flawed", "missing_step", "medium"),
                Variant("flawed", "tool_misuse", "medium")]

    async def play(spec: str) -> list[dict[str, Any]]:
        agent = make_agent(spec)
        specs = [EpisodeSpec(task=t, variant=v, seed=3, max_turns=max_turns)
                 for t in tasks for v in variants]
        records = [r.to_json() async for r in run_episodes(specs, agent)]
        await close_agent(agent)
        return records

    return [ep for spec in MODELS for ep in asyncio.run(play(spec))]


def _write(path: Path, episodes: list[dict[str, Any]]) -> Path:
    report = {"schema": "resilibench.report/1", "config": {"seed": 3, "fixture_hash": "f00d"},
              "environment": {"created": "2026-01-01T00:00:00+00:00",
                              "started": "2026-01-01T00:00:00+00:00", "commit": "abc123"},
              "summary": summarize.summary(episodes), "episodes": episodes,
              "complete": True}
    path.write_text(json.dumps(report))
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run's report and its comparison with a run of a shorter turn budget."""
    folder = tmp_path_factory.mktemp("browser")
    new_eps, old_eps = _episodes(10), _episodes(4)
    new = _write(folder / "new.json", new_eps)
    old = _write(folder / "old.json", old_eps)
    single, compared = folder / "new.html", folder / "cmp.html"
    assert main(["report", str(new), "--html", str(single)]) == 0
    assert main(["report", str(new), "--compare", str(old), "--html", str(compared)]) in (0, 1)
    compared_runs = comparison.compare(old_eps, new_eps, max_drop_pp=5)
    return {"single": single, "compared": compared, "episodes": new_eps,
            "comparison": compared_runs}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium: "
                    "`apt-get install -y chromium` as root (`make test` does it when it can)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install -e '.[dev]'")
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh --user-data-dir
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=ARGS, headless=True,
            viewport={"width": 1300, "height": 1000})
        yield context
        context.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("RESILI_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _Page:
    """A page that records every console error and uncaught exception."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.page = browser.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error"
                     else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.url = path.as_uri()
        self.page.goto(self.url)

    def go(self, fragment: str) -> None:
        self.page.goto(f"{self.url}#{fragment}")


def _rows(page: Any) -> list[dict[str, str]]:
    headers = [h.strip(" ▲▼") for h in page.locator("#episode-table thead th").all_inner_texts()]
    return [dict(zip(headers, row.locator("td").all_inner_texts(), strict=False))
            for row in page.locator("#episode-table tbody tr").all()]


# `pages` before `browser`: the episodes run on an event loop of their own, before Playwright's
# loop runs in this thread.
def test_report_headline_chart_click_filters_and_why(pages: dict[str, Any], browser: Any,
                                                    shots: Path) -> None:
    view = _Page(browser, pages["single"])
    page, episodes = view.page, pages["episodes"]
    headline = page.locator("#headline")
    text = headline.inner_text()
    assert text.startswith("ResiliBench: 48 episodes")
    for model in MODELS:
        assert model in text
    assert "optimal → flawed drop" in text
    headline.screenshot(path=str(shots / "headline.png"))
    page.screenshot(path=str(shots / "report-top.png"))

    # A bar of the follower's variant chart: the table shows exactly that model and variant.
    bar = page.locator('.model-charts[data-model="builtin:follower"] svg.chart '
                       'a.bar[data-label="optimal"]')
    bar.click()
    page.wait_for_selector("#episode-table")
    assert "view=episodes" in page.evaluate("location.hash")
    rows = _rows(page)
    want = [ep for ep in episodes if ep["model"] == "builtin:follower"
            and ep["variant"] == "optimal"]
    assert len(rows) == len(want) > 0
    assert {(r["model"], r["variant"]) for r in rows} == {("builtin:follower", "optimal")}
    assert page.locator(".pager").inner_text().startswith(f"{len(want)} of {len(episodes)}")
    # The why column says what why.py says of each of them.
    assert sorted(r["why"] for r in rows) == sorted(why.reasons(ep) for ep in want)

    # The drop chart's largest bar: the flaw's lost episodes.
    page.go_back()
    page.locator('.model-charts[data-model="builtin:follower"] svg.chart').nth(1) \
        .locator("a.bar").first.click()
    page.wait_for_selector("#episode-table")
    params = dict(urllib.parse.parse_qsl(page.evaluate("location.hash")[1:]))
    assert params["vs_optimal"] == "lost" and params["model"] == "builtin:follower"
    assert {r["flaw"].split(" ")[0] for r in _rows(page)} == {params["flaw"]}

    # An episode that failed says why in one sentence.
    failing = next(ep for ep in episodes if ep["outcome"] == "failed")
    view.go(urllib.parse.urlencode({"view": "episode", "ep": failing["id"]}))
    page.wait_for_selector("#why")
    assert page.locator("#why").inner_text() == why.sentence(failing)
    page.screenshot(path=str(shots / "episode-why.png"))
    assert view.errors == []


def test_compare_page_verdict_first_and_flips_open_old_and_new(
        pages: dict[str, Any], browser: Any, shots: Path) -> None:
    view = _Page(browser, pages["compared"])
    page, comparison = view.page, pages["comparison"]
    html = Path(pages["compared"]).read_text()
    assert html.index('id="headline"') < html.index('id="comparison"') < html.index(
        'id="charts"')
    verdicts = page.locator("#verdict-by-model tbody tr").all_inner_texts()
    assert [v.split("\t")[0] for v in verdicts] == [*MODELS]  # one verdict each, not pooled
    assert "all models pooled, information only" in html
    runs = page.locator("#runs").inner_text()
    assert "old.json" in runs and "new.json" in runs and "abc123" in runs
    page.screenshot(path=str(shots / "compare.png"))
    flips = page.locator("#flips a.flip")
    assert flips.count() == len(comparison["flipped"]) > 0
    flips.first.click()
    page.wait_for_selector("#divergence")
    heading = page.locator("#view-pair h2").inner_text()
    first = comparison["flipped"][0]
    assert "old run against new run" in heading and first["task_id"] in heading
    page.screenshot(path=str(shots / "compare-pair.png"))
    assert view.errors == []
