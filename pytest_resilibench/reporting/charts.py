"""The HTML report's charts, drawn as inline SVG straight from the summary: no plotting
library (a base install draws them), nothing to load, text a browser can search. Per model:
full success by prompt variant, the optimal → flawed drop per flaw sorted by size, and task
type × difficulty. Every bar and cell links to its episodes (the viewer's filters), so a
number is one click from the episodes behind it.
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_resilibench.base.names import DIFFICULTIES, TASK_TYPES
from pytest_resilibench.reporting.summarize import Summary, known_first, variant_order

__all__ = ["Bar", "Chart", "bars_svg", "charts", "episodes_href"]

_LABEL_W, _PLOT_W, _VALUE_W, _ROW_H = 170, 220, 60, 20
_FONT = 'font-family="system-ui,sans-serif" font-size="11"'


def episodes_href(filters: Mapping[str, object]) -> str:
    """The viewer's URL-fragment state for the episodes behind a figure."""
    return "#" + urllib.parse.urlencode({"view": "episodes", **{k: str(v) for k, v in
                                                                 filters.items()}})


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Bar:
    """One bar: its label, value and interval (percent or pp), and the episodes behind it."""

    label: str
    value: float
    lo: float
    hi: float
    filters: Mapping[str, object]
    text: str  # what the bar says in words (its tooltip and value label)


@dataclass(frozen=True)
class Chart:
    model: str
    title: str
    svg: str


def bars_svg(bars: Sequence[Bar], *, title: str, lo: float = 0.0, hi: float = 100.0,
             colour: str = "#3a7bd5", negative: str = "#3a7bd5") -> str:
    """Horizontal bars with interval whiskers on an axis from `lo` to `hi` (widened to every
    interval); each bar a link to its episodes; `negative`: the colour of bars below 0."""
    lo = min([lo, *(b.lo for b in bars)])
    hi = max([hi, *(b.hi for b in bars)])
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return _LABEL_W + _PLOT_W * (min(max(v, lo), hi) - lo) / span

    width = _LABEL_W + _PLOT_W + _VALUE_W
    height = _ROW_H * len(bars) + 24
    zero = x(0.0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{_e(title)}" {_FONT}>',
           f'<line x1="{zero:.1f}" y1="0" x2="{zero:.1f}" y2="{height - 20}" stroke="#333"/>']
    for i, b in enumerate(bars):
        y = i * _ROW_H
        left, right = sorted((x(0.0), x(b.value)))
        fill = negative if b.value < 0 else colour
        out.append(
            f'<a href="{_e(episodes_href(b.filters))}" class="bar" '
            f'data-label="{_e(b.label)}"><title>{_e(b.label)}: {_e(b.text)}</title>'
            f'<text x="{_LABEL_W - 6}" y="{y + 14}" text-anchor="end">{_e(b.label)}</text>'
            f'<rect x="{left:.1f}" y="{y + 3}" width="{max(right - left, 1):.1f}" height="14" '
            f'fill="{fill}" fill-opacity="0.8"/>'
            f'<line x1="{x(b.lo):.1f}" y1="{y + 10}" x2="{x(b.hi):.1f}" y2="{y + 10}" '
            f'stroke="#222"/>'
            f'<text x="{x(max(b.hi, b.value)) + 4:.1f}" y="{y + 14}">{_e(b.text)}</text></a>')
    axis_y = height - 8
    out.append(f'<text x="{_LABEL_W}" y="{axis_y}" fill="#5b6670">{lo:.0f}</text>'
               f'<text x="{_LABEL_W + _PLOT_W}" y="{axis_y}" text-anchor="end" '
               f'fill="#5b6670">{hi:.0f}</text></svg>')
    return "".join(out)


