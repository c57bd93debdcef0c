"""The genuine plan's own arguments beyond the Inputs (core/plan_extras.py, issue 34)."""

from __future__ import annotations

import pytest

from pytest_resilibench.core.plan_extras import genuine_workflow
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.simulator import EpisodeKey, Simulator
from pytest_resilibench.core.tasks import Task, load_tasks

REGISTRY = default_registry()


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return list(load_tasks())[::40]


def test_most_genuine_plans_carry_keys_and_values_beyond_the_inputs(tasks: list[Task]) -> None:
    beyond = 0
    for task in tasks:
        plan, _ = plan_for(task, Variant("optimal"), REGISTRY)
        assert plan is not None
        values = {str(v) for v in task.inputs.values()}
        beyond += any(k not in task.inputs and str(v) not in values
                      for s in plan.steps for k, v in s.arguments.items())
    assert beyond / len(tasks) >= 0.95


def test_extras_never_change_a_task_value_and_only_add(tasks: list[Task]) -> None:
    for task in tasks:
        reference = task.reference_workflow()
        genuine = genuine_workflow(task, reference, REGISTRY)
        assert genuine.tools == reference.tools
        for ref, step in zip(reference.steps, genuine.steps, strict=True):
            assert {k: step.arguments[k] for k in ref.arguments} == dict(ref.arguments)
            assert all(k not in task.inputs or k == "format" for k in step.arguments
                       if k not in ref.arguments)
            assert REGISTRY.argument_errors(step.tool, dict(step.arguments)) == []


def test_the_simulator_accepts_every_extra_and_records_no_deviation(tasks: list[Task]) -> None:
    """Run in order, each genuine step is never refused and never deviates from the task."""
    for task in tasks:
        plan, _ = plan_for(task, Variant("optimal"), REGISTRY)
        assert plan is not None
        sim = Simulator(REGISTRY, EpisodeKey(5, task.id), task_tools=task.required_tools,
                        inputs=task.inputs, base_success=0.95, data_flow=task.data_flow)
        for step in plan.steps:
            for _ in range(20):
                result = sim.call(step.tool, dict(step.arguments))
                assert not result.deterministic, (task.id, step, result.message)
                assert result.deviations == ()
                if result.ok:
                    break
            else:
                pytest.fail(f"{task.id}: {step.tool} never succeeded")


def test_extras_are_a_pure_function_of_the_task(tasks: list[Task]) -> None:
    task = tasks[3]
    copy = Task.from_json(task.to_json(), optimal=task.optimal, data_flow=task.data_flow)
    assert (genuine_workflow(copy, copy.reference_workflow(), REGISTRY)
            == genuine_workflow(task, task.reference_workflow(), REGISTRY))
