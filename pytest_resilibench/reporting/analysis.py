"""The analysis of a run: pure functions from episode summaries (`EpisodeRecord.to_json()`
dicts) to a JSON-able summary, and from that summary to tables in the paper's layout.

Episodes whose outcome is `error` (infrastructure failed) are counted apart and kept out of
every denominator. Agent errors (stop reason `agent_error`: the agent's own code raised) are
failed episodes in every rate, and counted apart too (`counts.outcomes`, `agent_errors`).
Optimal and flawed episodes of one unit — the same (task, repeat, seed,
base success), hence the same tool luck — are compared pair by pair (`stats.py`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

import numpy as np
from tabulate import tabulate

from pytest_resilibench.base.names import (
    DIFFICULTIES,
    FLAWS,
    SCORED,
    SEVERITIES,
    TASK_TYPES,
    is_scored,
)
from pytest_resilibench.reporting import stats, vocabulary
from pytest_resilibench.reporting.report import REPORT_SCHEMA
from pytest_resilibench.reporting.sequential import PAIR_FIELDS
from pytest_resilibench.runtime.protocol import error_cause

if TYPE_CHECKING:
    from pytest_resilibench.reporting.headline import Headline

__all__ = [
    "DIFFICULTIES",
    "OUTCOMES",
    "PAIR_FIELDS",
    "REPORT_SCHEMA",
    "SUMMARY_SCHEMA",
    "TASK_TYPES",
    "Table",
    "compare",
    "compare_model_table",
    "compare_table",
    "flips_table",
    "headline",
    "identify",
    "known_first",
    "load_report",
    "no_result",
    "paired_legend",
    "render_compare",
    "render_markdown",
    "render_terminal",
    "runs_table",
    "summary",
    "tables",
    "unit_key",
    "variant_order",
]

SUMMARY_SCHEMA = "resilibench.summary/1"
OUTCOMES = SCORED  # the outcomes a rate counts (names.SCORED)
_WEIGHTS = {"full": 1.0, "partial": 0.5, "failed": 0.0}
_BASE_VARIANTS = ("baseline", "cot", "optimal")
# Severity on a numeric axis for the robustness slope; the optimal plan is "no flaw" (0).
_SEVERITY_LEVEL = {"none": 0, **{s: i + 1 for i, s in enumerate(SEVERITIES)}}

Episode = Mapping[str, Any]


class Rates(TypedDict):
    """A group's outcome counts and rates (`_rates`); errors are never in a denominator."""

    n: int
    errors: int
    full: int
    partial: int
    failed: int
    full_rate: float | None
    full_ci: list[float]
    partial_rate: float | None
    failed_rate: float | None
    score: float | None
    turns: float | None
    tool_calls: float | None
    coverage: float | None
    order_adherence: float | None
    recovery_rate: float | None
    tokens: float | None


class Row(Rates, total=False):
    """A summary table's row: the group's fields (those its table groups by), then its rates."""

    model: str
    variant: str
    faults: str
    task_type: str
    difficulty: str
    flaw: str
    severity: str
    event: str
    calls: int
    recovered_share: float | None


class Drop(TypedDict):
    """Optimal minus flawed full-success rate over paired units (`_paired_drop`), in pp."""

    pairs: int
    optimal_rate: float | None
    flawed_rate: float | None
    drop_pp: float | None
    ci_pp: list[float | None]
    p_value: float | None
    method: str
    bootstrap_ci_pp: list[float | None] | None
    mde_paired_pp: float | None
    mde_unpaired_pp: float | None


class ModelDrop(Drop):
    model: str


class FlawDrop(ModelDrop):
    flaw: str


class Drops(TypedDict):
    by_model: list[ModelDrop]
    by_flaw: list[FlawDrop]


class Counts(TypedDict):
    episodes: int
    scored: int
    errors: int
    models: list[str]
    variants: list[str]
    outcomes: dict[str, int]


class SurfacePoint(TypedDict):
    x: float
    n: int
    full_rate: float
    full_ci: list[float]


class Slope(TypedDict):
    """The least-squares line through a surface's points (`_slope`)."""

    slope: float
    intercept: float


class Surface(Slope):
    """One model's full-success rate against a swept axis (`_surface`)."""

    model: str
    axis: str  # base_success | severity
    points: list[SurfacePoint]


class Surfaces(TypedDict):
    base_success: list[Surface]
    severity: list[Surface]


class VariantAverage(TypedDict):
    variant: str
    models: int
    mean_full_rate: float | None
    best_model: str
    best_full_rate: float


class IdenticalVariants(TypedDict):
    model: str
    variants: list[str]
    by_construction: bool  # a built-in agent, which never reads the CoT instruction


class PassK(TypedDict):
    model: str
    variant: str
    tasks: int
    pass_k: dict[str, float | None]  # k (as text) -> pass^k


class Usage(TypedDict):
    model: str
    episodes: int
    tokens: dict[str, int]  # `_TOKEN_KINDS` -> count
    cost_usd: float | None


class InfraCause(TypedDict):
    model: str
    cause: str
    count: int


class AgentErrorCause(TypedDict):
    """A model's agent errors of one kind: the exception and the agent's line."""

    model: str
    error: str
    count: int


