"""The verdict first: a run's headline, built once (`build`) and rendered the same way in the
terminal, the markdown and the HTML report (`lines`, `render_markdown`, `render_html`).

Per model: the full-success rate with its interval (every variant pooled, as the fail-under
gate counts it), the optimal → flawed drop with its interval, the flaw that hurt most, the
realistic fault profile's rate when it ran, its own verdict against its partner in another run
when there is one (the pooled figure is information only), and the cost. Every number is the
summary's (`summarize.summary`, what the JSON report stores):
nothing here computes a statistic, so the headline cannot disagree with the tables or the JSON.
In the HTML each model also gets up to three links to representative failing episodes.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from pytest_resilibench.base.safe_text import MARKDOWN_LIMIT, for_markdown, for_terminal
from pytest_resilibench.reporting import vocabulary, why

if TYPE_CHECKING:
    from pytest_resilibench.reporting.comparison import Comparison
    from pytest_resilibench.reporting.summarize import Summary

__all__ = ["Headline", "ModelHeadline", "build", "lines", "render_html", "render_markdown"]

Episode = Mapping[str, Any]


class ProfileRate(TypedDict):
    """A model's pooled full-success rate under one fault profile (summary `by_model`)."""

    faults: str
    n: int
    full: int
    full_rate: float | None
    full_ci: list[float]


class HeadlineDrop(TypedDict):
    drop_pp: float | None
    ci_pp: list[float | None]
    p_value: float | None
    pairs: int


class WorstFlaw(HeadlineDrop):
    flaw: str


class HeadlineVerdict(TypedDict):
    kind: str
    text: str


class Example(TypedDict):
    """A representative failing episode: its id (the viewer's key) and why it failed."""

    id: str
    variant: str
    outcome: str
    why: str


class ModelHeadline(TypedDict):
    model: str
    rates: list[ProfileRate]
    drop: NotRequired[HeadlineDrop]
    worst_flaw: NotRequired[WorstFlaw]
    verdict: NotRequired[HeadlineVerdict]
    cost_usd: float | None
    tokens: int
    examples: list[Example]
    errors: list[str]  # agent and infra errors: how many, and the most common cause
    requests: NotRequired[str]  # a real model's provider: throughput and rate limits


class Headline(TypedDict):
    counts: str  # `1500 episodes: 1236 full, ...`
    models: list[ModelHeadline]
    gate: list[str]  # the run's gate lines, as the terminal printed them
    # all models pooled, when compared: information only, each model has its own verdict
    comparison: NotRequired[HeadlineVerdict]
    # the resili_faults tests, one line each (reporting/chaos_summary.py `headline_lines`)
    chaos: NotRequired[list[str]]


def _drop_of(d: Mapping[str, Any]) -> HeadlineDrop:
    return {"drop_pp": d["drop_pp"], "ci_pp": list(d["ci_pp"]), "p_value": d["p_value"],
            "pairs": d["pairs"]}


def _examples(episodes: Sequence[Episode], model: str, worst: str | None) -> list[Example]:
    """Up to three failing episodes of `model`, of different variants where it can: the worst
    flaw's first, then an optimal one, then any other (each the first in id order)."""
    failing = sorted((ep for ep in episodes if str(ep.get("model")) == model
                      and ep.get("outcome") in ("partial", "failed")),
                     key=lambda ep: str(ep.get("id")))
    picked: list[Episode] = []

    def take(match: Any) -> None:
        for ep in failing:
            if len(picked) < 3 and ep not in picked and match(ep) and all(
                    p.get("variant") != ep.get("variant") for p in picked):
                picked.append(ep)
                return

    if worst is not None:
        take(lambda ep: ep.get("flaw") == worst)
    take(lambda ep: ep.get("variant") == "optimal")
    for _ in range(3):
        take(lambda ep: True)
    return [{"id": str(ep.get("id")), "variant": str(ep.get("variant")),
             "outcome": str(ep.get("outcome")), "why": why.reasons(ep)} for ep in picked]


def _errors(summary: Summary, model: str) -> list[str]:
    """`19 infra errors (most common, 19: passed --resili-max-cost)`, and the same for agent
    errors: a reader must see why episodes are missing from the rates, or failed."""
    out = []
    kinds: list[tuple[str, list[tuple[int, str]]]] = [
        ("agent_error", [(r["count"], r["error"]) for r in summary.get("agent_errors") or []
                         if r["model"] == model]),
        ("infra_error", [(r["count"], r["cause"]) for r in summary.get("infra_causes") or []
                         if r["model"] == model])]
    for key, mine in kinds:
        if mine:
            count, cause = max(mine, key=lambda r: r[0])
            which = "cause" if len(mine) == 1 else f"most common, {count}"
            out.append(f"{vocabulary.count(sum(n for n, _ in mine), key)} ({which}: {cause})")
    return out


