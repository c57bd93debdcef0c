"""The `realistic` section of `fixtures/paper/solver_report.json` (docs/FAULTS.md).

Per difficulty, over every task: the exact DP value under the realistic profile, the naive
policy's ("required tools in order, retry on failure") and the plan-retry policy's (the optimal
plan's tools in order, each retried until it succeeds: what a literal plan follower does), all
exact (`core/optimum/realistic.py`). Run `python -m solver.realistic_report` to recompute the
section; it replaces only the `realistic` key of the report (keeping its `ppo` entry, which
`solver.realistic_ppo` writes), so the paper profile's figures stay as they are.

`write_plans` writes a set's `realistic_workflows.jsonl.gz`: each task's realistic optimal plan,
which the prompts read instead of solving the DP at run time (`resilibench generate` writes it
for every set; `python -m solver.realistic_report plans default|paper` for a shipped one).
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_resilibench.core import faults
from pytest_resilibench.core.optimum.realistic import realistic_mdp
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS, EpisodeKey
from pytest_resilibench.core.tasks import DIFFICULTIES, Task, load_tasks, task_set_dir

from .realistic_clairvoyant import clairvoyant
from .solve import write_solver_report

# The realistic figures and stored plans are the paper set's (docs/FAULTS.md).
PAPER = task_set_dir("paper")

__all__ = ["clairvoyant_sample", "realistic_section", "write_plans", "write_section"]


def realistic_section(tasks: Sequence[Task], *,
                      base_success: float = DEFAULT_BASE_SUCCESS) -> dict[str, Any]:
    start = time.perf_counter()
    rows: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    states = 0
    solved: set[int] = set()
    for task in tasks:
        mdp = realistic_mdp(task, base_success=base_success)
        dp = mdp.value(mdp.initial_state())
        if id(mdp) not in solved:
            solved.add(id(mdp))
            states += mdp.states_solved()
        rows[task.difficulty].append((dp, mdp.naive_value, mdp.plan_retry_value))
    seconds = time.perf_counter() - start

    def summary(values: list[tuple[float, float, float]]) -> dict[str, float]:
        dp, naive, plan = (np.array(v) for v in zip(*values, strict=True))
        return {"tasks": len(values), "dp_mean": float(dp.mean()),
                "naive_mean": float(naive.mean()), "plan_retry_mean": float(plan.mean()),
                "gap_dp_naive_pp": float(100 * (dp - naive).mean()),
                "gap_dp_plan_retry_pp": float(100 * (dp - plan).mean())}

    by_difficulty = {d: summary(rows[d]) for d in DIFFICULTIES if rows[d]}
    return {
        "config": {"base_success": base_success, "tasks": len(tasks),
                   "structures": len(solved),
                   "turn_budget": "closure + ceil(closure / 2) + 2",
                   "rates": {"outage": faults.OUTAGE_RATE,
                             "auth_expiry": faults.AUTH_EXPIRY_RATE,
                             "rate_limit": faults.RATE_LIMIT_RATE,
                             "silent": faults.SILENT_RATE, "alt_factor": faults.ALT_FACTOR,
                             "retry_after_turns": faults.RETRY_AFTER_TURNS}},
        "by_difficulty": by_difficulty,
        "all": summary([r for d in DIFFICULTIES for r in rows[d]]),
        "states_solved": states,
        "seconds": seconds,
        "clairvoyant_sample": clairvoyant_sample(tasks, base_success=base_success),
    }


def clairvoyant_sample(tasks: Sequence[Task], *, base_success: float = DEFAULT_BASE_SUCCESS,
                       every: int = 25, seeds: int = 3) -> dict[str, Any]:
    """The clairvoyant bound on every `every`-th task x `seeds` seeds, beside the DP value of
    the same tasks (as the paper profile's report samples it)."""
    found, dp = [], []
    start = time.perf_counter()
    for task in tasks[::every]:
        mdp = realistic_mdp(task, base_success=base_success)
        dp.append(mdp.value(mdp.initial_state()))
        found += [clairvoyant(mdp, EpisodeKey(seed, task.id, 0)).success
                  for seed in range(seeds)]
    return {"tasks": len(dp), "seeds_per_task": seeds,
            "clairvoyant_mean": float(np.mean(found)) if found else None,
            "dp_mean_same_tasks": float(np.mean(dp)) if dp else None,
            "seconds_per_episode": (time.perf_counter() - start) / max(1, len(found))}


def write_plans(tasks: Sequence[Task], directory: Path, *,
                log: Callable[[str], None] | None = None) -> None:
    """Every task's realistic optimal plan into `directory` (`faults.REALISTIC_PLANS`, listed
    in its manifest), in id order. Each task structure is solved once, or read from the plan
    cache of this machine (core/realistic_plans.py), with a line on `log` per tenth solved."""
    from pytest_resilibench.core.realistic_plans import solve_missing, solved_plan

    from .solve import write_jsonl_gz

    registry = default_registry()

    def show(done: int, total: int) -> None:
        if log is not None and (done == total or done % max(1, total // 10) == 0):
            log(f"realistic plans: {done}/{total} structures solved")

    solve_missing(tasks, registry, show, stored=False)
    write_jsonl_gz(directory / faults.REALISTIC_PLANS, [
        {"schema": faults.REALISTIC_PLANS_SCHEMA, "task_id": task.id,
         "optimal": solved_plan(task, registry).to_json()}
        for task in sorted(tasks, key=lambda t: t.id)])


def write_section(section: dict[str, Any], path: Path) -> None:
    report = json.loads(path.read_text())
    if "ppo" in report.get("realistic", {}):
        section = {**section, "ppo": report["realistic"]["ppo"]}
    report["realistic"] = section
    write_solver_report(path, report)


if __name__ == "__main__":  # python -m solver.realistic_report [N | clairvoyant | plans SET]
    if sys.argv[1:2] == ["plans"]:
        directory = task_set_dir(sys.argv[2] if len(sys.argv) > 2 else "paper")
        write_plans(load_tasks(directory).tasks, directory,
                    log=lambda line: print(line, file=sys.stderr))
        sys.exit(0)
    tasks = list(load_tasks(PAPER).tasks)
    if sys.argv[1:] == ["clairvoyant"]:  # refresh the clairvoyant sample alone
        path = PAPER / "solver_report.json"
        report = json.loads(path.read_text())
        report["realistic"]["clairvoyant_sample"] = clairvoyant_sample(tasks)
        report["realistic"].pop("clairvoyant", None)
        print(json.dumps(report["realistic"]["clairvoyant_sample"], indent=1))
        write_solver_report(path, report)
        sys.exit(0)
    if len(sys.argv) > 1:
        tasks = tasks[: int(sys.argv[1])]
    found = realistic_section(tasks)
    print(json.dumps({k: v for k, v in found.items() if k != "config"}, indent=1))
    if len(tasks) == len(load_tasks(PAPER).tasks):
        write_section(found, PAPER / "solver_report.json")
