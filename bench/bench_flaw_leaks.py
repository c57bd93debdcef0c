"""Flaws that only reading catches (issue 34): can surface rules with no meaning tell a flawed
plan from the genuine one, and does a surface repair win back what a flaw costs?

1. Every rule of `tests/unit/surface_adversary.py` runs over the genuine (optimal) plan and
   each flawed plan of a deterministic sample of tasks, at every severity. Per rule: its
   false-positive rate on the genuine plans (FP) and, per flaw, its detection rate minus FP
   (the advantage; a rule with FP <= 5% is usable at that threshold as it stands). Per flaw:
   the best rule's advantage, and that of the OR of every rule that never fires on a
   genuine plan of the sample.
2. A plan copier (`builtin:follower`) and the surface-repair agent (the same copier after
   "keep only Inputs keys, set them to the Inputs values, drop repeated tools") run the
   optimal and each flawed variant (one severity): full-success rates, the flaw's drop for
   the copier and the share of it the repair recovers.

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

from surface_adversary import RULES, SurfaceRepairAgent

from pytest_resilibench.base.names import FLAWS, SEVERITIES
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import EpisodeSpec, run_episodes
from pytest_resilibench.runtime.protocol import Agent

FP_LIMIT = 0.05


def sample(count: int, task_set: str = "default") -> list[Task]:
    """`count` tasks of the set spread evenly over the id order (types and difficulties
    interleave)."""
    tasks = list(load_tasks(TASK_SETS[task_set]))
    step = max(1, len(tasks) // count)
    return tasks[::step][:count]


def _steps(plan: object) -> list[dict[str, object]]:
    return [{"tool": s.tool, "arguments": dict(s.arguments)} for s in plan.steps]  # type: ignore[attr-defined]


def rule_table(tasks: list[Task]) -> dict[str, dict[str, float]]:
    """Rule -> {"FP": rate on genuine plans, "<flaw>/<severity>": detection rate}."""
    registry = default_registry()
    hits: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[str, int] = defaultdict(int)
    for task in tasks:
        genuine, _ = plan_for(task, Variant("optimal"), registry)
        plans = {"FP": _steps(genuine)}
        for flaw in FLAWS:
            for severity in SEVERITIES:
                flawed, _ = plan_for(task, Variant("flawed", flaw, severity), registry)
                plans[f"{flaw}/{severity}"] = _steps(flawed)
        for column, steps in plans.items():
            totals[column] += 1
            for name, rule in RULES.items():
                hits[name][column] += rule(task, steps, registry)
    table = {name: {c: hits[name][c] / totals[c] for c in totals} for name in RULES}
    zero = [name for name in RULES if table[name]["FP"] == 0]
    table["OR of zero-FP rules"] = {c: 0.0 for c in totals}
    for task in tasks:  # the OR needs the plans again (cheap: plans are memoised per task)
        for column in totals:
            if column == "FP":
                plan, _ = plan_for(task, Variant("optimal"), registry)
            else:
                flaw, severity = column.split("/")
                plan, _ = plan_for(task, Variant("flawed", flaw, severity), registry)
            steps = _steps(plan)
            table["OR of zero-FP rules"][column] += any(
                RULES[n](task, steps, registry) for n in zero) / totals[column]
    return table


def print_rules(table: dict[str, dict[str, float]], severity: str) -> None:
    short = {f: f.split("_")[0][:5] + "_" + f.split("_")[-1][:4] for f in FLAWS}
    print(f"\nRule x flaw at {severity}: detection minus the genuine plans' FP rate, in pp "
          f"(FP in the first column; * FP > {FP_LIMIT:.0%})")
    print(f"{'rule':30} {'FP':>6} " + " ".join(f"{short[f]:>10}" for f in FLAWS))
    for name, row in table.items():
        mark = "*" if row["FP"] > FP_LIMIT else " "
        print(f"{name:30} {100 * row['FP']:5.1f}{mark} " + " ".join(
            f"{100 * (row[f'{f}/{severity}'] - row['FP']):+10.1f}" for f in FLAWS))
    print(f"{'best rule':30} {'':6} " + " ".join(
        f"{100 * max(r[f'{f}/{severity}'] - r['FP'] for r in table.values()):+10.1f}"
        for f in FLAWS))


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
    print(f"\nPlan copier vs surface repair, {len(tasks)} tasks x {repeats} repeats, {severity}:")
    print(f"{'variant':34} {'copier':>7} {'drop':>7} {'repair':>7} {'recovered':>10}")
    best = copier["optimal"]
    for variant in variants:
        label = variant.label
        drop = best - copier[label]
        share = (repair[label] - copier[label]) / drop if drop > 0 else float("nan")
        print(f"{label:34} {copier[label]:7.3f} {100 * drop:+7.1f} {repair[label]:7.3f} "
              f"{'' if variant.kind == 'optimal' else f'{share:10.1%}'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=600, help="tasks for the rule table")
    parser.add_argument("--episode-tasks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--severity", default="medium", choices=SEVERITIES)
    parser.add_argument("--no-episodes", action="store_true")
    parser.add_argument("--task-set", default="default", choices=sorted(TASK_SETS),
                        help="the default set (flows grammar) or the paper's")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"task set: {args.task_set}")
    table = rule_table(sample(args.tasks, args.task_set))
    for severity in SEVERITIES:
        print_rules(table, severity)
    print(f"({args.tasks} tasks, {time.perf_counter() - started:.0f}s)")
    if not args.no_episodes:
        print_recovery(sample(args.episode_tasks, args.task_set), args.severity, args.repeats,
                       args.seed)
        print(f"({time.perf_counter() - started:.0f}s in all)")


if __name__ == "__main__":
    main()
