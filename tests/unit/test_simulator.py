"""The stochastic simulator (docs/BENCHMARK.md: Simulator): success model, determinism, data
flow, outputs."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.simulator import (
    P_MAX,
    P_MIN,
    EpisodeKey,
    Simulator,
    outcome_draw,
    success_probability,
)

REGISTRY = default_registry()
PIPELINE = ("file_operations_reader", "data_processing_parser", "data_processing_aggregator",
            "file_operations_writer")
INPUTS = {"path": "/data/sales.csv", "format": "csv", "function": "sum",
          "destination": "/out/summary.json"}
ARGS = {
    "file_operations_reader": {"path": "/data/sales.csv"},
    "data_processing_parser": {"format": "csv"},
    "data_processing_aggregator": {"function": "sum"},
    "file_operations_writer": {"destination": "/out/summary.json"},
}


def make(seed: int = 7, task: str = "t0001", repeat: int = 0, base: float = 0.8) -> Simulator:
    return Simulator(REGISTRY, EpisodeKey(seed, task, repeat), task_tools=PIPELINE,
                     inputs=INPUTS, base_success=base)


def outcomes(sim: Simulator, calls: list[str]) -> list[tuple[bool, str | None]]:
    return [(r.ok, r.error_code) for r in (sim.call(t, ARGS[t]) for t in calls)]


@given(
    base=st.floats(0.01, 1.0),
    unmet=st.integers(0, 6),
    failed=st.integers(0, 6),
    calls=st.integers(0, 20),
    recent=st.integers(0, 3),
)
def test_probability_is_always_clamped(
    base: float, unmet: int, failed: int, calls: int, recent: int
) -> None:
    p = success_probability(base, unmet=unmet, failed_latest=failed, calls_made=calls,
                            recent_failures=recent)
    assert P_MIN <= p <= P_MAX


def test_the_precursor_rule() -> None:
    assert success_probability(0.8, unmet=0, failed_latest=0, calls_made=0,
                               recent_failures=0) == pytest.approx(0.8)
    assert success_probability(0.8, unmet=1, failed_latest=1, calls_made=2,
                               recent_failures=2) == pytest.approx(0.8 * 0.5 * 0.7)
    # The recent-failure factor only applies once three calls were made.
    assert success_probability(0.8, unmet=0, failed_latest=0, calls_made=3,
                               recent_failures=2) == pytest.approx(0.8 * 0.81)


def test_unmet_dependency_strictly_lowers_the_probability() -> None:
    sim = make()
    before = sim.probability("data_processing_parser")
    assert before == pytest.approx(0.8 * 0.5)
    for _ in range(20):  # until the reader succeeds
        if sim.call("file_operations_reader", ARGS["file_operations_reader"]).ok:
            break
    assert sim.succeeded("file_operations_reader")
    assert sim.probability("data_processing_parser") > before


def test_identical_inputs_give_identical_results() -> None:
    calls = list(PIPELINE) * 3
    sim_b = make()
    b = [sim_b.call(t, ARGS[t]).to_json() for t in calls]
    sim_a = make()
    a = [sim_a.call(t, ARGS[t]).to_json() for t in calls]
    assert a == b


def test_interleaving_episodes_changes_nothing() -> None:
    calls = list(PIPELINE) * 2
    alone = {task: outcomes(make(task=task), calls) for task in ("t1", "t2", "t3")}
    sims = {task: make(task=task) for task in alone}
    mixed: dict[str, list[tuple[bool, str | None]]] = {task: [] for task in alone}
    for call in calls:  # round-robin across three concurrent episodes
        for task, sim in reversed(sims.items()):
            r = sim.call(call, ARGS[call])
            mixed[task].append((r.ok, r.error_code))
    assert mixed == alone


def test_luck_differs_across_seeds_tasks_and_repeats() -> None:
    calls = list(PIPELINE) * 3
    runs = {str(k): outcomes(make(**k), calls)
            for k in ({"seed": 1}, {"seed": 2}, {"task": "t9"}, {"repeat": 1})}
    assert len({str(v) for v in runs.values()}) > 1


@pytest.mark.parametrize("base", [0.6, 0.8, 0.9])
def test_base_rate_within_a_999_interval(base: float) -> None:
    n = 100_000
    hits = 0
    for i in range(n):  # a dependency-free call on a clean history, fresh episode each time
        sim = Simulator(REGISTRY, EpisodeKey(11, f"t{i}", 0), task_tools=PIPELINE,
                        inputs=INPUTS, base_success=base)
        hits += sim.call("file_operations_reader", ARGS["file_operations_reader"]).ok
    half_width = 3.29 * math.sqrt(base * (1 - base) / n)  # z for 99.9% two-sided
    assert abs(hits / n - base) < half_width


def test_outcome_draw_decides_success() -> None:
    sim = make()
    for call in list(PIPELINE) * 3:
        p = sim.probability(call)
        n = sim._state(call).calls + 1
        r = sim.call(call, ARGS[call])
        assert r.ok == (outcome_draw(sim.key, call, n) < p)


def test_timeouts_cost_the_tools_timeout_and_time_only_moves_forward() -> None:
    sim = make()
    clock = 0.0
    for call in list(PIPELINE) * 5:
        r = sim.call(call, ARGS[call])
        assert r.clock_s >= clock
        clock = r.clock_s
        if r.error_code == "TIMEOUT":
            assert r.latency_s == REGISTRY[call].timeout_s


# --- deterministic INVALID_INPUT ------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "arguments", "fragment"),
    [
        ("file_operations_reader", {}, "required property"),
        ("file_operations_reader", {"path": "/etc/passwd"}, "not available"),
        ("file_operations_reader", {"path": "/data/sales.csv", "bogus": 1}, "Additional"),
        ("data_processing_parser", {"format": "xml"}, "does not match"),
        ("data_processing_parser", {"format": "csv", "source": "network_fetcher#1"},
         "was not produced"),
        ("data_processing_aggregator", {"function": "median"}, "is not one of"),
            ("file_operations_reader", {"path": "https://example.com/sales.csv"}, "is a URL"),
        ("file_operations_writer", ["not", "an", "object"], "JSON object"),
    ],
)
def test_bad_calls_are_invalid_input_whatever_the_luck(
    tool: str, arguments: Any, fragment: str
) -> None:
    for seed in range(5):
        r = make(seed=seed).call(tool, arguments)
        assert (r.ok, r.error_code, r.deterministic) == (False, "INVALID_INPUT", True)
        assert fragment in r.message


def test_unknown_tool_leaves_history_untouched() -> None:
    sim = make()
    r = sim.call("file_operations_teleporter", {})
    assert r.error_code == "UNKNOWN_TOOL"
    assert sim.history == []


def test_data_flows_through_the_chain() -> None:
    sim = make(base=1.0)
    refs: list[str] = []
    for tool in PIPELINE:
        for _ in range(30):
            r = sim.call(tool, ARGS[tool])
            if r.ok:
                break
        assert r.ok and r.output is not None
        if refs:
            assert r.output["inputs"] == [refs[-1]], "consumes the latest upstream output"
        refs.append(r.output["ref"])
    parsed = sim.call("data_processing_aggregator",
                      {"function": "sum", "source": refs[1], "format": "json"})
    assert parsed.error_code != "INVALID_INPUT"
    # Parsed data is JSON, so claiming it is CSV contradicts the data flow.
    wrong = sim.call("data_processing_aggregator",
                     {"function": "sum", "source": refs[1], "format": "csv"})
    assert wrong.error_code == "INVALID_INPUT"


# --- the explicit data flow (issue 50) -------------------------------------------------------
def _succeed(sim: Simulator, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    for _ in range(30):
        result = sim.call(tool, arguments)
        if result.ok and result.output is not None:
            return result.output
    raise AssertionError(f"{tool} never succeeded: {result.message}")


@pytest.mark.parametrize("data_flow", ["inferred", "explicit"])
def test_a_call_without_source_reads_as_its_data_flow_says(data_flow: str) -> None:
    """A transformer after a reader and a logger: the inferred flow reads the reader's
    records (its data dependency), the explicit one the latest output, the log entry."""
    sim = Simulator(REGISTRY, EpisodeKey(3, "t0001", 0), inputs=INPUTS, base_success=1.0,
                    task_tools=("file_operations_reader", "utility_logger",
                                "data_processing_transformer"),
                    data_flow=data_flow)  # type: ignore[arg-type]
    read = _succeed(sim, "file_operations_reader", {"path": "/data/sales.csv"})
    logged = _succeed(sim, "utility_logger", {"message": "started"})
    expected = read if data_flow == "inferred" else logged
    out = _succeed(sim, "data_processing_transformer",
                   {"operation": "normalize", "format": expected["format"]})
    assert out["inputs"] == [expected["ref"]]
    named = _succeed(sim, "data_processing_transformer",
                     {"operation": "normalize", "format": "csv",
                      "source": "file_operations_reader"})
    assert named["inputs"] == [read["ref"]]  # a named source reads the same under both


@pytest.mark.parametrize("data_flow", ["inferred", "explicit"])
def test_a_call_without_format_reads_json_under_the_explicit_flow(data_flow: str) -> None:
    sim = Simulator(REGISTRY, EpisodeKey(3, "t0001", 0), inputs=INPUTS, base_success=1.0,
                    task_tools=PIPELINE, data_flow=data_flow)  # type: ignore[arg-type]
    _succeed(sim, "file_operations_reader", {"path": "/data/sales.csv"})
    csv = sim.call("data_processing_validator", {"source": "file_operations_reader"})
    if data_flow == "inferred":
        assert csv.error_code != "INVALID_INPUT"
    else:  # refused whatever the luck, saying what to do, not what the data are
        assert csv.error_code == "INVALID_INPUT" and csv.deterministic
        assert "as json" in csv.message and "name its format" in csv.message
        assert "csv" not in csv.message
    assert sim.call("data_processing_validator", {"source": "file_operations_reader",
                                                  "format": "csv"}).error_code is None
    parsed = _succeed(sim, "data_processing_parser", {"format": "csv"})
    assert parsed["format"] == "json"  # json data need no format under either
    assert sim.call("data_processing_validator",
                    {"source": "data_processing_parser"}).error_code is None


# --- anything an agent sends ----------------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(tool=st.sampled_from(REGISTRY.names), arguments=JSON)
def test_arbitrary_arguments_never_raise(tool: str, arguments: Any) -> None:
    r = make().call(tool, arguments)
    if r.ok:
        assert REGISTRY.output_errors(tool, r.output) == []
    else:
        assert r.error_code in REGISTRY[tool].error_codes
        if r.deterministic:
            assert r.error_code == "INVALID_INPUT"


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**6), calls=st.lists(st.sampled_from(PIPELINE), max_size=12))
def test_outputs_validate_and_codes_are_declared(seed: int, calls: list[str]) -> None:
    sim = make(seed=seed)
    for call in calls:
        r = sim.call(call, ARGS[call])
        if r.ok:
            assert REGISTRY.output_errors(call, r.output) == []
        else:
            assert r.error_code in REGISTRY[call].error_codes
            assert "0." not in r.message, "messages never reveal the hidden draw"


def test_every_tool_can_succeed_with_valid_output(registry: ToolRegistry = REGISTRY) -> None:
    inputs = {"format": "json"}
    for tool in registry:
        sim = Simulator(registry, EpisodeKey(3, "t-all", 0), task_tools=(tool.name,),
                        inputs=inputs, base_success=1.0)
        args = _minimal_arguments(tool.parameters)
        for _ in range(40):
            r = sim.call(tool.name, args)
            if r.ok:
                break
        assert r.ok, (tool.name, r.message)
        assert registry.output_errors(tool.name, r.output) == []


def _minimal_arguments(schema: Any) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name in schema.get("required", []):
        prop = schema["properties"][name]
        if "enum" in prop:
            args[name] = prop["enum"][0] if name != "format" else "json"
        elif prop.get("type") == "integer":
            args[name] = prop.get("minimum", 1)
        elif "pattern" in prop:
            args[name] = "https://api.example.com/x"
        else:
            args[name] = "value"
    return args


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="base_success"):
        Simulator(REGISTRY, EpisodeKey(1, "t", 0), base_success=1.5)
    with pytest.raises(ValueError, match="format"):
        Simulator(REGISTRY, EpisodeKey(1, "t", 0), inputs={"format": "docx"})
    with pytest.raises(ValueError, match="data_flow"):
        Simulator(REGISTRY, EpisodeKey(1, "t", 0), data_flow="guessed")  # type: ignore[arg-type]


def test_a_value_that_says_what_to_make_is_accepted_and_recorded() -> None:
    """Another function or destination than the task's is accepted, as a real tool would
    accept it; the result records the deviation (for the output condition), never shown."""
    result = make().call("data_processing_aggregator", {"function": "max"})
    assert not result.deterministic  # not refused: random luck decides
    assert result.deviations == ("function",)
    assert result.to_json()["deviations"] == ["function"]
    assert "deviations" not in result.observation()
    assert make().call("data_processing_aggregator", {"function": "sum"}).deviations == ()


def test_the_writer_reports_the_destination_it_wrote() -> None:
    sim = Simulator(REGISTRY, EpisodeKey(3, "t0001"), task_tools=("file_operations_writer",),
                    inputs={"format": "csv", "path": "/data/in.csv",
                            "destination": "/reports/out.csv"})
    for _ in range(12):
        result = sim.call("file_operations_writer", {"destination": "/reports/out.csv"})
        if result.ok:
            break
    assert result.ok and result.output is not None
    assert result.output["path"] == "/reports/out.csv"


def test_every_output_tool_names_where_it_delivered() -> None:
    """Issue 34: a success of a tool that acts outside the data says where it went (the
    poster its target URL, the scheduler its job), so a model never has to guess."""
    registry = default_registry()
    values = {"destination": "/reports/x.json", "target_url": "https://p.example.com/in",
              "route_to": "svc-eu-west", "recipient": "ops@example.com",
              "job_name": "nightly-refresh", "schedule": "daily", "queue_name": "q-batches"}
    acting = [spec for spec in registry if spec.acts_outside]
    assert {s.name for s in acting} >= {"network_poster", "integration_scheduler"}
    for spec in acting:
        arguments = {p: values[p] for p in spec.required_parameters}
        sim = Simulator(registry, EpisodeKey(0, "t"), task_tools=(spec.name,),
                        inputs={"format": "json", **arguments}, base_success=1.0)
        result = next(r for r in (sim.call(spec.name, arguments) for _ in range(20)) if r.ok)
        named = next(p for p in spec.required_parameters if p != "schedule")
        assert values[named] in result.observation()["output"].values(), spec.name
