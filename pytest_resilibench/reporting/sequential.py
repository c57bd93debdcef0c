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

`SequentialTest` is the arithmetic; `SequentialGate` runs one per model (each against its own
partner in the baseline, `pairing.py`) and feeds them the run's pairs in the planned (seeded,
random) order, whatever order the episodes arrive in, so `-n 0` and `-n 2` stop after the same
pair with the same verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_resilibench.base.names import is_scored
from pytest_resilibench.reporting.pairing import PAIR_FIELDS, pair_key, partners

__all__ = ["SequentialGate", "SequentialTest"]

Verdict = Literal["pass", "regression"]
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


@dataclass(frozen=True)
class _Planned:
    case_id: str
    model: str
    key: tuple[Any, ...]  # the baseline partner's pair key, () when the model has no partner


class SequentialGate:
    """Pairs the run's episodes with a baseline's in the planned order and runs one test per
    model, each against the model's own partner in the baseline (`pairing.partners`).

    The plan is the run's benchmark items in their (seeded) order. Episodes may arrive in any
    order (xdist); the tests see the longest planned prefix whose episodes have all arrived,
    so where they stop depends on the plan alone. Planned cases without a scored baseline
    partner, and new episodes that hit infrastructure errors, are passed over (they say
    nothing about a regression). The gate is decided once any model regressed (the run fails
    whatever the others show) or every model passed."""

    def __init__(self, baseline: Sequence[Mapping[str, Any]], *, models: Sequence[str],
                 max_drop_pp: float, alpha: float) -> None:
        self.partners = partners({str(ep.get("model")) for ep in baseline}, models)
        self._old = {pair_key(ep, str(ep.get("model"))): ep.get("outcome") == "full"
                     for ep in baseline if is_scored(ep.get("outcome"))}
        self.tests = {model: SequentialTest(max_drop=max_drop_pp / 100.0, alpha=alpha)
                      for model in self.partners.of_new}
        self._plan: list[_Planned] = []
        self._arrived: dict[str, Mapping[str, Any]] = {}
        self._next = 0  # the first planned case the tests have not seen yet
        self.skipped = 0  # planned cases seen without a usable pair

    # --- the plan ------------------------------------------------------------------------------
    @property
    def planned(self) -> bool:
        return bool(self._plan)

    def plan(self, cases: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """(case id, pair fields) of every benchmark item, in run order."""
        self._plan = []
        for cid, fields in cases:
            model = str(fields.get("model"))
            partner = self.partners.of_new.get(model)
            self._plan.append(_Planned(cid, model, () if partner is None
                                       else pair_key(fields, partner)))
        self._advance()

    @property
    def episodes_planned(self) -> int:
        return len(self._plan)

    def pairs_planned(self, model: str | None = None) -> int:
        return sum(1 for p in self._plan if p.key in self._old
                   and (model is None or p.model == model))

    # --- episodes ------------------------------------------------------------------------------
    def add(self, case_id: str, episode: Mapping[str, Any]) -> bool:
        """Record an arrived episode; True when this arrival made the gate decide."""
        if self.decided:
            return False
        self._arrived[case_id] = episode
        return self._advance()

    def _advance(self) -> bool:
        while not self.decided and self._next < len(self._plan):
            planned = self._plan[self._next]
            episode = self._arrived.pop(planned.case_id, None)
            if episode is None:
                return False
            self._next += 1
            old = self._old.get(planned.key)
            test = self.tests.get(planned.model)
            if old is None or test is None or test.verdict is not None or not is_scored(
                    episode.get("outcome")):
                self.skipped += 1
                continue
            test.add(old, episode.get("outcome") == "full")
            if self.decided:
                return True
        return False

    @property
    def decided(self) -> bool:
        verdicts = [t.verdict for t in self.tests.values()]
        return "regression" in verdicts or all(v == "pass" for v in verdicts)

    @property
    def kind(self) -> str:
        verdicts = [t.verdict for t in self.tests.values()]
        if "regression" in verdicts:
            return "regression"
        return "pass" if all(v == "pass" for v in verdicts) else "inconclusive"

    def model_kind(self, model: str) -> str:
        return self.tests[model].verdict or "inconclusive"

    def line(self, model: str, name: str) -> str:
        """`NAME: sequential, drop ... over N of M planned pairs (allowed ...): VERDICT`, the
        model named as its verdict names it (`gate.pair_name`)."""
        t = self.tests[model]
        drop = "no pairs" if t.drop is None else f"drop {100 * t.drop:+.1f} pp"
        head = (f"{name}: sequential, {drop} over {t.n} of {self.pairs_planned(model)} planned "
                f"pairs (allowed {100 * t.max_drop:g} pp at {100 * (1 - t.alpha):g}% "
                "confidence)")
        if t.verdict == "regression":
            return f"{head}: REGRESSION (the drop is above the allowed one)"
        if t.verdict == "pass":
            return f"{head}: PASS (the drop is below the allowed one)"
        stopped = " (another model decided the gate first)" if self.decided else ""
        return f"{head}: INCONCLUSIVE (the pairs ran out before the evidence decided){stopped}"

    def stop_reason(self) -> str:
        regressed = [m for m, t in self.tests.items() if t.verdict == "regression"]
        which = f" ({', '.join(regressed)})" if regressed else ""
        pairs = sum(t.n for t in self.tests.values())
        return (f"resilibench: the sequential gate decided {self.kind.upper()}{which} after "
                f"{pairs} of {self.pairs_planned()} pairs")

    def to_json(self, *, episodes_run: int) -> dict[str, Any]:
        return {"verdict": self.kind, "pairs_planned": self.pairs_planned(),
                "episodes_planned": self.episodes_planned, "episodes_run": episodes_run,
                "paired_on": ["model", *PAIR_FIELDS],
                "by_model": [{"model": model, "old_model": self.partners.of_new[model],
                              **test.to_json(), "pairs_planned": self.pairs_planned(model)}
                             for model, test in self.tests.items()]}