def _requests(p: Mapping[str, Any]) -> str:
    """`1006 requests at 28.8/s, 14.8 in flight; 139 429s, waited 1457.3 s on rate limits,
    limit settled at 10` (the provider's figures in the summary, issue 33's four)."""
    rate = p.get("requests_per_s")
    out = f"{p.get('api_calls', 0):,} requests" + ("" if rate is None else f" at {rate:.1f}/s")
    if p.get("concurrency") is not None:
        out += f", {p['concurrency']:.1f} in flight"
    limited = (p.get("faults") or {}).get("rate_limit", 0)
    out += (f"; {limited} 429s, waited {p.get('limit_wait_s', 0.0):.1f} s on rate limits, "
            f"limit settled at {p.get('window', 0)}")
    return out


def build(
    summary: Summary,
    *,
    episodes: Sequence[Episode] = (),
    gate: Iterable[str] = (),
    comparison: Comparison | None = None,
    chaos: Mapping[str, Any] | None = None,
) -> Headline:
    """The headline of a run from its summary; `episodes` (the report's) give the example
    links, `gate` the run's gate lines, `comparison` the verdicts against another run,
    `chaos` the summary of its resili_faults tests (the report's `chaos` section's)."""
    counts = summary.get("counts", {})
    outcomes = counts.get("outcomes") or {"infra_error": counts.get("errors", 0)}
    drops = {d["model"]: d for d in summary.get("drops", {}).get("by_model", [])}
    worst: dict[str, Mapping[str, Any]] = {}
    for d in summary.get("drops", {}).get("by_flaw", []):
        best = worst.get(d["model"])
        if d["drop_pp"] is not None and (best is None or d["drop_pp"] > best["drop_pp"]):
            worst[d["model"]] = d
    usage = {u["model"]: u for u in summary.get("usage", [])}
    verdicts = {v["model"]: v for v in (comparison["by_model"] if comparison else [])}
    models: list[ModelHeadline] = []
    for model in counts.get("models", []):
        rates: list[ProfileRate] = [
            {"faults": str(r.get("faults", "paper")), "n": r["n"], "full": r["full"],
             "full_rate": r["full_rate"], "full_ci": list(r["full_ci"])}
            for r in summary.get("by_model", []) if r.get("model") == model]
        rates.sort(key=lambda r: r["faults"] != "paper")  # the paper's profile first
        u = usage.get(model)
        w = worst.get(model)
        line: ModelHeadline = {
            "model": model, "rates": rates,
            "cost_usd": None if u is None else u["cost_usd"],
            "tokens": 0 if u is None else sum(u["tokens"].get(k, 0) for k in
                                                 ("prompt", "completion")),
            "examples": _examples(episodes, model, None if w is None else str(w["flaw"])),
            "errors": _errors(summary, model),
        }
        if model in drops:
            line["drop"] = _drop_of(drops[model])
        if w is not None:
            line["worst_flaw"] = {"flaw": str(w["flaw"]), **_drop_of(w)}
        if model in verdicts:
            line["verdict"] = {"kind": verdicts[model]["kind"], "text": verdicts[model]["text"]}
        provider = (summary.get("providers") or {}).get(model)
        if provider:
            line["requests"] = _requests(provider)
        models.append(line)
    out: Headline = {
        "counts": f"{vocabulary.plural(counts.get('episodes', 0), 'episode')}: "
                  f"{vocabulary.counts_line(outcomes)}",
        "models": models, "gate": list(gate)}
    if comparison is not None:
        out["comparison"] = {"kind": comparison["overall"]["kind"],
                             "text": comparison["overall"]["text"]}
    if chaos is not None and chaos.get("tests"):
        from pytest_resilibench.reporting.chaos_summary import headline_lines

        out["chaos"] = headline_lines(chaos)
    return out


# --- the words: one list of lines, three renderings --------------------------------------------


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def interval(ci: Sequence[float | None], scale: float = 100.0, sign: str = "") -> str:
    if len(ci) != 2 or ci[0] is None or ci[1] is None:
        return "[–]"
    return f"[{scale * ci[0]:{sign}.1f}, {scale * ci[1]:{sign}.1f}]"


def _p(p: float | None) -> str:
    return "–" if p is None else f"p={p:.2g}" if p >= 1e-4 else "p<1e-4"


