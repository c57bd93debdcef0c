"""How memorisable a task set is (issue 34): distinct tool structures, optimal tool sequences
and input-key sets, and the share of held-out tasks an "input-key set -> optimal plan" lookup
built on the other half predicts exactly (tools, order, every value; solver/task_stats.py).
With --against, also the overlap of a second set (e.g. a fresh `generate --seed`) with the first.

Run: python bench/bench_task_lookup.py [--set default|paper | --tasks DIR] [--against DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_resilibench.solver.task_stats import (
    diversity,
    fixed_by_keys,
    lookup_prediction,
    overlap,
)

from pytest_resilibench.core.tasks import load_tasks, task_set_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", default="default", help="a shipped task set: default or paper")
    parser.add_argument("--tasks", type=Path, help="a task-set directory (overrides --set)")
    parser.add_argument("--against", type=Path, help="a second task-set directory to compare")
    args = parser.parse_args()
    directory = args.tasks or task_set_dir(args.set)
    tasks = list(load_tasks(directory))
    div = diversity(tasks)
    print(f"task set {directory}: {div.tasks} tasks")
    print(f"  distinct required-tool sets      {div.tool_sets}")
    print(f"  distinct required-tool sequences {div.tool_sequences}")
    print(f"  distinct optimal tool sequences  {div.optimal_sequences}")
    print(f"  distinct input-key sets          {div.key_sets}")
    fixed, shared = fixed_by_keys(tasks)
    print(f"  tasks whose shared input-key set always comes with one plan: {fixed} of {shared} "
          f"sharing a key set ({100 * fixed / max(1, div.tasks):.1f}% of all tasks)")
    result = lookup_prediction(tasks)
    print(f"  key-set -> plan lookup: {result.predicted}/{result.held_out} held-out tasks "
          f"predicted exactly ({100 * result.share:.1f}%); key set seen in training for "
          f"{100 * result.key_set_seen / max(1, result.held_out):.1f}%")
    if args.against is not None:
        other = list(load_tasks(args.against, require_workflows=False))
        for name, share in overlap(tasks, other).items():
            print(f"  {args.against} vs this set: {name} {100 * share:.1f}%")


if __name__ == "__main__":
    main()
