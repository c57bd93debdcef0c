"""The run summary and its tables, from hand-built episode dicts with known counts."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.reporting import comparison, stats, summarize, tables


def episode(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "m", "variant": "optimal", "flaw": None, "severity": None, "task_id": "t0000",
        "task_type": "data_pipeline", "difficulty": "easy", "repeat": 0, "seed": 0,
        "base_success": 0.8, "outcome": "full", "turns": 4, "tool_calls": 4, "coverage": 1.0,
        "order_adherence": 1.0, "errors_met": 0, "errors_recovered": 0,
        "tokens": {"prompt": 0, "completion": 0, "total": 10},
    }
    return {**base, **fields}


def optimal_and_flawed(n: int, *, optimal_full: int, flawed_full: int, model: str = "m",
                       flaw: str = "semantic_drift", severity: str = "medium",
                       **fields: Any) -> list[dict[str, Any]]:
    """n units, each one optimal and one flawed episode sharing (task, repeat, seed, base)."""
    eps = []
    for i in range(n):
        unit = {"task_id": f"t{i:04d}", "model": model, **fields}
        eps.append(episode(**unit, outcome="full" if i < optimal_full else "failed"))
        eps.append(episode(**unit, variant=f"flawed-{flaw}", flaw=flaw, severity=severity,
                           outcome="full" if i < flawed_full else "failed"))
    return eps


def test_rates_exclude_errors_from_denominators() -> None:
    eps = [episode(outcome="full")] * 3 + [episode(outcome="partial"),
                                           episode(outcome="failed"), episode(outcome="error")]
    s = summarize.summary(eps)
    (row,) = s["by_model_variant"]
    assert (row["n"], row["errors"], row["full"], row["partial"], row["failed"]) == (5, 1, 3, 1, 1)
    assert row["full_rate"] == pytest.approx(0.6)
    assert row["full_ci"] == pytest.approx(list(stats.wilson(3, 5)))
    assert row["score"] == pytest.approx((3 + 0.5) / 5)
    assert s["counts"] == {"episodes": 6, "scored": 5, "errors": 1, "models": ["m"],
                           "variants": ["optimal"],
                           "outcomes": {"full": 3, "partial": 1, "failed": 1, "agent_error": 0,
                                        "infra_error": 1}}
    assert list(s["counts"]["outcomes"]) == ["full", "partial", "failed", "agent_error",
                                             "infra_error"]
    assert s["errors_by_model"] == {"m": 1}
    assert "agent_errors" not in s and summarize.no_result(s) is None


def test_agent_errors_are_failed_in_the_rates_and_counted_apart() -> None:
    crash = "KeyError: 'plan' at agent.py:7 in complete"
    eps = [episode(outcome="full"), episode(outcome="failed"), episode(outcome="error"),
           *[episode(outcome="failed", stop_reason="agent_error", agent_error=crash)] * 2]
    s = summarize.summary(eps)
    (row,) = s["by_model_variant"]
    assert (row["n"], row["errors"], row["full"], row["failed"]) == (4, 1, 1, 3)
    assert s["counts"]["outcomes"] == {"full": 1, "partial": 0, "failed": 1, "agent_error": 2,
                                       "infra_error": 1}
    assert s["agent_errors"] == [{"model": "m", "error": crash, "count": 2}]
    assert tables.headline(s) == ("5 episodes: 1 full, 0 partial, 1 failed, 2 agent errors, "
                                    "1 infra error")
    (table,) = [t for t in tables.tables(s) if t.title.startswith("Agent errors")]
    assert table.rows == [["m", 2, crash]]
    assert table.links == [[{"model": "m", "stop_reason": "agent_error"}] * 3]


def test_penalised_episodes_are_counted_by_penalty() -> None:
    """Issue 50: an episode whose steps ran more often than its task allows lost a level; the
    summary counts such episodes (scored ones only), and says nothing where there are none."""
    eps = [episode(outcome="partial", penalties={"excess_runs": 3}),
           episode(outcome="failed", penalties={"excess_runs": 1}), episode(outcome="full"),
           episode(outcome="error", penalties={"excess_runs": 2})]
    assert summarize.summary(eps)["counts"]["penalties"] == {"excess_runs": 2}
    assert "penalties" not in summarize.summary(eps[2:3])["counts"]


def test_a_run_where_every_episode_is_an_infra_error_has_no_result() -> None:
    down = "model 'm' at http://h/v1: HTTP 503 (after 3 attempts)"
    s = summarize.summary([episode(outcome="error", infra_error=down)] * 3)
    assert summarize.no_result(s) == ("resilibench: every one of the 3 episodes was an infra "
                                     "error (cause: HTTP 503): no result")
    s = summarize.summary([episode(outcome="error", infra_error=down)] * 2
                         + [episode(outcome="error", infra_error="timeout")])
    assert summarize.no_result(s) == ("resilibench: every one of the 3 episodes was an infra "
                                     "error (most common cause, 2 of 3: HTTP 503): no result")


def test_summary_is_json_able() -> None:
    eps = optimal_and_flawed(10, optimal_full=8, flawed_full=5)
    s = summarize.summary(eps)
    assert json.loads(json.dumps(s)) == s


def test_drop_is_paired_on_the_unit() -> None:
    # Units 0-7 succeed with the optimal plan; 0-4 with the flawed one: 3 discordant pairs.
    s = summarize.summary(optimal_and_flawed(20, optimal_full=8, flawed_full=5))
    (drop,) = s["drops"]["by_model"]
    assert drop["pairs"] == 20
    assert drop["optimal_rate"] == pytest.approx(0.4) and drop["flawed_rate"] == pytest.approx(0.25)
    assert drop["drop_pp"] == pytest.approx(15.0)
    assert drop["p_value"] == pytest.approx(stats.mcnemar_exact(3, 0))
    assert drop["method"] == "mcnemar-exact+newcombe"
    (by_flaw,) = s["drops"]["by_flaw"]
    assert by_flaw["flaw"] == "semantic_drift" and by_flaw["drop_pp"] == pytest.approx(15.0)


def test_drop_ignores_units_with_an_error_or_no_partner() -> None:
    eps = optimal_and_flawed(10, optimal_full=10, flawed_full=0)
    eps[1]["outcome"] = "error"  # unit 0's flawed episode
    eps.append(episode(task_id="t9999", variant="flawed-tool_misuse", flaw="tool_misuse",
                       severity="light", outcome="failed"))  # no optimal partner
    (drop,) = summarize.summary(eps)["drops"]["by_model"]
    assert drop["pairs"] == 9 and drop["drop_pp"] == pytest.approx(100.0)


def test_several_flawed_siblings_count_one_unit_once() -> None:
    eps = optimal_and_flawed(12, optimal_full=12, flawed_full=6, flaw="missing_step")
    eps += [e for e in optimal_and_flawed(12, optimal_full=12, flawed_full=0, flaw="tool_misuse")
            if e["variant"] != "optimal"]
    (drop,) = summarize.summary(eps)["drops"]["by_model"]
    assert drop["pairs"] == 12
    assert drop["method"] == "sign-test+bootstrap"
    assert drop["flawed_rate"] == pytest.approx(0.25)
    assert drop["drop_pp"] == pytest.approx(75.0)


def test_pass_k_appears_only_with_repeats() -> None:
    assert summarize.summary([episode()])["pass_k"] == []
    eps = [episode(task_id="a", repeat=r, outcome="full" if r < 2 else "failed")
           for r in range(4)]
    eps += [episode(task_id="b", repeat=r) for r in range(4)]
    (row,) = summarize.summary(eps)["pass_k"]
    assert row["tasks"] == 2
    assert row["pass_k"]["2"] == pytest.approx((1 / 6 + 1) / 2)
    assert set(row["pass_k"]) == {"1", "2", "3", "4"}
    # Conditions told apart as the report spells them: base success 1 and 1.0 are two draws
    # of one each, not repeats.
    assert summarize.summary([episode(base_success=1), episode(base_success=1.0)])["pass_k"] == []


def test_robustness_surfaces_fit_slopes_over_the_sweeps() -> None:
    eps = []
    for base, full in ((0.9, 9), (0.8, 7), (0.7, 5), (0.6, 3)):
        eps += [episode(task_id=f"t{i}", base_success=base,
                        outcome="full" if i < full else "failed") for i in range(10)]
    for severity, full in (("light", 6), ("medium", 4), ("severe", 2)):
        eps += [episode(task_id=f"t{i}", variant="flawed-missing_step", flaw="missing_step",
                        severity=severity, outcome="full" if i < full else "failed")
                for i in range(10)]
    s = summarize.summary(eps)
    (reliability,) = s["surfaces"]["base_success"]
    # Optimal episodes alone run at 0.6..0.9 (0.3..0.9 full); flawed ones at 0.8 only.
    assert [p["x"] for p in reliability["points"]] == [0.6, 0.7, 0.8, 0.9]
    assert reliability["slope"] > 0
    (severity_surface,) = s["surfaces"]["severity"]
    assert [p["x"] for p in severity_surface["points"]] == [0, 1, 2, 3]
    assert severity_surface["slope"] < 0
    text = tables.render_terminal(s)
    assert "pp per level" in text and "pp per +0.1" in text


def test_no_surface_without_a_sweep() -> None:
    s = summarize.summary(optimal_and_flawed(5, optimal_full=3, flawed_full=2))
    assert s["surfaces"] == {"base_success": [], "severity": []}


def test_terminal_tables_follow_the_paper_layout() -> None:
    eps = optimal_and_flawed(10, optimal_full=8, flawed_full=4, model="alpha")
    eps += optimal_and_flawed(10, optimal_full=6, flawed_full=6, model="beta",
                              task_type="simple_task", difficulty="hard")
    eps.append(episode(model="beta", variant="baseline", outcome="error"))
    text = tables.render_terminal(summarize.summary(eps))
    titles = [t.title for t in tables.tables(summarize.summary(eps))]
    assert titles[:3] == ["Full success rate by prompt variant (%, 95% CI)",
                          "Outcomes by model and variant",
                          "Optimal → flawed plan, paired on the same tool luck"]
    assert "By task type" in titles and "By difficulty" in titles
    assert "Infra errors (outside every rate)" in titles
    main = text.split("-- Outcomes")[0]
    assert "best model" in main
    optimal_row = next(line for line in main.splitlines() if line.startswith("optimal"))
    # alpha 8/10, beta 6/10, mean 70, best alpha
    assert optimal_row.split()[1:3] == ["80.0", "[49.0,"] and "70.0" in optimal_row
    assert "alpha 80.0" in optimal_row
    assert "+40.0" in text  # alpha's drop in pp
    assert "41 episodes: 24 full, 0 partial, 16 failed, 1 infra error" in text


def test_markdown_has_a_heading_per_table() -> None:
    s = summarize.summary(optimal_and_flawed(6, optimal_full=4, flawed_full=2))
    md = tables.render_markdown(s)
    assert md.startswith("# ResiliBench report")
    assert md.count("\n## ") == len(tables.tables(s))
    assert "| model" in md


def _markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header cells, body rows) of every table a CommonMark + GFM-tables parser finds."""
    from markdown_it import MarkdownIt

    tables: list[tuple[list[str], list[list[str]]]] = []
    row: list[str] = []
    part = ""
    for tok in MarkdownIt("commonmark").enable("table").parse(text):
        if tok.type == "table_open":
            tables.append(([], []))
        elif tok.type in ("thead_open", "tbody_open"):
            part = tok.type
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "inline" and tables and part:
            row.append(tok.content)
        elif tok.type == "tr_close":
            if part == "thead_open":
                tables[-1][0].extend(row)
            else:
                tables[-1][1].append(row)
        elif tok.type == "table_close":
            part = ""
    return tables


