from typing import Any

import pytest

from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.scoring import (
    Conditions,
    conditions,
    deliverable_of,
    deviation,
    errors_met_and_recovered,
    first_success_order,
    lcs_length,
    order_adherence,
    outcome,
    score_calls,
)
from pytest_resilibench.core.tasks import Task

REQUIRED = ("file_operations_reader", "data_processing_validator", "file_operations_writer")
R, V, W = REQUIRED


def calls(*steps: tuple[str, bool], args: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{"tool": t, "ok": ok, "arguments": dict(args or {})} for t, ok in steps]


def test_full_success_needs_all_four() -> None:
    done = calls((R, False), (R, True), (V, True), (W, True))
    score = score_calls(done, REQUIRED, completed=True)
    assert score.outcome == "full"
    assert score.conditions.to_json() == dict.fromkeys(
        ("coverage", "order", "output", "completion"), True)
    assert (score.coverage, score.order_adherence) == (1.0, 1.0)
    assert score_calls(done, REQUIRED, completed=False).outcome == "partial"


def test_a_step_counts_only_from_a_success_with_the_task_s_values() -> None:
    """Issue 34: a success with `deviations` (another option than the text words) did
    another step: it covers nothing and sets no first success."""
    wrong = {"tool": V, "ok": True, "arguments": {}, "deviations": ["schema"]}
    done = [*calls((R, True)), wrong, *calls((W, True))]
    score = score_calls(done, REQUIRED, completed=True)
    assert not score.conditions.coverage and score.coverage == 2 / 3
    assert first_success_order(done, REQUIRED) == [R, W]
    # Redone with the task's values after the first write: covered, out of order.
    redone = score_calls([*done, *calls((V, True))], REQUIRED, completed=True)
    assert redone.conditions.coverage and not redone.conditions.order


def test_order_uses_first_successes_only() -> None:
    # a later repeat of the reader after the validator does not break the order
    done = calls((R, True), (V, True), (R, True), (W, True))
    assert conditions(done, REQUIRED, completed=True).order
    # the validator's first success before the reader's does
    swapped = calls((V, True), (R, True), (W, True))
    conds = conditions(swapped, REQUIRED, completed=True)
    assert not conds.order and conds.coverage and conds.output
    assert outcome(conds) == "partial"
    assert order_adherence(swapped, REQUIRED) == pytest.approx(2 / 3)


def test_order_needs_a_success_and_partial_needs_two() -> None:
    nothing = calls((R, False), (V, False))
    conds = conditions(nothing, REQUIRED, completed=True)
    assert not conds.order and conds.count == 1
    assert outcome(conds) == "failed"
    # order is measured over the whole required list: one success in order is no progress
    assert not conditions(calls((R, True)), REQUIRED, completed=True).order
    assert outcome(conditions(calls((R, True)), REQUIRED, completed=True)) == "failed"
    assert outcome(conditions(calls((R, True), (V, True)), REQUIRED, completed=True)) == "failed"


def test_partial_needs_progress_itself() -> None:
    # every tool, out of order, plus the signal: two conditions but neither is progress
    shuffled = calls((V, True), (R, True), (W, True))
    conds = conditions(shuffled, REQUIRED, completed=True)
    assert conds.coverage and conds.completion and not conds.order
    assert outcome(Conditions(True, False, False, True)) == "failed"
    assert outcome(Conditions(True, True, False, False)) == "partial"  # every step in order
    assert outcome(Conditions(False, False, True, True)) == "partial"  # the deliverable


def test_output_is_the_last_required_tool() -> None:
    conds = conditions(calls((R, True), (V, True)), REQUIRED, completed=True)
    assert not conds.output and not conds.coverage and not conds.order
    assert conditions(calls((W, True)), REQUIRED, completed=True).output


