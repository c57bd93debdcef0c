"""The sequential regression gate: stop as soon as the paired evidence decides.

A gate run pairs each new episode with the baseline's episode of the same case on common
random numbers (the same task, variant, repeat, seed and base rate: the same tool luck, see
docs/ARCHITECTURE.md). Each pair gives D = old_full - new_full in {-1, 0, 1}; the gate asks
whether the mean drop E[D] exceeds the allowed `max_drop` (a fraction, 0.05 = 5 points).

Testing by betting (Shafer 2021, "Testing by betting", JRSS-A 184(2); Waudby-Smith & Ramdas
2024, "Estimating means of bounded random variables by betting", JRSS-B 86(1)): with
X = (D + 1) / 2 in [0, 1] and m = (max_drop + 1) / 2, two gamblers bet on the next pair,

    K_up_t   = prod_i (1 + l_i (X_i - m)),   l_i in [0, c/m]          (the drop is above m)
    K_down_t = prod_i (1 - l_i (X_i - m)),   l_i in [0, c/(1 - m)]    (the drop is below m)

each bet chosen from the pairs before it only (predictable). Under "the drop is at most
max_drop" K_up is a nonnegative supermartingale, so by Ville's inequality it ever reaches
2/alpha with probability at most alpha/2; likewise K_down under "at least max_drop". The gate
says `regression` when K_up reaches 2/alpha and `pass` when K_down does, after any number of
pairs, looked at after every pair: the same two one-sided error rates (alpha/2 each) as the
fixed-sample gate's two-sided interval at level 1 - alpha (`stats.paired_verdict`). The bets are
WSR's aGRAPA rule (their section 5.3): l = (mu - m) / (var + (mu - m)^2) from the regularised
running mean and variance, truncated at c = 1/2 of the largest bet that keeps wealth positive.

`SequentialTest` is the arithmetic; `SequentialGate` feeds it the run's pairs in the planned
(seeded, random) order, whatever order the episodes arrive in, so `-n 0` and `-n 2` stop after
the same pair with the same verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_resilibench.base.names import is_scored

__all__ = ["SequentialGate", "SequentialTest", "pair_key"]

Verdict = Literal["pass", "regression"]
# Fields that give two episodes the same luck; their one home (analysis imports them), kept in
# this scipy-free module so the gate does not load the analysis stack at start-up.
PAIR_FIELDS = ("task_id", "variant", "flaw", "severity", "repeat", "seed", "base_success")
_BET_CAP = 0.5  # c: a fraction of the largest bet that keeps wealth nonnegative


class SequentialTest:
    """Anytime-valid test of "mean drop > max_drop" against "mean drop < max_drop" on paired
    binary outcomes. Feed pairs with `add`; `verdict` is set once either wealth reaches
    2/alpha, and further pairs leave it unchanged."""

    def __init__(self, *, max_drop: float, alpha: float) -> None:
        if not 0.0 <= max_drop < 1.0 or not math.isfinite(max_drop):
            raise ValueError(f"max_drop must lie in [0, 1), got {max_drop}")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
        self.max_drop = max_drop
        self.alpha = alpha
        self.threshold = 2.0 / alpha
        self._m = (max_drop + 1.0) / 2.0
        self.n = 0
        self.drops = 0  # pairs where old was full and new was not
        self.gains = 0  # pairs where new was full and old was not
        self.log_wealth_up = 0.0
        self.log_wealth_down = 0.0
        self.verdict: Verdict | None = None
        self.decided_at: int | None = None
        # WSR's regularised estimates: mean starts at 1/2, variance at 1/4 (one prior pair).
        self._sum = 0.5
        self._sq = 0.25
        self._mean = 0.5
        self._var = 0.25

    def add(self, old_full: bool, new_full: bool) -> Verdict | None:
        """One pair; returns the verdict if this pair decided it."""
        x = (int(old_full) - int(new_full) + 1) / 2.0
        m = self._m
        edge = self._mean - m
        bet = edge / (self._var + edge * edge)
        up = min(max(bet, 0.0), _BET_CAP / m)
        down = min(max(-bet, 0.0), _BET_CAP / (1.0 - m))
        self.log_wealth_up += math.log1p(up * (x - m))
        self.log_wealth_down += math.log1p(-down * (x - m))
        self.n += 1
        self.drops += old_full and not new_full
        self.gains += new_full and not old_full
        # The estimates for the next bet include this pair (predictable: used from n + 1 on).
        self._sum += x
        self._sq += (x - self._mean) ** 2
        self._mean = self._sum / (self.n + 1)
        self._var = self._sq / (self.n + 1)
        if self.verdict is None:
            log_threshold = math.log(self.threshold)
            if self.log_wealth_up >= log_threshold:
                self.verdict, self.decided_at = "regression", self.n
                return self.verdict
            if self.log_wealth_down >= log_threshold:
                self.verdict, self.decided_at = "pass", self.n
                return self.verdict
        return None

    @property
    def drop(self) -> float | None:
        """The observed mean drop (a fraction), None before the first pair."""
        return (self.drops - self.gains) / self.n if self.n else None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict or "inconclusive",
            "pairs": self.n,
            "decided_at_pair": self.decided_at,
            "drop_pp": None if self.drop is None else round(100 * self.drop, 4),
            "max_drop_pp": 100 * self.max_drop,
            "alpha": self.alpha,
            "wealth": {"regression": round(math.exp(min(self.log_wealth_up, 700.0)), 6),
                       "pass": round(math.exp(min(self.log_wealth_down, 700.0)), 6),
                       "threshold": self.threshold},
        }


def pair_key(fields: Mapping[str, Any], *, with_model: bool) -> tuple[Any, ...]:
    """The key on which a new episode meets its baseline partner."""
    names = (("model",) if with_model else ()) + PAIR_FIELDS
    return tuple(fields.get(name) for name in names)


@dataclass(frozen=True)
class _Planned:
    case_id: str
    key: tuple[Any, ...]


class SequentialGate:
    """Pairs the run's episodes with a baseline's in the planned order and runs the test.

    The plan is the run's benchmark items in their (seeded) order. Episodes may arrive in any
    order (xdist); the test sees the longest planned prefix whose episodes have all arrived,
    so where it stops depends on the plan alone. Planned cases without a scored baseline
    partner, and new episodes that hit infrastructure errors, are passed over (they say
    nothing about a regression)."""

    def __init__(self, baseline: Sequence[Mapping[str, Any]], *, models: Sequence[str],
                 max_drop_pp: float, alpha: float) -> None:
        old_models = sorted({str(ep.get("model")) for ep in baseline})
        new_models = sorted(set(models))
        self.with_model = old_models == new_models
        if not self.with_model and (len(old_models) != 1 or len(new_models) != 1):
            raise ValueError(f"cannot pair runs of models {old_models} and {new_models}: "
                             "compare runs of the same models, or one model each")
        self._old = {pair_key(ep, with_model=self.with_model): ep.get("outcome") == "full"
                     for ep in baseline if is_scored(ep.get("outcome"))}
        self.test = SequentialTest(max_drop=max_drop_pp / 100.0, alpha=alpha)
        self._plan: list[_Planned] = []
        self._arrived: dict[str, Mapping[str, Any]] = {}
        self._next = 0  # the first planned case the test has not seen yet
        self.skipped = 0  # planned cases seen without a usable pair

    # --- the plan ------------------------------------------------------------------------------
    @property
    def planned(self) -> bool:
        return bool(self._plan)

    def plan(self, cases: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """(case id, pair fields) of every benchmark item, in run order."""
        self._plan = [_Planned(cid, pair_key(f, with_model=self.with_model)) for cid, f in cases]
        self._advance()

    @property
    def episodes_planned(self) -> int:
        return len(self._plan)

    @property
    def pairs_planned(self) -> int:
        return sum(1 for p in self._plan if p.key in self._old)

    # --- episodes ------------------------------------------------------------------------------
    def add(self, case_id: str, episode: Mapping[str, Any]) -> bool:
        """Record an arrived episode; True when this arrival made the test decide."""
        if self.test.verdict is not None:
            return False
        self._arrived[case_id] = episode
        return self._advance()

    def _advance(self) -> bool:
        while self.test.verdict is None and self._next < len(self._plan):
            planned = self._plan[self._next]
            episode = self._arrived.pop(planned.case_id, None)
            if episode is None:
                return False
            self._next += 1
            old = self._old.get(planned.key)
            if old is None or not is_scored(episode.get("outcome")):
                self.skipped += 1
                continue
            if self.test.add(old, episode.get("outcome") == "full") is not None:
                return True
        return False

    @property
    def decided(self) -> bool:
        return self.test.verdict is not None

    @property
    def kind(self) -> str:
        return self.test.verdict or "inconclusive"

    def line(self) -> str:
        t = self.test
        drop = "no pairs" if t.drop is None else f"drop {100 * t.drop:+.1f} pp"
        head = (f"sequential, {drop} over {t.n} of {self.pairs_planned} planned pairs "
                f"(allowed {100 * t.max_drop:g} pp, alpha {t.alpha:g})")
        if t.verdict == "regression":
            return f"{head}: REGRESSION (the drop is above the allowed one)"
        if t.verdict == "pass":
            return f"{head}: PASS (the drop is below the allowed one)"
        return f"{head}: INCONCLUSIVE (the pairs ran out before the evidence decided)"

    def stop_reason(self) -> str:
        return (f"resilibench: the sequential gate decided {self.kind.upper()} after "
                f"{self.test.n} of {self.pairs_planned} pairs")

    def to_json(self, *, episodes_run: int) -> dict[str, Any]:
        return {**self.test.to_json(), "pairs_planned": self.pairs_planned,
                "episodes_planned": self.episodes_planned, "episodes_run": episodes_run,
                "paired_on": list((("model",) if self.with_model else ()) + PAIR_FIELDS)}
