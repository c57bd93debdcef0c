"""Run against run: each new episode paired with the baseline's episode of the same luck and a
partner model (`pairing.py`), and a paired verdict per model (`stats.paired_verdict`). The
gate, `resilibench report --compare`, the headline, the markdown and the HTML all read the
verdicts of one `compare` call, so they cannot disagree. Pooled figures (all models, per
variant) are kept as information; no gate judges them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from pytest_resilibench.base.names import is_scored
from pytest_resilibench.reporting import stats
from pytest_resilibench.reporting.pairing import PAIR_FIELDS, pair_key, partners
from pytest_resilibench.reporting.summarize import variant_order

__all__ = [
    "RUN_FIELDS",
    "ComparedVerdict",
    "Comparison",
    "Flip",
    "ModelVerdict",
    "VariantVerdict",
    "compare",
    "identify",
]

Episode = Mapping[str, Any]


class ComparedVerdict(stats.VerdictJSON):
    """A paired verdict of `compare` (`stats.Verdict`), with its sentence."""

    text: str


class VariantVerdict(ComparedVerdict):
    variant: str


class ModelVerdict(ComparedVerdict):
    model: str  # the new run's model
    old_model: str  # its partner in the baseline (`pairing.partners`)


class Flip(TypedDict):
    """A pair whose full success changed between the runs: `lost` (full before, not now) or
    `gained`; the ids are each run's episode."""

    change: str
    model: str
    variant: str
    task_id: str
    old_id: str
    new_id: str
    old_outcome: str
    new_outcome: str


class Comparison(TypedDict):
    """What `compare` returns: the runs' models and their partners, what pairs an episode,
    the pairs and the scored episodes left unpaired (old, new), the verdict per model (what
    every gate judges), the pooled figures overall and per variant (information only), and
    the pairs that flipped."""

    models: dict[str, list[str]]  # old | new -> models
    unpartnered: dict[str, list[str]]  # old | new -> models without a partner, not judged
    paired_on: list[str]
    pairs: int
    unpaired: dict[str, int]  # old | new -> episodes
    max_drop_pp: float
    confidence: float
    overall: ComparedVerdict
    by_model: list[ModelVerdict]
    by_variant: list[VariantVerdict]
    flipped: list[Flip]


def _full(ep: Episode) -> bool:
    return ep.get("outcome") == "full"


def compare(old: Sequence[Episode], new: Sequence[Episode], *, max_drop_pp: float,
            confidence: float = 0.95) -> Comparison:
    """Paired verdicts of `new` against `old` on full success, per model. Episodes pair on
    `PAIR_FIELDS` (the same tool luck) between partner models; infra errors drop their pair.
    Raises ValueError when no model of `new` has a partner in `old`."""
    models_old = sorted({str(ep.get("model")) for ep in old})
    models_new = sorted({str(ep.get("model")) for ep in new})
    found = partners(models_old, models_new)
    baseline = {pair_key(ep, str(ep.get("model"))): ep for ep in old
                if is_scored(ep.get("outcome"))}
    pairs: list[tuple[Episode, Episode]] = []
    for ep in new:
        partner = found.of_new.get(str(ep.get("model")))
        if partner is not None and is_scored(ep.get("outcome")):
            match = baseline.get(pair_key(ep, partner))
            if match is not None:
                pairs.append((match, ep))
    pairs.sort(key=lambda p: repr(pair_key(p[1], str(p[1].get("model")))))

    def verdict(subset: Sequence[tuple[Episode, Episode]]) -> ComparedVerdict:
        v = stats.paired_verdict([_full(a) for a, _ in subset], [_full(b) for _, b in subset],
                                 max_drop_pp=max_drop_pp, alpha=1 - confidence)
        return {**v.to_json(), "text": v.describe()}

    by_variant: dict[str, list[tuple[Episode, Episode]]] = defaultdict(list)
    by_model: dict[str, list[tuple[Episode, Episode]]] = defaultdict(list)
    for a, b in pairs:
        by_variant[str(a.get("variant"))].append((a, b))
        by_model[str(b.get("model"))].append((a, b))
    return {
        "models": {"old": models_old, "new": models_new},
        "unpartnered": {"old": list(found.old_alone), "new": list(found.new_alone)},
        "paired_on": ["model", *PAIR_FIELDS],
        "pairs": len(pairs),
        "unpaired": {"old": sum(1 for ep in old if is_scored(ep.get("outcome"))) - len(pairs),
                     "new": sum(1 for ep in new if is_scored(ep.get("outcome"))) - len(pairs)},
        "max_drop_pp": max_drop_pp,
        "confidence": confidence,
        "overall": verdict(pairs),
        # Every partnered model has a verdict, "no paired episodes" included: a model whose
        # episodes found no partner is inconclusive, never silently left out.
        "by_model": [{"model": new_model, "old_model": old_model,
                      **verdict(by_model[new_model])}
                     for new_model, old_model in found.of_new.items()],
        "by_variant": [{"variant": v, **verdict(by_variant[v])}
                       for v in sorted(by_variant, key=variant_order)],
        "flipped": _flips(pairs),
    }


def _flips(pairs: Sequence[tuple[Episode, Episode]]) -> list[Flip]:
    """The pairs whose full success changed, losses first, then by model, variant, task."""
    flips: list[Flip] = [
        {"change": "lost" if _full(a) else "gained", "model": str(b.get("model")),
         "variant": str(b.get("variant")), "task_id": str(b.get("task_id")),
         "old_id": str(a.get("id")), "new_id": str(b.get("id")),
         "old_outcome": str(a.get("outcome")), "new_outcome": str(b.get("outcome"))}
        for a, b in pairs if _full(a) != _full(b)]
    return sorted(flips, key=lambda f: (f["change"] != "lost", f["model"],
                                        variant_order(f["variant"]), f["task_id"]))



RUN_FIELDS = ("path", "started", "created", "commit", "models", "fixture_hash")


def identify(path: str | Path, report: Mapping[str, Any]) -> dict[str, Any]:
    """What tells a run apart: its file, when it started and ended, the commit it ran at, its
    models and the fixtures' hash; `missing` names what the report does not record."""
    env = report.get("environment") or {}
    config = report.get("config") or {}
    models = sorted({str(ep.get("model")) for ep in report.get("episodes", [])})
    found: dict[str, Any] = {
        "path": str(path), "started": env.get("started"), "created": env.get("created"),
        "commit": env.get("commit"), "models": ", ".join(models) or None,
        "fixture_hash": config.get("fixture_hash")}
    return {**found, "missing": [k for k in RUN_FIELDS if found.get(k) in (None, "")]}


