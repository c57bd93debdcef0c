"""The regression gate: the rules that set a run's exit status, and one line per verdict.

One vocabulary of thresholds (`GatePolicy`) serves the run (`--resili-max-drop`,
`--resili-confidence`, `--resili-fail-under`, `--resili-inconclusive`,
`--resili-max-infra-errors`, each an ini key too) and `resilibench report` (the same names
without the prefix); the run records its policy in the report, and `report --compare` reuses it
unless told otherwise. The checks:

- fail-under: every model's full-success rate at least the threshold;
- baseline: each model against its own partner in the baseline (`reporting/pairing.py`),
  paired on common random numbers (`reporting/comparison.py`, the same comparison every report
  prints). Any model's regression fails the run and names the model; the pooled figure is
  information only. An inconclusive model passes or fails by `inconclusive`;
- infra errors: episodes the model could not be reached for, tolerated up to a count or share.
- resili_faults tests (docs/CHAOS.md): each test against its own runs in the baseline, seed
  for seed (`judge_chaos`), with the same verdict and the same policy as a model.

The rules and their defaults are in README.md, "Gate an agent release in CI".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_resilibench.base.names import is_scored
from pytest_resilibench.integration.gate_policy import GatePolicy

if TYPE_CHECKING:
    from pytest_resilibench.reporting.comparison import Comparison
    from pytest_resilibench.reporting.sequential import SequentialGate

__all__ = [
    "GateResult",
    "compare_with_baseline",
    "exit_status",
    "fail_under",
    "infra_errors",
    "judge",
    "judge_chaos",
    "judge_sequential",
    "pair_name",
]

Episode = Mapping[str, Any]


@dataclass(frozen=True)
class GateResult:
    failed: bool
    kind: str  # pass | regression | inconclusive | below | error | infra | not judged
    line: str
    subject: str = ""  # the model it judges, as named in `line` ("" for the run as a whole)


def fail_under(episodes: Sequence[Episode], threshold: float,
               labels: Mapping[str, str] | None = None) -> list[GateResult]:
    results = []
    for model in sorted({str(ep["model"]) for ep in episodes}):
        own = [ep for ep in episodes if ep["model"] == model]
        scored = [ep for ep in own if is_scored(ep["outcome"])]
        name = (labels or {}).get(model, model)
        if not scored:
            results.append(GateResult(True, "error", f"{name}: no scored episodes "
                                      f"(all {len(own)} hit infrastructure errors)", name))
            continue
        rate = sum(ep["outcome"] == "full" for ep in scored) / len(scored)
        below = rate < threshold
        results.append(GateResult(
            below, "below" if below else "pass",
            f"{name}: full-success {rate:.1%} over {len(scored)} episodes "
            f"{'<' if below else '>='} fail-under {threshold:.1%}", name))
    return results


def _verdict(kind: str, name: str, line: str, policy: GatePolicy) -> GateResult:
    """A model's paired verdict as a gate result: a regression fails, an inconclusive one
    as the policy says (and says so)."""
    failed = kind == "regression" or (kind == "inconclusive" and policy.inconclusive == "fail")
    if kind == "inconclusive":
        line += f" [--resili-inconclusive={policy.inconclusive}: " \
                f"{'fails' if failed else 'passes'}]"
    return GateResult(failed, kind, line, name)


def pair_name(model: str, partner: str, labels: Mapping[str, str] | None = None) -> str:
    """A model as its verdict names it: by its agent's name (`labels`), and its partner's
    when the two differ (`pairing.partners`)."""
    name = (labels or {}).get(model, model)
    return name if partner == model else f"{name} (against {partner})"


def judge(comparison: Comparison, policy: GatePolicy,
          labels: Mapping[str, str] | None = None) -> list[GateResult]:
    """One result per partnered model, from the comparison every report prints; the models
    without a partner as one line that fails nothing."""
    results = []
    for v in comparison["by_model"]:
        name = pair_name(v["model"], v["old_model"], labels)
        results.append(_verdict(v["kind"], name, f"baseline {name}: {v['text']}", policy))
    alone = [(labels or {}).get(m, m) for m in comparison["unpartnered"]["new"]]
    if alone:
        results.append(GateResult(False, "not judged", "baseline: no partner in the baseline, "
                                  f"not judged: {', '.join(alone)}"))
    return results


def judge_chaos(comparison: Mapping[str, Any] | None, policy: GatePolicy, *,
                tests: Sequence[str]) -> list[GateResult]:
    """One result per resili_faults test paired with its runs in the baseline
    (`chaos_summary.compare`); the `tests` of this run without a pair as one line that fails
    nothing (a test new since the baseline, or a baseline from before it)."""
    results = []
    for test, result in (comparison or {}).items():
        name = f"chaos {test}"
        results.append(_verdict(result["verdict"]["kind"], name, f"{name}: "
                                f"{result['line'].removeprefix(f'{test}: ')}", policy))
    alone = [test for test in tests if test not in (comparison or {})]
    if alone:
        results.append(GateResult(False, "not judged", "chaos: no paired seeds in the "
                                  f"baseline, not judged: {', '.join(alone)}"))
    return results


def judge_sequential(gate: SequentialGate, policy: GatePolicy,
                     labels: Mapping[str, str] | None = None) -> list[GateResult]:
    """The sequential gate's verdict per model (`reporting/sequential.py`)."""
    names = {model: pair_name(model, gate.partners.of_new[model], labels) for model in gate.tests}
    return [_verdict(gate.model_kind(model), names[model],
                     f"baseline {gate.line(model, names[model])}", policy)
            for model in gate.tests]


