"""The HTML report: one self-contained file that opens offline (inline CSS and SVG charts,
the episodes gzip-compressed inside it, `report_data.py`), and needs no plotting library. The
verdict first: the headline (headline.py), then, for a comparison, the runs, the verdict per
model and the flipped episodes (each a link to the old and new episode side by side); then the
charts per model (charts.py), whose bars and cells link to their episodes; then the tables in
the paper's layout, whose every cell links to its episodes; and an episode viewer
(`report_viewer.js`): a sortable, filterable table of every episode with a "why" column and
free-text search over the conversations, each trajectory rendered on demand with one plain
sentence saying why it ended as it did, and an episode side by side with its optimal or flawed
sibling of the same tool luck.

What came from a run (model text, tool output, ids) goes through `html.escape` here and through
`textContent` in the viewer: model output is untrusted text.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_resilibench.base.atomic import atomic_write
from pytest_resilibench.base.outputs import prepare
from pytest_resilibench.reporting import (
    charts,
    comparison,
    headline,
    report_data,
    summarize,
    tables,
    vocabulary,
    why,
)

__all__ = ["DERIVED", "embedded_episodes", "render_html", "write_html"]

# What the page adds to each embedded episode (why.py), so the viewer only displays it.
DERIVED = ("why", "why_sentence")

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
#headline{border:1px solid #dde3ea;border-radius:6px;padding:8px 14px;margin:8px 0 14px;
background:#fcfdfe}#headline .counts{font-weight:600;font-size:15px;margin:4px 0}
#headline .model{margin:8px 0}#headline .model h3{margin:6px 0 2px}#headline .model p{margin:1px 0}
#headline .model.regression{border-left:4px solid #b3261e;padding-left:8px}
#headline .model.pass{border-left:4px solid #17692f;padding-left:8px}
#headline .examples{font-size:13px}
.model-charts{margin:6px 0 16px}.model-charts h3{margin:8px 0 4px}
svg.chart a{cursor:pointer}svg.chart a:hover rect{fill-opacity:1;stroke:#111}
p.why{font-size:14px;background:#f3f6f9;border-left:4px solid #3a7bd5;padding:6px 10px}
td.why{font-size:12.5px;color:#394450}
"""

def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# --- summary tables ---------------------------------------------------------------------------