def test_markdown_renders_the_intended_tables_and_their_legends() -> None:
    eps = optimal_and_flawed(30, optimal_full=24, flawed_full=12, model="builtin:adaptive")
    eps += [{**ep, "variant": v} for ep in eps[:20:2] for v in ("baseline", "cot")]
    eps += optimal_and_flawed(30, optimal_full=20, flawed_full=18, model="o3",
                              flaw="missing_step")
    eps.append(episode(model="o3", variant="baseline", outcome="error", infra_error="HTTP 500"))
    s = summarize.summary(eps)
    md = tables.render_markdown(s)
    expected = tables.tables(s)
    found = _markdown_tables(md)
    # Every table comes out whole: its own header, exactly its rows (no legend read as a row).
    assert [h for h, _ in found] == [t.headers for t in expected]
    assert [len(rows) for _, rows in found] == [len(t.rows) for t in expected]
    for (_, rows), t in zip(found, expected, strict=True):
        assert rows == [[str(c) for c in r] for r in t.rows]
    # Legends are paragraphs of their own, present where a statistic needs one.
    from markdown_it import MarkdownIt

    paragraphs = [tok.content for tok in MarkdownIt("commonmark").enable("table").parse(md)
                  if tok.type == "inline" and tok.level == 1]
    paired = next(p for p in paragraphs if p.startswith("drop = optimal − flawed"))
    assert "McNemar" in paired and "MDE" in paired and "smaller than the MDE" in paired
    assert any("identical by construction for builtin:adaptive" in p for p in paragraphs)


