"""No surface feature separates injected steps from genuine ones; a flawed prompt differs from
the optimal one only as its flaw record says; the baseline and optimal prompts differ by the
plan block alone. Hypothesis over the shipped tasks x flaws x severities (a sample here; every
combination in bench/bench_plan_audit.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_resilibench.core.flaws import FLAWS, SEVERITIES
from pytest_resilibench.core.plan_audit import (
    delivered,
    literal_run,
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
from pytest_resilibench.core.scoring import deliverable_of
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks
from pytest_resilibench.core.workflow import PlanStep

REGISTRY = default_registry()
TASKS = load_tasks().tasks
SWEEP = settings(max_examples=150, deadline=None)
task_index = st.integers(min_value=0, max_value=len(TASKS) - 1)
REALISTIC_TASKS = 8


@SWEEP
@given(task_index, st.sampled_from(FLAWS), st.sampled_from(SEVERITIES))
def test_injected_steps_read_like_genuine_ones(index: int, flaw: str, severity: str) -> None:
    task = TASKS[index]
    plan, record = plan_for(task, Variant("flawed", flaw, severity), REGISTRY)
    assert plan is not None and record is not None
    assert surface_problems(task, plan, record, REGISTRY) == []


@SWEEP
@given(task_index, st.sampled_from(FLAWS), st.sampled_from(SEVERITIES))
def test_a_flawed_plan_is_its_parent_with_the_recorded_changes(
    index: int, flaw: str, severity: str
) -> None:
    task = TASKS[index]
    optimal, _ = plan_for(task, Variant("optimal"), REGISTRY)
    plan, record = plan_for(task, Variant("flawed", flaw, severity), REGISTRY)
    assert optimal is not None and record is not None
    assert replay(optimal, record, task, REGISTRY) == plan


@settings(max_examples=60, deadline=None)
@given(task_index, st.sampled_from(["text", "native"]), st.sampled_from(["paper", "realistic"]))
def test_baseline_and_optimal_prompts_differ_by_the_plan_block_only(
    index: int, tool_mode: str, faults: str
) -> None:
    # Under `realistic` a default task's plan is solved when first shown (seconds for some
    # structures): a few tasks, each solved once, show the same prompt structure.
    task = TASKS[index if faults == "paper" else index % REALISTIC_TASKS]
    prompts = {v.label: render_prompt(task, v, tool_mode=tool_mode, faults=faults)
               for v in all_variants()}
    baseline = prompts["baseline"]
    for label, prompt in prompts.items():
        assert prompt.messages[0] == baseline.messages[0], label  # one system prompt for all
        assert prompt.tools == baseline.tools, label
        if prompt.plan is not None:
            assert plan_block_only(baseline.messages[1]["content"],
                                   prompt.messages[1]["content"], render_plan(prompt.plan))


def test_the_scoring_rules_reach_every_variant() -> None:
    system = render_prompt(TASKS[0], Variant("baseline")).messages[0]["content"]
    for rule in ("its own tool", "first success", "TASK_COMPLETED", "turns left",
                 "deliverable"):
        assert rule in system
    assert "work around" not in system
    assert "finish within 10 turns" in render_prompt(TASKS[0], Variant("baseline")
                                                     ).messages[1]["content"]


def test_the_realistic_profile_s_rules_reach_every_variant_and_no_plan_repeats_them() -> None:
    from pytest_resilibench.core.faults import EVENT_RULES

    for variant in all_variants():
        prompt = render_prompt(TASKS[7], variant, faults="realistic")
        assert EVENT_RULES in prompt.messages[1]["content"], variant.label
        assert prompt.plan is None or "stays down" not in prompt.plan.advice, variant.label


# --- the checks can fail ------------------------------------------------------------------------
def _optimal(task: Task):  # type: ignore[no-untyped-def]
    plan, _ = plan_for(task, Variant("optimal"), REGISTRY)
    assert plan is not None
    return plan


@pytest.mark.parametrize("defect", ["capitalised", "placeholder", "dangling", "advice"])
def test_each_surface_defect_is_found(defect: str) -> None:
    task = next(t for t in TASKS if any(s.purpose.startswith("prerequisite of")
                                        for s in _optimal(t).steps))
    plan = _optimal(task)
    step = plan.steps[0]
    if defect == "capitalised":
        step = replace(step, purpose=step.purpose[:1].upper() + step.purpose[1:])
    elif defect == "placeholder":
        step = replace(step, arguments={**step.arguments, "url": "https://api.example.com/x"})
    elif defect == "dangling":
        step = replace(step, on_failure="retry once; if it still fails, go on with "
                                        "network_poster without it")
    steps = (step, *plan.steps[1:])
    if defect == "advice":
        steps = tuple(PlanStep(s.tool, s.purpose.split(": ", 1)[-1], s.arguments, s.on_failure)
                      for s in steps)
    problems = surface_problems(task, replace(plan, steps=steps), None, REGISTRY)
    assert problems, defect


# --- flaws only a reader catches (issue 13) -----------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(task_index, st.sampled_from(["parameter_error", "logical_inconsistency"]),
       st.sampled_from(["medium", "severe"]))
def test_medium_and_severe_value_flaws_carry_an_accepted_edit_that_spoils_the_deliverable(
    index: int, flaw: str, severity: str
) -> None:
    """The flawed plan holds an edit the tools accept but that leaves the task not done as
    asked (the wrong deliverable, or a step done with another option than the text words);
    the plan copier, following it, meets no INVALID_INPUT on that step and misses the output
    or the coverage condition (a logical_inconsistency of a task whose data have one path,
    from a source to an output step that writes no file, has neither a data path to spoil
    nor a file to misname: assumed away here, counted in bench/bench_plan_audit.py)."""
    from pytest_resilibench.runtime.agents import make_agent
    from pytest_resilibench.runtime.episode import run_episode

    task = TASKS[index]
    optimal, _ = plan_for(task, Variant("optimal"), REGISTRY)
    plan, record = plan_for(task, Variant("flawed", flaw, severity), REGISTRY)
    assert optimal is not None and plan is not None and record is not None
    # (a single data path: the deliverable's data goes through no step between)
    assume(flaw == "parameter_error" or len(deliverable_of(task, REGISTRY).lineage) > 2
           or "destination" in optimal.steps[-1].arguments)
    spoiling = spoiling_edits(optimal, record, task, REGISTRY)
    assert spoiling, record
    episode = asyncio.run(run_episode(task, Variant("flawed", flaw, severity),
                                      make_agent("builtin:follower"), seed=0))
    assert not (episode.conditions["output"] and episode.conditions["coverage"])
    for change in spoiling:
        # No refusal of the edited step names the edit (another edit of the plan may still
        # break its data, or use up the turns before it).
        step = plan.steps[change["index"]]
        refusals = [c["message"] for c in episode.calls if c["tool"] == step.tool
                    and c.get("error_code") == "INVALID_INPUT"]
        assert not [m for m in refusals if f"{change['parameter']} {change['new']!r}" in m
                    or f"{change['new']!r} was not produced" in m], (change, refusals)


def test_a_spoiling_edit_is_told_from_a_harmless_one() -> None:
    task = next(t for t in TASKS if len(t.required_tools) >= 3)
    optimal, _ = plan_for(task, Variant("optimal"), REGISTRY)
    assert optimal is not None and delivered(task, literal_run(task, optimal, REGISTRY)[0],
                                             REGISTRY)
    step = next(i for i, s in enumerate(optimal.steps) if s.arguments)
    param, value = next(iter(optimal.steps[step].arguments.items()))
    harmless = {"changes": [{"kind": "parameter", "index": step, "parameter": param,
                             "new": value, "accepted": True}]}
    assert spoiling_edits(optimal, harmless, task, REGISTRY) == []


def test_a_two_step_writer_task_s_logical_inconsistency_misnames_its_destination() -> None:
    """One data path (a source, then the writer): medium and severe name the destination for
    another format than the data's, which the writer accepts and which spoils the deliverable;
    light keeps its refused edit."""
    # (the paper set's: every default task has a step between, issue 34)
    task = next(t for t in load_tasks(TASK_SETS["paper"]) if len(_optimal(t).steps) == 2
                and t.required_tools[-1] == "file_operations_writer")
    optimal = _optimal(task)
    _, light = plan_for(task, Variant("flawed", "logical_inconsistency", "light"), REGISTRY)
    assert light is not None and not light["changes"][0]["accepted"]
    asked = task.inputs["destination"]
    for severity in ("medium", "severe"):
        plan, record = plan_for(task, Variant("flawed", "logical_inconsistency", severity),
                                REGISTRY)
        assert plan is not None and record is not None
        [change] = record["changes"]
        assert change["accepted"] and change["parameter"] == "destination"
        written = plan.steps[-1].arguments["destination"]
        assert written == change["new"] != asked
        assert written.rsplit(".", 1)[0] == asked.rsplit(".", 1)[0]  # only the extension
        assert change["names"] != change["consumes"] == task.inputs["format"]
        assert spoiling_edits(optimal, record, task, REGISTRY) == [change]
