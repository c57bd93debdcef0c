"""The HTML report and the `resilibench report` command: self-contained, escaped, every
episode reachable; input errors exit 2; `--compare` gives a paired verdict."""

from __future__ import annotations

import asyncio
import html
import json
import re
import sys
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.reporting import (
    comparison,
    report_data,
    report_html,
    summarize,
    tables,
    vocabulary,
    why,
)

HOSTILE = '<script>alert("x")</script> & <b>bold</b>'


def episode(i: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"t{i:04d}/optimal/m/r0/s0", "model": "m", "variant": "optimal", "flaw": None,
        "severity": None, "task_id": f"t{i:04d}", "task_type": "data_pipeline",
        "difficulty": "easy", "repeat": 0, "seed": 0, "base_success": 0.8, "outcome": "full",
        "turns": 2, "tool_calls": 2, "coverage": 1.0, "order_adherence": 1.0, "errors_met": 1,
        "errors_recovered": 1, "tokens": {"prompt": 5, "completion": 5, "total": 10},
        "stop_reason": "completed",
        "messages": [
            {"role": "system", "content": "You are an agent. Tools: file_operations_reader"},
            {"role": "user", "content": f"Task {i}: read the file"},
            {"role": "assistant", "content": HOSTILE},
            {"role": "user", "content": "<tool_response>{}</tool_response>"},
        ],
        "calls": [
            {"turn": 1, "tool": "file_operations_reader", "arguments": {"path": "/a.csv"},
             "ok": False, "error_code": "TIMEOUT", "message": "timed out after 30 s",
             "success_probability": 0.8},
            {"turn": 2, "tool": "file_operations_reader", "arguments": {"path": "/a.csv"},
             "ok": True, "error_code": None, "message": None, "success_probability": 0.8},
        ],
    }
    return {**base, **fields}


def run(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema": "resilibench.report/1", "config": {"seed": 0, "models": ["m"]},
            "environment": {"python": "3"}, "episodes": episodes,
            "summary": summarize.summary(episodes)}


