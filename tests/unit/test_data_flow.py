"""One data-flow rule, read alike by the generator, the flaw injector and the simulator.

Which earlier output a call reads when it names no `source` (`ToolSpec.reads_input`,
`ToolRegistry.default_source`), the format its output has (`ToolSpec.produced_format`) and the
order steps may run in (`ToolRegistry.dependency_order`) live on the registry. For any task and
any order of its closure that the registry allows: the formats the generator wrote into the
task's step arguments are the ones the flaw injector's plan shows, and the simulator, running
those steps, accepts every format and produces the formats the plan expects.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.flaws import _Plan
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.simulator import EpisodeKey, Simulator
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.core.workflow import PlanStep

REGISTRY = default_registry()
TASKS = load_tasks().tasks
ATTEMPTS = 80  # retries until a step succeeds (p >= 0.1 a call once its dependencies ran)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data(), index=st.integers(0, len(TASKS) - 1))
def test_generator_flaws_and_simulator_read_the_same_flow(data: st.DataObject,
                                                         index: int) -> None:
    task = TASKS[index]
    closure = REGISTRY.closure(task.required_tools)
    order = REGISTRY.dependency_order(data.draw(st.permutations(closure)), task.required_tools)
    assert sorted(order) == sorted(closure)
    steps = [PlanStep(tool=t, purpose="", arguments=dict(task.step_arguments[t])) for t in order]
    flow = _Plan(steps, task, REGISTRY, DrawStream("test", task.id)).formats()
    if order == closure:  # the generator bound the formats along the closure's order
        assert [s.arguments.get("format", c) for s, (c, _) in zip(steps, flow, strict=True)] \
            == [c for c, _ in flow]
    sim = Simulator(REGISTRY, EpisodeKey(0, task.id, 0), task_tools=task.required_tools,
                    inputs=task.inputs)
    for step, (consumed, produced) in zip(steps, flow, strict=True):
        arguments = {**step.arguments, "format": consumed} if "format" in step.arguments \
            else step.arguments
        for _ in range(ATTEMPTS):
            result = sim.call(step.tool, arguments)
            assert "does not match the input data" not in result.message, (step, result)
            if result.ok:
                break
        assert result.ok and result.output is not None
        assert result.output["format"] == produced, step.tool


def test_dependency_order_keeps_the_given_order_where_nothing_depends() -> None:
    reader, parser = "file_operations_reader", "data_processing_parser"
    assert REGISTRY.dependency_order([parser, reader]) == (reader, parser)
    assert REGISTRY.dependency_order(["utility_logger", reader]) == ("utility_logger", reader)


def test_default_source_prefers_the_latest_dependency() -> None:
    task = ("file_operations_reader", "data_processing_parser", "network_poster")
    latest = {"file_operations_reader": 0, "utility_logger": 1}
    assert REGISTRY.default_source("data_processing_parser", task, latest) \
        == "file_operations_reader"
    assert REGISTRY.default_source("network_poster", task, latest) == "utility_logger"
    assert REGISTRY.default_source("data_processing_parser", task, {}) is None
