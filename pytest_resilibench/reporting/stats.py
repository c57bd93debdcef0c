"""The statistics of a benchmark run: Wilson intervals, pass^k, paired comparisons on common
random numbers, a regression verdict and minimum detectable effects.

Every model and variant meets the same tool luck on the same (seed, task, repeat), so two
conditions are compared pair by pair: the noise they share cancels, and a few hundred paired
episodes decide what thousands of unpaired ones could not. Distributions come from
scipy.special (scipy.stats would cost every summarising run ~0.4 s of CPU to import; the two
closed forms below give its figures, tests/unit/test_stats.py checks them against it); the
bootstrap draws from a numpy Generator keyed through `rng.key_int`, so a report never changes
between runs of the same data.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

import numpy as np
from scipy import special

from pytest_resilibench.base.rng import key_int

__all__ = [
    "PairedComparison",
    "Rate",
    "Verdict",
    "group_successes",
    "mcnemar_exact",
    "mde_paired",
    "mde_unpaired",
    "newcombe_paired_ci",
    "paired_binary",
    "paired_bootstrap_ci",
    "paired_means",
    "paired_verdict",
    "pass_hat_k",
    "rate",
    "wilson",
]

Interval = tuple[float, float]


@dataclass(frozen=True)
class Rate:
    """`successes` out of `n` with its Wilson interval; `value` is None when n is 0."""

    successes: int
    n: int
    value: float | None
    ci: Interval

    def to_json(self) -> dict[str, object]:
        return {"k": self.successes, "n": self.n, "rate": self.value, "ci": list(self.ci)}


def wilson(successes: int, n: int, *, confidence: float = 0.95) -> Interval:
    """The Wilson score interval of a binomial proportion; (0, 1) when there is no data."""
    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return (0.0, 1.0)
    # Newcombe (1998), method 3, as scipy.stats.binomtest(...).proportion_ci(method="wilson")
    # computes it, operation for operation (the same floats), without importing scipy.stats:
    # ~0.4 s of CPU for every run that summarises (it builds every distribution's docstring).
    p = successes / n
    z = float(special.ndtri(0.5 + 0.5 * confidence))
    denom = 2 * (n + z**2)
    center = (2 * n * p + z**2) / denom
    delta = z / denom * math.sqrt(4 * n * p * (1 - p) + z**2)
    return (0.0 if successes == 0 else center - delta, 1.0 if successes == n else center + delta)


def rate(successes: int, n: int, *, confidence: float = 0.95) -> Rate:
    value = successes / n if n else None
    return Rate(successes, n, value, wilson(successes, n, confidence=confidence))


def pass_hat_k(successes_by_task: Mapping[str, Sequence[bool]], k: int) -> float | None:
    """tau-bench's pass^k: the chance that k repeats drawn from a task's n all succeed,
    C(c, k) / C(n, k), averaged over the tasks that ran at least k times."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    scores = [
        special.comb(sum(runs), k, exact=True) / special.comb(len(runs), k, exact=True)
        for runs in successes_by_task.values()
        if len(runs) >= k
    ]
    return float(np.mean(scores)) if scores else None


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Exact McNemar p-value (two-sided): a binomial test of the discordant pairs at 1/2."""
    if a_only < 0 or b_only < 0:
        raise ValueError("discordant counts must be >= 0")
    n, k = a_only + b_only, min(a_only, b_only)
    if a_only == b_only:
        return 1.0
    # The two tails of Binomial(n, 1/2) as far out as the observed split: P(X <= k) + P(X >= n - k)
    # (scipy.stats.binomtest's two-sided p-value, to ~1e-12, without importing scipy.stats).
    return min(1.0, float(special.bdtr(k, n, 0.5) + special.bdtrc(n - k - 1, n, 0.5)))


def newcombe_paired_ci(
    both: int, a_only: int, b_only: int, neither: int, *, confidence: float = 0.95
) -> Interval:
    """Newcombe's (1998, method 10) square-and-add interval for rate(a) - rate(b) on paired
    binary data, from the Wilson intervals of the two rates. Unlike the bootstrap it stays
    honest when there are few discordant pairs (the bootstrap's interval collapses to a point)."""
    n = both + a_only + b_only + neither
    if n == 0:
        return (-1.0, 1.0)
    p1, p2 = (both + a_only) / n, (both + b_only) / n
    l1, u1 = wilson(both + a_only, n, confidence=confidence)
    l2, u2 = wilson(both + b_only, n, confidence=confidence)
    margins = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    phi = 0.0
    if margins > 0:
        cross = both * neither - a_only * b_only
        # Newcombe's continuity correction of the correlation between the two rates.
        corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
        phi = corrected / math.sqrt(margins)
    diff = p1 - p2
    down_a, up_b = p1 - l1, u2 - p2
    down_b, up_a = p2 - l2, u1 - p1
    low = diff - math.sqrt(max(0.0, down_a**2 + up_b**2 - 2 * phi * down_a * up_b))
    high = diff + math.sqrt(max(0.0, down_b**2 + up_a**2 - 2 * phi * down_b * up_a))
    return (max(-1.0, low), min(1.0, high))


def _generator(*key: object) -> np.random.Generator:
    return np.random.default_rng(key_int("resilibench.stats", *key))


def paired_bootstrap_ci(
    a: Sequence[bool],
    b: Sequence[bool],
    *,
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of rate(a) - rate(b), resampling pairs. A pair is
    (a wins), (b wins) or a tie, so a resample of n pairs is one multinomial draw of the three
    counts: exact, and O(resamples) whatever n is."""
    n, a_only, b_only = _discordance(a, b)
    if n == 0:
        return (-1.0, 1.0)
    counts = _generator("bootstrap", seed, n, a_only, b_only).multinomial(
        n, [a_only / n, b_only / n, (n - a_only - b_only) / n], size=resamples
    )
    diffs = (counts[:, 0] - counts[:, 1]) / n
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return (float(low), float(high))


def _discordance(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int, int]:
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    pairs = Counter(zip(map(bool, a), map(bool, b), strict=True))
    return len(a), pairs[True, False], pairs[False, True]


@dataclass(frozen=True)
class PairedComparison:
    """Condition a against condition b on the same pairs; `diff` is rate(a) - rate(b)."""

    n: int
    rate_a: float | None
    rate_b: float | None
    diff: float | None
    ci: Interval
    p_value: float
    method: str
    bootstrap_ci: Interval | None = None
    a_only: int | None = None
    b_only: int | None = None

    def to_json(self, *, scale: float = 1.0) -> dict[str, object]:
        """Plain builtins; `scale=100` gives percentage points."""

        def s(x: float | None) -> float | None:
            return None if x is None else x * scale

        out: dict[str, object] = {
            "n": self.n, "rate_a": s(self.rate_a), "rate_b": s(self.rate_b),
            "diff": s(self.diff), "ci": [s(self.ci[0]), s(self.ci[1])],
            "p_value": self.p_value, "method": self.method,
        }
        if self.bootstrap_ci is not None:
            out["bootstrap_ci"] = [s(self.bootstrap_ci[0]), s(self.bootstrap_ci[1])]
        if self.a_only is not None:
            out["a_only"], out["b_only"] = self.a_only, self.b_only
        return out


def paired_binary(
    a: Sequence[bool], b: Sequence[bool], *, confidence: float = 0.95, seed: int = 0
) -> PairedComparison:
    """Successes of a against b on the same episodes' luck: exact McNemar p-value, Newcombe
    interval, and the paired bootstrap interval beside it."""
    n, a_only, b_only = _discordance(a, b)
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    ra, rb = (sum(a) / n, sum(b) / n) if n else (None, None)
    return PairedComparison(
        n=n, rate_a=ra, rate_b=rb,
        diff=None if ra is None or rb is None else ra - rb,
        ci=newcombe_paired_ci(both, a_only, b_only, n - both - a_only - b_only,
                              confidence=confidence),
        p_value=mcnemar_exact(a_only, b_only),
        method="mcnemar-exact+newcombe",
        bootstrap_ci=paired_bootstrap_ci(a, b, confidence=confidence, seed=seed) if n else None,
        a_only=a_only, b_only=b_only,
    )


def paired_means(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, seed: int = 0,
    resamples: int = 4000,
) -> PairedComparison:
    """Paired per-unit scores in [0, 1] (e.g. one optimal episode against the mean of its seven
    flawed siblings), each unit counted once: an exact sign test over the units that differ
    (McNemar's test is its binary case) and a bootstrap interval over units."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    n = len(a)
    method = "sign-test+bootstrap"
    if n == 0:
        return PairedComparison(0, None, None, None, (-1.0, 1.0), 1.0, method)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = x - y
    p = mcnemar_exact(int(np.sum(d > 0)), int(np.sum(d < 0)))
    if np.allclose(d, d[0]):
        # No spread, so resampling would claim certainty. Bound instead: the share of units
        # that could differ is at most Wilson's upper limit for 0 of n, and such a unit's
        # difference could lie anywhere in [-1, 1].
        w = wilson(0, n, confidence=confidence)[1]
        ci = (float((1 - w) * d[0] - w), float((1 - w) * d[0] + w))
    else:
        # Resampling n units is one multinomial draw over the distinct differences (few:
        # fractions of the siblings), so memory stays O(resamples) however many units.
        values, counts = np.unique(d, return_counts=True)
        draws = _generator("boot-means", seed, n).multinomial(n, counts / n, size=resamples)
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(draws @ values / n, [tail, 100 - tail])
        ci = (float(lo), float(hi))
    return PairedComparison(n, float(x.mean()), float(y.mean()), float(d.mean()), ci, p, method)


VerdictKind = Literal["pass", "regression", "inconclusive"]


class VerdictJSON(TypedDict):
    """`Verdict.to_json()`: the verdict as plain builtins."""

    kind: VerdictKind
    drop_pp: float | None
    ci: list[float]
    p_value: float
    more_needed: int | None
    n: int
    max_drop_pp: float
    confidence: float


@dataclass(frozen=True)
class Verdict:
    """The regression gate's answer. `drop_pp` is rate(old) - rate(new) in percentage points
    with its interval; `more_needed` estimates how many more paired episodes would decide an
    inconclusive comparison (None when decided, or when no sample size would)."""

    kind: VerdictKind
    drop_pp: float | None
    ci: Interval
    p_value: float
    more_needed: int | None
    n: int
    max_drop_pp: float
    confidence: float  # the interval's level (1 - alpha)

    def to_json(self) -> VerdictJSON:
        return {"kind": self.kind, "drop_pp": self.drop_pp, "ci": list(self.ci),
                "p_value": self.p_value, "more_needed": self.more_needed, "n": self.n,
                "max_drop_pp": self.max_drop_pp, "confidence": self.confidence}

    def describe(self) -> str:
        # The thresholds stand beside every verdict: a reader sees what it was judged against.
        allowed = f"allowed {self.max_drop_pp:g} pp at {100 * self.confidence:g}% confidence"
        if self.drop_pp is None:
            return f"inconclusive: no paired episodes ({allowed})"
        lo, hi = self.ci
        p = f"={self.p_value:.3g}" if self.p_value >= 1e-4 else "<1e-4"
        head = (f"{self.kind}: drop {self.drop_pp:+.1f} pp [{lo:+.1f}, {hi:+.1f}] over "
                f"{self.n} pairs ({allowed}; McNemar p{p})")
        if self.kind == "inconclusive" and self.more_needed is not None:
            head += f"; about {self.more_needed} more paired episodes would decide it"
        return head


def paired_verdict(
    old: Sequence[bool], new: Sequence[bool], *, max_drop_pp: float, alpha: float = 0.05
) -> Verdict:
    """Regression when the drop old→new is significantly above `max_drop_pp` (the interval's
    low end lies above it), pass when it is significantly below (the high end lies below),
    inconclusive otherwise. Intervals are Newcombe's at level 1 - alpha on paired data."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    comparison = paired_binary(old, new, confidence=1 - alpha)
    if comparison.diff is None:
        return Verdict("inconclusive", None, (-100.0, 100.0), 1.0, None, 0, max_drop_pp,
                       1 - alpha)
    drop = comparison.diff * 100
    lo, hi = comparison.ci[0] * 100, comparison.ci[1] * 100
    kind: VerdictKind = "regression" if lo > max_drop_pp else "pass" if hi < max_drop_pp \
        else "inconclusive"
    more = None
    if kind == "inconclusive" and not math.isclose(drop, max_drop_pp, abs_tol=1e-6):
        # The interval narrows as 1/sqrt(n): the n at which its relevant half-width shrinks to
        # the distance between the observed drop and the allowed one.
        half = (drop - lo) if drop > max_drop_pp else (hi - drop)
        needed = comparison.n * (half / abs(drop - max_drop_pp)) ** 2
        if needed < 1e9:  # beyond that, no practical run decides it
            more = max(1, math.ceil(needed - comparison.n))
    return Verdict(kind, drop, (lo, hi), comparison.p_value, more, comparison.n, max_drop_pp,
                   1 - alpha)


def _z(p: float) -> float:
    return float(special.ndtri(p))  # the standard normal quantile (scipy.stats.norm.ppf's)


def mde_unpaired(n_per_arm: int, *, base_rate: float, alpha: float = 0.05,
                 power: float = 0.8) -> float:
    """The smallest drop from `base_rate` that a two-sided test on two independent samples of
    `n_per_arm` detects with `power`: Cohen's h = (z_{1-α/2} + z_power)·√(2/n), mapped back
    from the arcsine scale."""
    if n_per_arm < 1 or not 0 < base_rate <= 1:
        raise ValueError("need n_per_arm >= 1 and 0 < base_rate <= 1")
    h = (_z(1 - alpha / 2) + _z(power)) * math.sqrt(2 / n_per_arm)
    phi = 2 * math.asin(math.sqrt(base_rate)) - h
    return base_rate - (math.sin(phi / 2) ** 2 if phi > 0 else 0.0)


def mde_paired(n_pairs: int, *, discordance: float, alpha: float = 0.05,
               power: float = 0.8) -> float:
    """The smallest paired difference that McNemar's test detects with `power` over `n_pairs`
    when a fraction `discordance` of the pairs disagree: Connor's (1987) sample size
    n = (z_{1-α/2}·√ψ + z_power·√(ψ - δ²))² / δ², solved for δ.

    In closed form: with s = √(ψ - δ²) the equation is the quadratic
    (n + zb²)·s² + 2·za·zb·√ψ·s + (za² - n)·ψ = 0, whose non-negative root is
    s = √ψ·(√(n·(n - za² + zb²)) - za·zb) / (n + zb²); then δ = √(ψ - s²). (A root finder
    would give the same to ~1e-12, and scipy.optimize costs ~0.2 s to import.)"""
    if n_pairs < 1 or not 0 < discordance <= 1:
        raise ValueError("need n_pairs >= 1 and 0 < discordance <= 1")
    za, zb, psi = _z(1 - alpha / 2), _z(power), discordance

    def pairs_needed(delta: float) -> float:  # what a difference δ needs
        return (za * math.sqrt(psi) + zb * math.sqrt(max(0.0, psi - delta**2))) ** 2 / delta**2

    top = min(psi, math.sqrt(psi))  # |δ| cannot exceed ψ
    if pairs_needed(top) > n_pairs:  # even the largest possible difference needs more pairs
        return top
    n = float(n_pairs)
    s = math.sqrt(psi) * (math.sqrt(max(0.0, n * (n - za**2 + zb**2))) - za * zb) / (n + zb**2)
    return math.sqrt(max(0.0, psi - s * s))


def group_successes(
    rows: Iterable[tuple[str, bool]],
) -> dict[str, list[bool]]:
    """{unit: [success, ...]} from (unit, success) rows — the input of `pass_hat_k`."""
    grouped: dict[str, list[bool]] = {}
    for unit, ok in rows:
        grouped.setdefault(unit, []).append(ok)
    return grouped