class Summary(TypedDict):
    """What `summary` returns and the report stores under "summary" (schema
    `resilibench.summary/1`); analysis, report_html, gate and cli read it."""

    schema: str
    confidence: float
    counts: Counts
    errors_by_model: dict[str, int]
    infra_causes: list[InfraCause]
    usage: list[Usage]
    by_model: list[Row]  # per model and fault profile: every variant pooled (the headline's)
    by_model_variant: list[Row]
    variant_averages: list[VariantAverage]
    by_task_type: list[Row]
    by_difficulty: list[Row]
    by_type_difficulty: list[Row]  # per model (a grid pooled over models hides them)
    by_flaw: list[Row]
    drops: Drops
    identical_variants: list[IdenticalVariants]
    pass_k: list[PassK]
    surfaces: Surfaces
    # The realistic fault profile's sections (absent for paper episodes), and what the
    # session adds: its providers' counts (real models only).
    faults: NotRequired[list[str]]
    by_event: NotRequired[list[Row]]
    providers: NotRequired[dict[str, dict[str, Any]]]
    # Only when some episode was an agent error (the agent's own code raised).
    agent_errors: NotRequired[list[AgentErrorCause]]


class ComparedVerdict(stats.VerdictJSON):
    """A paired verdict of `compare` (`stats.Verdict`), with its sentence."""

    text: str


class VariantVerdict(ComparedVerdict):
    variant: str


class ModelVerdict(ComparedVerdict):
    model: str  # the new run's model
    old_model: str  # the old run's (the same, but for runs of one model each)


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
    """What `compare` returns: the runs' models, what pairs an episode, the pairs and the
    scored episodes left unpaired (old, new), the verdicts overall, per model and per
    variant, and the pairs that flipped."""

    models: dict[str, list[str]]  # old | new -> models
    paired_on: list[str]
    pairs: int
    unpaired: dict[str, int]  # old | new -> episodes
    max_drop_pp: float
    alpha: float
    overall: ComparedVerdict
    by_model: list[ModelVerdict]
    by_variant: list[VariantVerdict]
    flipped: list[Flip]


def variant_order(label: str) -> tuple[int, str]:
    """baseline, cot, optimal, then the flawed variants in the paper's flaw order."""
    if label in _BASE_VARIANTS:
        return (_BASE_VARIANTS.index(label), "")
    flaw = label.removeprefix("flawed-")
    return (3 + (FLAWS.index(flaw) if flaw in FLAWS else len(FLAWS)), flaw)


def known_first(values: Iterable[str], known: Sequence[str]) -> list[str]:
    """The distinct values, those in `known` first in its order, then the rest sorted."""
    present = set(values)
    return [v for v in known if v in present] + sorted(present - set(known))


def unit_key(ep: Episode) -> tuple[Any, ...]:
    """What fixes an episode's tool luck: every variant of a unit meets the same draws."""
    return (ep.get("task_id"), ep.get("repeat"), ep.get("seed"), ep.get("base_success"))


def _is_scored(ep: Episode) -> bool:
    return is_scored(ep.get("outcome"))


def _full(ep: Episode) -> bool:
    return ep.get("outcome") == "full"


def _mean(values: Iterable[float]) -> float | None:
    return _column_mean([float(v) for v in values])


def _tokens(ep: Episode) -> float:
    tokens = ep.get("tokens")
    if type(tokens) is dict or isinstance(tokens, Mapping):  # the first: no ABC check
        return float(tokens.get("total") or 0)
    return float(tokens or 0)


# A scored episode's figures, in the order `_rates` averages them: (outcome, score, turns,
# tool calls, coverage, order adherence, tokens, errors met, errors recovered).
_Figures = tuple[str, float, float, float, float, float, float, int, int]


def _figures(ep: Episode) -> _Figures | None:
    """What `_rates` reads of an episode; None when it is not scored (an error)."""
    get = ep.get
    outcome: Any = get("outcome")
    if not is_scored(outcome):
        return None
    return (outcome, _WEIGHTS[outcome], float(get("turns") or 0),
            float(get("tool_calls") or 0), float(get("coverage") or 0),
            float(get("order_adherence") or 0), _tokens(ep), int(get("errors_met") or 0),
            int(get("errors_recovered") or 0))


@dataclass(frozen=True)
class _FigureTable:
    """Every episode's figures as numpy columns, one row an episode (`_figure_table`), read
    once for all of a summary's tables: each table reads every episode again, and a group's
    means over a column's rows are the very floats `np.mean` gives over its list (the same
    float64 values in the same order)."""

    row: dict[int, int]  # id(episode) -> its row
    scored: np.ndarray  # bool: not an error
    outcome: np.ndarray  # index in OUTCOMES (0 where not scored)
    means: tuple[np.ndarray, ...]  # score, turns, tool calls, coverage, order, tokens (views:
    # a group's rows are gathered into an array of their own before `np.mean`)
    met: np.ndarray  # errors met
    recovered: np.ndarray  # errors recovered


