"""The sequential gate: its test's error rates and decisions, and its pairing in run order."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.reporting.pairing import pair_key
from pytest_resilibench.reporting.sequential import SequentialGate, SequentialTest


def feed(test: SequentialTest, pairs: list[tuple[bool, bool]]) -> SequentialTest:
    for old, new in pairs:
        test.add(old, new)
    return test


def paired(rng: random.Random, n: int, *, psi: float, drop: float) -> list[tuple[bool, bool]]:
    """Pairs that disagree with probability psi, the old side winning by `drop` on average."""
    b, c = (psi + drop) / 2, (psi - drop) / 2
    out = []
    for _ in range(n):
        u = rng.random()
        out.append((True, False) if u < b else (False, True) if u < b + c else
                   (rng.random() < 0.6,) * 2)
    return out


def test_identical_outcomes_pass_and_a_collapse_is_a_regression() -> None:
    same = feed(SequentialTest(max_drop=0.05, alpha=0.05), [(True, True)] * 1000)
    assert same.verdict == "pass" and same.decided_at is not None
    assert same.decided_at < 200  # each agreeing pair is evidence of at most the allowed drop
    worse = feed(SequentialTest(max_drop=0.05, alpha=0.05), [(True, False)] * 1000)
    assert worse.verdict == "regression" and worse.decided_at is not None
    assert worse.decided_at < same.decided_at  # a loss is stronger evidence than a tie


def test_the_verdict_is_final() -> None:
    test = feed(SequentialTest(max_drop=0.05, alpha=0.05), [(True, False)] * 50)
    decided_at = test.decided_at
    assert test.add(False, True) is None
    feed(test, [(False, True)] * 2000)
    assert (test.verdict, test.decided_at) == ("regression", decided_at)


def test_a_stricter_level_needs_more_evidence() -> None:
    loose = feed(SequentialTest(max_drop=0.05, alpha=0.10), [(True, True)] * 1000)
    strict = feed(SequentialTest(max_drop=0.05, alpha=0.01), [(True, True)] * 1000)
    assert loose.decided_at is not None and strict.decided_at is not None
    assert loose.decided_at < strict.decided_at


@pytest.mark.parametrize(("max_drop", "alpha"), [(-0.1, 0.05), (1.0, 0.05), (0.05, 0.0),
                                                 (0.05, 1.0), (float("nan"), 0.05)])
def test_bad_parameters_are_refused(max_drop: float, alpha: float) -> None:
    with pytest.raises(ValueError):
        SequentialTest(max_drop=max_drop, alpha=alpha)


def test_error_rate_at_the_allowed_drop_stays_below_alpha() -> None:
    """Any verdict when the true drop equals the allowed one is an error (Ville: <= alpha).
    A fixed seed: the count is what this code gives, compared with the bound."""
    rng = random.Random(7)
    gates = 300
    wrong = sum(
        feed(SequentialTest(max_drop=0.05, alpha=0.05),
             paired(rng, 1000, psi=0.2, drop=0.05)).verdict is not None
        for _ in range(gates))
    assert wrong <= 0.05 * gates


def test_power_on_a_clear_pass_and_a_clear_regression() -> None:
    rng = random.Random(11)
    passes = [feed(SequentialTest(max_drop=0.05, alpha=0.05),
                   paired(rng, 1500, psi=0.1, drop=0.0)) for _ in range(50)]
    regressions = [feed(SequentialTest(max_drop=0.05, alpha=0.05),
                        paired(rng, 1500, psi=0.1, drop=0.10)) for _ in range(50)]
    assert all(t.verdict == "pass" for t in passes)
    assert all(t.verdict == "regression" for t in regressions)
    assert sum(t.decided_at or 1500 for t in passes + regressions) < 0.5 * 100 * 1500


# --- the gate: pairing and run order ---------------------------------------------------------
def episode(task: str, outcome: str, *, model: str = "m", variant: str = "optimal"
            ) -> dict[str, object]:
    return {"model": model, "task_id": task, "variant": variant, "flaw": None,
            "severity": None, "repeat": 0, "seed": 0, "base_success": 0.8, "outcome": outcome}


def gate_for(baseline: list[dict[str, object]], **kw: object) -> SequentialGate:
    return SequentialGate(baseline, models=kw.pop("models", ["m"]),  # type: ignore[arg-type]
                          max_drop_pp=5.0, alpha=0.05)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=300),
       st.randoms(use_true_random=False))
def test_arrival_order_never_changes_the_decision(
    outcomes: list[tuple[bool, bool]], rng: random.Random
) -> None:
    """Episodes arriving in any order (xdist) give the decision of the planned order."""
    tasks = [f"t{i:04d}" for i in range(len(outcomes))]
    pairs = list(zip(tasks, outcomes, strict=True))
    baseline = [episode(t, "full" if old else "failed") for t, (old, _) in pairs]
    new = [episode(t, "full" if n else "failed") for t, (_, n) in pairs]
    in_order, shuffled = gate_for(baseline), gate_for(baseline)
    for gate in (in_order, shuffled):
        gate.plan((t, ep) for t, ep in zip(tasks, new, strict=True))
    for t, ep in zip(tasks, new, strict=True):
        in_order.add(t, ep)
    arrivals = list(zip(tasks, new, strict=True))
    rng.shuffle(arrivals)
    for t, ep in arrivals:
        shuffled.add(t, ep)
    assert shuffled.tests["m"].to_json() == in_order.tests["m"].to_json()
    reference = feed(SequentialTest(max_drop=0.05, alpha=0.05), outcomes)
    assert in_order.tests["m"].decided_at == reference.decided_at
    assert in_order.kind == (reference.verdict or "inconclusive")


def test_unpaired_and_infrastructure_errors_are_passed_over() -> None:
    baseline = [episode("t0", "full"), episode("t1", "error"), episode("t2", "full")]
    gate = gate_for(baseline)
    new = {"t0": episode("t0", "full"), "t1": episode("t1", "full"),
           "t2": episode("t2", "error"), "t3": episode("t3", "failed")}
    gate.plan(new.items())
    assert gate.pairs_planned() == 2  # t1's baseline errored, t3 has no partner
    for cid in ("t3", "t2", "t1", "t0"):
        gate.add(cid, new[cid])
    assert gate.tests["m"].n == 1 and gate.skipped == 3


def test_models_pair_by_name_or_one_against_one() -> None:
    baseline = [episode("t0", "full", model="old")]
    one_each = gate_for(baseline, models=["new"])
    assert one_each.partners.of_new == {"new": "old"}
    assert pair_key(episode("t0", "full", model="new"), "old") in one_each._old
    with pytest.raises(ValueError, match="no model"):
        gate_for([*baseline, episode("t0", "full", model="other")], models=["new", "x"])


def test_each_model_is_judged_on_its_own_and_one_regression_decides() -> None:
    """Three unchanged models and one that regressed: the gate stops on the regression and
    names it, although the pooled drop is small."""
    models = ["a", "b", "c", "agent"]
    tasks = [f"t{i:04d}" for i in range(400)]
    baseline = [episode(t, "full", model=m) for m in models for t in tasks]
    gate = gate_for(baseline, models=models)
    plan = [(f"{m}-{t}", episode(t, "failed" if m == "agent" and i % 3 == 0 else "full",
                                 model=m)) for i, t in enumerate(tasks) for m in models]
    gate.plan(plan)
    for cid, ep in plan:
        if gate.add(cid, ep):
            break
    assert gate.decided and gate.kind == "regression"
    assert gate.model_kind("agent") == "regression"
    assert all(gate.model_kind(m) != "regression" for m in ("a", "b", "c"))
    assert "(agent)" in gate.stop_reason()
    assert gate.line("agent", "agent").endswith("REGRESSION (the drop is above the allowed one)")
    unchanged = gate_for(baseline, models=models)
    unchanged.plan((f"{m}-{t}", episode(t, "full", model=m)) for t in tasks for m in models)
    for t in tasks:
        for m in models:
            unchanged.add(f"{m}-{t}", episode(t, "full", model=m))
    assert unchanged.kind == "pass" and all(unchanged.model_kind(m) == "pass" for m in models)


def test_the_line_and_record_say_what_was_used() -> None:
    gate = gate_for([episode(f"t{i}", "full") for i in range(400)])
    gate.plan((f"t{i}", episode(f"t{i}", "full")) for i in range(400))
    for i in range(400):
        gate.add(f"t{i}", episode(f"t{i}", "full"))
    record = gate.to_json(episodes_run=400)
    assert record["verdict"] == "pass" and record["pairs_planned"] == 400
    [model] = record["by_model"]
    assert model["pairs"] == model["decided_at_pair"] < 400
    line = gate.line("m", "m")
    assert "PASS" in line and f"over {model['pairs']} of 400" in line
    assert "allowed 5 pp at 95% confidence" in line