def test_markdown_comparison_is_a_table_followed_by_its_note() -> None:
    a = optimal_and_flawed(20, optimal_full=15, flawed_full=10)
    b = optimal_and_flawed(20, optimal_full=12, flawed_full=10)
    c = comparison.compare(a, b, max_drop_pp=5)
    found = _markdown_tables(tables.render_compare(c, fmt="github"))
    expected = [tables.compare_model_table(c), tables.compare_table(c),
                tables.flips_table(c)]
    assert [h for h, _ in found] == [t.headers for t in expected]
    assert [len(rows) for _, rows in found] == [len(t.rows) for t in expected]


def test_identical_baseline_and_cot_are_noted_only_when_identical() -> None:
    base = [episode(variant="baseline", task_id=f"t{i:04d}", outcome="full") for i in range(4)]
    same = [{**ep, "variant": "cot"} for ep in base]
    differ = [{**ep, "variant": "cot", "outcome": "failed" if i == 0 else ep["outcome"]}
              for i, ep in enumerate(base)]
    builtin = [{**ep, "model": "builtin:oracle"} for ep in base + same]
    assert summarize.summary(builtin)["identical_variants"] == [
        {"model": "builtin:oracle", "variants": ["baseline", "cot"], "by_construction": True}]
    assert summarize.summary(base + same)["identical_variants"][0]["by_construction"] is False
    assert summarize.summary(base + differ)["identical_variants"] == []
    main = tables.tables(summarize.summary(builtin))[0]
    assert "identical by construction" in main.note
    assert tables.tables(summarize.summary(base + differ))[0].note == ""


