"""Learned detectors of flawed plans (issue 50): can a shallow model, trained on other tasks'
genuine and flawed plans, tell a flawed plan from the genuine one without reading for meaning?

For each flaw and severity, every sampled task gives two examples that share the task: its
genuine plan (the optimal variant's) and its flawed plan, as a run shows it (the candidate the
set's `flaw_choices.json.gz` keeps; `--candidate 0` shows the plans of a set without choices).
Detectors are trained on two thirds of the tasks and scored on the third they never saw (3 folds
by task, seeded), as ROC AUC: 0.5 is chance, 1.0 a perfect detector. The detectors are those the
generator's adversarial filter hid the flaws from (solver/flaw_detectors.py: linear over plan
n-grams, gradient-boosted trees over structural features; views `plan` and `plan+task`), trained
here from scratch: pass a `--seed` other than the filter's (0) for folds and models it never used.

Run:  python bench/bench_flaw_detectors.py [--task-set default] [--tasks 1500]
      [--severities light,medium] [--seed 1] [--candidate 0]
Needs scikit-learn (the `solver` extra).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pytest_resilibench.solver.flaw_detectors import DETECTORS, Example, example, held_out_auc

from pytest_resilibench.base.names import FLAWS
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks


def examples(tasks: list[Task], flaw: str, severity: str, registry: ToolRegistry,
             candidate: int | None) -> list[Example]:
    """The genuine and the flawed plan of every task (tasks whose flaw changed nothing are
    kept: a detector cannot tell them apart, as it should not)."""
    out = []
    for task in tasks:
        genuine, _ = plan_for(task, Variant("optimal"), registry)
        flawed, _ = plan_for(task, Variant("flawed", flaw, severity), registry,
                             candidate=candidate)
        assert genuine is not None and flawed is not None
        out += [example(task, genuine, flawed=False), example(task, flawed, flawed=True)]
    return out


def sample(tasks: list[Task], count: int) -> list[Task]:
    step = max(1, len(tasks) // count)
    return tasks[::step][:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task-set", default="default")
    parser.add_argument("--tasks", type=int, default=1500)
    parser.add_argument("--severities", default="light,medium")
    parser.add_argument("--flaws", default=",".join(FLAWS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--candidate", type=int, default=None,
                        help="show this candidate injection of every task instead of the "
                             "set's chosen one (0: as a set without choices)")
    parser.add_argument("--json", type=Path, help="also write the table here")
    args = parser.parse_args()
    registry = default_registry()
    tasks = sample(list(load_tasks(TASK_SETS.get(args.task_set) or Path(args.task_set))),
                   args.tasks)
    start = time.process_time()
    table: dict[str, dict[str, float]] = {}
    shown = "the set's chosen candidates" if args.candidate is None else \
        f"candidate {args.candidate}"
    print(f"held-out ROC AUC over {len(tasks)} tasks of {args.task_set}, {shown} (3 folds by "
          f"task, seed {args.seed}); 0.5 = chance")
    columns = [f"{family}/{view}" for family, view in DETECTORS]
    print(f"{'flaw':24} {'severity':8} " + " ".join(f"{c:>17}" for c in columns))
    for severity in args.severities.split(","):
        for flaw in args.flaws.split(","):
            exs = examples(tasks, flaw, severity, registry, args.candidate)
            row = {f"{family}/{view}": held_out_auc(exs, family, view, registry,
                                                    seed=args.seed)
                   for family, view in DETECTORS}
            table[f"{flaw}/{severity}"] = row
            print(f"{flaw:24} {severity:8} " + " ".join(f"{row[c]:17.3f}" for c in columns),
                  flush=True)
    print(f"CPU {time.process_time() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
