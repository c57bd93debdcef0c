"""The HTML report: one self-contained file that opens offline (inline CSS, PNG plots as
base64, the episodes gzip-compressed inside it, `report_data.py`). A summary in the paper's
layout whose every cell links to its episodes, matplotlib plots, and an episode viewer
(`report_viewer.js`): a sortable, filterable table of every episode with free-text search over
the conversations, each trajectory rendered on demand, and an episode side by side with its
optimal or flawed sibling of the same tool luck.

What came from a run (model text, tool output, ids) goes through `html.escape` here and through
`textContent` in the viewer: model output is untrusted text.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import urllib.parse
from collections import defaultdict
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_resilibench.base.atomic import atomic_write
from pytest_resilibench.base.outputs import prepare
from pytest_resilibench.reporting import analysis, report_data, vocabulary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["embedded_episodes", "figures", "render_html", "write_html"]

_MISSING_MATPLOTLIB = ("the HTML report draws its plots with matplotlib, which is not installed: "
                       "pip install 'pytest-resilibench[report]'")

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1320px;padding:0 16px;color:#1d232a;background:#fff}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #dde3ea;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.meta{color:#5b6670;font-size:12.5px}.note{color:#5b6670;font-size:12.5px;margin:4px 0 0}
table{border-collapse:collapse;margin:6px 0;font-size:13px}
th,td{border:1px solid #dde3ea;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f6f9;font-weight:600}tr:nth-child(even) td{background:#fafbfc}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.grid{display:flex;flex-wrap:wrap;gap:12px}.grid figure{margin:0;border:1px solid #dde3ea;
padding:6px;border-radius:4px}figcaption{font-size:12.5px;color:#5b6670}
img{max-width:100%;height:auto}
.full{color:#17692f;font-weight:600}.partial{color:#8a5a00;font-weight:600}
.failed{color:#b3261e;font-weight:600}.infra_error{color:#6b3fa0;font-weight:600}
nav{display:flex;gap:4px;margin:10px 0 14px;border-bottom:1px solid #dde3ea}
nav a{padding:6px 14px;text-decoration:none;color:#1d232a;border:1px solid transparent;
border-bottom:none;border-radius:4px 4px 0 0}nav a.active{border-color:#dde3ea;background:#f3f6f9;
font-weight:600}a{color:#1f5fbf}td a{text-decoration:none}td a:hover{text-decoration:underline}
td.id{white-space:nowrap}
.filters{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;padding:8px 10px;
background:#f3f6f9;border:1px solid #dde3ea;border-radius:4px;font-size:13px}
.filters select,.filters input{font:inherit}.chip{background:#fff;border:1px solid #c6d0da;
border-radius:10px;padding:1px 8px;text-decoration:none}.pager{font-size:13px;margin:8px 0 4px}
.timing{color:#5b6670}
table.episodes{width:100%}table.episodes th{position:sticky;top:0}
table.episodes th a{color:inherit;text-decoration:none}
td.vs.lost{background:#fbe4e2!important}td.vs.gained{background:#e3f4e8!important}
.facts th{width:1%;white-space:nowrap}.cond{margin-right:10px}.cond.ok{color:#17692f}
.cond.no{color:#b3261e}.links{margin:6px 0 10px}.button{font-weight:600}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:16px;align-items:start}
.pair>div{min-width:0}tr.diverge td{background:#fff4d6!important}
table.turns{width:100%}pre.plan{max-height:none}
pre.plan span.only{background:#fff4d6;display:inline-block;width:100%}
.tool{font-family:ui-monospace,monospace;font-size:12.5px}
details{border:1px solid #dde3ea;border-radius:4px;margin:6px 0;padding:4px 10px}
details[open]{background:#fcfdfe}summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:6px 8px;margin:4px 0;
border-radius:3px;font-size:12.5px;max-height:420px;overflow:auto}
.msg{border-left:3px solid #c6d0da;padding-left:8px;margin:8px 0}
.msg.assistant{border-color:#3a7bd5}.msg.tool,.msg.user{border-color:#9aa5b1}
.msg.system{border-color:#d0d7de}.role{font-weight:600;font-size:12px;color:#5b6670}
.verdict{font-size:16px;font-weight:600;padding:6px 10px;border-radius:4px;display:inline-block}
.verdict.pass{background:#e3f4e8}.verdict.regression{background:#fbe4e2}
.verdict.inconclusive{background:#fff4d6}
"""