def test_empty_and_malformed_input_do_not_crash() -> None:
    s = summarize.summary([])
    assert s["counts"]["episodes"] == 0 and tables.tables(s) == []
    odd = summarize.summary([episode(outcome="exploded", tokens=None), "not a dict"])  # type: ignore[list-item]
    assert odd["counts"]["errors"] == 1
    assert "1 episode: 0 full, 0 partial, 0 failed, 1 infra error" in tables.render_terminal(odd)


def test_variant_order_is_the_papers() -> None:
    labels = ["flawed-semantic_drift", "optimal", "cot", "flawed-sequence_disorder", "baseline"]
    assert sorted(labels, key=summarize.variant_order) == [
        "baseline", "cot", "optimal", "flawed-sequence_disorder", "flawed-semantic_drift"]


def test_fault_sections_only_for_realistic_episodes() -> None:
    paper = summarize.summary([episode(), episode(outcome="failed")])
    assert "by_event" not in paper and "faults" not in paper
    events = {"outage": {"met": 2, "recovered": 1}}
    eps = [episode(faults="realistic", events=events),
           episode(faults="realistic", events=events, outcome="failed"),
           episode(faults="realistic", events={})]
    s = summarize.summary(eps)
    assert s["faults"] == ["realistic"]
    rows = {r["event"]: r for r in s["by_event"]}
    assert (rows["outage"]["n"], rows["outage"]["full"], rows["outage"]["calls"]) == (2, 1, 4)
    assert rows["outage"]["recovered_share"] == pytest.approx(0.5)
    assert (rows["none"]["n"], rows["none"]["recovered_share"]) == (1, None)
    titles = [t.title for t in tables.tables(s)]
    assert "Success by event kind (realistic faults)" in titles


@given(st.lists(st.booleans(), min_size=1, max_size=200))
def test_a_units_share_is_the_float_numpys_mean_gives(successes: list[bool]) -> None:
    """`_paired_drop` takes a unit's flawed success share as a count over a count, for what
    `np.mean` gives: sums of 0 and 1 are exact in any order of summation."""
    assert sum(successes) / len(successes) == float(np.mean(successes))


_figures = st.fixed_dictionaries({
    "outcome": st.sampled_from(["full", "partial", "failed", "error"]),
    "turns": st.integers(0, 10), "tool_calls": st.integers(0, 30),
    "coverage": st.floats(0, 1), "order_adherence": st.floats(0, 1),
    "errors_met": st.integers(0, 5), "errors_recovered": st.integers(0, 5),
    "tokens": st.one_of(st.none(), st.integers(0, 10**6),
                        st.builds(lambda t: {"total": t}, st.integers(0, 10**6))),
})


