"""Figures for the realistic fault profile (issue 14, docs/FAULTS.md): on the optimal plan,
`builtin:oracle` (the profile's exact policy) against `builtin:follower` (the plan, literally)
and `builtin:adaptive`, paired on the same episodes (seed, task, repeat), by difficulty; and
the oracle's full-success count against the DP's expected count.

Tasks: a stratified sample (the first N ids cover every type x difficulty cell evenly) of the
paper set (docs/FAULTS.md's figures) or the default set. Run:
    python bench/bench_realistic_agents.py [--tasks 150] [--seeds 4] [--task-set paper|default]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from collections import defaultdict

from pytest_resilibench.core.optimum.realistic import realistic_solution
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.tasks import DIFFICULTIES, TASK_SETS, load_tasks, task_set_dir
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import run_episode

AGENTS = ("oracle", "follower", "adaptive")


async def main(n_tasks: int, seeds: int, task_set: str) -> None:
    tasks = list(load_tasks(task_set_dir(task_set)).tasks[:n_tasks])
    agents = {name: make_agent(f"builtin:{name}") for name in AGENTS}
    full: dict[str, dict[str, list[bool]]] = {a: defaultdict(list) for a in AGENTS}
    expected = variance = 0.0
    start = time.perf_counter()
    for task in tasks:
        value = realistic_solution(task).value
        for seed in range(seeds):
            expected += value
            variance += value * (1 - value)
            for name, agent in agents.items():
                record = await run_episode(task, Variant("optimal"), agent, seed=seed,
                                           faults="realistic")
                full[name][task.difficulty].append(record.outcome == "full")
    seconds = time.perf_counter() - start
    print(f"{len(tasks)} tasks x {seeds} seeds, {seconds:.0f}s")
    for difficulty in (*DIFFICULTIES, "all"):
        def rows(name: str, d: str = difficulty) -> list[bool]:
            if d == "all":
                return [x for v in full[name].values() for x in v]
            return full[name][d]
        oracle, follower, adaptive = rows("oracle"), rows("follower"), rows("adaptive")
        n = len(oracle)
        wins = sum(o and not f for o, f in zip(oracle, follower, strict=True))
        losses = sum(f and not o for o, f in zip(oracle, follower, strict=True))
        gap = 100 * (sum(oracle) - sum(follower)) / n
        # Paired: the difference of two rates on the same episodes, discordant pairs only.
        se = 100 * math.sqrt(wins + losses - (wins - losses) ** 2 / n) / n
        print(f"{difficulty:7s} n={n:4d} oracle {100 * sum(oracle) / n:5.1f}% "
              f"follower {100 * sum(follower) / n:5.1f}% adaptive {100 * sum(adaptive) / n:5.1f}%"
              f"  oracle-follower {gap:+.1f} pp (paired 95% CI ±{1.96 * se:.1f}; "
              f"{wins} wins, {losses} losses)")
    total = sum(sum(v) for v in full["oracle"].values())
    print(f"oracle full {total} vs DP expected {expected:.1f} "
          f"(99% interval ±{2.576 * math.sqrt(variance):.1f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=150)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--task-set", choices=sorted(TASK_SETS), default="paper")
    args = parser.parse_args()
    asyncio.run(main(args.tasks, args.seeds, args.task_set))