def _figure_table(episodes: Sequence[Episode]) -> _FigureTable:
    figures = [_figures(ep) for ep in episodes]
    filled = [f if f is not None else _UNSCORED for f in figures]
    code: dict[str, int] = {outcome: i for i, outcome in enumerate(OUTCOMES)}
    # Rows to columns through numpy: `zip(*filled)` takes ~10x as long over 50,400 rows.
    numbers = np.array([f[1:7] for f in filled], dtype=np.float64).reshape(len(filled), 6)
    counts = np.array([f[7:] for f in filled], dtype=np.int64).reshape(len(filled), 2)
    return _FigureTable(
        row={id(ep): i for i, ep in enumerate(episodes)},
        scored=np.array([f is not None for f in figures], dtype=bool),
        outcome=np.array([code[f[0]] for f in filled], dtype=np.intp),
        means=tuple(numbers.T), met=counts[:, 0], recovered=counts[:, 1])


_UNSCORED: _Figures = ("full", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0)  # a row `scored` masks out


def _rates(episodes: Sequence[Episode], confidence: float,
           table: _FigureTable | None = None) -> Rates:
    """Outcome counts and rates of a group, errors apart (never in a denominator).
    `table`: the `_figure_table` of episodes that include these (a summary's tables share
    it)."""
    if table is None:
        table = _figure_table(episodes)
    rows = np.fromiter(map(table.row.__getitem__, map(id, episodes)), dtype=np.intp,
                       count=len(episodes))
    rows = rows[table.scored[rows]]
    n = len(rows)
    full_n, partial_n, failed_n = (int(c) for c in np.bincount(
        table.outcome[rows], minlength=len(OUTCOMES))[:len(OUTCOMES)])
    met, recovered = int(table.met[rows].sum()), int(table.recovered[rows].sum())
    score, turns, calls, coverage, order, tokens = (
        float(np.mean(column[rows])) if n else None for column in table.means)
    full = stats.rate(full_n, n, confidence=confidence)
    return {
        "n": n,
        "errors": len(episodes) - n,
        "full": full_n,
        "partial": partial_n,
        "failed": failed_n,
        "full_rate": full.value,
        "full_ci": list(full.ci),
        "partial_rate": partial_n / n if n else None,
        "failed_rate": failed_n / n if n else None,
        "score": score,
        "turns": turns,
        "tool_calls": calls,
        "coverage": coverage,
        "order_adherence": order,
        "recovery_rate": recovered / met if met else None,
        "tokens": tokens,
    }


def _column_mean(values: Sequence[float]) -> float | None:
    """`np.mean` of floats already converted (`_mean` converts first)."""
    return float(np.mean(values)) if values else None


def _group(episodes: Iterable[Episode], *fields: str) -> dict[tuple[Any, ...], list[Episode]]:
    """The episodes by their values of `fields` (None where absent), each group in order."""
    eps = episodes if isinstance(episodes, list) else list(episodes)
    groups: dict[tuple[Any, ...], list[Episode]] = defaultdict(list)
    for key, ep in zip(_keys(eps, fields), eps, strict=True):
        groups[key].append(ep)
    return groups


