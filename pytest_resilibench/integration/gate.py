"""The regression gate: a run fails when its agent got worse, and says why in one line.

Two checks, each optional: `--resili-fail-under=RATE` on the full-success rate of every model,
and `--resili-baseline=OLD.json --resili-max-drop=PP`, which pairs this run's episodes with the
old run's on common random numbers (same task, variant, flaw, severity, repeat, seed and base
rate: the same luck) and applies a paired test. When each report holds one model the names
need not match: a new release of an agent is compared with the old one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_resilibench.base.names import is_scored
from pytest_resilibench.reporting.analysis import compare

__all__ = ["GateResult", "compare_with_baseline", "fail_under"]

Episode = Mapping[str, Any]


@dataclass(frozen=True)
class GateResult:
    failed: bool
    kind: str  # pass | regression | inconclusive | below | error
    line: str


def _scored(episodes: Sequence[Episode]) -> list[Episode]:
    return [ep for ep in episodes if is_scored(ep["outcome"])]


def fail_under(episodes: Sequence[Episode], threshold: float) -> list[GateResult]:
    results = []
    for model in sorted({ep["model"] for ep in episodes}):
        own = [ep for ep in episodes if ep["model"] == model]
        scored = _scored(own)
        if not scored:
            results.append(GateResult(True, "error", f"{model}: no scored episodes "
                                      f"(all {len(own)} hit infrastructure errors)"))
            continue
        rate = sum(ep["outcome"] == "full" for ep in scored) / len(scored)
        below = rate < threshold
        results.append(GateResult(
            below, "below" if below else "pass",
            f"{model}: full-success {rate:.1%} over {len(scored)} episodes "
            f"{'<' if below else '>='} fail-under {threshold:.1%}"))
    return results


def compare_with_baseline(
    old: Sequence[Episode], new: Sequence[Episode], *, max_drop_pp: float, alpha: float = 0.05
) -> GateResult:
    """Pair episodes on common random numbers (`analysis.compare`) and apply the verdict."""
    try:
        comparison = compare(old, new, max_drop_pp=max_drop_pp, alpha=alpha)
    except ValueError as exc:
        return GateResult(True, "error", f"baseline: {exc}")
    if not comparison["pairs"]:
        return GateResult(True, "error", "baseline: no episode of this run pairs with the "
                          "baseline (different tasks, variants, seed or base rate?)")
    overall = comparison["overall"]
    line = f"baseline {overall['text']}"
    if comparison["unpaired"]["new"]:
        line += f" ({comparison['unpaired']['new']} episodes had no partner and were left out)"
    return GateResult(overall["kind"] == "regression", overall["kind"], line)
