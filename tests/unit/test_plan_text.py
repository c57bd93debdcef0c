"""The plan renderer: contingencies round-trip and name only tools of the plan as shown."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.core.plan_text import (
    PREREQUISITE_ADVICE,
    Contingency,
    plan_advice,
    shown_plan,
)
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.workflow import PlanStep, Workflow

REGISTRY = default_registry()
names = st.sampled_from(REGISTRY.names)
contingencies = st.builds(
    Contingency, st.integers(0, 6), st.lists(names, max_size=2, unique=True).map(tuple),
    st.lists(names, max_size=2, unique=True).map(tuple), st.none() | names)


@given(contingencies)
def test_a_contingency_reads_back_as_written(contingency: Contingency) -> None:
    if contingency.retries == 0:  # nothing is re-run without a retry
        contingency = Contingency(0, then=contingency.then)
    assert Contingency.parse(contingency.render()) == contingency


def test_rewording_names_only_tools_of_the_plan() -> None:
    text = ("re-run integration_authenticator, then retry up to 3 times; if it still fails, "
            "go on with network_poster without it")
    # The authenticator was dropped, the poster replaced by the router.
    kept = {"network_router": "network_router", "network_poster": "network_router"}
    parsed = Contingency.parse(text)
    assert parsed is not None
    assert parsed.reworded("integration_connector", kept, ["network_router"]).render() == (
        "retry up to 3 times; if it still fails, go on with network_router without it")
    # A dropped `then` becomes the next step shown; none left: the step ends the plan.
    assert parsed.reworded("integration_connector", {}, ["utility_logger"]).then == \
        "utility_logger"
    assert parsed.reworded("integration_connector", {}, []).render() == "retry up to 3 times"


def test_prerequisite_marks_and_advice_follow_the_plan_as_shown() -> None:
    task_tools = ("network_fetcher", "network_poster")
    steps = (PlanStep("network_fetcher", ""), PlanStep("integration_authenticator", ""),
             PlanStep("network_poster", ""))
    shown = shown_plan(Workflow(steps), task_tools, REGISTRY)
    assert shown.steps[1].purpose.startswith("prerequisite of network_poster: ")
    assert shown.advice == PREREQUISITE_ADVICE
    without_user = shown_plan(Workflow(steps[:2]), task_tools, REGISTRY)
    assert not without_user.steps[1].purpose.startswith("prerequisite")
    assert without_user.advice == "" == plan_advice(without_user.steps)
