"""The report's plots as PNG files, drawn with matplotlib (`pip install
'pytest-resilibench[report]'`), for a user who asks for images (`resilibench report RUN.json
--png DIR`): slides, papers. The HTML report needs none of this: its charts are inline SVG
(charts.py).
"""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_resilibench.reporting import summarize

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["figures", "write_pngs"]

_MISSING_MATPLOTLIB = ("PNG plots are drawn with matplotlib, which is not installed: "
                       "pip install 'pytest-resilibench[report]' (the HTML report needs none)")


# --- plots ---------------------------------------------------------------------------------


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


def _plot_variants(s: summarize.Summary) -> str | None:
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


def _plot_drops(s: summarize.Summary) -> str | None:
    rows = [r for r in s.get("drops", {}).get("by_flaw", []) if r["drop_pp"] is not None]
    if not rows:
        return None
    flaws = sorted({r["flaw"] for r in rows}, key=lambda f: summarize.variant_order(f"flawed-{f}"))
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


def _plot_surfaces(s: summarize.Summary) -> str | None:
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


def figures(s: summarize.Summary) -> list[tuple[str, str]]:
    """(caption, base64 PNG) for each plot the run has data for."""
    plots = [
        ("Full success by variant and model, with 95% Wilson intervals.", _plot_variants),
        ("Optimal → flawed drop per flaw, paired on the same tool luck.", _plot_drops),
        ("Full success against tool reliability and flaw severity.", _plot_surfaces),
    ]
    out = []
    for caption, draw in plots:
        png = draw(s)
        if png is not None:
            out.append((caption, png))
    return out


_NAMES = ("variants", "drops", "surfaces")


def write_pngs(s: summarize.Summary, directory: str | Path) -> list[Path]:
    """Each plot the run has data for as `DIRECTORY/<name>.png`; the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in zip(_NAMES, (_plot_variants, _plot_drops, _plot_surfaces), strict=True):
        png = draw(s)
        if png is not None:
            path = out / f"{name}.png"
            path.write_bytes(base64.b64decode(png))
            written.append(path)
    return written
