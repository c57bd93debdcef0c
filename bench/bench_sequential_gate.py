"""Error rates of the sequential gate, by simulation, beside the fixed-sample gate's.

    python bench/bench_sequential_gate.py [--gates 1000] [--pairs 1500] [--max-drop 5]

Each simulated gate draws `--pairs` paired outcomes (old full?, new full?) from the paired
outcome model: old succeeds with probability 0.6; a fraction `psi` of the pairs disagree
(discordance), split so that the true drop old -> new is `drop`. The sequential gate
(`sequential.SequentialTest`, the code the plugin runs) sees the pairs one at a time and stops
when it decides; the fixed-sample gate (`stats.paired_verdict`, what `--resili-gate=fixed`
runs) judges all of them. For true drops of 0, the allowed drop and twice it, it prints how
often each gate said pass / regression / inconclusive, and the sequential gate's mean share
of the episodes. At the allowed drop any verdict is an error (type I; the nominal level is
alpha); at 0 a pass and at twice the allowed drop a regression is the power.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_resilibench.reporting.sequential import SequentialTest
from pytest_resilibench.reporting.stats import paired_verdict

P_OLD = 0.6


def draw_pairs(rng: np.random.Generator, n: int, *, psi: float, drop: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """n pairs with P(old 1, new 0) = (psi + drop) / 2 and P(old 0, new 1) = (psi - drop) / 2."""
    b, c = (psi + drop) / 2, (psi - drop) / 2
    if c < 0 or b > P_OLD or c > 1 - P_OLD:
        raise ValueError(f"no paired model with discordance {psi} and drop {drop}")
    u = rng.random(n)
    old = np.where(u < b, True, np.where(u < b + c, False, u < b + c + (P_OLD - b)))
    new = np.where(u < b, False, np.where(u < b + c, True, old))
    return old, new


def one_gate(old: np.ndarray, new: np.ndarray, *, max_drop: float, alpha: float
             ) -> tuple[str, int, str]:
    """(sequential verdict, pairs it used, fixed-sample verdict)."""
    test = SequentialTest(max_drop=max_drop, alpha=alpha)
    for a, b in zip(old.tolist(), new.tolist(), strict=True):
        if test.add(a, b) is not None:
            break
    fixed = paired_verdict(old.tolist(), new.tolist(), max_drop_pp=100 * max_drop, alpha=alpha)
    return test.verdict or "inconclusive", test.n, fixed.kind


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gates", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--max-drop", type=float, default=5.0, help="allowed drop, pp")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--psi", default="0.1,0.2,0.3", help="discordance levels")
    parser.add_argument("--seed", type=int, default=2026)
    opts = parser.parse_args()
    rng = np.random.default_rng(opts.seed)
    delta = opts.max_drop / 100
    rows = []
    for psi in (float(p) for p in opts.psi.split(",")):
        for label, drop in (("0", 0.0), ("= allowed", delta), ("2x allowed", 2 * delta)):
            seq = {"pass": 0, "regression": 0, "inconclusive": 0}
            fixed = dict.fromkeys(seq, 0)
            used = 0
            for _ in range(opts.gates):
                old, new = draw_pairs(rng, opts.pairs, psi=psi, drop=drop)
                verdict, n, fixed_verdict = one_gate(old, new, max_drop=delta,
                                                     alpha=opts.alpha)
                seq[verdict] += 1
                fixed[fixed_verdict] += 1
                used += n
            share = lambda counts, k: f"{100 * counts[k] / opts.gates:.1f}"  # noqa: E731
            rows.append([psi, label,
                         share(seq, "pass"), share(seq, "regression"),
                         share(seq, "inconclusive"), f"{100 * used / opts.gates / opts.pairs:.1f}",
                         share(fixed, "pass"), share(fixed, "regression"),
                         share(fixed, "inconclusive")])
    print(f"{opts.gates} simulated gates per row, {opts.pairs} planned pairs, allowed drop "
          f"{opts.max_drop:g} pp, alpha {opts.alpha:g}, old full-success rate {P_OLD}")
    print(tabulate(rows, headers=[
        "discordance", "true drop", "seq pass %", "seq regr. %", "seq incon. %",
        "seq episodes %", "fixed pass %", "fixed regr. %", "fixed incon. %"],
        disable_numparse=True))
    print("type I error = any verdict at the allowed drop (nominal: alpha); "
          "power = pass at 0, regression at 2x")


if __name__ == "__main__":
    main()
