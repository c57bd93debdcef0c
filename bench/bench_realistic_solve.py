"""What solving a task's realistic MDP costs (core/optimum/realistic.py), per task structure:
states memoised and seconds, over every `--every`-th distinct structure of a task set (the
default set's plans are solved at run time: the oracle and the realistic prompts solve each
structure once per process). With `--plain N`, the N largest sampled structures are solved a
second time memoised on full states (no canonical key), for the reduction and a check that
the start value is the same bit for bit.

Run:  python bench/bench_realistic_solve.py [--task-set default] [--every 10] [--plain 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from pytest_resilibench.core.faults import task_faults
from pytest_resilibench.core.optimum.realistic import RealisticMDP, RState
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import Task, load_tasks, task_set_dir


class _Plain(RealisticMDP):
    def _canonical(self, state: RState) -> RState:
        return state


def _structures(task_set: str) -> list[Task]:
    """One task per distinct (required tools, stand-ins): what the MDP cache keys on."""
    registry, seen = default_registry(), {}
    for task in load_tasks(task_set_dir(task_set)).tasks:
        faults = task_faults(task, registry)
        seen.setdefault((task.required_tools, tuple(sorted(faults.alternatives.items()))), task)
    return list(seen.values())


def _solve(task: Task, kind: type[RealisticMDP]) -> tuple[float, int, float]:
    registry = default_registry()
    mdp = kind(task_faults(task, registry), tuple(task.required_tools), registry=registry)
    start = time.perf_counter()
    value = mdp.value(mdp.initial_state())
    return value, mdp.states_solved(), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task-set", default="default")
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--plain", type=int, default=3)
    args = parser.parse_args()
    structures = _structures(args.task_set)
    sample = structures[::args.every]
    rows = [(task, *_solve(task, RealisticMDP)) for task in sample]
    states = [r[2] for r in rows]
    seconds = [r[3] for r in rows]

    def spread(values: list[float], unit: str) -> str:
        ordered, digits = sorted(values), 2 if unit == "s" else 0
        picks = {"median": statistics.median(ordered),
                 "p95": ordered[int(0.95 * (len(ordered) - 1))], "max": ordered[-1],
                 "total": sum(ordered)}
        return ", ".join(f"{name} {value:,.{digits}f}{unit}" for name, value in picks.items())

    print(f"{args.task_set}: {len(structures)} structures, {len(sample)} solved "
          f"(every {args.every}th)")
    print(f"  states:  {spread(states, '')}")
    print(f"  seconds: {spread(seconds, 's')}")
    for task, value, n, secs in sorted(rows, key=lambda r: -r[2])[:args.plain]:
        plain_value, plain_n, plain_secs = _solve(task, _Plain)
        same = "same value" if plain_value == value else f"VALUE DIFFERS {plain_value!r}"
        print(f"  {task.id} ({len(task.required_tools)} steps): {n:,} states {secs:.2f}s; "
              f"on full states {plain_n:,} states {plain_secs:.2f}s "
              f"({plain_n / n:.1f}x); {same}")


if __name__ == "__main__":
    main()