def _keys(eps: Sequence[Episode], fields: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Each episode's `_group` key. The summary groups 50,400 rows a dozen ways, by one or
    two fields mostly: a tuple display costs half of `tuple(map(...))` for those."""
    if len(fields) == 1:
        (a,) = fields
        return [(ep.get(a),) for ep in eps]
    if len(fields) == 2:
        a, b = fields
        return [(ep.get(a), ep.get(b)) for ep in eps]
    return [tuple(map(ep.get, fields)) for ep in eps]


def _pp(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _pp_pair(ci: tuple[float, float] | None) -> list[float | None] | None:
    return None if ci is None else [_pp(ci[0]), _pp(ci[1])]


# A scored episode's unit and whether it was a full success: what paired drops compare. The
# unit is its rank among the run's units in the order of their `repr` (the order drops list
# units in), so that each drop sorts integers, not the same few thousand reprs again.
_Paired = tuple[int, bool]


def _paired_of(episodes: Iterable[Episode]) -> dict[int, _Paired]:
    """Each scored episode's `_Paired`, by `id()`, read once for all of a summary's drops
    (each reads the same optimal episodes again)."""
    scored = [(id(ep), unit_key(ep), _full(ep)) for ep in episodes if _is_scored(ep)]
    rank = {unit: i for i, unit in enumerate(sorted({unit for _, unit, _ in scored}, key=repr))}
    return {key: (rank[unit], full) for key, unit, full in scored}


def _paired_drop(
    optimal: Sequence[Episode], flawed: Sequence[Episode], paired: Mapping[int, _Paired], *,
    confidence: float, seed: int,
) -> Drop | None:
    """Optimal minus flawed full-success rate over the units that ran both (errors out).
    One flawed episode per unit: exact McNemar. Several (all flaws, or all severities, of a
    unit): each unit counts once, with its mean flawed success (sign test). `paired`:
    `_paired_of` episodes that include these."""
    best = dict(p for p in map(paired.get, map(id, optimal)) if p is not None)
    by_unit: dict[int, list[bool]] = defaultdict(list)
    for p in map(paired.get, map(id, flawed)):
        if p is not None and p[0] in best:
            by_unit[p[0]].append(p[1])
    if not by_unit:
        return None
    units = sorted(by_unit)
    a = [best[u] for u in units]
    # Each unit's flawed success share: a count over a count, the very float np.mean gives
    # (sums of 0 and 1 are exact whatever the order), without its per-call overhead.
    shares = [sum(by_unit[u]) / len(by_unit[u]) for u in units]
    if all(len(by_unit[u]) == 1 for u in units):
        comparison = stats.paired_binary(a, [by_unit[u][0] for u in units],
                                         confidence=confidence, seed=seed)
    else:
        comparison = stats.paired_means([float(x) for x in a], shares,
                                        confidence=confidence, seed=seed)
    # Share of units where the two plans disagree: what McNemar's power hangs on.
    psi = float(np.mean([float(x) != share for x, share in zip(a, shares, strict=True)]))
    base = comparison.rate_a
    return {
        "pairs": comparison.n,
        "optimal_rate": comparison.rate_a,
        "flawed_rate": comparison.rate_b,
        "drop_pp": _pp(comparison.diff),
        "ci_pp": [_pp(comparison.ci[0]), _pp(comparison.ci[1])],
        "p_value": comparison.p_value,
        "method": comparison.method,
        "bootstrap_ci_pp": _pp_pair(comparison.bootstrap_ci),
        # The drop this many pairs would detect (80% power, two-sided alpha = 1 - confidence),
        # paired at the observed discordance and, for contrast, unpaired.
        "mde_paired_pp": (_pp(stats.mde_paired(comparison.n, discordance=psi,
                                               alpha=1 - confidence))
                          if psi else None),
        "mde_unpaired_pp": (_pp(stats.mde_unpaired(comparison.n, base_rate=base,
                                                   alpha=1 - confidence))
                            if base else None),
    }


def _slope(points: Sequence[tuple[float, float]]) -> Slope | None:
    xs = sorted({x for x, _ in points})
    if len(xs) < 2:
        return None
    slope, intercept = np.polyfit([x for x, _ in points], [y for _, y in points], 1)
    return {"slope": float(slope), "intercept": float(intercept)}


def _surface(
    episodes: Sequence[Episode], axis: str, x_of: Callable[[Episode], float | None],
    confidence: float,
) -> list[Surface]:
    """Full-success rate per model against one swept axis, with a least-squares slope (per
    unit of the axis) when the run covers at least two values."""
    out: list[Surface] = []
    for (model,), eps in sorted(_group(episodes, "model").items(), key=lambda kv: str(kv[0])):
        by_x: dict[float, list[Episode]] = defaultdict(list)
        for ep in eps:
            x = x_of(ep)
            if x is not None:
                by_x[x].append(ep)
        if len(by_x) < 2:
            continue
        points: list[SurfacePoint] = []
        for x in sorted(by_x):
            r = _rates(by_x[x], confidence)
            if (rate := r["full_rate"]) is not None:  # an episode of this x was scored
                points.append({"x": x, "n": r["n"], "full_rate": rate, "full_ci": r["full_ci"]})
        fit = _slope([(p["x"], p["full_rate"]) for p in points])
        if fit is not None:
            out.append({"model": model, "axis": axis, "points": points, **fit})
    return out


def _severity_x(ep: Episode) -> float | None:
    if ep.get("variant") == "optimal":
        return 0.0
    severity = ep.get("severity")
    return float(_SEVERITY_LEVEL[severity]) if severity in _SEVERITY_LEVEL else None


def _pass_k(by_model_variant: Mapping[tuple[Any, ...], Sequence[Episode]]) -> list[PassK]:
    """pass^k for k = 1..repeats per model × variant (the episodes `_group`ed so), a
    task-condition being (task, flaw, severity, seed, base success) and its repeats the
    draws."""
    rows: list[PassK] = []
    for (model, variant), eps in by_model_variant.items():
        conditions = [((ep.get("task_id"), ep.get("severity"), ep.get("seed"),
                        ep.get("base_success")), ep) for ep in eps if _is_scored(ep)]
        if len({condition for condition, _ in conditions}) == len(conditions):
            continue  # one draw per condition (the usual run): no repr of each to pay for
        runs = stats.group_successes((repr(condition), _full(ep)) for condition, ep in conditions)
        most = max((len(r) for r in runs.values()), default=0)
        if most < 2:  # equal as values, told apart by repr (1 and 1.0): still one draw each
            continue
        values = {str(k): stats.pass_hat_k(runs, k) for k in range(1, most + 1)}
        rows.append({"model": model, "variant": variant, "tasks": len(runs), "pass_k": values})
    return sorted(rows, key=lambda r: (r["model"], variant_order(r["variant"])))


def summary(
    episodes: Iterable[Episode], *, confidence: float = 0.95, seed: int = 0
) -> Summary:
    """Everything the reports print, as JSON-able builtins (rates are fractions, drops pp)."""
    eps = [ep for ep in episodes if type(ep) is dict or isinstance(ep, Mapping)]
    models = sorted({str(ep.get("model")) for ep in eps})

    table = _figure_table(eps)
    paired = _paired_of(eps)
    by_model_variant = _group(eps, "model", "variant")  # also for pass^k and identical rows

    def rows(*fields: str, subset: Sequence[Episode] = eps,
             order: Callable[[tuple[Any, ...]], Any] = repr,
             groups: dict[tuple[Any, ...], list[Episode]] | None = None) -> list[Row]:
        if groups is None:
            groups = _group(subset, *fields)
        return [cast(Row, {**dict(zip(fields, key, strict=True)),
                           **_rates(groups[key], confidence, table)})
                for key in sorted(groups, key=order)]

    by_mv = rows("model", "variant", order=lambda k: (str(k[0]), variant_order(str(k[1]))),
                 groups=by_model_variant)
    flawed = [ep for ep in eps if str(ep.get("variant", "")).startswith("flawed")]
    optimal_by_model = _group((ep for ep in eps if ep.get("variant") == "optimal"), "model")
    flawed_by_model = _group(flawed, "model")
    flawed_by_flaw = _group(flawed, "model", "flaw")

    drops_by_model: list[ModelDrop] = []
    for model in models:
        d = _paired_drop(optimal_by_model.get((model,), []), flawed_by_model.get((model,), []),
                         paired, confidence=confidence, seed=seed)
        if d is not None:
            drops_by_model.append({"model": model, **d})
    drops_by_flaw: list[FlawDrop] = []
    for (model, flaw) in sorted(flawed_by_flaw, key=lambda k: (str(k[0]), variant_order(
            f"flawed-{k[1]}"))):
        d = _paired_drop(optimal_by_model.get((model,), []), flawed_by_flaw[(model, flaw)],
                         paired, confidence=confidence, seed=seed)
        if d is not None:
            drops_by_flaw.append({"model": model, "flaw": flaw, **d})

    variants = known_first((str(ep.get("variant")) for ep in eps), [])
    variants.sort(key=variant_order)
    averages: list[VariantAverage] = []
    for variant in variants:
        rated = [(r["model"], r["full_rate"]) for r in by_mv if r["variant"] == variant]
        cells = [(model, rate) for model, rate in rated if rate is not None]
        if cells:
            best_model, best_rate = max(cells, key=lambda cell: cell[1])
            averages.append({"variant": variant, "models": len(cells),
                             "mean_full_rate": _mean(rate for _, rate in cells),
                             "best_model": best_model, "best_full_rate": best_rate})

    errors: dict[str, int] = defaultdict(int)
    for ep, scored in zip(eps, table.scored.tolist(), strict=True):
        if not scored:
            errors[str(ep.get("model"))] += 1
    result: Summary = {
        "schema": SUMMARY_SCHEMA,
        "confidence": confidence,
        "counts": {"episodes": len(eps), "scored": int(table.scored.sum()),
                   "errors": sum(errors.values()), "models": models, "variants": variants,
                   "outcomes": vocabulary.tally(vocabulary.status_key(
                       ep.get("outcome"), ep.get("stop_reason")) for ep in eps)},
        "errors_by_model": dict(sorted(errors.items())),
        "infra_causes": _infra_causes(eps),
        "usage": _usage(eps, models),
        # The fault profile is a row's field ("paper" where the episode has none): a rate over
        # both profiles would mean neither.
        "by_model": rows("model", "faults", groups=_by_model_profile(eps)),
        "by_model_variant": by_mv,
        "variant_averages": averages,
        "by_task_type": rows("model", "task_type", order=lambda k: (
            str(k[0]), _rank(k[1], TASK_TYPES))),
        "by_difficulty": rows("model", "difficulty", order=lambda k: (
            str(k[0]), _rank(k[1], DIFFICULTIES))),
        "by_type_difficulty": rows("model", "task_type", "difficulty", order=lambda k: (
            str(k[0]), _rank(k[1], TASK_TYPES), _rank(k[2], DIFFICULTIES))),
        "by_flaw": rows("model", "flaw", "severity", subset=flawed, order=lambda k: (
            str(k[0]), variant_order(f"flawed-{k[1]}"), _rank(k[2], SEVERITIES))),
        "drops": {"by_model": drops_by_model, "by_flaw": drops_by_flaw},
        "identical_variants": _identical_variants(by_model_variant),
        "pass_k": _pass_k(by_model_variant),
        "surfaces": {
            "base_success": _surface(eps, "base_success", _float_or_none("base_success"),
                                     confidence),
            # A sweep means at least two severities; optimal then anchors the curve at 0.
            "severity": _surface(
                [ep for ep in eps if ep.get("variant") == "optimal" or ep.get("flaw")],
                "severity", _severity_x, confidence)
            if len({ep.get("severity") for ep in flawed}) > 1 else [],
        },
    }
    agent_errors = _agent_errors(eps)
    if agent_errors:
        result["agent_errors"] = agent_errors
    sections = _fault_sections(eps, confidence)
    if sections:
        result["faults"], result["by_event"] = sections["faults"], sections["by_event"]
    return result


def _by_model_profile(eps: Sequence[Episode]) -> dict[tuple[Any, ...], list[Episode]]:
    groups: dict[tuple[Any, ...], list[Episode]] = defaultdict(list)
    for ep in eps:
        groups[(str(ep.get("model")), str(ep.get("faults") or "paper"))].append(ep)
    return groups


def _identical_variants(
    by_model_variant: Mapping[tuple[Any, ...], Sequence[Episode]],
) -> list[IdenticalVariants]:
    """Per model, whether its baseline and cot episodes (`_group`ed by model and variant) are
    the same episodes (same calls, turns and outcome on every unit). The built-in agents never
    read the CoT instruction, so for them the two rows are identical by construction, and a
    reader must be told."""
    out: list[IdenticalVariants] = []
    for model in sorted({model for model, _ in by_model_variant}, key=str):
        base = by_model_variant.get((model, "baseline"))
        cot = by_model_variant.get((model, "cot"))
        if not base or not cot:
            continue

        def trace(ep: Episode) -> tuple[Any, ...]:
            calls = tuple((c.get("tool"), c.get("ok")) for c in ep.get("calls") or ())
            return (ep.get("outcome"), ep.get("turns"), ep.get("tool_calls"), calls)

        a = {unit_key(ep): trace(ep) for ep in base}
        b = {unit_key(ep): trace(ep) for ep in cot}
        if a == b:
            builtin = str(model).startswith("builtin:")
            out.append({"model": model, "variants": ["baseline", "cot"],
                        "by_construction": builtin})
    return out


_TOKEN_KINDS = ("prompt", "cached", "completion", "reasoning", "replayed")


def _usage(eps: Sequence[Episode], models: Sequence[str]) -> list[Usage]:
    """Tokens and cost per model (agents/pricing.py): cost is None when no episode of the
    model had a price. Replayed tokens came from the model-call cache (not spent)."""
    rows: list[Usage] = []
    by_model: dict[str, list[Episode]] = defaultdict(list)
    for ep in eps:
        by_model[str(ep.get("model"))].append(ep)
    for model in models:
        mine = by_model[model]
        counted = [counts for ep in mine if type(counts := ep.get("tokens")) is dict
                   or isinstance(counts, Mapping)]  # the first: no ABC check
        tokens = {kind: sum([int(counts.get(kind) or 0) for counts in counted])
                  for kind in _TOKEN_KINDS}
        costs = [float(c) for ep in mine if (c := ep.get("cost_usd")) is not None]
        rows.append({"model": model, "episodes": len(mine), "tokens": tokens,
                     "cost_usd": round(sum(costs), 6) if costs else None})
    return rows


def _infra_causes(eps: Sequence[Episode]) -> list[InfraCause]:
    """Infrastructure errors per model grouped by cause, most frequent first."""
    counts: Counter[tuple[str, str]] = Counter(
        (str(ep.get("model")), error_cause(str(ep.get("infra_error") or ep.get("stop_reason"))))
        for ep in eps if ep.get("outcome") == "error")
    return [{"model": model, "cause": cause, "count": n}
            for (model, cause), n in sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1]))]


def _agent_errors(eps: Sequence[Episode]) -> list[AgentErrorCause]:
    """Agent errors per model grouped by what was raised where, most frequent first."""
    counts: Counter[tuple[str, str]] = Counter(
        (str(ep.get("model")), str(ep.get("agent_error") or "agent_error"))
        for ep in eps if ep.get("stop_reason") == "agent_error")
    return [{"model": model, "error": error, "count": n}
            for (model, error), n in sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1]))]


def no_result(s: Summary) -> str | None:
    """The line that says a run has no result, when every one of its episodes was an infra
    error (none reached the model), with their causes; else None."""
    counts = s.get("counts", {})
    n = int(counts.get("episodes", 0))
    if not n or int((counts.get("outcomes") or {}).get("infra_error", 0)) != n:
        return None
    causes: Counter[str] = Counter()
    for row in s.get("infra_causes") or ():
        causes[row["cause"]] += row["count"]
    which = "the one episode" if n == 1 else f"every one of the {n} episodes"
    line = f"resilibench: {which} was an infra error"
    if causes:
        ((cause, count),) = causes.most_common(1)
        line += (f" (cause: {cause})" if len(causes) == 1 else
                 f" (most common cause, {count} of {n}: {cause})")
    return line + ": no result"


_EVENT_ORDER = ("outage", "auth_expired", "rate_limited", "silent", "tainted", "none")


class FaultSections(TypedDict, total=False):
    faults: list[str]
    by_event: list[Row]


def _fault_sections(eps: Sequence[Episode], confidence: float) -> FaultSections:
    """The realistic fault profile's part of the summary (docs/FAULTS.md): the profile, and
    per model and event kind the episodes that met it, their rates and how often the agent
    recovered (a call carrying the event later followed by a clean success of its step).
    Nothing for paper episodes, whose summary stays as it was."""
    realistic = [ep for ep in eps if ep.get("faults")]
    if not realistic:
        return {}
    groups: dict[tuple[str, str], list[Episode]] = defaultdict(list)
    calls: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for ep in realistic:
        events = ep.get("events") or {}
        for kind in events or {"none": None}:
            key = (str(ep.get("model")), kind)
            groups[key].append(ep)
            if kind in events:
                calls[key][0] += int(events[kind].get("met", 0))
                calls[key][1] += int(events[kind].get("recovered", 0))
    rows: list[Row] = []
    for model, kind in sorted(groups, key=lambda k: (k[0], _rank(k[1], _EVENT_ORDER))):
        met, recovered = calls[(model, kind)]
        rows.append(cast(Row, {"model": model, "event": kind, "calls": met,
                               "recovered_share": recovered / met if met else None,
                               **_rates(groups[(model, kind)], confidence)}))
    return {"faults": sorted({str(ep["faults"]) for ep in realistic}), "by_event": rows}


def _rank(value: Any, known: Sequence[str]) -> tuple[int, str]:
    return (known.index(value), "") if value in known else (len(known), str(value))


def _float_or_none(field: str) -> Callable[[Episode], float | None]:
    def get(ep: Episode) -> float | None:
        value = ep.get(field)
        return float(value) if isinstance(value, int | float) else None
    return get


# --- tables ---------------------------------------------------------------------------------


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
    usage = [r for r in s.get("usage", []) if any(r["tokens"].values())
             or r["cost_usd"] is not None]
    if usage:
        out.append(Table(
            "Tokens and cost by model",
            ["model", "episodes", *_TOKEN_KINDS, "cost USD"],
            [[r["model"], r["episodes"], *(f"{r['tokens'][k]:,}" for k in _TOKEN_KINDS),
              "–" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}"] for r in usage],
            "cached is part of prompt, reasoning part of completion; replayed: answered by "
            "the model-call cache, not spent; cost: – where the price is unknown",
            [[{"model": r["model"]}] * (3 + len(_TOKEN_KINDS)) for r in usage]))
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


def _axis_label(axis: str, x: float) -> str:
    if axis == "severity":
        names = {v: k for k, v in _SEVERITY_LEVEL.items()}
        return names.get(int(x), str(x))
    return f"{x:g}"


def _slope_label(r: Surface) -> str:
    if r["axis"] == "severity":
        return f"{100 * r['slope']:+.1f} pp per level"
    # Reliability: pp of full success per 0.1 of base success probability.
    return f"{10 * r['slope']:+.1f} pp per +0.1"


def _render_table(t: Table, fmt: str, heading: Callable[[str], str]) -> str:
    # Blank lines around every table and its legend: in markdown a line straight under a
    # table is read as one more row (GFM tables end at a blank line).
    block = [heading(t.title), tabulate(t.rows, headers=t.headers, tablefmt=fmt,
                                        disable_numparse=True)]
    if t.note:
        block.append(t.note)
    return ("\n\n" if fmt == "github" else "\n").join(block)


# Tables longer than this fold into a `<details>` element in the markdown.
MARKDOWN_FOLD_ROWS = 8


def _fold(title: str, body: str, rows: int) -> str:
    """A markdown block, folded into `<details>` when it is long (blank lines around the
    content: GitHub renders markdown inside the element only then)."""
    if rows <= MARKDOWN_FOLD_ROWS:
        return body
    return f"<details><summary>{title} ({rows} rows)</summary>\n\n{body}\n\n</details>"


def headline(s: Summary) -> str:
    """`1500 episodes: 1236 full, 249 partial, 15 failed, 0 infra errors`."""
    counts = s.get("counts", {})
    outcomes = counts.get("outcomes") or {"infra_error": counts.get("errors", 0)}
    return f"{vocabulary.plural(counts.get('episodes', 0), 'episode')}: " \
        f"{vocabulary.counts_line(outcomes)}"


def relabel_models(s: Summary, labels: Mapping[str, str]) -> Summary:
    """The summary with each model spec in `labels` shown by its label (an agent's `name`):
    every string equal to one, value or key, anywhere in it."""
    if not labels:
        return s

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return labels.get(value, value)
        if isinstance(value, Mapping):
            return {swap(k): swap(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(swap(v) for v in value)
        return value

    return cast(Summary, swap(s))


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


# --- reports on disk and run-to-run comparison -------------------------------------------------


def load_report(path: str | Path) -> dict[str, Any]:
    """A `resilibench.report/1` file, checked enough that the summary, the gate and the
    reports can trust it: bounded size and nesting, finite numbers (`jsonfile.py`), and every
    episode's fields of the right types (`record.episode_problem`). Raises
    FileNotFoundError, or ValueError with a message that names the file."""
    from pytest_resilibench.base.jsonfile import load_json_file
    from pytest_resilibench.core.record import REQUIRED_FIELDS, episode_problem

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such report file")
    try:
        data = load_json_file(path, what="a JSON report")
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: expected schema {REPORT_SCHEMA!r}, found {found!r}")
    episodes = data.get("episodes")
    if not isinstance(episodes, list):
        raise ValueError(f"{path}: 'episodes' must be a list of episode objects")
    missing = {f for e in episodes if isinstance(e, dict)
               for f in REQUIRED_FIELDS if f not in e}
    if missing:
        raise ValueError(f"{path}: episodes lack required fields {sorted(missing)}")
    seen: dict[str, int] = {}  # an episode's id -> its index
    for i, episode in enumerate(episodes):
        if (problem := episode_problem(episode)) is not None:
            raise ValueError(f"{path}: episode {i}: {problem}")
        # An id twice (a merge, a hand edit) would count its episode twice in every rate.
        episode_id = episode.get("id")
        if episode_id is not None and seen.setdefault(episode_id, i) != i:
            raise ValueError(f"{path}: episode id {episode_id!r} appears twice (episodes "
                             f"{seen[episode_id]} and {i}): a report holds each episode once")
    for name in ("config", "environment", "summary"):
        if not isinstance(data.setdefault(name, {}), dict):
            raise ValueError(f"{path}: {name!r} must be an object")
    return data


def _pairs(old: Sequence[Episode], new: Sequence[Episode], *, with_model: bool
           ) -> list[tuple[Episode, Episode]]:
    fields = (("model",) if with_model else ()) + PAIR_FIELDS

    def index(eps: Sequence[Episode]) -> dict[tuple[Any, ...], Episode]:
        return {tuple(ep.get(f) for f in fields): ep for ep in eps if _is_scored(ep)}

    a, b = index(old), index(new)
    return [(a[k], b[k]) for k in sorted(a.keys() & b.keys(), key=repr)]


def compare(
    old: Sequence[Episode], new: Sequence[Episode], *, max_drop_pp: float, alpha: float = 0.05
) -> Comparison:
    """Paired verdicts of `new` against `old` on full success: overall and per variant.
    Episodes pair on `PAIR_FIELDS` (the same tool luck), within a model when both runs ran the
    same models, across the two models when each ran one; errors drop their pair."""
    models_old = sorted({str(ep.get("model")) for ep in old})
    models_new = sorted({str(ep.get("model")) for ep in new})
    with_model = models_old == models_new
    if not with_model and (len(models_old) != 1 or len(models_new) != 1):
        raise ValueError(f"cannot pair runs of models {models_old} and {models_new}: "
                         "compare runs of the same models, or one model each")
    pairs = _pairs(old, new, with_model=with_model)

    def verdict(subset: Sequence[tuple[Episode, Episode]]) -> ComparedVerdict:
        v = stats.paired_verdict([_full(a) for a, _ in subset], [_full(b) for _, b in subset],
                                 max_drop_pp=max_drop_pp, alpha=alpha)
        return {**v.to_json(), "text": v.describe()}

    groups: dict[str, list[tuple[Episode, Episode]]] = defaultdict(list)
    by_model: dict[tuple[str, str], list[tuple[Episode, Episode]]] = defaultdict(list)
    for a, b in pairs:
        groups[str(a.get("variant"))].append((a, b))
        by_model[(str(b.get("model")), str(a.get("model")))].append((a, b))
    return {
        "models": {"old": models_old, "new": models_new},
        "paired_on": list((("model",) if with_model else ()) + PAIR_FIELDS),
        "pairs": len(pairs),
        "unpaired": {"old": sum(1 for ep in old if _is_scored(ep)) - len(pairs),
                     "new": sum(1 for ep in new if _is_scored(ep)) - len(pairs)},
        "max_drop_pp": max_drop_pp,
        "alpha": alpha,
        "overall": verdict(pairs),
        "by_model": [{"model": new_model, "old_model": old_model,
                      **verdict(by_model[(new_model, old_model)])}
                     for new_model, old_model in sorted(by_model)],
        "by_variant": [{"variant": v, **verdict(groups[v])}
                       for v in sorted(groups, key=variant_order)],
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


def compare_model_table(c: Comparison) -> Table:
    """The verdict per model (paired within it), the first thing a comparison shows."""
    rows = [[_model_label(v), v["n"], *_verdict_cells(v)] for v in c.get("by_model", [])]
    rows.append(["all models", c["overall"]["n"], *_verdict_cells(c["overall"])])
    links = [_links({"model": v["model"]}, 7) for v in c.get("by_model", [])]
    return Table(
        f"Verdict per model: drop old → new in full success (allowed {c['max_drop_pp']:g} pp)",
        ["model", "pairs", "drop pp", f"{100 * (1 - c['alpha']):g}% CI", "p", "verdict",
         "more pairs needed"],
        rows, "", [*links, [None] * 7])


def _links(target: Filter, cells: int) -> list[Filter | None]:
    return [target] * cells


def _model_label(v: ModelVerdict) -> str:
    return v["model"] if v["model"] == v["old_model"] else f"{v['old_model']} → {v['model']}"


def compare_table(c: Comparison) -> Table:
    rows = [["all", c["overall"]["n"], *_verdict_cells(c["overall"])]]
    rows += [[v["variant"], v["n"], *_verdict_cells(v)] for v in c["by_variant"]]
    return Table(
        f"Paired comparison per variant: drop old → new in full success (allowed "
        f"{c['max_drop_pp']:g} pp)",
        ["variant", "pairs", "drop pp", f"{100 * (1 - c['alpha']):g}% CI", "p", "verdict",
         "more pairs needed"],
        rows,
        f"paired on {', '.join(c['paired_on'])}; unpaired episodes left out: "
        f"{c['unpaired']['old']} old, {c['unpaired']['new']} new",
        [[None] * 7, *[_links({"variant": v["variant"]}, 7) for v in c["by_variant"]]])


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
    """The comparison: the runs (when known), the verdict per model, per variant, and the
    flipped pairs (at most `flips` rows), then the overall verdict's sentence."""
    heading: Callable[[str], str] = (lambda t: f"## {t}") if fmt == "github" else (
        lambda t: f"-- {t} --")
    found = [*([runs_table(runs)] if runs else []), compare_model_table(c), compare_table(c)]
    parts = [_render_table(t, fmt, heading) for t in found]
    if c.get("flipped"):
        t = flips_table(c, flips)
        body = _render_table(t, fmt, heading)
        parts.append(_fold(t.title, body, len(t.rows)) if fmt == "github" else body)
    parts.append(f"verdict: {c['overall']['text']}")
    return "\n\n".join(parts) + "\n"


def _or_dash(value: object) -> object:
    return "–" if value is None else value
