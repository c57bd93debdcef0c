"""The regression gate: a run fails when its agent got worse, and says why in one line.

Two checks, each optional: `--resili-fail-under=RATE` on the full-success rate of every model,
and `--resili-baseline=OLD.json --resili-max-drop=PP`, which pairs this run's episodes with the
old run's on common random numbers (same task, variant, flaw, severity, repeat, seed and base
rate: the same luck) and applies a paired test. When each report holds one model the names
need not match: a new release of an agent is compared with the old one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_resilibench.stats import Verdict, paired_verdict

__all__ = ["GateResult", "compare_with_baseline", "fail_under", "load_report", "pair_key"]

REPORT_SCHEMA = "resilibench.report/1"
Episode = Mapping[str, Any]


@dataclass(frozen=True)
class GateResult:
    failed: bool
    kind: str  # pass | regression | inconclusive | below | error
    line: str


def load_report(path: Path) -> dict[str, Any]:
    """A report written by this plugin; a clear ValueError for anything else."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read report {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise ValueError(f"{path} is not a {REPORT_SCHEMA} report")
    return data


def pair_key(ep: Episode, *, with_model: bool) -> tuple[Any, ...]:
    key = (ep["task_id"], ep["variant"], ep.get("flaw"), ep.get("severity"), ep["repeat"],
           ep["seed"], ep["base_success"])
    return (ep["model"], *key) if with_model else key


def _scored(episodes: Sequence[Episode]) -> list[Episode]:
    return [ep for ep in episodes if ep["outcome"] != "error"]


def fail_under(episodes: Sequence[Episode], threshold: float) -> list[GateResult]:
    results = []
    for model in sorted({ep["model"] for ep in episodes}):
        scored = _scored([ep for ep in episodes if ep["model"] == model])
        if not scored:
            results.append(GateResult(True, "error", f"{model}: no scored episodes "
                                      f"(all {len(episodes)} hit infrastructure errors)"))
            continue
        rate = sum(ep["outcome"] == "full" for ep in scored) / len(scored)
        below = rate < threshold
        results.append(GateResult(
            below, "below" if below else "pass",
            f"{model}: full-success {rate:.1%} over {len(scored)} episodes "
            f"{'<' if below else '>='} fail-under {threshold:.1%}"))
    return results


def compare_with_baseline(
    old: Sequence[Episode], new: Sequence[Episode], *, max_drop_pp: float
) -> GateResult:
    """Pair episodes on common random numbers and apply the paired verdict."""
    single = len({ep["model"] for ep in old}) <= 1 and len({ep["model"] for ep in new}) <= 1
    old_by_key = {pair_key(ep, with_model=not single): ep for ep in _scored(old)}
    pairs = [(old_by_key[k], ep) for ep in _scored(new)
             if (k := pair_key(ep, with_model=not single)) in old_by_key]
    if not pairs:
        return GateResult(True, "error", "baseline: no episode of this run pairs with the "
                          "baseline (different tasks, variants, seed or base rate?)")
    verdict: Verdict = paired_verdict(
        [a["outcome"] == "full" for a, _ in pairs],
        [b["outcome"] == "full" for _, b in pairs],
        max_drop_pp=max_drop_pp,
    )
    unpaired = len(_scored(new)) - len(pairs)
    line = f"baseline {verdict.describe()}"
    if unpaired:
        line += f" ({unpaired} episodes had no partner and were left out)"
    return GateResult(verdict.kind == "regression", verdict.kind, line)
