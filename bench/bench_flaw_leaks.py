"""Flaws that only reading catches (issue 34): can surface rules with no meaning tell a flawed
plan from the genuine one, and does a surface repair win back what a flaw costs?

1. Every rule of `tests/unit/surface_adversary.py` runs over the genuine (optimal) plan and
   each flawed plan of a deterministic sample of tasks, at every severity. Per rule: its
   false-positive rate on the genuine plans (FP) and, per flaw, its detection rate minus FP
   (the advantage; a rule with FP <= 5% is usable at that threshold as it stands). Per flaw:
   the best rule's advantage, and that of the OR of every rule that never fires on a
   genuine plan of the sample.
2. A plan copier (`builtin:follower`), the surface-repair agent (the same copier after
   "set Inputs keys to the Inputs values, drop repeated tools") and issue 50's meaning-free
   repair (that, then drop every `source` and non-required `format`, and put the steps in
   the order the text shows their values) run the optimal and each flawed variant (one
   severity): full-success rates, the flaw's drop for the copier and the share of it each
   repair recovers.

Run:  python bench/bench_flaw_leaks.py [--tasks 600] [--episode-tasks 300] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from surface_adversary import (
    FP_LIMIT,
    MeaningFreeRepairAgent,
    SurfaceRepairAgent,
    advantage_at_limit,
    best_combinations,
    rule_bits,
    rule_table,
)

from pytest_resilibench.base.names import FLAWS, SEVERITIES
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import EpisodeSpec, run_episodes
from pytest_resilibench.runtime.protocol import Agent


def sample(count: int, task_set: str = "default") -> list[Task]:
    """`count` tasks of the set spread evenly over the id order (types and difficulties
    interleave). `task_set`: a shipped set's name, or the folder `resilibench generate`
    wrote."""
    tasks = list(load_tasks(TASK_SETS.get(task_set) or Path(task_set)))
    step = max(1, len(tasks) // count)
    return tasks[::step][:count]


def print_rules(table: dict[str, dict[str, float]], best: dict[str, tuple[float, str]],
                severity: str) -> None:
    short = {f: f.split("_")[0][:5] + "_" + f.split("_")[-1][:4] for f in FLAWS}
    print(f"\nRule x flaw at {severity}: detection minus FP in pp at FP <= {FP_LIMIT:.0%} "
          f"(raw detection minus FP in brackets where FP > {FP_LIMIT:.0%}, marked *)")
    print(f"{'rule':30} {'FP':>6} " + " ".join(f"{short[f]:>15}" for f in FLAWS))
    for name, row in table.items():
        mark = "*" if row["FP"] > FP_LIMIT else " "
        cells = []
        for f in FLAWS:
            raw = row[f"{f}/{severity}"] - row["FP"]
            limited = advantage_at_limit(row[f"{f}/{severity}"], row["FP"])
            cells.append(f"{100 * limited:+6.1f}" + (f" ({100 * raw:+5.0f})" if mark == "*"
                                                      else " " * 8))
        print(f"{name:30} {100 * row['FP']:5.1f}{mark} " + " ".join(f"{c:>15}" for c in cells))
    print(f"{'best rule, negation or AND':30} {'':6} " + " ".join(
        f"{100 * best[f'{f}/{severity}'][0]:+6.1f}{'':9}" for f in FLAWS))
    for f in FLAWS:
        adv, label = best[f"{f}/{severity}"]
        print(f"  {f:22} {100 * adv:+6.1f}  {label}")


async def _full_rates(agent: Agent, tasks: list[Task], variants: list[Variant], repeats: int,
                      seed: int) -> dict[str, float]:
    specs = [EpisodeSpec(t, v, seed, r) for v in variants for t in tasks for r in range(repeats)]
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    async for record in run_episodes(specs, agent, concurrency=64):
        if record.outcome != "error":
            counts[record.variant][0] += record.outcome == "full"
            counts[record.variant][1] += 1
    return {k: full / n for k, (full, n) in counts.items()}


def print_recovery(tasks: list[Task], severity: str, repeats: int, seed: int) -> None:
    variants = [Variant("optimal"), *(Variant("flawed", f, severity) for f in FLAWS)]
    copier = asyncio.run(_full_rates(make_agent("builtin:follower"), tasks, variants, repeats,
                                     seed))
    repair = asyncio.run(_full_rates(SurfaceRepairAgent(), tasks, variants, repeats, seed))
    free = asyncio.run(_full_rates(MeaningFreeRepairAgent(), tasks, variants, repeats, seed))
    print(f"\nPlan copier vs surface repair and issue 50's meaning-free repair (drop source and "
          f"non-required format, dedupe, reorder by text), {len(tasks)} tasks x {repeats} "
          f"repeats, {severity}:")
    print(f"{'variant':34} {'copier':>7} {'drop':>7} {'repair':>7} {'recovered':>10} "
          f"{'free':>7} {'recovered':>10}")
    best = copier["optimal"]
    for variant in variants:
        label = variant.label
        drop = best - copier[label]
        cells = []
        for rates in (repair, free):
            share = (rates[label] - copier[label]) / drop if drop > 0 else float("nan")
            cells.append(f"{rates[label]:7.3f} "
                         f"{'' if variant.kind == 'optimal' else f'{share:10.1%}':>10}")
        print(f"{label:34} {copier[label]:7.3f} {100 * drop:+7.1f} " + " ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=600, help="tasks for the rule table")
    parser.add_argument("--episode-tasks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--severity", default="medium", choices=SEVERITIES)
    parser.add_argument("--no-episodes", action="store_true")
    parser.add_argument("--task-set", default="default", metavar="NAME|DIR",
                        help="default (flows grammar), paper, or a generated set's folder")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"task set: {args.task_set}")
    bits = rule_bits(sample(args.tasks, args.task_set))
    table, best = rule_table(bits), best_combinations(bits)
    for severity in SEVERITIES:
        print_rules(table, best, severity)
    print(f"({args.tasks} tasks, {time.perf_counter() - started:.0f}s)")
    if not args.no_episodes:
        print_recovery(sample(args.episode_tasks, args.task_set), args.severity, args.repeats,
                       args.seed)
        print(f"({time.perf_counter() - started:.0f}s in all)")


if __name__ == "__main__":
    main()