def _variant_chart(s: Summary, model: str) -> str | None:
    rows = [r for r in s.get("by_model_variant", [])
            if r["model"] == model and r["full_rate"] is not None]
    if not rows:
        return None
    rows.sort(key=lambda r: variant_order(r["variant"]))
    bars = [Bar(r["variant"], 100 * (r["full_rate"] or 0.0), 100 * r["full_ci"][0],
                100 * r["full_ci"][1], {"model": model, "variant": r["variant"]},
                f"{100 * (r['full_rate'] or 0.0):.1f}%") for r in rows]
    return bars_svg(bars, title=f"{model}: full success % by prompt variant")


def _drop_chart(s: Summary, model: str) -> str | None:
    rows = [d for d in s.get("drops", {}).get("by_flaw", [])
            if d["model"] == model and d["drop_pp"] is not None]
    if not rows:
        return None
    rows.sort(key=lambda d: -(d["drop_pp"] or 0.0))  # the largest drop on top
    bars = [Bar(d["flaw"], d["drop_pp"] or 0.0, _or(d["ci_pp"][0], d["drop_pp"]),
                _or(d["ci_pp"][1], d["drop_pp"]),
                {"model": model, "flaw": d["flaw"], "vs_optimal": "lost"},
                f"{d['drop_pp']:+.1f} pp") for d in rows]
    return bars_svg(bars, title=f"{model}: optimal → flawed drop per flaw, pp", lo=0.0,
                    hi=10.0, colour="#b3261e", negative="#17692f")


def _or(value: float | None, default: float | None) -> float:
    return float(value if value is not None else default or 0.0)


def _grid_chart(s: Summary, model: str) -> str | None:
    cells = {(r["task_type"], r["difficulty"]): r for r in s.get("by_type_difficulty", [])
             if r.get("model") == model and r["full_rate"] is not None}
    if not cells:
        return None
    types = known_first((t for t, _ in cells), TASK_TYPES)
    levels = known_first((d for _, d in cells), DIFFICULTIES)
    cell_w, cell_h, left = 64, 22, 150
    width, height = left + cell_w * len(levels), cell_h * (len(types) + 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart grid" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{_e(model)}: full success % by task type and difficulty" {_FONT}>']
    for j, level in enumerate(levels):
        out.append(f'<text x="{left + cell_w * j + cell_w / 2}" y="15" '
                   f'text-anchor="middle">{_e(level)}</text>')
    for i, kind in enumerate(types):
        y = cell_h * (i + 1)
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{_e(kind)}</text>')
        for j, level in enumerate(levels):
            r = cells.get((kind, level))
            if r is None:
                continue
            rate = 100 * (r["full_rate"] or 0.0)
            shade = _shade(rate)
            href = episodes_href({"model": model, "task_type": kind, "difficulty": level})
            out.append(
                f'<a href="{_e(href)}" class="cell">'
                f'<title>{_e(kind)} × {_e(level)}: {rate:.1f}% full of {r["n"]}</title>'
                f'<rect x="{left + cell_w * j}" y="{y}" width="{cell_w - 2}" '
                f'height="{cell_h - 2}" fill="{shade}"/>'
                f'<text x="{left + cell_w * j + cell_w / 2 - 1}" y="{y + 15}" '
                f'text-anchor="middle" fill="{"#fff" if rate < 55 else "#111"}">'
                f'{rate:.0f}</text></a>')
    return "".join(out) + "</svg>"


def _shade(rate: float) -> str:
    """From dark blue (0%) to pale green (100%)."""
    t = max(0.0, min(1.0, rate / 100))
    start, end = (35, 55, 110), (200, 235, 200)
    return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(start, end, strict=True))


def charts(s: Summary) -> list[Chart]:
    """Each model's charts, in model order: variants, drops per flaw, type × difficulty."""
    out: list[Chart] = []
    for model in s.get("counts", {}).get("models", []):
        drawn: list[tuple[str, Any]] = [
            ("Full success % by prompt variant (95% CI)", _variant_chart(s, model)),
            ("Optimal → flawed drop per flaw, pp, largest first (paired, 95% CI)",
             _drop_chart(s, model)),
            ("Full success % by task type × difficulty", _grid_chart(s, model)),
        ]
        out += [Chart(model, title, svg) for title, svg in drawn if svg is not None]
    return out