def _table(t: tables.Table, table_id: str | None = None) -> str:
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
                text = f'<a href="{_e(charts.episodes_href(target))}">{text}</a>'
            num = ' class="num"' if j and _looks_numeric(cell) else ""
            cells.append(f"<td{num}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="note">{_e(t.note)}</p>' if t.note else ""
    attrs = f' id="{_e(table_id)}"' if table_id else ""
    return (f"<h3>{_e(t.title)}</h3><table{attrs}><thead><tr>{head}</tr></thead>"
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
    return report_data.json_utf8(json.dumps(value, ensure_ascii=False).replace("<", "\\u003c"))


def _asset(name: str) -> str:
    package = __name__.rpartition(".")[0]  # the assets lie beside this module
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


# --- the document ---------------------------------------------------------------------------


def _pair_href(old_id: str, new_id: str) -> str:
    return "#" + urllib.parse.urlencode({"view": "pair", "a": f"old:{old_id}", "b": new_id})


def _flips(c: comparison.Comparison) -> str:
    """Every flipped pair, each a link to the old and the new episode side by side."""
    t = tables.flips_table(c)
    rows = "".join(
        f'<tr><td class="{"failed" if f["change"] == "lost" else "full"}">{_e(f["change"])}'
        f'</td><td>{_e(f["model"])}</td><td>{_e(f["variant"])}</td><td>{_e(f["task_id"])}</td>'
        f'<td>{_e(f["old_outcome"])}</td><td>{_e(f["new_outcome"])}</td>'
        f'<td><a class="flip" href="{_e(_pair_href(f["old_id"], f["new_id"]))}">old ⇆ new</a>'
        f"</td></tr>" for f in c.get("flipped", []))
    head = "".join(f"<th>{_e(h)}</th>" for h in [*t.headers, "side by side"])
    body = (f'<table id="flips"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
            if rows else '<p class="note">No pair changed its full success.</p>')
    return f"<h3>{_e(t.title)}</h3>{body}"


def _comparison(c: comparison.Comparison, runs: Mapping[str, Mapping[str, Any]] | None) -> str:
    # The verdict is per model (the table); the pooled figure is in its note, as information.
    parts = ['<section id="comparison"><h2>Comparison with the other run</h2>',
             _table(tables.compare_model_table(c), "verdict-by-model")]
    if runs:
        parts.append(_table(tables.runs_table(runs), "runs"))
    parts += [_flips(c), _table(tables.compare_table(c), "verdict-by-variant"), "</section>"]
    return "".join(parts)


def _charts(s: summarize.Summary) -> str:
    drawn = charts.charts(s)
    if not drawn:
        return ""
    parts = ['<section id="charts"><h2>Charts</h2><p class="note">Per model; every bar and '
             "cell links to its episodes.</p>"]
    for model in dict.fromkeys(c.model for c in drawn):
        figures = "".join(f"<figure>{c.svg}<figcaption>{_e(c.title)}</figcaption></figure>"
                          for c in drawn if c.model == model)
        parts.append(f'<div class="model-charts" data-model="{_e(model)}"><h3>{_e(model)}</h3>'
                     f'<div class="grid">{figures}</div></div>')
    return "".join(parts) + "</section>"


def _with_why(episodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**ep, "why": why.reasons(ep), "why_sentence": why.sentence(ep)} for ep in episodes]


def render_html(
    report: Mapping[str, Any],
    *,
    summary: summarize.Summary | None = None,
    comparison: comparison.Comparison | None = None,
    other: Mapping[str, Any] | None = None,
    runs: Mapping[str, Mapping[str, Any]] | None = None,
    gate: Sequence[str] | None = None,
    title: str = "ResiliBench report",
) -> str:
    """The whole report as one HTML document: the headline, the comparison with `other` (the
    old run's report, whose episodes travel too for the side-by-side views) when given, the
    charts, the tables whose cells link to their episodes, and the episode viewer over the
    embedded episodes (`report_data.py`). `gate` replaces the run's recorded gate lines;
    `summary` defaults to a fresh `summarize.summary` of
    the report's episodes."""
    episodes: list[Mapping[str, Any]] = list(report.get("episodes", []))
    s = summary if summary is not None else summarize.summary(episodes)
    providers = report.get("summary", {}).get("providers")
    if providers and "providers" not in s:  # counted at run time, not from the episodes
        s = {**s, "providers": providers}
    if gate is None:  # the run's own gate lines, unless judged again (`report --compare`)
        gate = (report.get("environment") or {}).get("gate") or []
    head = headline.build(s, episodes=episodes, gate=gate, comparison=comparison,
                          chaos=(report.get("chaos") or {}).get("summary"))
    parts = [headline.render_html(head)]
    if comparison is not None:
        parts.append(_comparison(comparison, runs))
    parts.append(_charts(s))
    parts.append('<h2>Tables</h2><p class="note">Each cell links to its episodes.</p>')
    parts += [_table(t) for t in tables.tables(s)]
    parts += [f'<p class="note">{_e(vocabulary.LEGEND)}</p>',
              _key_values("Run configuration", report.get("config", {})),
              _key_values("Environment", report.get("environment", {}))]
    meta = {"words": vocabulary.WORDS, "order": list(vocabulary.COUNT_ORDER),
            "episodes": len(episodes)}
    nav = (f'<nav><a id="tab-summary" href="#view=summary">Summary</a>'
           f'<a id="tab-episodes" href="#view=episodes">Episodes ({len(episodes)})</a></nav>')
    views = ('<section id="view-episodes" hidden></section>'
             '<section id="view-episode" hidden></section>'
             '<section id="view-pair" hidden></section>')
    old = ""
    if other is not None:
        old = ('<script type="application/octet-stream" id="resili-old">'
               + report_data.encode(report_data.pack(_with_why(other.get("episodes", []))))
               + "</script>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>{nav}"
            "<noscript><p class=\"note\">The episode viewer needs JavaScript; the headline, "
            "charts and tables below do not.</p></noscript>"
            '<section id="view-summary">' + "\n".join(p for p in parts if p) + "</section>"
            + views
            + f'<script type="application/json" id="resili-meta">{_script_json(meta)}</script>'
            + '<script type="application/octet-stream" id="resili-data">'
            + report_data.encode(report_data.pack(_with_why(episodes))) + "</script>" + old
            + f"<script>{_asset('report_viewer.js')}</script></body></html>\n")


def embedded_episodes(document: str) -> list[dict[str, Any]]:
    """The episodes a rendered report carries (what its viewer shows), in the viewer's order."""
    match = re.search(r'<script type="application/octet-stream" id="resili-data">([^<]*)'
                      r"</script>", document)
    if match is None:
        raise ValueError("not a ResiliBench HTML report: no embedded episodes")
    return [{k: v for k, v in ep.items() if k not in DERIVED}
            for ep in report_data.unpack(report_data.decode(match.group(1)))]


def write_html(path: str | Path, report: Mapping[str, Any], **options: Any) -> Path:
    path = prepare(path)
    # A lone surrogate left in the page's text (a model's name, an error) shows as its escape.
    atomic_write(path, render_html(report, **options).encode("utf-8", "backslashreplace"))
    return path
