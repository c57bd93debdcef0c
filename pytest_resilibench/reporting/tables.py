"""The summary and a comparison as titled tables in the paper's layout, rendered for the
terminal (plain text, the headline last) and as markdown (the headline first, long tables
folded). The figures are `summarize.py`'s and `comparison.py`'s; nothing here computes one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from pytest_resilibench.base.names import (
    DIFFICULTIES,
    TASK_TYPES,
)
from pytest_resilibench.base.safe_text import (
    CELL_LIMIT,
    MARKDOWN_LIMIT,
    for_markdown,
    for_terminal,
)
from pytest_resilibench.reporting import vocabulary
from pytest_resilibench.reporting.comparison import (
    RUN_FIELDS,
    ComparedVerdict,
    Comparison,
    ModelVerdict,
)
from pytest_resilibench.reporting.summarize import (
    SEVERITY_LEVEL,
    TOKEN_KINDS,
    Summary,
    Surface,
    known_first,
)

if TYPE_CHECKING:
    from pytest_resilibench.reporting.headline import Headline

__all__ = [
    "MARKDOWN_FOLD_ROWS",
    "Table",
    "compare_model_table",
    "compare_table",
    "flips_table",
    "headline",
    "paired_legend",
    "render_compare",
    "render_markdown",
    "render_terminal",
    "runs_table",
    "tables",
]

Episode = Mapping[str, Any]

Filter = dict[str, str]


@dataclass(frozen=True)
class Table:
    """A titled table; `note` is its legend. `links[i][j]`, where given, is the episode
    filter behind cell (i, j) (field -> value, e.g. {"model": "o3", "outcome": "failed"}):
    the HTML report links the cell to those episodes."""

    title: str
    headers: list[str]
    rows: list[list[Any]]
    note: str = ""
    links: list[list[Filter | None]] | None = None


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}"


def _pct_ci(rate: float | None, ci: Sequence[float]) -> str:
    if rate is None:
        return "–"
    return f"{100 * rate:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1f}"


def _ci_pp(ci: Sequence[float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "–"
    return f"[{ci[0]:+.1f}, {ci[1]:+.1f}]"


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def _pivot(rows: Sequence[Mapping[str, Any]], column: str, columns: Sequence[str],
           title: str) -> Table:
    """model × `column` of full-success % (scored episodes in parentheses)."""
    cells: dict[str, dict[str, str]] = defaultdict(dict)
    for r in rows:
        cells[str(r["model"])][str(r[column])] = f"{_pct(r['full_rate'])} ({r['n']})"
    models = sorted(cells)
    body = [[model, *(cells[model].get(c, "–") for c in columns)] for model in models]
    links: list[list[Filter | None]] = [
        [{"model": m}, *({"model": m, column: c} for c in columns)] for m in models]
    return Table(title, ["model", *columns], body, "full success %, (scored episodes)", links)


def _rate_links(row: Filter, *columns: str | None) -> list[Filter | None]:
    """A row's cells: the row's episodes, or, under an outcome's column, those of that
    outcome (`columns` names the outcome key of each cell, None for the row's)."""
    return [row if c is None else {**row, "outcome": c} for c in columns]


def paired_legend(methods: Iterable[str], confidence: float, *, mde: bool = True) -> str:
    """What the paired table's columns mean, in one line, for the methods it used."""
    level = f"{100 * confidence:g}%"
    used = set(methods)
    tests = []
    if any(m.startswith("mcnemar") for m in used):
        tests.append(f"exact McNemar test on the pairs that disagree, Newcombe's {level} "
                     "interval")
    if any(m.startswith("sign") for m in used):
        tests.append("sign test over units, each optimal episode once against the mean of its "
                     f"flawed siblings, bootstrap {level} interval")
    text = ("drop = optimal − flawed, pair by pair on the same tool luck. p: two-sided chance "
            "of a difference this large if the plan made no difference ("
            + ("; ".join(tests) or "paired test") + "); the interval is not the test, so near "
            "the edge one can exclude 0 while p > 0.05.")
    if mde:
        text += (" MDE: the drop these pairs detect 80% of the time at the observed "
                 "disagreement, a planning figure, not a bound: a significant drop may be "
                 "smaller than the MDE (it was caught with less than 80% chance).")
    return text


def _identical_note(s: Summary) -> str:
    same = s.get("identical_variants") or []
    if not same:
        return ""
    built = [r["model"] for r in same if r["by_construction"]]
    other = [r["model"] for r in same if not r["by_construction"]]
    parts = []
    if built:
        parts.append(f"baseline and cot are identical by construction for {', '.join(built)}: "
                     "built-in agents ignore the CoT instruction")
    if other:
        parts.append(f"baseline and cot gave the same episodes for {', '.join(other)}")
    return "; ".join(parts) + "."


def tables(s: Summary) -> list[Table]:
    """The summary's tables in the paper's layout, each with a title and a legend; empty ones
    left out."""
    out: list[Table] = []
    by_mv = s.get("by_model_variant", [])
    variants = s.get("counts", {}).get("variants", [])
    identical = _identical_note(s)
    if by_mv:
        # The paper's main table: a row per prompt variant, a column per model.
        grid: dict[str, dict[str, str]] = defaultdict(dict)
        for r in by_mv:
            grid[r["variant"]][r["model"]] = _pct_ci(r["full_rate"], r["full_ci"])
        models = sorted({r["model"] for r in by_mv})
        averages = {a["variant"]: a for a in s.get("variant_averages", [])}
        several = len(models) > 1
        body, links = [], []
        for v in variants:
            row = [v, *(grid[v].get(m, "–") for m in models)]
            link: list[Filter | None] = [{"variant": v},
                                         *({"variant": v, "model": m} for m in models)]
            if several:
                a = averages.get(v)
                row += ["–", "–"] if a is None else [
                    _pct(a["mean_full_rate"]), f"{a['best_model']} {_pct(a['best_full_rate'])}"]
                link += [{"variant": v}, None if a is None else
                         {"variant": v, "model": a["best_model"]}]
            body.append(row)
            links.append(link)
        out.append(Table("Full success rate by prompt variant (%, 95% CI)",
                         ["variant", *models, *(["mean", "best model"] if several else [])],
                         body, identical, links))
        out.append(Table(
            "Outcomes by model and variant",
            ["model", "variant", "n", "full % [95% CI]", "partial %", "failed %", "score",
             "turns", "calls", "recovered %", "infra errors"],
            [[r["model"], r["variant"], r["n"], _pct_ci(r["full_rate"], r["full_ci"]),
              _pct(r["partial_rate"]), _pct(r["failed_rate"]),
              "–" if r["score"] is None else f"{r['score']:.3f}",
              "–" if r["turns"] is None else f"{r['turns']:.1f}",
              "–" if r["tool_calls"] is None else f"{r['tool_calls']:.1f}",
              _pct(r["recovery_rate"], 0), r["errors"]] for r in by_mv],
            "score: full = 1, partial = 0.5; infra errors are outside every rate"
            + ("; agent errors count as failed" if s.get("agent_errors") else "")
            + (f". {identical}" if identical else ""),
            [_rate_links({"model": r["model"], "variant": r["variant"]}, None, None, None,
                         "full", "partial", "failed", None, None, None, None, "infra_error")
             for r in by_mv]))
    drops = s.get("drops", {})
    confidence = float(s.get("confidence", 0.95))
    if drops.get("by_model"):
        out.append(Table(
            "Optimal → flawed plan, paired on the same tool luck",
            ["model", "optimal %", "flawed %", "drop pp", f"{100 * confidence:g}% CI", "p",
             "pairs", "MDE pp"],
            [[d["model"], _pct(d["optimal_rate"]), _pct(d["flawed_rate"]),
              _signed(d["drop_pp"]), _ci_pp(d["ci_pp"]), _p(d["p_value"]), d["pairs"],
              "–" if d["mde_paired_pp"] is None else f"{d['mde_paired_pp']:.1f}"]
             for d in drops["by_model"]],
            paired_legend((d["method"] for d in drops["by_model"]), confidence),
            [[{"model": d["model"]}, {"model": d["model"], "variant": "optimal"},
              {"model": d["model"], "kind": "flawed"},
              *[{"model": d["model"], "kind": "flawed", "vs_optimal": "lost"}] * 4,
              None] for d in drops["by_model"]]))
    if drops.get("by_flaw"):
        out.append(Table(
            "Drop by flaw",
            ["model", "flaw", "optimal %", "flawed %", "drop pp", f"{100 * confidence:g}% CI",
             "p", "pairs"],
            [[d["model"], d["flaw"], _pct(d["optimal_rate"]), _pct(d["flawed_rate"]),
              _signed(d["drop_pp"]), _ci_pp(d["ci_pp"]), _p(d["p_value"]), d["pairs"]]
             for d in drops["by_flaw"]],
            paired_legend((d["method"] for d in drops["by_flaw"]), confidence, mde=False),
            [[{"model": d["model"]}, {"model": d["model"], "flaw": d["flaw"]},
              {"model": d["model"], "variant": "optimal"},
              {"model": d["model"], "flaw": d["flaw"]},
              *[{"model": d["model"], "flaw": d["flaw"], "vs_optimal": "lost"}] * 4]
             for d in drops["by_flaw"]]))
    if s.get("by_flaw") and len({r.get("severity") for r in s["by_flaw"]}) > 1:
        out.append(Table(
            "Flawed plans by severity",
            ["model", "flaw", "severity", "n", "full % [95% CI]", "partial %", "failed %"],
            [[r["model"], r["flaw"], r["severity"], r["n"], _pct_ci(r["full_rate"], r["full_ci"]),
              _pct(r["partial_rate"]), _pct(r["failed_rate"])] for r in s["by_flaw"]],
            links=[_rate_links({"model": r["model"], "flaw": r["flaw"],
                                "severity": r["severity"]},
                               None, None, None, None, "full", "partial", "failed")
                   for r in s["by_flaw"]]))
    if s.get("by_task_type"):
        types = known_first((r["task_type"] for r in s["by_task_type"]), TASK_TYPES)
        out.append(_pivot(s["by_task_type"], "task_type", types, "By task type"))
    if s.get("by_difficulty"):
        levels = known_first((r["difficulty"] for r in s["by_difficulty"]), DIFFICULTIES)
        out.append(_pivot(s["by_difficulty"], "difficulty", levels, "By difficulty"))
    if s.get("pass_k"):
        ks = sorted({k for r in s["pass_k"] for k in r["pass_k"]}, key=int)
        out.append(Table(
            "pass^k over repeats (%)", ["model", "variant", "tasks", *(f"pass^{k}" for k in ks)],
            [[r["model"], r["variant"], r["tasks"], *(_pct(r["pass_k"].get(k)) for k in ks)]
             for r in s["pass_k"]],
            "pass^k: chance that k repeats of a task all succeed (tau-bench)",
            [[{"model": r["model"], "variant": r["variant"]}] * (3 + len(ks))
             for r in s["pass_k"]]))
    surfaces = [*s.get("surfaces", {}).get("base_success", []),
                *s.get("surfaces", {}).get("severity", [])]
    if surfaces:
        out.append(Table(
            "Robustness surfaces: full success against the swept axis",
            ["model", "axis", "points (x: full %)", "slope"],
            [[r["model"], r["axis"],
              "  ".join(f"{_axis_label(r['axis'], p['x'])}: {_pct(p['full_rate'])}"
                        for p in r["points"]),
              _slope_label(r)] for r in surfaces],
            links=[[{"model": r["model"]}] * 4 for r in surfaces]))
    if s.get("by_event"):
        out.append(Table(
            f"Success by event kind ({', '.join(s.get('faults', []))} faults)",
            ["model", "event", "episodes", "full % [95% CI]", "partial %", "event calls",
             "recovered %"],
            [[r["model"], r["event"], r["n"], _pct_ci(r["full_rate"], r["full_ci"]),
              _pct(r["partial_rate"]), r["calls"], _pct(r["recovered_share"], 0)]
             for r in s["by_event"]],
            "episodes that met each event at least once (none: met no event); recovered: "
            "event calls later followed by a clean success of the same step",
            [[{"model": r["model"]}] * 7 for r in s["by_event"]]))
    if s.get("recovery"):
        out.append(Table(
            "Recovery after failed calls (counts over scored episodes)",
            ["model", "episodes", "met a failure", "failed calls", "retried", "recovered",
             "retry storms", "gave up", "retry_after honoured", "retry_after ignored",
             "fabricated success"],
            [[r["model"], r["episodes"], r["met_failure"],
              *(r["measures"].get(name, 0) for name in _RECOVERY_COLUMNS)]
             for r in s["recovery"]],
            "retried / recovered: failed calls of a tool called again later / that later "
            "succeeded cleanly; retry storms: the same call more than 3 times in a row; gave "
            "up: a tool whose last call failed with a retryable fault; fabricated: said done "
            "while a tool's last call failed or was spoilt (core/recovery.py)",
            [[{"model": r["model"]}] * 11 for r in s["recovery"]]))
    usage = [r for r in s.get("usage", []) if any(r["tokens"].values())
             or r["cost_usd"] is not None]
    if usage:
        out.append(Table(
            "Tokens and cost by model",
            ["model", "episodes", *TOKEN_KINDS, "cost USD"],
            [[r["model"], r["episodes"], *(f"{r['tokens'][k]:,}" for k in TOKEN_KINDS),
              "–" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}"] for r in usage],
            "cached is part of prompt, reasoning part of completion; replayed: answered by "
            "the model-call cache, not spent; cost: – where the price is unknown",
            [[{"model": r["model"]}] * (3 + len(TOKEN_KINDS)) for r in usage]))
    providers = s.get("providers", {})
    if providers:
        out.append(Table(
            "Model requests",
            ["model", "requests", "sent", "retries", "429s", "timeouts", "server errors",
             "refused", "not sent", "cache hits", "req/s", "in flight", "limit",
             "waited s"],
            [[m, p.get("requests", 0), p.get("api_calls", 0), p.get("retries", 0),
              p.get("faults", {}).get("rate_limit", 0), p.get("faults", {}).get("timeout", 0),
              p.get("faults", {}).get("server_error", 0), p.get("faults", {}).get("refused", 0),
              p.get("not_sent", 0), p.get("cache_hits", 0), _or_dash(p.get("requests_per_s")),
              _or_dash(p.get("concurrency")), p.get("window") or "–",
              f"{p.get('limit_wait_s', 0.0):.1f}"] for m, p in providers.items()],
            "sent: HTTP requests, retries included (after a 429 too: a 429 spends no retry); "
            "req/s: sent over the span from the first request to the last reply; in flight: "
            "requests in flight on average; limit: the adaptive concurrency limit at the end "
            "(all processes); waited s: time requests waited on rate limits, added up",
            [[{"model": m}] * 14 for m in providers]))
    agent_errors = s.get("agent_errors")
    if agent_errors:
        out.append(Table("Agent errors (failed episodes in every rate)",
                         ["model", "agent errors", "raised"],
                         [[r["model"], r["count"], r["error"]] for r in agent_errors],
                         "the agent's own code raised: the exception, and the agent's last line "
                         "it went through",
                         [[{"model": r["model"], "stop_reason": "agent_error"}] * 3
                          for r in agent_errors]))
    causes = s.get("infra_causes")
    errors = s.get("errors_by_model", {})
    if causes:
        out.append(Table("Infra errors (outside every rate)",
                         ["model", "infra errors", "cause"],
                         [[r["model"], r["count"], r["cause"]] for r in causes],
                         "grouped by cause",
                         [[{"model": r["model"], "outcome": "infra_error"}] * 3 for r in causes]))
    elif errors:
        out.append(Table("Infra errors (outside every rate)", ["model", "infra errors"],
                         [[m, n] for m, n in errors.items()],
                         links=[[{"model": m, "outcome": "infra_error"}] * 2 for m in errors]))
    return out


_RECOVERY_COLUMNS = ("failures", "retried", "recovered", "storms", "gave_up",
                     "retry_after_honoured", "retry_after_ignored", "fabricated")


def _axis_label(axis: str, x: float) -> str:
    if axis == "severity":
        names = {v: k for k, v in SEVERITY_LEVEL.items()}
        return names.get(int(x), str(x))
    return f"{x:g}"


def _slope_label(r: Surface) -> str:
    if r["axis"] == "severity":
        return f"{100 * r['slope']:+.1f} pp per level"
    # Reliability: pp of full success per 0.1 of base success probability.
    return f"{10 * r['slope']:+.1f} pp per +0.1"


def _render_table(t: Table, fmt: str, heading: Callable[[str], str]) -> str:
    # Every cell is shown as data (a model's name, an agent's error, a server's cause:
    # base/safe_text.py), cut to a bound: one 16 KB cause must not make every row 16 KB wide.
    def shown(text: object) -> str:
        return for_markdown(text) if fmt == "github" else for_terminal(text, limit=CELL_LIMIT)

    # Blank lines around every table and its legend: in markdown a line straight under a
    # table is read as one more row (GFM tables end at a blank line).
    block = [heading(t.title), tabulate([[shown(c) for c in row] for row in t.rows],
                                        headers=[shown(h) for h in t.headers], tablefmt=fmt,
                                        disable_numparse=True)]
    if t.note:
        block.append(for_markdown(t.note, limit=MARKDOWN_LIMIT) if fmt == "github"
                     else for_terminal(t.note, limit=MARKDOWN_LIMIT))
    return ("\n\n" if fmt == "github" else "\n").join(block)


# Tables longer than this fold into a `<details>` element in the markdown.
MARKDOWN_FOLD_ROWS = 8


def _fold(title: str, body: str, rows: int) -> str:
    """A markdown block, folded into `<details>` when it is long (blank lines around the
    content: GitHub renders markdown inside the element only then)."""
    if rows <= MARKDOWN_FOLD_ROWS:
        return body
    return f"<details><summary>{title} ({rows} rows)</summary>\n\n{body}\n\n</details>"


def render_terminal(s: Summary, *, head: Headline | None = None, full: bool = True) -> str:
    """When `full`, the compact plain-text tables, one titled section each; then the headline
    (`headline.py`), last, where a terminal leaves it in view (what the plugin prints)."""
    from pytest_resilibench.reporting import headline as headline_

    parts = [_render_table(t, "simple", lambda title: f"-- {title} --")
             for t in (tables(s) if full else [])]
    parts.append("\n".join(headline_.lines(head if head is not None else headline_.build(s))))
    return "\n\n".join(parts) + "\n"


def render_markdown(s: Summary, *, title: str = "ResiliBench report",
                    head: Headline | None = None, comparison: Comparison | None = None,
                    runs: Mapping[str, Mapping[str, Any]] | None = None,
                    html_link: str | None = None) -> str:
    """The headline first (with a link to the HTML report, `html_link`, when one was
    written), then the comparison (when there is one: the runs, the verdict per model, per
    variant and the flipped pairs), then the tables, long ones folded."""
    from pytest_resilibench.reporting import headline as headline_

    h = head if head is not None else headline_.build(s, comparison=comparison)
    parts = [f"# {title}", headline_.render_markdown(h).rstrip("\n")]
    if html_link:
        parts.append(f"Charts, every episode and why it ended: [the HTML report]({html_link})")
    if comparison is not None:
        parts.append(render_compare(comparison, fmt="github", runs=runs).rstrip("\n"))
    for i, t in enumerate(tables(s)):
        body = _render_table(t, "github", lambda name: f"## {name}")
        parts.append(body if i == 0 else _fold(t.title, body, len(t.rows)))
    return "\n\n".join(parts) + "\n"



def headline(s: Summary) -> str:
    """`1500 episodes: 1236 full, 249 partial, 15 failed, 0 infra errors`."""
    counts = s.get("counts", {})
    outcomes = counts.get("outcomes") or {"infra_error": counts.get("errors", 0)}
    return f"{vocabulary.plural(counts.get('episodes', 0), 'episode')}: " \
        f"{vocabulary.counts_line(outcomes)}"



def compare_model_table(c: Comparison) -> Table:
    """The verdict per model (paired within it), the first thing a comparison shows."""
    rows = [[_model_label(v), v["n"], *_verdict_cells(v)] for v in c.get("by_model", [])]
    rows += [[m, "–", "–", "–", "–", "NOT JUDGED", "–"] for m in c["unpartnered"]["new"]]
    links = [_links({"model": v["model"]}, 7) for v in c.get("by_model", [])]
    links += [_links({"model": m}, 7) for m in c["unpartnered"]["new"]]
    pooled = c["overall"]
    note = (f"each model against its own partner in the baseline; all models pooled, "
            f"information only: drop {_signed(pooled['drop_pp'])} pp {_ci_pp(pooled['ci'])} "
            f"over {pooled['n']} pairs")
    if c["unpartnered"]["old"]:
        note += f"; in the baseline only: {', '.join(c['unpartnered']['old'])}"
    return Table(
        f"Verdict per model: drop old → new in full success (allowed {c['max_drop_pp']:g} pp "
        f"at {100 * c['confidence']:g}% confidence)",
        ["model", "pairs", "drop pp", f"{100 * c['confidence']:g}% CI", "p", "verdict",
         "more pairs needed"],
        rows, note, links)


def _links(target: Filter, cells: int) -> list[Filter | None]:
    return [target] * cells


def _model_label(v: ModelVerdict) -> str:
    return v["model"] if v["model"] == v["old_model"] else f"{v['old_model']} → {v['model']}"


def compare_table(c: Comparison) -> Table:
    rows = [[v["variant"], v["n"], *_verdict_cells(v)] for v in c["by_variant"]]
    return Table(
        "Per variant, all models pooled (information, not a verdict): drop old → new in full "
        "success",
        ["variant", "pairs", "drop pp", f"{100 * c['confidence']:g}% CI", "p", "pooled",
         "more pairs needed"],
        rows,
        f"paired on {', '.join(c['paired_on'])}; unpaired episodes left out: "
        f"{c['unpaired']['old']} old, {c['unpaired']['new']} new",
        [_links({"variant": v["variant"]}, 7) for v in c["by_variant"]])


def flips_table(c: Comparison, limit: int | None = None) -> Table:
    """The pairs that flipped (losses first); `limit` rows at most."""
    flips = c.get("flipped", [])
    shown = flips if limit is None else flips[:limit]
    more = len(flips) - len(shown)
    return Table(
        f"Flipped episodes: {sum(f['change'] == 'lost' for f in flips)} lost full success, "
        f"{sum(f['change'] == 'gained' for f in flips)} gained",
        ["change", "model", "variant", "task", "old", "new"],
        [[f["change"], f["model"], f["variant"], f["task_id"], f["old_outcome"],
          f["new_outcome"]] for f in shown],
        f"{more} more in the JSON and HTML" if more else "")


def _verdict_cells(v: ComparedVerdict) -> list[str]:
    return [_signed(v["drop_pp"]), _ci_pp(v["ci"]) if v["drop_pp"] is not None else "–",
            _p(v["p_value"]), v["kind"].upper(),
            "–" if v["more_needed"] is None else str(v["more_needed"])]


def runs_table(runs: Mapping[str, Mapping[str, Any]]) -> Table:
    """Old and new side by side, a row per identifying field."""
    names = {"path": "file", "started": "started", "created": "written", "commit": "git commit",
             "models": "models", "fixture_hash": "fixture hash"}
    rows = [[names[k], *(runs[side].get(k) or "not recorded" for side in ("old", "new"))]
            for k in RUN_FIELDS]
    return Table("Runs compared", ["", "old", "new"], rows)


def render_compare(c: Comparison, *, fmt: str = "simple",
                   runs: Mapping[str, Mapping[str, Any]] | None = None,
                   flips: int | None = 20) -> str:
    """The comparison: the runs (when known), the verdict per model, the pooled figures per
    variant, and the flipped pairs (at most `flips` rows). The gate's lines follow it
    (integration/gate.py), the same for the run and `resilibench report --compare`."""
    heading: Callable[[str], str] = (lambda t: f"## {t}") if fmt == "github" else (
        lambda t: f"-- {t} --")
    found = [*([runs_table(runs)] if runs else []), compare_model_table(c), compare_table(c)]
    parts = [_render_table(t, fmt, heading) for t in found]
    if c.get("flipped"):
        t = flips_table(c, flips)
        body = _render_table(t, fmt, heading)
        parts.append(_fold(t.title, body, len(t.rows)) if fmt == "github" else body)
    return "\n\n".join(parts) + "\n"


def _or_dash(value: object) -> object:
    return "–" if value is None else value