def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# --- plots ------------------------------------------------------------------------------------


def _figure(width: float, height: float) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(_MISSING_MATPLOTLIB) from None
    # A bare Figure renders through Agg on savefig; no pyplot, no global state, no display.
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _errbars(rates: Sequence[float], cis: Sequence[Sequence[float]]) -> list[list[float]]:
    return [[max(0.0, r - lo) for r, (lo, _) in zip(rates, cis, strict=True)],
            [max(0.0, hi - r) for r, (_, hi) in zip(rates, cis, strict=True)]]


def _grouped_bars(ax: Axes, groups: Sequence[str], series: Mapping[str, Mapping[str, Any]],
                  value: str, ci: str, scale: float) -> None:
    """Bars per group (x) and series (colour) with interval whiskers."""
    width = 0.8 / max(1, len(series))
    for i, (name, cells) in enumerate(series.items()):
        xs = [g for g, label in enumerate(groups) if cells.get(label, {}).get(value) is not None]
        rows = [cells[groups[g]] for g in xs]
        heights = [scale * r[value] for r in rows]
        intervals = [[scale * (c if c is not None else r[value]) for c in r[ci]] for r in rows]
        ax.bar([x - 0.4 + width * (i + 0.5) for x in xs], heights, width, label=name,
               yerr=_errbars(heights, intervals), capsize=2, error_kw={"linewidth": 0.8})
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g.removeprefix("flawed-") for g in groups], rotation=30, ha="right",
                       fontsize=8)
    if len(series) > 1:  # beside the axes, never over a bar
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _plot_variants(s: analysis.Summary) -> str | None:
    rows = [r for r in s.get("by_model_variant", []) if r["full_rate"] is not None]
    if not rows:
        return None
    variants = [v for v in s["counts"]["variants"] if any(r["variant"] == v for r in rows)]
    series: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in rows:
        series[r["model"]][r["variant"]] = r
    fig = _figure(7.5, 3.6)
    ax = fig.subplots()
    _grouped_bars(ax, variants, series, "full_rate", "full_ci", 100)
    ax.set_ylabel("full success % (95% CI)")
    ax.set_ylim(0, 100)
    ax.set_title("Full success by prompt variant and model", fontsize=10)
    return _png(fig)


def _plot_drops(s: analysis.Summary) -> str | None:
    rows = [r for r in s.get("drops", {}).get("by_flaw", []) if r["drop_pp"] is not None]
    if not rows:
        return None
    flaws = sorted({r["flaw"] for r in rows}, key=lambda f: analysis.variant_order(f"flawed-{f}"))
    series: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in rows:
        series[r["model"]][r["flaw"]] = r
    fig = _figure(7.5, 3.6)
    ax = fig.subplots()
    _grouped_bars(ax, flaws, series, "drop_pp", "ci_pp", 1)
    ax.axhline(0, color="#333", linewidth=0.8)
    ax.set_ylabel("optimal − flawed, pp (95% CI)")
    ax.set_title("Optimal → flawed drop per flaw (paired)", fontsize=10)
    return _png(fig)


_SURFACE_AXES: tuple[Literal["base_success", "severity"], ...] = ("base_success", "severity")


