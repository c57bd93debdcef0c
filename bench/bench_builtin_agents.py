"""Figures for the built-in agents (issue 5): is the harness consistent with the DP, and do the
plan-following agents react to flaws as they should?

1. `builtin:oracle` on the optimal variant: its full-success count against the DP's expected
   count (sum of the per-task DP values), with the 99% interval of that sum (normal
   approximation to the Poisson-binomial).
2. `builtin:follower` and `builtin:adaptive`: full-success rate on the optimal variant and on
   each flaw (one severity), and the drop optimal -> flawed.

Tasks come from `fixtures/` when present, else they are generated in-process (`solver.generate`)
with the DP plan as their optimal workflow. Run:
    python bench/bench_builtin_agents.py [--tasks 500] [--repeats 4] [--severity medium]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from collections import defaultdict
from dataclasses import replace

from pytest_resilibench.base.names import FLAWS, TOOL_MODES
from pytest_resilibench.core.optimum.dp import solve_task
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.tasks import Task, load_tasks
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import EpisodeSpec, run_episodes

Z99 = 2.5758


def benchmark_tasks(count: int) -> list[Task]:
    """`count` tasks spread over the types and difficulties, each with its DP plan."""
    try:
        tasks = list(load_tasks())
    except FileNotFoundError:
        from pytest_resilibench.solver.generate import generate_task

        tasks = [generate_task(i) for i in range(5040)]
    step = max(1, len(tasks) // count)
    picked = tasks[::step][:count]
    return [t if t.optimal is not None else replace(t, optimal=solve_task(t).workflow)
            for t in picked]


async def rates(
    agent_spec: str, tasks: list[Task], variants: list[Variant], *, repeats: int, seed: int,
    tool_mode: str, base_success: float,
) -> dict[str, tuple[int, int, int]]:
    """Per variant label: (full successes, scored episodes, infrastructure errors)."""
    agent = make_agent(agent_spec)
    specs = [EpisodeSpec(task, variant, seed, repeat, base_success, tool_mode=tool_mode)
             for variant in variants for task in tasks for repeat in range(repeats)]
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    async for record in run_episodes(specs, agent, concurrency=64):
        row = counts[record.variant]
        if record.outcome == "error":
            row[2] += 1
            print(f"  error in {record.id}: {record.infra_error}")
        else:
            row[0] += record.outcome == "full"
            row[1] += 1
    return {k: (v[0], v[1], v[2]) for k, v in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--severity", default="medium")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--tool-mode", default="text", choices=TOOL_MODES)
    parser.add_argument("--base-success", type=float, default=0.8)
    args = parser.parse_args()

    started = time.perf_counter()
    tasks = benchmark_tasks(args.tasks)
    optimal = Variant("optimal")
    print(f"{len(tasks)} tasks x {args.repeats} repeats, seed {args.seed}, base success "
          f"{args.base_success}, {args.tool_mode} mode "
          f"({time.perf_counter() - started:.1f}s to load and solve)")

    # 1. oracle vs DP
    t0 = time.perf_counter()
    oracle = asyncio.run(rates("builtin:oracle", tasks, [optimal], repeats=args.repeats,
                               seed=args.seed, tool_mode=args.tool_mode,
                               base_success=args.base_success))["optimal"]
    values = [solve_task(t, base_success=args.base_success).value for t in tasks]
    expected = args.repeats * sum(values)
    sd = math.sqrt(args.repeats * sum(v * (1 - v) for v in values))
    lo, hi = expected - Z99 * sd, expected + Z99 * sd
    inside = lo <= oracle[0] <= hi
    print(f"oracle/optimal: {oracle[0]}/{oracle[1]} full = {oracle[0] / oracle[1]:.4f}; DP "
          f"expects {expected:.1f} = {expected / oracle[1]:.4f}, 99% interval "
          f"[{lo / oracle[1]:.4f}, {hi / oracle[1]:.4f}] -> {'inside' if inside else 'OUTSIDE'}"
          f" ({time.perf_counter() - t0:.1f}s)")

    # 2. follower and adaptive, optimal vs each flaw
    variants = [optimal, *(Variant("flawed", f, args.severity) for f in FLAWS)]
    table: dict[str, dict[str, float]] = {}
    for name in ("follower", "adaptive"):
        t0 = time.perf_counter()
        got = asyncio.run(rates(f"builtin:{name}", tasks, variants, repeats=args.repeats,
                                seed=args.seed, tool_mode=args.tool_mode,
                                base_success=args.base_success))
        table[name] = {label: full / scored for label, (full, scored, _) in got.items()}
        print(f"builtin:{name}: {sum(v[1] for v in got.values())} episodes in "
              f"{time.perf_counter() - t0:.1f}s")
    print(f"\n{'variant':32} {'follower':>9} {'drop':>7} {'adaptive':>9} {'drop':>7}")
    for variant in variants:
        label = variant.label
        f, a = table["follower"][label], table["adaptive"][label]
        fd = table["follower"]["optimal"] - f
        ad = table["adaptive"]["optimal"] - a
        mark = "" if variant.kind == "optimal" or ad < fd else "  <- adaptive drops more"
        print(f"{label:32} {f:9.3f} {fd:+7.3f} {a:9.3f} {ad:+7.3f}{mark}")


if __name__ == "__main__":
    main()