def _drop(d: HeadlineDrop) -> str:
    if d["drop_pp"] is None:
        return "–"
    return f"{d['drop_pp']:+.1f} pp {interval(d['ci_pp'], 1.0, '+')}"


def _rate(r: ProfileRate) -> str:
    return f"{pct(r['full_rate'])} {interval(r['full_ci'])} of {r['n']}"


def _cost(m: ModelHeadline) -> str:
    tokens = f"{m['tokens']:,} tokens"
    return f"cost ${m['cost_usd']:.4f}, {tokens}" if m["cost_usd"] is not None else \
        f"cost – ({tokens})" if m["tokens"] else "cost –"


def model_lines(m: ModelHeadline) -> list[str]:
    """A model's lines: rates, then the drop and worst flaw, then verdict and cost."""
    rates = [f"full success {_rate(r)}" if r["faults"] == "paper" else
             f"{r['faults']} profile {_rate(r)}" for r in m["rates"]]
    out = ["; ".join(rates) or "no scored episode"]
    paired = []
    if "drop" in m:
        d = m["drop"]
        paired.append(f"optimal → flawed drop {_drop(d)} over {d['pairs']} pairs "
                      f"({_p(d['p_value'])})")
    if "worst_flaw" in m:
        paired.append(f"worst flaw {m['worst_flaw']['flaw']} {_drop(m['worst_flaw'])}")
    if paired:
        out.append("; ".join(paired))
    last = [f"vs its baseline partner: {m['verdict']['text']}"] if "verdict" in m else []
    out.append("; ".join([*last, _cost(m)]))
    requests = [m["requests"]] if "requests" in m else []
    return out + requests + m["errors"]


def lines(h: Headline) -> list[str]:
    """The headline as plain lines (the terminal prints these), each shown as data: a model's
    name and its errors are what an agent or a server said (base/safe_text.py)."""
    out = [f"ResiliBench: {h['counts']}"]
    if "comparison" in h:
        out.append(f"all models pooled, for information: {h['comparison']['text']}")
    for m in h["models"]:
        out.append(m["model"])
        out += [f"  {line}" for line in model_lines(m)]
    out += [f"resili_faults {line}" for line in h.get("chaos", [])]
    out += [f"resilibench gate: {line}" for line in h["gate"]]
    return [for_terminal(line) for line in out]


def render_markdown(h: Headline) -> str:
    """The same lines as markdown: a bold count line, a bullet per model (what the HTML and
    the terminal say, word for word; every line escaped, as it may quote a model's name or a
    server's error: base/safe_text.py)."""
    out = [f"**ResiliBench: {_md(h['counts'])}**", ""]
    if "comparison" in h:
        out += [f"All models pooled, for information: {_md(h['comparison']['text'])}", ""]
    for m in h["models"]:
        out.append(f"- **{_md(m['model'])}**: " + "<br>".join(_md(x) for x in model_lines(m)))
    out += [f"- resili_faults {_md(line)}" for line in h.get("chaos", [])]
    out += [f"- resilibench gate: {_md(line)}" for line in h["gate"]]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return for_markdown(text, limit=MARKDOWN_LIMIT)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def render_html(h: Headline) -> str:
    """The same lines as an HTML block (id `headline`), each model's failing examples linked
    to the episode viewer."""
    parts = [f'<section id="headline"><p class="counts">ResiliBench: {_e(h["counts"])}</p>']
    if "comparison" in h:
        parts.append(f'<p class="pooled">All models pooled, for information: '
                     f'{_e(h["comparison"]["text"])}</p>')
    for m in h["models"]:
        kind = m["verdict"]["kind"] if "verdict" in m else ""
        parts.append(f'<div class="model {_e(kind)}" data-model="{_e(m["model"])}">'
                     f'<h3>{_e(m["model"])}</h3>'
                     + "".join(f"<p>{_e(line)}</p>" for line in model_lines(m)))
        if m["examples"]:
            links = " · ".join(
                f'<a class="example" href="#view=episode&amp;ep={_e(_quote(x["id"]))}" '
                f'title="{_e(x["why"])}">{_e(x["variant"])}: {_e(x["outcome"])}</a>'
                for x in m["examples"])
            parts.append(f'<p class="examples">failing episodes: {links}</p>')
        parts.append("</div>")
    parts += [f'<p class="chaos">resili_faults {_e(line)}</p>' for line in h.get("chaos", [])]
    parts += [f'<p class="gate">resilibench gate: {_e(line)}</p>' for line in h["gate"]]
    return "".join(parts) + "</section>"


def _quote(text: str) -> str:
    import urllib.parse

    return urllib.parse.quote(text, safe="")