def _plot_surfaces(s: analysis.Summary) -> str | None:
    surfaces = s.get("surfaces", {})
    axes_present = [a for a in _SURFACE_AXES if surfaces.get(a)]
    if not axes_present:
        return None
    fig = _figure(4.2 * len(axes_present), 3.4)
    axs = fig.subplots(1, len(axes_present), squeeze=False)[0]
    for ax, axis in zip(axs, axes_present, strict=True):
        for curve in surfaces[axis]:
            xs = [p["x"] for p in curve["points"]]
            ys = [100 * p["full_rate"] for p in curve["points"]]
            ax.plot(xs, ys, marker="o", label=curve["model"])
            ax.fill_between(xs, [100 * p["full_ci"][0] for p in curve["points"]],
                            [100 * p["full_ci"][1] for p in curve["points"]], alpha=0.15)
        if axis == "severity":
            ax.set_xticks([0, 1, 2, 3])
            ax.set_xticklabels(["optimal", "light", "medium", "severe"], fontsize=8)
            ax.set_xlabel("flaw severity")
        else:
            ax.set_xlabel("tool base success probability")
        ax.set_ylabel("full success %")
        ax.set_ylim(0, 100)
    handles, labels = axs[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncols=min(4, len(labels)))
    fig.suptitle("Robustness curves", fontsize=10)
    return _png(fig)


def _plot_heatmap(s: analysis.Summary) -> str | None:
    cells = [(r["task_type"], r["difficulty"], rate) for r in s.get("by_type_difficulty", [])
             if (rate := r["full_rate"]) is not None]
    if not cells:
        return None
    types = analysis.known_first((kind for kind, _, _ in cells), analysis.TASK_TYPES)
    levels = analysis.known_first((level for _, level, _ in cells), analysis.DIFFICULTIES)
    grid = [[float("nan")] * len(levels) for _ in types]
    for kind, level, rate in cells:
        grid[types.index(kind)][levels.index(level)] = 100 * rate
    fig = _figure(5.6, 0.55 * len(types) + 1.6)
    ax = fig.subplots()
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value == value:  # not NaN
                ax.text(j, i, f"{value:.0f}", ha="center", va="center",
                        color="white" if value < 60 else "black", fontsize=9)
    ax.set_xticks(range(len(levels)))
    ax.set_xticklabels(levels)
    ax.set_yticks(range(len(types)))
    ax.set_yticklabels(types, fontsize=8)
    fig.colorbar(image, ax=ax, label="full success %")
    ax.set_title("Task type × difficulty (all models and variants)", fontsize=10)
    return _png(fig)


def figures(s: analysis.Summary) -> list[tuple[str, str]]:
    """(caption, base64 PNG) for each plot the run has data for."""
    plots = [
        ("Full success by variant and model, with 95% Wilson intervals.", _plot_variants),
        ("Optimal → flawed drop per flaw, paired on the same tool luck.", _plot_drops),
        ("Full success against tool reliability and flaw severity.", _plot_surfaces),
        ("Full success by task type and difficulty.", _plot_heatmap),
    ]
    out = []
    for caption, draw in plots:
        png = draw(s)
        if png is not None:
            out.append((caption, png))
    return out


# --- summary tables ---------------------------------------------------------------------------


def _episodes_href(filters: Mapping[str, object]) -> str:
    """The viewer's URL-fragment state for the episodes behind a summary cell."""
    return "#" + urllib.parse.urlencode({"view": "episodes", **{k: str(v) for k, v in
                                                                 filters.items()}})


def _table(t: analysis.Table) -> str:
    """A summary table; each cell with a filter (`Table.links`) links to its episodes."""
    head = "".join(f"<th>{_e(h)}</th>" for h in t.headers)
    body = []
    for i, row in enumerate(t.rows):
        links = t.links[i] if t.links and i < len(t.links) else []
        cells = []
        for j, cell in enumerate(row):
            text = _e(cell)
            target = links[j] if j < len(links) else None
            if target:
                text = f'<a href="{_e(_episodes_href(target))}">{text}</a>'
            num = ' class="num"' if j and _looks_numeric(cell) else ""
            cells.append(f"<td{num}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="note">{_e(t.note)}</p>' if t.note else ""
    return (f"<h3>{_e(t.title)}</h3><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{note}")


_NUMERIC = re.compile(r"^(–|[+-]?\d[\d.,]*(e-?\d+)?( \[.*\])?( \(\d+\))?|<1e-4|\[.*\])$")


def _looks_numeric(cell: object) -> bool:
    """Numbers, rates with intervals, counts: right-aligned; text stays left."""
    return bool(_NUMERIC.match(str(cell)))


def _key_values(title: str, data: Mapping[str, Any]) -> str:
    if not data:
        return ""
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v if isinstance(v, str) else _json(v))}</td></tr>"
                   for k, v in data.items())
    return f"<details><summary>{_e(title)}</summary><table>{rows}</table></details>"