def test_lcs_and_first_success_order() -> None:
    assert lcs_length("abcde", "ace") == 3
    assert lcs_length("", "abc") == 0
    assert lcs_length("abc", "cba") == 1
    done = calls((W, True), (R, False), (R, True), ("utility_logger", True), (W, True))
    assert first_success_order(done, REQUIRED) == [W, R]
    assert order_adherence(done, REQUIRED) == pytest.approx(1 / 3)


def test_errors_recovered_by_the_tool_or_an_alternative() -> None:
    registry = default_registry()
    done = calls(
        ("data_processing_validator", False),   # recovered by network_validator (same op+role)
        ("network_validator", True),
        ("file_operations_writer", False),      # never recovered
        ("file_operations_reader", False),      # recovered by a retry
        ("file_operations_reader", True),
    )
    assert errors_met_and_recovered(done, registry=registry) == (3, 2)
    # without a registry only the same tool counts
    assert errors_met_and_recovered(done) == (3, 1)


def test_deviation_right_and_wrong() -> None:
    reference = [{"tool": R, "arguments": {"path": "/in.csv"}},
                 {"tool": V, "arguments": {}},
                 {"tool": W, "arguments": {"destination": "/out.json"}}]
    plan = [{"tool": R, "arguments": {"path": "/in_v0.csv"}},   # wrong argument
            {"tool": "network_fetcher", "arguments": {}},      # wrong tool (misuse)
            {"tool": W, "arguments": {"destination": "/out.json"}},
            {"tool": W, "arguments": {"destination": "/out.json"}}]  # duplicate
    made = [{"tool": R, "ok": True, "arguments": {"path": "/in.csv"}},
            {"tool": V, "ok": True, "arguments": {}},
            {"tool": W, "ok": True, "arguments": {"destination": "/out.json"}}]
    dev = deviation(made, plan, reference)
    assert dev["wrong_steps"] == [0, 1, 3]
    assert dev["not_followed"] == [0, 1]
    assert (dev["right_deviations"], dev["wrong_deviations"]) == (2, 0)
    assert dev["restored"] == [V]
    # following the wrong plan literally: no deviation at all
    literal = [{"tool": R, "ok": False, "arguments": {"path": "/in_v0.csv"}},
               {"tool": "network_fetcher", "ok": True, "arguments": {}},
               {"tool": W, "ok": True, "arguments": {"destination": "/out.json"}}]
    dev = deviation(literal, plan, reference)
    assert dev["not_followed"] == [] and dev["right_deviations"] == 0


def test_deviation_reordered() -> None:
    reference = [{"tool": R}, {"tool": V}, {"tool": W}]
    plan = [{"tool": V}, {"tool": R}, {"tool": W}]
    in_reference_order = calls((R, True), (V, True), (W, True))
    assert deviation(in_reference_order, plan, reference)["reordered"]
    in_plan_order = calls((V, True), (R, True), (W, True))
    assert not deviation(in_plan_order, plan, reference)["reordered"]