@given(st.lists(_figures, max_size=40), st.data())
def test_a_group_s_rates_from_the_run_s_figure_table_are_its_own(
        rows: list[dict[str, Any]], data: st.DataObject) -> None:
    """The summary reads every group's figures off one table of the whole run's: the same
    counts and the very floats of `np.mean` over the group's own lists (the old way)."""
    eps = [episode(**row) for row in rows]
    group = data.draw(st.lists(st.sampled_from(eps), unique_by=id) if eps else st.just([]))
    table = summarize._figure_table(eps)
    got = summarize._rates(group, 0.95, table)
    assert got == summarize._rates(group, 0.95)  # a table of the group alone
    scored = [ep for ep in group if ep["outcome"] != "error"]

    def mean(field: str) -> float | None:
        values = [float(summarize._tokens(ep) if field == "tokens" else ep[field] or 0)
                  for ep in scored]
        return float(np.mean(values)) if values else None

    assert (got["n"], got["errors"]) == (len(scored), len(group) - len(scored))
    assert [got[o] for o in ("full", "partial", "failed")] == [
        sum(ep["outcome"] == o for ep in scored) for o in ("full", "partial", "failed")]
    for field in ("turns", "tool_calls", "coverage", "order_adherence", "tokens"):
        assert got[field] == mean(field)  # exactly: the same summation
    met = sum(ep["errors_met"] for ep in scored)
    assert got["recovery_rate"] == (sum(ep["errors_recovered"] for ep in scored) / met
                                    if met else None)


def _ids(eps: list[dict[str, Any]], run: str) -> list[dict[str, Any]]:
    return [{**ep, "id": f"{run}-{ep['model']}-{ep['variant']}-{ep['task_id']}"} for ep in eps]


def test_compare_gives_a_verdict_per_model_and_lists_the_flipped_pairs() -> None:
    old = _ids(optimal_and_flawed(30, optimal_full=30, flawed_full=20, model="a")
               + optimal_and_flawed(30, optimal_full=20, flawed_full=20, model="b"), "old")
    # a loses 12 optimal successes (a regression); b gains 3 flawed ones.
    new = _ids(optimal_and_flawed(30, optimal_full=18, flawed_full=20, model="a")
               + optimal_and_flawed(30, optimal_full=20, flawed_full=23, model="b"), "new")
    c = comparison.compare(old, new, max_drop_pp=5)
    verdicts = {v["model"]: v for v in c["by_model"]}
    assert verdicts["a"]["kind"] == "regression" and verdicts["a"]["n"] == 60
    assert verdicts["a"]["drop_pp"] == pytest.approx(20.0)
    assert verdicts["b"]["drop_pp"] == pytest.approx(-5.0)
    assert [(f["change"], f["model"], f["variant"]) for f in c["flipped"]] == (
        [("lost", "a", "optimal")] * 12 + [("gained", "b", "flawed-semantic_drift")] * 3)
    first = c["flipped"][0]
    assert (first["old_id"], first["new_id"]) == ("old-a-optimal-t0018", "new-a-optimal-t0018")
    table = tables.compare_model_table(c)
    assert [r[0] for r in table.rows] == ["a", "b"]  # the pooled figure is in the note only
    assert "all models pooled, information only" in table.note


def test_identify_names_what_a_report_does_not_record() -> None:
    report = {"environment": {"created": "2026-01-01T00:00:00+00:00", "commit": None},
              "config": {"fixture_hash": "abc"}, "episodes": [episode(id="x")]}
    found = comparison.identify("old.json", report)
    assert found["missing"] == ["started", "commit"]
    assert (found["models"], found["fixture_hash"]) == ("m", "abc")
    table = tables.runs_table({"old": found, "new": found})
    assert ["git commit", "not recorded", "not recorded"] in table.rows


def test_the_headline_says_why_episodes_are_missing_or_failed() -> None:
    from pytest_resilibench.reporting import headline

    eps = optimal_and_flawed(4, optimal_full=4, flawed_full=2)
    eps += [episode(task_id=f"e{i}", outcome="error", infra_error="HTTP 500: boom")
            for i in range(3)]
    eps += [episode(task_id="e9", outcome="error", infra_error="not sent: passed the cap")]
    lines = headline.lines(headline.build(summarize.summary(eps)))
    assert "  4 infra errors (most common, 3: HTTP 500: boom)" in lines