def compare_with_baseline(old: Sequence[Episode], new: Sequence[Episode], policy: GatePolicy,
                          labels: Mapping[str, str] | None = None
                          ) -> tuple[Comparison | None, list[GateResult]]:
    """The comparison (None when the runs cannot be paired) and its verdicts."""
    from pytest_resilibench.reporting.comparison import compare

    try:
        comparison = compare(old, new, max_drop_pp=policy.max_drop_pp,
                             confidence=policy.confidence)
    except ValueError as exc:
        return None, [GateResult(True, "error", f"baseline: {exc}")]
    if not comparison["pairs"]:
        return comparison, [GateResult(
            True, "error", "baseline: no episode of this run pairs with the baseline "
            "(different tasks, variants, seed or base rate?)")]
    return comparison, judge(comparison, policy, labels)


def infra_errors(episodes: Sequence[Episode], policy: GatePolicy) -> GateResult | None:
    """The infra-error rule's line, when the run had any (None otherwise)."""
    errors = sum(1 for ep in episodes if ep.get("outcome") == "error"
                 and ep.get("stop_reason") != "harness_error")  # a harness bug is no infra
    if not errors:
        return None
    allowed = policy.max_infra_errors
    ok = allowed.allows(errors, len(episodes))
    return GateResult(not ok, "infra",
                      f"infra errors: {errors} of {len(episodes)} episodes "
                      f"{'within' if ok else 'over'} --resili-max-infra-errors={allowed}")


_WHAT = {"regression": "REGRESSION against the baseline", "below": "below --resili-fail-under",
         "inconclusive": "INCONCLUSIVE against the baseline (--resili-inconclusive=fail)",
         "error": "no verdict", "infra": "over --resili-max-infra-errors"}


def exit_status(status: int, *, failed_items: int, infra_items: int,
                results: Sequence[GateResult], incomplete: bool) -> tuple[int, str]:
    """The run's exit status and the one line that says which rule set it.

    pytest's own `status` stands when it is neither 0 nor 1 (interrupted, usage or internal
    error). Otherwise the run fails on: a failed item other than an infra error (an agent or
    harness error, or a test of the user's own), a failed gate result (infra errors over the
    tolerance among them) or an incomplete run; infra-error items within the tolerance do not
    fail it (README.md, "Gate an agent release in CI")."""
    if status not in (0, 1):
        return status, f"resilibench: exit {status}: pytest's own status (the run did not end " \
            "normally)"
    reasons = []
    if (other := failed_items - infra_items) > 0:
        reasons.append(f"{other} failed item{'s' if other != 1 else ''} (agent or harness "
                       "errors, or tests of your own)")
    for r in results:
        if r.failed:
            what = _WHAT.get(r.kind, r.kind)
            reasons.append(f"{r.subject} {what}" if r.subject else
                           f"{r.line.split(':')[0]} {what}")
    if incomplete:
        reasons.append("the run is incomplete (see above)")
    if reasons:
        return 1, "resilibench: exit 1: " + "; ".join(reasons)
    if status == 1 and failed_items <= 0:  # set by something else than a failed item: kept
        return 1, "resilibench: exit 1: pytest's own status (a failure outside the items)"
    judged = [r for r in results if r.subject]
    said = f"every gate passed ({len(judged)} verdicts)" if judged else \
        "no gate asked (--resili-fail-under, --resili-baseline)"
    infra = next((r for r in results if r.kind == "infra"), None)
    if infra is not None:
        said += f"; {infra.line}, so their items do not fail the run"
    return 0, f"resilibench: exit 0: {said}"
