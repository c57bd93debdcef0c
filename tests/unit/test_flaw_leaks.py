"""Flaws that only reading catches (issue 34): the adversarial property tests. The rules and
the surface-repair agent are `surface_adversary.py`'s; bench/bench_flaw_leaks.py runs them
at scale and prints the whole table."""

from __future__ import annotations

import asyncio

import pytest

from pytest_resilibench.base.names import FLAWS, SEVERITIES
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.scoring import deliverable_of, score_calls
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import EpisodeSpec, run_episodes
from tests.unit.sample_tasks import SALES
from tests.unit.surface_adversary import (
    _SUFFIX,
    RULES,
    _core,
    best_combinations,
    count_shift_advantage,
    key_outside_inputs,
    repeats,
    rule_bits,
    value_not_in_inputs,
)

REGISTRY = default_registry()


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return list(load_tasks())[::25]


@pytest.fixture(scope="module")
def best() -> dict[str, tuple[float, str]]:
    """The surface adversary's best advantage at <= 5% false positives per flaw/severity,
    over every rule, its negation and the AND of any two, on a sample of the default set
    that covers every type x difficulty (every 17th task)."""
    return best_combinations(rule_bits(list(load_tasks())[::17]))


# Known leaks since issue 50's typed flows (shorter easy flows, fewer skips a step can take):
# strict, so the day a change closes them these marks must go.
_TYPED_FLOW_LEAKS = {
    "missing_step": "light: key outside Inputs AND no tool needs a non-Inputs key, +11.1 pp",
    "logical_inconsistency": "medium: a format other than the Inputs', +11.7 pp",
}


@pytest.mark.parametrize("flaw", [
    pytest.param(f, marks=pytest.mark.xfail(strict=True, reason=_TYPED_FLOW_LEAKS[f]))
    if f in _TYPED_FLOW_LEAKS else f
    for f in FLAWS if f != "redundant_operations"])
def test_only_reading_tells_these_flaws_from_the_genuine_plan(
        best: dict[str, tuple[float, str]], flaw: str) -> None:
    """Issue 34's limit: no surface rule (nor a negation, nor two of them together) flags
    these flawed plans more than 10 points above the genuine plans it flags, at <= 5%
    false positives. (redundant_operations repeats a tool, which no genuine plan does:
    docs/BENCHMARK.md, Flaws.)"""
    for severity in SEVERITIES:
        advantage, rule = best[f"{flaw}/{severity}"]
        assert advantage <= 0.10, (severity, rule, advantage)


def _steps(task: Task, variant: Variant) -> list[dict[str, object]]:
    plan, _ = plan_for(task, variant, REGISTRY)
    assert plan is not None
    return [{"tool": s.tool, "arguments": dict(s.arguments)} for s in plan.steps]


def _rate(rule: object, tasks: list[Task], variant: Variant) -> float:
    return sum(bool(rule(t, _steps(t, variant), REGISTRY))  # type: ignore[operator]
               for t in tasks) / len(tasks)


@pytest.mark.parametrize("rule", [key_outside_inputs, value_not_in_inputs],
                         ids=lambda r: r.__name__)
def test_keys_and_values_beyond_the_inputs_tell_no_flaw(tasks: list[Task], rule: object) -> None:
    """Genuine plans carry them as often as flawed ones: each flaw <= 5 pp above."""
    genuine = _rate(rule, tasks, Variant("optimal"))
    for flaw in FLAWS:
        for severity in SEVERITIES:
            assert _rate(rule, tasks, Variant("flawed", flaw, severity)) - genuine <= 0.05, (
                flaw, severity)


@pytest.mark.parametrize("task_set", ["default", "paper"])
def test_wrong_values_take_the_forms_right_values_take(task_set: str) -> None:
    """No suffix, nothing the schema refuses, no enum member it lacks: a parameter_error
    value is one the task generator could have written, in either task set."""
    tasks = list(load_tasks(TASK_SETS[task_set]))[::25]
    for task in tasks:
        for severity in SEVERITIES:
            _, record = plan_for(task, Variant("flawed", "parameter_error", severity), REGISTRY)
            assert record is not None
            for change in record["changes"]:
                new, old = change["new"], change["old"]
                if isinstance(new, str) and isinstance(old, str):  # not the old value + more
                    assert not (_core(new) != _core(old) and _core(new).startswith(_core(old)))
                    assert bool(_SUFFIX.search(new)) <= bool(_SUFFIX.search(old)), change
                assert change["violates"] != "schema", change
    for severity in SEVERITIES:
        for rule in ("value outside the enum", "schema invalid", "Inputs value + suffix"):
            assert _rate(RULES[rule], tasks, Variant("flawed", "parameter_error", severity)) \
                <= _rate(RULES[rule], tasks, Variant("optimal")) + 0.10, (rule, severity)


