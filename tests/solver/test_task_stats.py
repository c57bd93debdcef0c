"""solver/task_stats.py: the memoriser's lookup and the diversity counts (issue 34)."""

from __future__ import annotations

from dataclasses import replace

from pytest_resilibench.solver.task_stats import (
    abstract_plan,
    diversity,
    fixed_by_keys,
    in_training_half,
    lookup_prediction,
    overlap,
)

from pytest_resilibench.core.tasks import Task, load_tasks, task_set_dir
from pytest_resilibench.core.workflow import PlanStep, Workflow


def _task(task_id: str, path: str, tools: tuple[str, ...] = ("file_operations_reader",
                                                              "file_operations_writer")) -> Task:
    inputs = {"format": "csv", "path": path, "destination": path + ".out"}
    steps = tuple(PlanStep(tool=t, purpose="", arguments={"path": path} if t.endswith("reader")
                           else {"destination": path + ".out"}) for t in tools)
    return Task(id=task_id, type="simple_task", difficulty="easy", description="",
                inputs=inputs, expected_outputs={}, required_tools=tools,
                optimal=Workflow(steps=steps))


def test_abstract_plans_name_the_input_a_value_came_from() -> None:
    a, b = _task("t1", "/a.csv"), _task("t2", "/b.csv")
    assert abstract_plan(a) == abstract_plan(b)
    assert abstract_plan(a)[0] == ("file_operations_reader", (("path", "$path"),))
    literal = replace(a, optimal=Workflow(steps=(PlanStep("file_operations_reader", "",
                                                          {"path": "/elsewhere"}),)))
    assert abstract_plan(literal)[0][1] == (("path", '"/elsewhere"'),)


def test_a_set_of_one_structure_is_predicted_whole_and_two_plans_split_it() -> None:
    same = [_task(f"t{i}", f"/d{i}.csv") for i in range(200)]
    result = lookup_prediction(same)
    assert result.predicted == result.held_out == result.key_set_seen > 50
    # Same input keys, two plans (one with an extra parameter-free step): the lookup can
    # only ever give one of them.
    other = ("file_operations_reader", "data_processing_validator", "file_operations_writer")
    mixed = [_task(f"t{i}", f"/d{i}.csv", other if i % 2 else _task("x", "").required_tools)
             for i in range(200)]
    assert 0.3 < lookup_prediction(mixed).share < 0.7
    assert diversity(mixed).key_sets == 1 and diversity(mixed).tool_sets == 2
    assert fixed_by_keys(same) == (200, 200) and fixed_by_keys(mixed) == (0, 200)


def test_the_split_is_deterministic_and_about_half() -> None:
    tasks = [_task(f"t{i:04d}", "/x") for i in range(1000)]
    first = [in_training_half(t) for t in tasks]
    assert first == [in_training_half(t) for t in tasks]
    assert 400 < sum(first) < 600


def test_overlap_counts_what_the_first_set_holds() -> None:
    a = [_task("t1", "/a.csv")]
    b = [_task("t2", "/a.csv"), _task("t3", "/c.csv")]
    shared = overlap(a, b)
    assert shared["tool_sets_shared"] == 1.0
    assert shared["input_values_shared"] == 3 / 5  # format, path, destination of 5 pairs


def test_the_paper_set_is_the_lookup_issue_34_found() -> None:
    paper = list(load_tasks(task_set_dir("paper")))
    div = diversity(paper)
    assert (div.tool_sets, div.tool_sequences, div.key_sets) == (91, 91, 64)
    assert lookup_prediction(paper).share > 0.6