def _json(value: object) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str)


def _script_json(value: object) -> str:
    """JSON safe inside a <script> element (no `</script>` can close it early)."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c")


def _asset(name: str) -> str:
    package = __name__.rpartition(".")[0]  # the assets lie beside this module
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


# --- the document ---------------------------------------------------------------------------


def render_html(
    report: Mapping[str, Any],
    *,
    summary: analysis.Summary | None = None,
    comparison: analysis.Comparison | None = None,
    title: str = "ResiliBench report",
) -> str:
    """The whole report as one HTML document: the summary (tables whose cells link to their
    episodes, plots), and the episode viewer over the embedded episodes (`report_data.py`).
    `summary` defaults to a fresh `analysis.summary` of the report's episodes."""
    episodes: list[Mapping[str, Any]] = list(report.get("episodes", []))
    s = summary if summary is not None else analysis.summary(episodes)
    providers = report.get("summary", {}).get("providers")
    if providers and "providers" not in s:  # counted at run time, not from the episodes
        s = {**s, "providers": providers}
    counts = s.get("counts", {})
    parts = [f'<p class="meta">{_e(analysis.headline(s))} · models: '
             f'{_e(", ".join(counts.get("models", [])))}</p>',
             f'<p class="note">{_e(vocabulary.LEGEND)}</p>',
             _key_values("Run configuration", report.get("config", {})),
             _key_values("Environment", report.get("environment", {}))]
    if comparison is not None:
        kind = comparison["overall"]["kind"]
        parts += ["<h2>Comparison with the other run</h2>",
                  f'<p class="verdict {_e(kind)}">{_e(comparison["overall"]["text"])}</p>',
                  _table(analysis.compare_table(comparison))]
    parts.append('<h2>Tables</h2><p class="note">Each cell links to its episodes.</p>')
    parts += [_table(t) for t in analysis.tables(s)]
    plots = figures(s)
    if plots:
        parts.append("<h2>Plots</h2><div class=\"grid\">" + "".join(
            f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{png}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>" for caption, png in plots)
            + "</div>")
    meta = {"words": vocabulary.WORDS, "order": list(vocabulary.COUNT_ORDER),
            "episodes": len(episodes)}
    nav = (f'<nav><a id="tab-summary" href="#view=summary">Summary</a>'
           f'<a id="tab-episodes" href="#view=episodes">Episodes ({len(episodes)})</a></nav>')
    views = ('<section id="view-episodes" hidden></section>'
             '<section id="view-episode" hidden></section>'
             '<section id="view-pair" hidden></section>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>{nav}"
            "<noscript><p class=\"note\">The episode viewer needs JavaScript; the tables and "
            "plots below do not.</p></noscript>"
            '<section id="view-summary">' + "\n".join(p for p in parts if p) + "</section>"
            + views
            + f'<script type="application/json" id="resili-meta">{_script_json(meta)}</script>'
            + '<script type="application/octet-stream" id="resili-data">'
            + report_data.encode(report_data.pack(episodes)) + "</script>"
            + f"<script>{_asset('report_viewer.js')}</script></body></html>\n")


def embedded_episodes(document: str) -> list[dict[str, Any]]:
    """The episodes a rendered report carries (what its viewer shows), in the viewer's order."""
    match = re.search(r'<script type="application/octet-stream" id="resili-data">([^<]*)'
                      r"</script>", document)
    if match is None:
        raise ValueError("not a ResiliBench HTML report: no embedded episodes")
    return report_data.unpack(report_data.decode(match.group(1)))


def write_html(path: str | Path, report: Mapping[str, Any], **options: Any) -> Path:
    path = prepare(path)
    atomic_write(path, render_html(report, **options).encode("utf-8"))
    return path
