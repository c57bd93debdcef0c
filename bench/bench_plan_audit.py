"""The plan audit of issue 13 over every shipped task x flaw x severity (5040 x 7 x 3).

For each flawed plan: the surface problems `plan_audit.surface_problems` finds (an injected
step worded unlike a genuine one, a contingency or prerequisite mark naming a tool not in the
plan, an Advice about unmarked prerequisites, an argument value from nowhere in the task), and
whether replaying its record on the optimal plan gives it back exactly (`plan_audit.replay`).
Also the purpose lengths of injected and genuine steps (a length detector's material) and how
many plans have an edit at all; and the share of medium and severe parameter_error and
logical_inconsistency plans that carry an edit the tools accept but that spoils the
deliverable when the plan is run literally (`plan_audit.spoiling_edits`, target 100%); and,
for every task, tool mode and fault profile, whether each variant's prompt is the baseline's
(system prompt, tools, user message) plus its plan block alone (`plan_audit.plan_block_only`).
Figures are printed, not asserted. Run:
    python bench/bench_plan_audit.py [--every 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

from pytest_resilibench.core.flaws import FLAWS, SEVERITIES
from pytest_resilibench.core.plan_audit import (
    plan_block_only,
    replay,
    spoiling_edits,
    surface_problems,
)
from pytest_resilibench.core.prompts import (
    Variant,
    all_variants,
    plan_for,
    render_plan,
    render_prompt,
)
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import load_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--every", type=int, default=1, help="take every n-th task")
    args = parser.parse_args()
    registry = default_registry()
    tasks = load_tasks().tasks[:: args.every]
    started = time.perf_counter()
    plans = Counter[str]()
    flagged = Counter[str]()
    replay_differs = Counter[str]()
    unchanged = Counter[str]()
    kinds = Counter[str]()
    spoiled = Counter[tuple[str, str]]()
    read_only = ("parameter_error", "logical_inconsistency")
    lengths: dict[str, list[int]] = {"genuine": [], "genuine, unmarked": [], "injected": []}
    for task in tasks:
        optimal, _ = plan_for(task, Variant("optimal"), registry)
        assert optimal is not None
        if surface_problems(task, optimal, None, registry):
            flagged["optimal"] += 1
        plans["optimal"] += 1
        genuine = {s.tool for s in optimal.steps}
        for flaw in FLAWS:
            for severity in SEVERITIES:
                plan, record = plan_for(task, Variant("flawed", flaw, severity), registry)
                assert plan is not None and record is not None
                plans[flaw] += 1
                problems = surface_problems(task, plan, record, registry)
                flagged[flaw] += bool(problems)
                for problem in problems:
                    kinds[problem.split(": ", 1)[-1].split(" ")[0]] += 1
                replay_differs[flaw] += replay(optimal, record, task, registry) != plan
                unchanged[flaw] += not record["changes"]
                if flaw in read_only and severity != "light":
                    spoiled[flaw, severity] += bool(spoiling_edits(optimal, record, task,
                                                                   registry))
                for step in plan.steps:
                    side = "genuine" if step.tool in genuine else "injected"
                    lengths[side].append(len(step.purpose))
                    if side == "genuine" and not step.purpose.startswith("prerequisite of"):
                        lengths["genuine, unmarked"].append(len(step.purpose))
    prompts = more_than_plan = 0
    for task in tasks:
        for tool_mode in ("text", "native"):
            for faults in ("paper", "realistic"):
                baseline = render_prompt(task, Variant("baseline"), tool_mode=tool_mode,
                                         faults=faults)
                for variant in all_variants():
                    prompt = render_prompt(task, variant, tool_mode=tool_mode, faults=faults)
                    prompts += 1
                    user, own = baseline.messages[1]["content"], prompt.messages[1]["content"]
                    more_than_plan += not (
                        prompt.messages[0] == baseline.messages[0]
                        and prompt.tools == baseline.tools
                        and (plan_block_only(user, own, render_plan(prompt.plan))
                             if prompt.plan is not None else own == user
                             or (variant.kind == "cot" and own.startswith(user + "\n\n")
                                 and "\n" not in own.removeprefix(user + "\n\n"))))
    elapsed = time.perf_counter() - started
    print(f"{len(tasks)} tasks x {len(FLAWS)} flaws x {len(SEVERITIES)} severities "
          f"in {elapsed:.0f} s")
    print(f"{'plans':>24} {'n':>7} {'flagged':>8} {'replay differs':>15} {'no edit':>8}")
    for name in ("optimal", *FLAWS):
        print(f"{name:>24} {plans[name]:>7} {flagged[name]:>8} {replay_differs[name]:>15} "
              f"{unchanged[name]:>8}")
    if kinds:
        print("problems by kind:", dict(kinds))
    print("plans with an accepted edit that spoils the deliverable (run literally):")
    for flaw in read_only:
        for severity in ("medium", "severe"):
            share = spoiled[flaw, severity] / len(tasks)
            print(f"{flaw:>24} {severity:>7} {spoiled[flaw, severity]:>5}/{len(tasks)} "
                  f"{share:.1%}")
    print(f"prompts differing from the baseline's by more than their plan block: "
          f"{more_than_plan}/{prompts} (10 variants x 2 tool modes x 2 fault profiles; "
          f"cot: its one paragraph)")
    for side, values in lengths.items():
        if values:
            print(f"purpose length, {side} steps: n={len(values)} "
                  f"mean={statistics.mean(values):.1f} median={statistics.median(values):.0f} "
                  f"sd={statistics.pstdev(values):.1f}")


if __name__ == "__main__":
    main()