def sweep_run() -> dict[str, Any]:
    """Optimal and flawed episodes over two reliabilities and three severities."""
    eps = []
    for base in (0.9, 0.7):
        for i in range(6):
            unit = {"task_id": f"t{i:04d}", "base_success": base,
                    "task_type": ("simple_task", "data_pipeline")[i % 2],
                    "difficulty": ("easy", "hard")[i // 3]}
            eps.append(episode(i, **unit, outcome="full" if i < 5 else "failed"))
            for severity in ("light", "medium", "severe"):
                eps.append(episode(i, **unit, variant="flawed-semantic_drift",
                                   flaw="semantic_drift", severity=severity,
                                   outcome="full" if i < 3 else "partial"))
    for n, ep in enumerate(eps):
        ep["id"] = f"e{n}"
    return run(eps)


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(doc: str) -> _Collector:
    c = _Collector()
    c.feed(doc)
    return c


def test_html_is_self_contained_with_inline_svg_charts_first() -> None:
    doc = report_html.render_html(sweep_run())
    c = parse(doc)
    assert not [t for t, a in c.tags if t == "link"]
    assert not [t for t, a in c.tags if t == "img"]  # no raster images: SVG drawn from data
    for tag, attrs in c.tags:
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            assert not re.match(r"(https?:)?//", value), (tag, value)
    # The headline, then the charts, then the tables.
    assert doc.index('id="headline"') < doc.index('id="charts"') < doc.index("<h2>Tables</h2>")
    svgs = re.findall(r'<svg [^>]*aria-label="([^"]*)"', doc)
    assert svgs == ["m: full success % by prompt variant",
                    "m: optimal → flawed drop per flaw, pp",
                    "m: full success % by task type and difficulty"]


def test_charts_are_per_model_with_drops_largest_first_and_link_to_their_episodes() -> None:
    from pytest_resilibench.reporting import charts

    eps = []
    for model in ("a", "b"):
        for i in range(8):
            eps.append(episode(i, model=model, id=f"{model}-o{i}"))
            for k, flaw in enumerate(("missing_step", "tool_misuse", "semantic_drift")):
                lost = i < (2 * k + 1 if model == "a" else 6 - 2 * k)
                eps.append(episode(i, model=model, id=f"{model}-{flaw}-{i}",
                                   variant=f"flawed-{flaw}", flaw=flaw, severity="medium",
                                   outcome="failed" if lost else "full"))
    s = summarize.summary(eps)
    drawn = charts.charts(s)
    assert [c.model for c in drawn] == ["a"] * 3 + ["b"] * 3
    for model in ("a", "b"):
        (drop_chart,) = [c.svg for c in drawn if c.model == model and "drop" in c.title]
        labels = re.findall(r'class="bar" data-label="([^"]*)"', drop_chart)
        drops = {d["flaw"]: d["drop_pp"] or 0.0 for d in s["drops"]["by_flaw"]
                 if d["model"] == model}
        assert labels == sorted(drops, key=lambda f: -drops[f])  # largest first
        for href, label in re.findall(r'<a href="#([^"]*)" class="bar" data-label="([^"]*)"',
                                      drop_chart):
            params = dict(urllib.parse.parse_qsl(html.unescape(href)))
            assert params == {"view": "episodes", "model": model, "flaw": label,
                              "vs_optimal": "lost"}
    assert labels == ["missing_step", "tool_misuse", "semantic_drift"]  # model b's order


def _with_vs_optimal(eps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each episode with the viewer's `vs_optimal`: lost / gained / same full success against
    the optimal episode of its unit (the same tool luck)."""
    best = {(ep["model"], *summarize.unit_key(ep)): ep["outcome"] == "full"
            for ep in eps if ep["variant"] == "optimal"}
    out = []
    for ep in eps:
        a = best.get((ep["model"], *summarize.unit_key(ep)))
        b = ep["outcome"] == "full"
        vs = ("" if a is None or ep["variant"] == "optimal" else
              "lost" if a and not b else "gained" if b and not a else "same")
        out.append({**ep, "vs_optimal": vs})
    return out


def _matches(ep: dict[str, Any], field: str, want: str) -> bool:
    """The viewer's filter semantics (report_viewer.js, FIELDS), for checking the links."""
    outcome = ep["outcome"] if ep["outcome"] in ("full", "partial", "failed") else "infra_error"
    value = {"outcome": outcome,
             "kind": "flawed" if str(ep["variant"]).startswith("flawed") else ep["variant"],
             }.get(field, ep.get(field))
    return ("" if value is None else str(value)) == want


def _links(doc: str) -> list[tuple[str, dict[str, str]]]:
    """(cell text, filter) of every summary cell that links to episodes."""
    out = []
    for m in re.finditer(r'<a href="#([^"]*)">([^<]*)</a>', doc):
        params = dict(urllib.parse.parse_qsl(html.unescape(m.group(1))))
        if params.pop("view", None) == "episodes":
            out.append((html.unescape(m.group(2)), params))
    return out


def test_every_episode_is_embedded_and_decodes_back() -> None:
    report = sweep_run()
    doc = report_html.render_html(report)
    embedded = report_html.embedded_episodes(doc)
    assert embedded == [dict(ep) for ep in report_data.order(report["episodes"])]
    # The shared system prompt is stored once, not once per episode.
    packed = report_data.pack(report["episodes"])
    assert len(packed["prompts"]) == 1
    assert doc.count("You are an agent.") == 0  # compressed, not in the markup


def test_summary_cells_link_to_exactly_their_episodes() -> None:
    report = sweep_run()
    doc = report_html.render_html(report)
    links = _links(doc)
    eps = _with_vs_optimal(report["episodes"])
    outcomes = tables.tables(summarize.summary(eps))[1]
    assert outcomes.title == "Outcomes by model and variant"
    for row, cells in zip(outcomes.rows, outcomes.links or [], strict=True):
        # n, and the full / partial / failed counts behind each rate's link
        first = cells[0]
        assert first is not None
        selected = [ep for ep in eps if all(_matches(ep, k, v) for k, v in first.items())]
        assert len(selected) == row[2]
        for j, outcome in ((3, "full"), (4, "partial"), (5, "failed")):
            hits = [ep for ep in selected if _matches(ep, "outcome", outcome)]
            assert cells[j] == {**first, "outcome": outcome}
            assert len(hits) == round(row[2] * float(str(row[j]).split()[0]) / 100)
    assert len(links) > 20
    for text, filters in links:  # every link but a zero's selects something
        found = any(all(_matches(ep, k, v) for k, v in filters.items()) for ep in eps)
        assert found or text in ("0", "0.0", "–"), (text, filters)


def test_the_viewer_markup_and_vocabulary() -> None:
    doc = report_html.render_html(sweep_run())
    c = parse(doc)
    ids = {a.get("id") for _, a in c.tags}
    assert {"view-summary", "view-episodes", "view-episode", "view-pair", "resili-meta",
            "resili-data", "tab-summary", "tab-episodes"} <= ids
    meta = re.search(r'id="resili-meta">([^<]*)</script>', doc)
    assert meta is not None
    words = json.loads(meta.group(1))["words"]
    assert words == vocabulary.WORDS
    assert [t for t, a in c.tags if t == "script" and a.get("src")] == []
    assert "DecompressionStream" in doc  # the data is decompressed in the page


def test_model_output_is_escaped() -> None:
    doc = report_html.render_html(run([episode(0), episode(1, model=HOSTILE)]))
    assert "<script>alert" not in doc and "<b>bold</b>" not in doc
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in doc
    assert "".join(parse(doc).text).count(HOSTILE) >= 1  # the text survives, inert
    # The conversation travels compressed and intact; the viewer shows it as text.
    (shown,) = [ep for ep in report_html.embedded_episodes(doc) if ep["model"] == "m"]
    assert shown["messages"][2]["content"] == HOSTILE
    viewer = (Path(report_html.__file__).parent / "report_viewer.js").read_text()
    assert "innerHTML" not in viewer.replace("never innerHTML", "")


def test_episodes_without_trajectories_still_list() -> None:
    ep = episode(0)
    del ep["messages"], ep["calls"]
    (shown,) = report_html.embedded_episodes(report_html.render_html(run([ep])))
    assert shown == ep


def test_html_needs_no_matplotlib_and_pngs_name_their_extra(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A base install: matplotlib cannot be imported.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(sweep_run()))
    assert main(["report", str(path), "--html", str(tmp_path / "out.html")]) == 0
    assert "<svg " in (tmp_path / "out.html").read_text()
    assert main(["report", str(path), "--png", str(tmp_path / "png")]) == 2
    assert "pytest-resilibench[report]" in capsys.readouterr().err


def test_png_plots_are_written_on_request(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib.figure")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(sweep_run()))
    assert main(["report", str(path), "--png", str(tmp_path / "png")]) == 0
    written = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert written == ["drops.png", "surfaces.png", "variants.png"]
    for name in written:
        assert (tmp_path / "png" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_episode_table_carries_why_and_the_view_its_sentence() -> None:
    eps = [episode(0, id="ok"),
           episode(1, id="late", outcome="partial", stop_reason="max_turns", turns=10,
                   max_turns=10, conditions={"coverage": True, "order": False,
                                             "output": False, "completion": True},
                   deviation={"not_followed": [2, 4], "wrong_steps": [4]})]
    doc = report_html.render_html(run(eps))
    packed = report_data.unpack(report_data.decode(re.search(
        r'id="resili-data">([^<]*)<', doc).group(1)))  # type: ignore[union-attr]
    late = next(ep for ep in packed if ep["id"] == "late")
    assert late["why"] == ("✗ order, output · ran out of turns (10/10) · left plan at step 3")
    assert late["why_sentence"] == why.sentence(eps[1])
    assert late["why_sentence"].startswith("Partial success: the order and output conditions "
                                           "were not met; the agent ran out of turns (10/10)")
    assert "first left the plan at step 3, a correct step" in late["why_sentence"]
    # What the page adds is not part of the episodes it carries.
    assert report_html.embedded_episodes(doc) == [dict(ep) for ep in report_data.order(eps)]


def test_cli_prints_tables_and_writes_markdown_and_html(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(sweep_run()))
    md, out = tmp_path / "r.md", tmp_path / "r.html"
    assert main(["report", str(path), "--markdown", str(md), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "-- Optimal → flawed plan, paired on the same tool luck --" in printed
    assert printed.index("-- Optimal") < printed.index("ResiliBench: ")  # headline last
    assert "HTML report: " in printed and " MiB, open it" in printed
    assert md.read_text().startswith("# ResiliBench report\n\n**ResiliBench: ")
    assert "[the HTML report](r.html)" in md.read_text()
    assert out.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such report file"),
    ("{not json", "not a JSON report"),
    (json.dumps({"schema": "something/9", "episodes": []}), "expected schema"),
    (json.dumps({"schema": "resilibench.report/1", "episodes": {}}), "must be a list"),
    (json.dumps({"schema": "resilibench.report/1", "episodes": [{"model": "m"}]}),
     "lack required fields"),
])
def test_bad_input_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          content: str | None, message: str) -> None:
    path = tmp_path / "run.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def _variant_run(model: str, full_until: int, n: int = 80) -> dict[str, Any]:
    return run([episode(i, model=model, id=f"e{i}", outcome="full" if i < full_until
                        else "failed") for i in range(n)])


def test_compare_gives_a_paired_verdict(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    old, new, same = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "same.json"
    old.write_text(json.dumps(_variant_run("m", 70)))
    new.write_text(json.dumps(_variant_run("m", 40)))
    same.write_text(json.dumps(_variant_run("m", 70)))
    # 30 of 80 paired episodes lost: a regression, exit 1.
    assert main(["report", str(new), "--compare", str(old), "--max-drop", "5"]) == 1
    printed = capsys.readouterr().out
    assert "resilibench gate: baseline m: regression: drop +37.5 pp" in printed
    assert printed.rstrip().endswith("resilibench: exit 1: m REGRESSION against the baseline")
    # Identical luck and behaviour: no drop, passes a 5 pp gate.
    assert main(["report", str(same), "--compare", str(old), "--max-drop", "5"]) == 0
    assert "resilibench gate: baseline m: pass: drop +0.0 pp" in capsys.readouterr().out
    html_path = tmp_path / "cmp.html"
    assert main(["report", str(new), "--compare", str(old), "--html", str(html_path)]) == 1
    assert '<div class="model regression" data-model="m">' in html_path.read_text()


def test_compare_pairs_two_single_model_runs_across_models() -> None:
    c = comparison.compare(_variant_run("a", 40)["episodes"], _variant_run("b", 40)["episodes"],
                         max_drop_pp=5)
    assert c["pairs"] == 80 and [(v["model"], v["old_model"]) for v in c["by_model"]] == [
        ("b", "a")]
    assert c["by_model"][0]["kind"] == "pass"
    two = _variant_run("a", 40)["episodes"] + _variant_run("b", 40)["episodes"]
    three = two + _variant_run("c", 40)["episodes"]
    with pytest.raises(ValueError, match="no model"):
        comparison.compare(two, _variant_run("c", 40)["episodes"] + _variant_run("d", 40)[
            "episodes"], max_drop_pp=5)
    c = comparison.compare(two, three, max_drop_pp=5)  # c is new: named, not judged
    assert c["unpartnered"] == {"old": [], "new": ["c"]}


def test_report_from_real_episodes(tmp_path: Path) -> None:
    """A small run of the built-in agents through `run_episode`, end to end to HTML."""
    from pytest_resilibench.core.prompts import Variant
    from pytest_resilibench.core.tasks import load_tasks
    from pytest_resilibench.runtime.agent_boundary import close_agent
    from pytest_resilibench.runtime.agents import make_agent
    from pytest_resilibench.runtime.episode import EpisodeSpec, run_episodes

    tasks = list(load_tasks())[::1000][:3]
    variants = [Variant("optimal"), Variant("flawed", "missing_step", "severe")]

    async def play(spec: str) -> list[dict[str, Any]]:
        agent = make_agent(spec)
        specs = [EpisodeSpec(task=t, variant=v, seed=1) for t in tasks for v in variants]
        records = [r.to_json() async for r in run_episodes(specs, agent)]
        await close_agent(agent)
        return records

    episodes = [ep for spec in ("builtin:follower", "builtin:adaptive")
                for ep in asyncio.run(play(spec))]
    assert len(episodes) == 12
    s = summarize.summary(episodes)
    assert s["counts"]["scored"] + s["counts"]["errors"] == 12
    assert {d["model"] for d in s["drops"]["by_model"]} == {"builtin:follower",
                                                           "builtin:adaptive"}
    path = tmp_path / "real.html"
    report_html.write_html(path, run(episodes), summary=s)
    shown = report_html.embedded_episodes(path.read_text())
    assert sorted(ep["id"] for ep in shown) == sorted(ep["id"] for ep in episodes)
    text = json.dumps(shown)
    assert "<tool_call>" in text and "TASK_COMPLETED" in text


def test_realistic_runs_show_success_by_event_kind() -> None:
    met = {"outage": {"met": 1, "recovered": 1}}
    ep = episode(0, faults="realistic", events=met)
    ep["calls"][0] = {**ep["calls"][0], "error_code": "SERVICE_UNAVAILABLE", "event": "outage"}
    doc = report_html.render_html(run([ep, episode(1, faults="realistic", events={})]))
    assert "Success by event kind (realistic faults)" in doc
    assert report_html.embedded_episodes(doc)[0]["calls"][0]["event"] == "outage"
    assert "Success by event kind" not in report_html.render_html(run([episode(0)]))


def test_report_outputs_default_to_the_ignored_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "night.json"
    path.write_text(json.dumps(sweep_run()))
    assert main(["report", str(path), "--html", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / ".resilibench" / "night.html").is_file()
    assert (tmp_path / ".resilibench" / "night.md").is_file()
    assert (tmp_path / ".resilibench" / ".gitignore").is_file()
    assert "HTML report: .resilibench/night.html" in out


@pytest.fixture(scope="module")
def default_run_episodes() -> list[dict[str, Any]]:
    """The default run's 1500 episodes (builtin:adaptive, every variant, 10 tasks a cell),
    trajectories kept: the report a new user makes first."""
    from pytest_resilibench.core.registry import default_registry
    from pytest_resilibench.core.tasks import load_tasks
    from pytest_resilibench.integration.cases import build_cases
    from pytest_resilibench.integration.options import RunConfig
    from pytest_resilibench.integration.runner import EpisodeRunner
    from pytest_resilibench.runtime.agents import make_agent

    config = RunConfig()
    todo = build_cases(config, list(load_tasks()))
    runner = EpisodeRunner(config, default_registry(), agent_factory=make_agent)
    try:
        runner.start(todo)
        return [runner.result(case).to_json() for case in todo]
    finally:
        runner.close()


@pytest.mark.slow
def test_a_1500_episode_report_with_trajectories_stays_under_3_mb(
        default_run_episodes: list[dict[str, Any]]) -> None:
    eps = default_run_episodes
    assert len(eps) == 1500 and all(ep["messages"] and ep["calls"] for ep in eps)
    doc = report_html.render_html(run(eps))
    size = len(doc.encode("utf-8"))
    assert size <= 3_000_000, size
    assert report_html.embedded_episodes(doc) == [dict(ep) for ep in report_data.order(eps)]
