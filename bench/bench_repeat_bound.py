"""Why no task set within the benchmark's strata hides redundant_operations (issue 34).

Every copy the flaw makes adds a repeated step and leaves the set of distinct tools as it
was, so a rule that counts repeats (plan length minus distinct tools) sees the flaw raise its
count by the number of copies: one at light, two at medium. A surface rule can also see the
distinct tools, so the count must hide the shift within every such stratum.

1. The shipped set's genuine plans: their repeat counts and the best count rule's advantage
   (`surface_adversary.count_shift_advantage`, at <= 5% false positives) at each shift.
2. For genuine plans that repeat up to M steps, the lowest advantage any distribution of
   repeat counts reaches (a seeded search: Nelder-Mead from many starts), under issue 34's
   other limit: the repair that drops repeats wins back <= 25% of the drop only where >= 75%
   of the plans repeat a step of their own. Beside it, the chance an episode of
   DEFAULT_MAX_TURNS one-call turns at DEFAULT_BASE_SUCCESS gets through the plan of the
   largest stratum (the type with the most tools, plus M repeats) with every call done.

Run:  python bench/bench_repeat_bound.py [--set default] [--starts 120]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from pytest_resilibench.solver.generate import STEP_COUNTS
from surface_adversary import FP_LIMIT, count_shift_advantage, repeats

from pytest_resilibench.core.optimum.mdp import DEFAULT_MAX_TURNS
from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS
from pytest_resilibench.core.tasks import load_tasks, task_set_dir

REPEATING = 0.75  # issue 34: the repair may win back <= 25%, so >= 75% of plans repeat


def shipped_counts(task_set: str) -> Counter[int]:
    """Repeat counts of the set's optimal plans."""
    counts: Counter[int] = Counter()
    for task in load_tasks(task_set_dir(task_set)):
        counts[repeats(task.reference_workflow().tools)] += 1
    return counts


def lowest_advantage(most: int, shift: int, starts: int) -> tuple[float, np.ndarray]:
    """The lowest count-rule advantage over distributions of 0..most repeats with at least
    REPEATING of the plans repeating (a penalty outside), and the distribution."""
    rng = np.random.default_rng(most * 10 + shift)

    def objective(x: np.ndarray) -> float:
        p = np.exp(x - x.max())
        p /= p.sum()
        return count_shift_advantage(p, shift) + 50 * max(0.0, REPEATING - (1 - p[0]))

    best, best_p = np.inf, np.ones(most + 1) / (most + 1)
    for _ in range(starts):
        found = minimize(objective, rng.normal(size=most + 1) * 2, method="Nelder-Mead",
                         options={"maxiter": 4000, "xatol": 1e-6, "fatol": 1e-7})
        if found.fun < best:
            best, best_p = float(found.fun), np.exp(found.x - found.x.max())
    return best, best_p / best_p.sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", default="default", help="a shipped task set")
    parser.add_argument("--starts", type=int, default=120, help="search starts per row")
    parser.add_argument("--most", type=int, default=8, help="the largest M to search")
    args = parser.parse_args()

    counts = shipped_counts(args.set)
    total = sum(counts.values())
    genuine = np.array([counts[j] / total for j in range(max(counts) + 1)])
    print(f"{args.set} set: {total} optimal plans; repeated steps per plan "
          + ", ".join(f"{j}: {counts[j]}" for j in sorted(counts)))
    for shift, severity in ((1, "light, one copy"), (2, "medium, two copies")):
        print(f"  count rule at <= {FP_LIMIT:.0%} FP, {severity}: "
              f"+{100 * count_shift_advantage(genuine, shift):.1f} pp")

    widest = max(hi for _, hi in STEP_COUNTS.values())
    print(f"\nlowest count-rule advantage with >= {REPEATING:.0%} of plans repeating; "
          f"P(done) = a {widest}-tool plan plus M repeats within {DEFAULT_MAX_TURNS} "
          f"one-call turns at success {DEFAULT_BASE_SUCCESS}")
    print(f"{'M':>2}  {'P(done)':>7}  {'light, pp':>9}  {'medium, pp':>10}  "
          "distribution at light (plans repeating 0..M steps)")
    for most in range(1, args.most + 1):
        done = binom.sf(widest + most - 1, DEFAULT_MAX_TURNS, DEFAULT_BASE_SUCCESS)
        light, shape = lowest_advantage(most, 1, args.starts)
        medium, _ = lowest_advantage(most, 2, args.starts)
        print(f"{most:>2}  {done:>7.3f}  {100 * light:>9.1f}  {100 * medium:>10.1f}  "
              + " ".join(f"{x:.2f}" for x in shape))


if __name__ == "__main__":
    main()
