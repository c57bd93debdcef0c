"""Adversarial filtering of flaw instances (issue 50; AFLite: Sakaguchi et al. 2020, after
Zellers et al. 2018): per (task, flaw, severity), keep the candidate injection that shallow
detectors trained on other tasks find hardest to tell from the genuine plan.

`inject_flaw(..., candidate=k)` gives K candidate flawed plans per task (k = 0 is the plan a set
without choices shows). Round by round, the tasks are split into folds (seeded); the detector
ensemble of `flaw_detectors.py` (both families, both views) is trained on the other folds' tasks,
genuine plans against their currently chosen flawed plans, and each held-out task keeps its
candidate with the lowest mean flawed-probability (ties: the lower k), among those whose flow
is as sensible as candidate 0's. A task's choice is never
made by a model that saw the task. Rounds stop early when no choice changes. Every draw is a
pure function of the seed and the task ids, so the choices are too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_resilibench.core.flow_sense import sense_problems
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import ToolRegistry
from pytest_resilibench.core.tasks import Task

from .flaw_detectors import DETECTORS, Detector, Example, example, folds

__all__ = ["FilterConfig", "choose_candidates", "filter_flaws"]


@dataclass(frozen=True)
class FilterConfig:
    """How the filter runs: candidates per task, rounds, folds and the seed of the folds and
    the models."""

    candidates: int = 8
    rounds: int = 2
    folds: int = 3
    seed: int = 0
    # The severities whose candidates are weighed (issue 50's targets name light and medium;
    # severe, three edits, shows candidate 0: its edits are meant to show).
    severities: tuple[str, ...] = ("light", "medium")

    def to_json(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "rounds": self.rounds, "folds": self.folds,
                "seed": self.seed, "severities": list(self.severities)}


def _candidates(task: Task, flaw: str, severity: str, count: int,
                registry: ToolRegistry) -> list[Example]:
    """The task's candidate flawed plans; one whose flow is not sensible where candidate 0's
    is (core/flow_sense.py: a flawed plan must still look like one a person would write)
    stands in as candidate 0's plan, so it is never chosen over it (ties go to the lower k)."""
    variant = Variant("flawed", flaw, severity)
    plans = [plan_for(task, variant, registry, candidate=k)[0] for k in range(count)]
    assert all(plan is not None for plan in plans)
    first = plans[0]
    assert first is not None
    if not sense_problems(first.tools, registry):
        plans = [plan if plan is not None and not sense_problems(plan.tools, registry)
                 else first for plan in plans]
    return [example(task, plan, flawed=True) for plan in plans if plan is not None]


def choose_candidates(genuine: Mapping[str, Example],
                      candidates: Mapping[str, Sequence[Example]], registry: ToolRegistry,
                      config: FilterConfig) -> dict[str, int]:
    """The chosen candidate index per task id, by the rounds described above."""
    ids = sorted(genuine)
    chosen = dict.fromkeys(ids, 0)
    for round_ in range(config.rounds):
        changed = False
        for test_ids in folds(ids, config.folds, config.seed + round_):
            train = [ex for t in ids if t not in test_ids
                     for ex in (genuine[t], candidates[t][chosen[t]])]
            models = [Detector(family, view, registry, seed=config.seed).fit(train)
                      for family, view in DETECTORS]
            test = sorted(test_ids)
            batch = [ex for t in test for ex in candidates[t]]
            score = np.mean([m.score(batch) for m in models], axis=0)
            at = 0
            for t in test:
                n = len(candidates[t])
                best = int(np.argmin(score[at:at + n]))  # first minimum: the lower k
                at += n
                changed |= best != chosen[t]
                chosen[t] = best
        if not changed:
            break
    return chosen


def filter_flaws(tasks: Sequence[Task], flaws: Sequence[str], severities: Sequence[str],
                 registry: ToolRegistry, config: FilterConfig = FilterConfig(),
                 log: Callable[[str], None] = lambda _: None) -> dict[str, dict[str, int]]:
    """`{"flaw/severity": {task id: chosen k}}` over the tasks (k = 0 included)."""
    genuine = {}
    for task in tasks:
        plan, _ = plan_for(task, Variant("optimal"), registry)
        assert plan is not None
        genuine[task.id] = example(task, plan, flawed=False)
    out: dict[str, dict[str, int]] = {}
    for severity in severities:
        for flaw in flaws:
            candidates = {t.id: _candidates(t, flaw, severity, config.candidates, registry)
                          for t in tasks}
            chosen = choose_candidates(genuine, candidates, registry, config)
            out[f"{flaw}/{severity}"] = chosen
            log(f"{flaw}/{severity}: {sum(k != 0 for k in chosen.values())} of "
                f"{len(chosen)} tasks take another candidate than 0")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Write the choices of a solved task set again (`resilibench generate` writes them for a
    set it generates): `python -m pytest_resilibench.solver.adversarial_filter [DIR]`."""
    import argparse
    from pathlib import Path

    from pytest_resilibench.core.registry import default_registry
    from pytest_resilibench.core.tasks import FIXTURES_DIR, load_tasks

    from .generate import write_flaw_choices

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("directory", nargs="?", type=Path, default=FIXTURES_DIR)
    args = parser.parse_args(argv)
    tasks = list(load_tasks(args.directory))
    write_flaw_choices(tasks, args.directory, default_registry())
    load_tasks.cache_clear()


if __name__ == "__main__":
    main()