def _played(task: Any, plan: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The calls of `plan` on the real simulator, each step retried until it succeeds."""
    from pytest_resilibench.core.simulator import EpisodeKey, Simulator

    sim = Simulator(default_registry(), EpisodeKey(5, task.id), task_tools=task.required_tools,
                    inputs=task.inputs)
    out = []
    for tool, arguments in plan:
        for _ in range(30):
            result = sim.call(tool, arguments)
            out.append(result.to_json())
            if result.ok or result.deterministic:
                break
    return out


def test_the_output_condition_wants_the_deliverable_as_the_task_asked() -> None:
    from pytest_resilibench.core.scoring import deliverable_of
    from pytest_resilibench.core.tasks import load_tasks

    task = next(t for t in load_tasks() if t.required_tools[-1] == "file_operations_writer"
                and len(t.required_tools) >= 3 and t.optimal is not None
                and t.optimal.tools == t.required_tools)
    deliverable = deliverable_of(task, default_registry())
    assert deliverable.tool == "file_operations_writer" and len(deliverable.lineage) >= 2
    steps = [(t, dict(task.step_arguments[t])) for t in task.required_tools]

    def output(plan: list[tuple[str, dict[str, Any]]]) -> bool:
        return score_calls(_played(task, plan), task.required_tools, completed=True,
                           deliverable=deliverable).conditions.output

    assert output(steps)
    wrong_place = dict(steps[-1][1], destination=steps[-1][1]["destination"] + ".bak")
    assert not output([*steps[:-1], (steps[-1][0], wrong_place)])  # accepted, wrong place
    assert not output([steps[0], steps[-1]])  # skips the steps the data must go through


N = "utility_notifier"
NOTICED = (R, N, V, N, W)  # a notice when the data are in and again once validated


def test_a_step_asked_twice_is_done_by_the_tool_s_second_success() -> None:
    """docs/BENCHMARK.md, Repeated steps: the required list names the notifier twice; its
    first success does the first notice, its second the second, in the list's order."""
    done = calls((R, True), (N, True), (V, True), (N, False), (N, True), (W, True))
    assert first_success_order(done, NOTICED) == list(NOTICED)
    assert score_calls(done, NOTICED, completed=True).outcome == "full"
    once = calls((R, True), (N, True), (V, True), (W, True))
    score = score_calls(once, NOTICED, completed=True)
    assert not score.conditions.coverage and score.coverage == 4 / 5
    early = calls((R, True), (N, True), (N, True), (V, True), (W, True))
    assert first_success_order(early, NOTICED) == [R, N, N, V, W]
    assert not conditions(early, NOTICED, completed=True).order


def test_a_step_that_acts_outside_the_data_done_too_often_spoils_the_deliverable() -> None:
    """A notice more than the task asks (a third notification, a second enqueue mid-flow)
    did something the task did not ask for: no full success, whatever else went right. A
    failed call is no repeat; one with other values (another recipient) is no repeat either,
    but a side effect the task never asked for (issue 50), which spoils it as well."""
    task = Task(id="t1", type="basic_task", difficulty="easy", description="",
                inputs={"path": "/in.csv", "recipient": "#ops", "destination": "/out.csv"},
                expected_outputs={}, required_tools=NOTICED,
                step_arguments={R: {"path": "/in.csv"}, N: {"recipient": "#ops"}, V: {},
                                W: {"destination": "/out.csv"}})
    deliverable = deliverable_of(task, default_registry())
    assert dict(deliverable.acting) == {N: 2, W: 1}

    def made(*steps: tuple[str, bool]) -> list[dict[str, Any]]:  # outputs name no inputs
        return [{**c, "output": {"ref": f"r{i}"}} for i, c in enumerate(calls(*steps))]

    right = made((R, True), (N, True), (V, True), (N, True), (W, True))
    assert score_calls(right, NOTICED, completed=True, deliverable=deliverable).outcome == "full"
    for extra in (made((N, True)), made((W, True))):
        spoiled = score_calls([*right[:-1], *extra, right[-1]], NOTICED, completed=True,
                              deliverable=deliverable)
        assert not spoiled.conditions.output and spoiled.outcome != "full"
    other = [{"tool": N, "ok": True, "arguments": {"recipient": "#all"},
              "deviations": ["recipient"]}]
    harmless = score_calls([*right[:-1], *made((N, False)), right[-1]], NOTICED,
                           completed=True, deliverable=deliverable)
    assert harmless.conditions.output
    elsewhere = score_calls([*right[:-1], *other, right[-1]], NOTICED, completed=True,
                            deliverable=deliverable)
    assert elsewhere.conditions.coverage and not elsewhere.conditions.output


def test_deviation_counts_a_step_asked_twice_as_two_steps() -> None:
    reference = [{"tool": t, "arguments": {}} for t in NOTICED]
    plan = [*reference[:4], reference[1], reference[4]]  # a third notice
    dev = deviation(calls(*((t, True) for t in NOTICED)), plan, reference)
    assert dev["wrong_steps"] == [4]