def test_logical_inconsistency_adds_only_keys_genuine_plans_carry(tasks: list[Task]) -> None:
    for rule in ("`source` key", "value with `#`", "key outside Inputs"):
        genuine = _rate(RULES[rule], tasks, Variant("optimal"))
        for severity in SEVERITIES:
            flawed = _rate(RULES[rule], tasks,
                           Variant("flawed", "logical_inconsistency", severity))
            assert flawed - genuine <= 0.10, (rule, severity)


def _call(tool: str, ok: bool, ref: str, inputs: list[str]) -> dict[str, object]:
    output = {"ref": ref, "inputs": inputs} if ok else None
    return {"tool": tool, "ok": ok, "arguments": {}, "output": output}


def test_a_second_delivery_spoils_the_deliverable_a_retry_does_not() -> None:
    deliverable = deliverable_of(SALES, REGISTRY)
    assert deliverable.once  # a post acts outside the data
    made = [_call(t, True, f"{t}#1", [f"{p}#1"] if p else [])
            for t, p in zip(SALES.required_tools, (None, *SALES.required_tools[:-1]),
                            strict=True)]
    made[2]["output"]["inputs"] = ["file_operations_reader#1"]  # type: ignore[index]
    made[1]["output"]["inputs"] = ["file_operations_reader#1"]  # type: ignore[index]

    def output(calls: list[dict[str, object]]) -> bool:
        return score_calls(calls, SALES.required_tools, completed=True, registry=REGISTRY,
                           deliverable=deliverable).conditions.output

    assert output(made)
    retried = [*made[:-1], _call("network_poster", False, "", []), made[-1]]
    assert output(retried)
    again = [*made, _call("network_poster", True, "network_poster#2",
                          ["data_processing_aggregator#1"])]
    assert not output(again)


def test_a_plan_copier_pays_for_repeated_steps(tasks: list[Task]) -> None:
    """builtin:follower loses >= 40 pp of full success on redundant_operations (medium)."""
    chosen = tasks[:60]
    agent = make_agent("builtin:follower")
    variants = [Variant("optimal"), Variant("flawed", "redundant_operations", "medium")]

    async def rates() -> dict[str, float]:
        full: dict[str, int] = {}
        specs = [EpisodeSpec(t, v, 11) for v in variants for t in chosen]
        async for record in run_episodes(specs, agent, concurrency=16):
            full[record.variant] = full.get(record.variant, 0) + (record.outcome == "full")
        return {k: n / len(chosen) for k, n in full.items()}

    got = asyncio.run(rates())
    assert got["optimal"] - got.get("flawed-redundant_operations-medium", 0.0) >= 0.40, got


def test_the_count_rule_sees_every_copy_unless_genuine_plans_repeat_as_widely() -> None:
    """bench/bench_repeat_bound.py's adversary: where genuine plans never repeat a step, a
    repeat count catches every copy; where 75% repeat one step and none two, it still
    catches 75% at light; only a count spread wide (twenty counts, 5% each) hides one copy
    (a count beyond every genuine plan's still flags 5%)."""
    assert count_shift_advantage([1.0], 1) == pytest.approx(1.0)
    assert count_shift_advantage([1.0], 2) == pytest.approx(1.0)
    assert count_shift_advantage([0.25, 0.75], 1) == pytest.approx(0.75)
    assert count_shift_advantage([0.05] * 20, 1) == pytest.approx(0.05)
    # Two copies against the same wide spread: counts 20 and 21 have no genuine plan.
    assert count_shift_advantage([0.05] * 20, 2) == pytest.approx(0.10)
    # A count rule may flag a share of a count's plans (as advantage_at_limit does): at
    # [0.5, 0.5] the flawed plans with one repeat are as many as the genuine ones, so only
    # the count of two (no genuine plan) tells, on half the flawed plans.
    assert count_shift_advantage([0.5, 0.5], 1) == pytest.approx(0.5)


def test_the_shipped_plans_never_repeat_a_step(tasks: list[Task]) -> None:
    """Why redundant_operations is the one flaw a surface rule catches (docs/BENCHMARK.md,
    Flaws): no genuine plan of the sample repeats a tool, so any copy shows."""
    for task in tasks:
        assert repeats(task.reference_workflow().tools) == 0, task.id
