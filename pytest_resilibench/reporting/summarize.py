"""A run's summary: pure functions from episode records (`EpisodeRecord.to_json()` dicts) to
a JSON-able `Summary`, the figures every table, the headline and the JSON report show.

Episodes whose outcome is `error` (infrastructure failed) are counted apart and kept out of
every denominator. Agent errors (stop reason `agent_error`: the agent's own code raised) are
failed episodes in every rate, and counted apart too (`counts.outcomes`, `agent_errors`).
Optimal and flawed episodes of one unit — the same (task, repeat, seed, base success), hence
the same tool luck — are compared pair by pair (`stats.py`). Rendering is `tables.py`'s, run
against run `comparison.py`'s.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, TypeVar, cast

import numpy as np

from pytest_resilibench.base.names import (
    DIFFICULTIES,
    FLAWS,
    SCORED,
    SEVERITIES,
    TASK_TYPES,
    is_scored,
)
from pytest_resilibench.reporting import stats, vocabulary
from pytest_resilibench.runtime.protocol import error_cause

__all__ = [
    "OUTCOMES",
    "SEVERITY_LEVEL",
    "SUMMARY_SCHEMA",
    "TOKEN_KINDS",
    "Summary",
    "known_first",
    "model_labels",
    "no_result",
    "relabel_models",
    "summary",
    "unit_key",
    "variant_order",
]

SUMMARY_SCHEMA = "resilibench.summary/1"
OUTCOMES = SCORED  # the outcomes a rate counts (names.SCORED)
_WEIGHTS = {"full": 1.0, "partial": 0.5, "failed": 0.0}
_BASE_VARIANTS = ("baseline", "cot", "optimal")
# Severity on a numeric axis for the robustness slope; the optimal plan is "no flaw" (0).
SEVERITY_LEVEL = {"none": 0, **{s: i + 1 for i, s in enumerate(SEVERITIES)}}

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
    # Episodes a penalty cost a level, by penalty (scoring.py `Score.penalties`: "excess_runs");
    # only where some episode has one, so runs without are summarised as before.
    penalties: NotRequired[dict[str, int]]


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
    tokens: dict[str, int]  # `TOKEN_KINDS` -> count
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


class RecoveryRow(TypedDict):
    """A model's recovery measures summed over its scored episodes (core/recovery.py
    `MEASURES`, each a count), and how many of them met a failed or spoilt call."""

    model: str
    episodes: int
    met_failure: int
    measures: dict[str, int]


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
    # Per model, what its agent did after failed calls: only when some episode counted its
    # recovery measures (records that carry `recovery`).
    recovery: NotRequired[list[RecoveryRow]]



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
    return float(SEVERITY_LEVEL[severity]) if severity in SEVERITY_LEVEL else None


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
    penalised = _penalised(eps)
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
    if penalised:
        result["counts"]["penalties"] = penalised
    agent_errors = _agent_errors(eps)
    if agent_errors:
        result["agent_errors"] = agent_errors
    recovery = _recovery(eps, models)
    if recovery:
        result["recovery"] = recovery
    sections = _fault_sections(eps, confidence)
    if sections:
        result["faults"], result["by_event"] = sections["faults"], sections["by_event"]
    return result


def _recovery(eps: Sequence[Episode], models: Sequence[str]) -> list[RecoveryRow]:
    """Each model's recovery measures over its scored episodes (the record's `recovery`,
    absent where no call failed: zeros); none when no episode carries them (an older
    report, or a run where nothing failed)."""
    from pytest_resilibench.core.recovery import MEASURES, add_measures

    if not any(isinstance(ep.get("recovery"), Mapping) for ep in eps):
        return []
    rows: list[RecoveryRow] = []
    for model in models:
        total: dict[str, int] = dict.fromkeys(MEASURES, 0)
        scored = met = 0
        for ep in eps:
            if str(ep.get("model")) != model or not is_scored(ep.get("outcome")):
                continue
            scored += 1
            counted = ep.get("recovery")
            if isinstance(counted, Mapping):
                met += 1
                add_measures(total, counted)
        rows.append({"model": model, "episodes": scored, "met_failure": met,
                     "measures": total})
    return rows


def _penalised(eps: Sequence[Episode]) -> dict[str, int]:
    """Scored episodes a penalty cost a level, by penalty (the record's `penalties`)."""
    found: dict[str, int] = defaultdict(int)
    for ep in eps:
        penalties = ep.get("penalties")
        if isinstance(penalties, Mapping) and is_scored(ep.get("outcome")):
            for name in penalties:
                found[str(name)] += 1
    return dict(sorted(found.items()))


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


TOKEN_KINDS = ("prompt", "cached", "completion", "reasoning", "replayed")


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
                  for kind in TOKEN_KINDS}
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



_T = TypeVar("_T")


def relabel_models(s: _T, labels: Mapping[str, str]) -> _T:
    """A summary or a comparison with each model spec in `labels` shown by its label (an
    agent's `name`): every string equal to one, value or key, anywhere in it."""
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

    return cast(_T, swap(s))


def model_labels(config: Mapping[str, Any]) -> dict[str, str]:
    """A report's `config.agent_names` (spec -> the agent's name), the strings of it only: a
    report is read from outside."""
    names = config.get("agent_names")
    if not isinstance(names, Mapping):
        return {}
    return {k: v for k, v in names.items() if isinstance(k, str) and isinstance(v, str)}
