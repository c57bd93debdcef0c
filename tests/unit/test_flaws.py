"""The seven flaw injectors: hypothesis properties per flaw, on valid hand-built tasks."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.base.names import FLOW_PARAMS
from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.flaws import (
    FLAWS,
    SEVERITIES,
    SEVERITY_CHANGES,
    SIMILAR_WINDOW,
    _free_moves,
    _Plan,
    inject_flaw,
    similar_tools,
    task_value,
)
from pytest_resilibench.core.plan_extras import genuine_workflow
from pytest_resilibench.core.plan_text import shown_plan
from pytest_resilibench.core.registry import DATA_FORMATS, default_registry
from pytest_resilibench.core.simulator import EpisodeKey, Simulator
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.workflow import PlanStep, Workflow
from tests.unit.sample_tasks import SALES

REGISTRY = default_registry()
PROPERTY = settings(max_examples=60, deadline=None)

SOURCES = ("file_operations_reader", "network_fetcher")
PROCESSORS = (
    "data_processing_parser", "data_processing_transformer", "data_processing_validator",
    "data_processing_filter", "file_operations_converter", "file_operations_compressor",
    "computation_calculator", "computation_analyzer", "computation_optimizer",
    "computation_simulator", "computation_predictor", "integration_mapper", "network_validator",
)
AGGREGATORS = ("data_processing_aggregator", "integration_queue")
OUTPUTS = ("file_operations_writer", "network_poster", "utility_notifier", "network_router",
           "integration_scheduler")
VALUES = {
    "path": "data/sales_2025.csv", "url": "https://api.example.com/v1/orders",
    "target_url": "https://hooks.example.com/reports", "destination": "out/summary.json",
    "route_to": "billing-service", "recipient": "ops@example.com", "queue_name": "orders",
    "job_name": "nightly-report", "expression": "price * quantity",
    "condition": "amount > 100", "target_schema": "crm_v2",
}


@st.composite
def tasks(draw: st.DrawFn) -> Task:
    """A valid task: a source, processors, maybe an aggregator, an output; inputs hold every
    required value and `step_arguments` the correct calls (the simulator accepts them)."""
    tools = [
        draw(st.sampled_from(SOURCES)),
        *draw(st.lists(st.sampled_from(PROCESSORS), max_size=3, unique=True)),
        *draw(st.lists(st.sampled_from(AGGREGATORS), max_size=1)),
        draw(st.sampled_from(OUTPUTS)),
    ]
    inputs: dict[str, Any] = {"format": draw(st.sampled_from(DATA_FORMATS))}
    step_arguments = {}
    for tool in tools:
        spec = REGISTRY[tool]
        args = {}
        for param in spec.required_parameters:
            if param not in inputs:
                schema = spec.parameters["properties"][param]
                if "enum" in schema:
                    inputs[param] = draw(st.sampled_from(schema["enum"]))
                elif schema["type"] == "integer":
                    inputs[param] = draw(st.integers(schema["minimum"], schema["maximum"]))
                else:
                    inputs[param] = VALUES[param]
            args[param] = inputs[param]
        step_arguments[tool] = args
    return Task(
        id=f"h{draw(st.integers(0, 99999)):05d}", type="data_pipeline", difficulty="easy",
        description="Process the data and deliver the result.", inputs=inputs,
        expected_outputs={"result": "delivered"}, required_tools=tuple(tools),
        constraints=("at most 10 turns",), step_arguments=step_arguments,
    )


def parent_of(task: Task) -> Workflow:
    """The plan flaws start from, as the prompts build it (with the genuine extras)."""
    reference = genuine_workflow(task, task.reference_workflow(), REGISTRY)
    return shown_plan(reference, task.required_tools, REGISTRY)


def inject(flaw: str, severity: str, task: Task) -> tuple[Workflow, dict[str, Any]]:
    return inject_flaw(flaw, severity, parent_of(task), task, REGISTRY)


def step_keys(workflow: Workflow, without: Collection[str] = ()) -> list[str]:
    """The steps as hashable strings (a step's arguments are a dict), less `without` keys."""
    return [json.dumps({**s.to_json(), "arguments": {
        k: v for k, v in s.arguments.items() if k not in without}}, sort_keys=True)
        for s in workflow.steps]


def is_subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def fits(task: Task, tool: str) -> bool:
    """Whether the task has a value for each required parameter of the tool."""
    spec = REGISTRY[tool]
    props = spec.parameters.get("properties", {})
    return all(p == "format" or task_value(p, props[p], task.inputs) is not None
               for p in spec.required_parameters)


def deterministic_failures(task: Task, workflow: Workflow, tries: int = 12) -> list[str]:
    """Run the plan in order on a simulator, retrying random failures; return the messages
    of the calls refused whatever the luck (INVALID_INPUT on bad arguments). A run where a
    step meets random failures `tries` times in a row (a tool down for the episode) is run
    again under the next seed: the steps after it would be refused for want of its output,
    which is luck, not the plan."""
    for seed in range(7, 17):
        sim = Simulator(REGISTRY, EpisodeKey(seed, task.id), task_tools=task.required_tools,
                        inputs=task.inputs)
        refused: list[str] = []
        for step in workflow.steps:
            for _ in range(tries):
                result = sim.call(step.tool, dict(step.arguments))
                if result.ok:
                    break
                if result.deterministic:
                    assert result.error_code == "INVALID_INPUT"
                    refused.append(f"{step.tool}: {result.message}")
                    break
            else:
                break  # out of luck: another seed
        else:
            return refused
    raise AssertionError(f"{task.id}: a step failed at random under every seed")


# --- every flaw -------------------------------------------------------------------------------
@PROPERTY
@given(tasks())
def test_the_parent_plan_is_valid(task: Task) -> None:
    assert deterministic_failures(task, parent_of(task)) == []


@pytest.mark.parametrize("flaw", FLAWS)
@PROPERTY
@given(task=tasks())
def test_every_flaw_changes_the_plan_monotonically_and_deterministically(
    flaw: str, task: Task
) -> None:
    parent = parent_of(task)
    counts = []
    for severity in SEVERITIES:
        flawed, record = inject(flaw, severity, task)
        assert flawed != parent
        assert record["flaw"] == flaw and record["severity"] == severity
        assert 1 <= len(record["changes"]) <= SEVERITY_CHANGES[severity]
        assert json.loads(json.dumps(record)) == record
        assert inject(flaw, severity, task) == (flawed, record)  # fixed per task
        counts.append(len(record["changes"]))
    assert counts == sorted(counts)


@PROPERTY
@given(tasks())
def test_the_draws_depend_on_the_task_id_not_on_anything_else(task: Task) -> None:
    flawed = {flaw: inject(flaw, "severe", task)[0] for flaw in FLAWS}
    renamed = Task(**{**task.__dict__, "description": "Another wording."})
    assert {flaw: inject(flaw, "severe", renamed)[0] for flaw in FLAWS} == flawed


# --- per flaw -----------------------------------------------------------------------------------
def violated_dependencies(workflow: Workflow, tools: Sequence[str]) -> list[tuple[str, str]]:
    steps = workflow.tools
    return [(steps[i], steps[j]) for i in range(len(steps)) for j in range(i + 1, len(steps))
            if steps[j] in REGISTRY.dependencies(steps[i], tools)]


@PROPERTY
@given(tasks(), st.sampled_from(SEVERITIES))
def test_sequence_disorder_keeps_the_steps_and_breaks_the_text_s_order(
    task: Task, severity: str
) -> None:
    parent = parent_of(task)
    flawed, _ = inject("sequence_disorder", severity, task)
    # The same steps; only the data flow each states (`source`, an optional `format`) is
    # restated for where the step now stands (issue 34: no dangling name marks the move).
    assert Counter(step_keys(flawed, without=FLOW_PARAMS)) == Counter(
        step_keys(parent, without=FLOW_PARAMS))
    for step in flawed.steps:
        source = step.arguments.get("source")
        assert source is None or source in flawed.tools[:flawed.tools.index(step.tool)]
    assert violated_dependencies(parent, parent.tools) == []
    # The required steps' order is not the text's; a dependency breaks only where no move
    # could keep them all (issue 34: two branches, a side step, two deliverables).
    required = [t for t in flawed.tools if t in task.required_tools]
    assert required != [t for t in parent.tools if t in task.required_tools]
    if _free_moves(_Plan(list(parent.steps), task, REGISTRY, DrawStream("t"))):
        assert violated_dependencies(flawed, parent.tools) == []
    else:
        assert violated_dependencies(flawed, parent.tools)


@PROPERTY
@given(tasks(), st.sampled_from(SEVERITIES))
def test_missing_step_drops_steps_the_task_needs(task: Task, severity: str) -> None:
    parent = parent_of(task)
    flawed, record = inject("missing_step", severity, task)
    dropped = Counter(parent.tools) - Counter(flawed.tools)
    assert sum(dropped.values()) == len(record["changes"]) >= 1
    assert set(dropped) <= set(task.required_tools)
    assert is_subsequence(flawed.tools, parent.tools) and flawed.steps


@PROPERTY
@given(tasks(), st.sampled_from(SEVERITIES))
def test_redundant_operations_keeps_every_step_and_adds_unneeded_ones(
    task: Task, severity: str
) -> None:
    """Issue 50: each added step is one the task does not need: a step its text names but
    declines, a second run of a step that acts outside the data to a destination the task
    never names, or (where neither is left) a verbatim copy."""
    parent = parent_of(task)
    flawed, record = inject("redundant_operations", severity, task)
    assert is_subsequence(parent.tools, flawed.tools)
    added = Counter(step_keys(flawed, ("source",))) - Counter(step_keys(parent, ("source",)))
    assert sum(added.values()) == len(record["changes"]) >= 1
    closure = set(REGISTRY.closure(task.required_tools))
    for change in record["changes"]:
        if change.get("declined"):
            assert change["tool"] not in closure
            assert all(str(task.inputs[p]) in task.description
                       for p in REGISTRY[change["tool"]].required_parameters
                       if p not in ("format", "source") and p not in task.worded)
        elif change["kind"] == "inserted":
            assert REGISTRY[change["tool"]].acts_outside
            assert change["new"] != change["old"] and change["new"] not in task.description
        else:
            assert change["kind"] == "duplicated"
    kinds = [("declined" if c.get("declined") else c["kind"]) for c in record["changes"]]
    # Verbatim copies only after every unneeded step of the other two kinds.
    assert kinds == sorted(kinds, key=("declined", "inserted", "duplicated").index)


@PROPERTY
@given(tasks(), st.sampled_from(SEVERITIES))
def test_tool_misuse_swaps_steps_for_similar_tools_with_another_function(
    task: Task, severity: str
) -> None:
    parent = parent_of(task)
    flawed, _ = inject("tool_misuse", severity, task)
    assert len(flawed.steps) == len(parent.steps)
    swapped = [(old, new) for old, new in zip(parent.steps, flawed.steps, strict=True)
               if old.tool != new.tool]
    assert swapped
    for old, new in swapped:
        assert REGISTRY[new.tool].operation != REGISTRY[old.tool].operation
        assert new.tool in similar_tools(REGISTRY, old.tool, other_function=True)[
            :SIMILAR_WINDOW + len(parent.steps)]
        assert fits(task, new.tool)
        # The wrong tool is called correctly: this flaw is about function, not arguments.
        assert REGISTRY.argument_errors(new.tool, dict(new.arguments)) == []
        assert new.on_failure == old.on_failure


@PROPERTY
@given(tasks(), st.sampled_from(SEVERITIES))
def test_semantic_drift_keeps_a_prefix_and_drifts_through_neighbours(
    task: Task, severity: str
) -> None:
    parent = parent_of(task)
    flawed, record = inject("semantic_drift", severity, task)
    # The drift runs from a kept prefix on, and stops early only when no neighbour fits.
    drifted = [c["index"] for c in record["changes"]]
    start = drifted[0] if drifted else len(parent.steps)
    assert start >= 1 and drifted == list(range(start, start + len(drifted)))
    assert len(drifted) <= SEVERITY_CHANGES[severity]
    end = start + len(drifted)
    assert flawed.steps[:start] == parent.steps[:start]
    assert [s.tool for s in flawed.steps[end:]] == [s.tool for s in parent.steps[end:]]
    assert len(flawed.steps) == len(parent.steps)
    for i in range(start, end):
        # A neighbour: one of the tools most like the previous one, new to the plan.
        used = {*parent.tools, *flawed.tools[start:i]}
        assert flawed.tools[i] not in used
        near = [t for t in similar_tools(REGISTRY, flawed.tools[i - 1], exclude=used)
                [:SIMILAR_WINDOW] if fits(task, t)]
        assert flawed.tools[i] in near
    assert len(set(flawed.tools)) == len(flawed.tools)


@PROPERTY
@given(tasks(), st.sampled_from(SEVERITIES))
def test_parameter_error_breaks_a_schema_or_the_task_inputs(task: Task, severity: str) -> None:
    parent = parent_of(task)
    flawed, record = inject("parameter_error", severity, task)
    assert flawed.tools == parent.tools
    broken = [
        step for step in flawed.steps
        if REGISTRY.argument_errors(step.tool, dict(step.arguments))
        or any(k in task.inputs and k != "format" and v != task.inputs[k]
               for k, v in step.arguments.items())
    ]
    assert len(broken) == len(record["changes"]) >= 1
    # The first edit is refused when run; the others (medium, severe) are accepted.
    assert not record["changes"][0]["accepted"] or len(record["changes"]) > 1
    refused = [c for c in record["changes"] if not c["accepted"]]
    assert len(deterministic_failures(task, flawed)) >= min(1, len(refused))
    for change in record["changes"]:
        assert change["accepted"] == (change["violates"] == "deliverable")


@PROPERTY
@given(tasks(), st.sampled_from(SEVERITIES))
def test_logical_inconsistency_consumes_what_no_predecessor_produces(
    task: Task, severity: str
) -> None:
    parent = parent_of(task)
    flawed, record = inject("logical_inconsistency", severity, task)
    assert flawed.tools == parent.tools
    for change in record["changes"]:
        step = flawed.steps[change["index"]]
        assert change["index"] >= 1
        # Valid against the schema: the fault is in the data flow, not in a value.
        assert REGISTRY.argument_errors(step.tool, dict(step.arguments)) == []
        earlier = {s.tool for s in flawed.steps[: change["index"]]}
        if change["accepted"] and change["kind"] == "source":
            # An output that exists but skips a step the data must go through.
            assert step.arguments["source"].split("#")[0] in earlier and change["skips"]
        elif change["accepted"]:
            # One data path: the writer files it under another format's name.
            assert len(parent.steps) == 2 and change["names"] != change["consumes"]
            assert step.arguments["destination"] == change["new"] != task.inputs["destination"]
            assert change["new"].rsplit(".", 1)[0] == change["old"].rsplit(".", 1)[0]
        elif change["kind"] == "source":
            # An output not made yet, or one whose format is not the one the step states.
            assert (step.arguments["source"] not in earlier
                    or change["consumes"] != step.arguments["format"])
        else:
            assert step.arguments["format"] != change["consumes"]
    refused = deterministic_failures(task, flawed)
    assert all("format" in r or "source" in r for r in refused)
    assert refused or all(c["accepted"] for c in record["changes"])


# --- examples and bad input -----------------------------------------------------------------
def test_a_lighter_flaw_is_the_start_of_a_heavier_one() -> None:
    for flaw in ("sequence_disorder", "tool_misuse", "parameter_error", "missing_step",
                 "redundant_operations", "logical_inconsistency"):
        light = inject(flaw, "light", SALES)[1]["changes"]
        severe = inject(flaw, "severe", SALES)[1]["changes"]
        assert severe[: len(light)] == light, flaw


def test_placeholder_purposes_become_the_tools_purposes() -> None:
    parent = parent_of(SALES)
    assert SALES.reference_workflow().steps[0].purpose == "step 1"
    assert parent.steps[0].purpose == "read the contents of a file from disk and load its raw " \
        "records for later steps"


def test_solver_prerequisites_and_advice_survive() -> None:
    steps = (PlanStep("integration_authenticator", "get a token", {"service": "crm"}),
             *parent_of(SALES).steps)
    plan = Workflow(steps, advice="On TIMEOUT retry at once.")
    for flaw in FLAWS:
        flawed, record = inject_flaw(flaw, "severe", plan, SALES, REGISTRY)
        assert flawed.advice == plan.advice and record["changes"], flaw


def test_bad_flaw_or_severity_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown flaw 'typo'"):
        inject_flaw("typo", "light", parent_of(SALES), SALES, REGISTRY)
    with pytest.raises(ValueError, match="unknown severity 'extreme'"):
        inject_flaw("missing_step", "extreme", parent_of(SALES), SALES, REGISTRY)


def test_an_empty_plan_stays_empty() -> None:
    empty = Workflow(())
    assert inject_flaw("tool_misuse", "light", empty, SALES, REGISTRY)[0] == empty


def test_a_tasks_flawed_plans_are_pinned() -> None:
    """Flawed plans must not drift between versions (paired comparisons across runs rely on
    them): a change here is a deliberate change of the benchmark."""
    changes = {f: inject(f, "light", SALES)[1]["changes"] for f in FLAWS}
    assert changes["parameter_error"] == [
        {"kind": "parameter", "index": 0, "tool": "file_operations_reader",
         "parameter": "path", "old": "data/sales_2025.csv", "new": "data/sales_2024.csv",
         "violates": "task_inputs", "accepted": False}]
    # A skip first, where the plan has one (issue 34: a `source` naming an earlier step is
    # what genuine steps show).
    assert changes["logical_inconsistency"] == [
        {"kind": "source", "index": 3, "tool": "data_processing_aggregator",
         "parameter": "source", "old": "data_processing_transformer",
         "new": "file_operations_reader",
         "arguments": {"function": "sum", "source": "file_operations_reader"},
         "skips": ["data_processing_transformer"], "accepted": True}]
    # No step its text declines: a second post to a URL the task never names (issue 50).
    assert changes["redundant_operations"] == [
        {"kind": "inserted", "tool": "network_poster", "at": 5,
         "arguments": {"source": "data_processing_aggregator",
                       "target_url": "https://api.example.com/v4/reports"},
         "repeats": 4, "parameter": "target_url", "old": "https://api.example.com/v1/reports",
         "new": "https://api.example.com/v4/reports"}]
    # Issue 34: a swap and a drift that leave the plan as a genuine one looks (every shown
    # value used), and a move that breaks no dependency (two branches); issue 50: a sensible
    # flow (an archive first would be a branch out of a reader's order: core/flow_sense.py).
    assert changes["tool_misuse"] == [
        {"kind": "replaced", "index": 1, "tool": "data_processing_parser",
         "new_tool": "computation_simulator", "arguments": {}}]
    assert changes["semantic_drift"] == [
        {"kind": "drifted", "index": 1, "tool": "data_processing_parser",
         "new_tool": "file_operations_scanner", "neighbour_of": "file_operations_reader",
         "arguments": {"directory": "data/sales_2025.csv"}}]
    assert changes["sequence_disorder"] == [
        {"kind": "moved", "tool": "data_processing_transformer", "from": 2, "to": 1,
         "before": "data_processing_parser"}]
    assert changes["missing_step"] == [
        {"kind": "removed", "tool": "data_processing_parser", "index": 1}]


# The kinds of change each flaw makes (docs/BENCHMARK.md: Flaws), whichever candidate.
CHANGE_KINDS = {
    "sequence_disorder": {"moved"}, "tool_misuse": {"replaced"}, "parameter_error": {"parameter"},
    "missing_step": {"removed"}, "redundant_operations": {"inserted", "duplicated"},
    "logical_inconsistency": {"source", "format"}, "semantic_drift": {"drifted"},
}


def test_candidate_zero_is_the_plan_without_choices() -> None:
    """k = 0 draws from the stream a set without choices always used (the pinned plans
    above), and its record says nothing of candidates."""
    for flaw in FLAWS:
        assert inject_flaw(flaw, "medium", parent_of(SALES), SALES, REGISTRY,
                           candidate=0) == inject(flaw, "medium", SALES)
    with pytest.raises(ValueError, match="candidate"):
        inject_flaw("missing_step", "light", parent_of(SALES), SALES, REGISTRY, candidate=-1)


@pytest.mark.parametrize("flaw", FLAWS)
@PROPERTY
@given(task=tasks(), candidate=st.integers(1, 7), severity=st.sampled_from(SEVERITIES))
def test_every_candidate_is_the_same_flaw_from_its_own_draws(
        flaw: str, task: Task, candidate: int, severity: str) -> None:
    """Candidate k (the generator's filter picks one: solver/adversarial_filter.py, which
    keeps a flow as sensible as candidate 0's) is fixed per (task, flaw, k) and makes the
    flaw's kind of changes."""
    parent = parent_of(task)
    _, first_record = inject(flaw, severity, task)
    flawed, record = inject_flaw(flaw, severity, parent, task, REGISTRY, candidate=candidate)
    assert inject_flaw(flaw, severity, parent, task, REGISTRY,
                       candidate=candidate) == (flawed, record)
    assert record["candidate"] == candidate and "candidate" not in first_record
    assert flawed != parent
    assert {c["kind"] for c in record["changes"]} <= CHANGE_KINDS[flaw]
    assert 1 <= len(record["changes"]) <= SEVERITY_CHANGES[severity]


@pytest.mark.parametrize("task_set", ["default", "paper"])
def test_on_generated_tasks_bad_values_and_broken_data_flow_are_refused_or_spoil(
        task_set: str) -> None:
    """On a sample of the 5040 tasks of each set: the parent plan meets only random failures;
    every parameter_error and logical_inconsistency plan either gets a deterministic
    INVALID_INPUT or carries an accepted edit that leaves the task not done as asked (issue
    34: an option the text words, a skip of a step the data must go through)."""
    from pytest_resilibench.core.plan_audit import spoiling_edits
    from pytest_resilibench.core.tasks import TASK_SETS, load_tasks

    try:
        sample = load_tasks(TASK_SETS[task_set]).tasks[::20]
    except FileNotFoundError as exc:
        pytest.skip(f"task fixtures absent ({exc})")
    harmless = []
    for task in sample:
        parent = parent_of(task)
        assert deterministic_failures(task, parent) == [], task.id
        for flaw in ("parameter_error", "logical_inconsistency"):
            for severity in SEVERITIES:
                flawed, record = inject(flaw, severity, task)
                if not deterministic_failures(task, flawed) and not spoiling_edits(
                        parent, record, task, REGISTRY):
                    harmless.append((task.id, flaw, severity))
    assert harmless == []


@pytest.mark.parametrize("middle", [("integration_queue",), ("file_operations_compressor",)])
def test_semantic_drift_finds_another_start_where_the_neighbours_run_out(
        middle: tuple[str, ...]) -> None:
    """Two plans hypothesis found: the neighbours of the computation_simulator step run out
    one step into a severe drift (it drifted fewer steps than medium), and the last step has
    no neighbour the task's values fit (light drifted nothing)."""
    tools = ("network_fetcher", "computation_simulator", "data_processing_parser", *middle,
             "network_poster")
    inputs = {"format": "csv", "url": VALUES["url"], "target_url": VALUES["target_url"],
              "queue_name": VALUES["queue_name"]}
    step_arguments = {tool: {p: inputs[p] for p in REGISTRY[tool].required_parameters}
                      for tool in tools}
    task = Task(id="h00000", type="data_pipeline", difficulty="easy",
                description="Process the data and deliver the result.", inputs=inputs,
                expected_outputs={"result": "delivered"}, required_tools=tools,
                constraints=("at most 10 turns",), step_arguments=step_arguments)
    counts = [len(inject("semantic_drift", severity, task)[1]["changes"])
              for severity in SEVERITIES]
    assert counts == sorted(counts) and counts[0] >= 1, counts


def test_every_flaw_changes_a_plan_that_asks_a_step_twice() -> None:
    """docs/BENCHMARK.md, Repeated steps: the injectors take a genuine plan with a repeated
    step (a notice, then again after the log) and each flaw at each severity still changes
    the rendered prompt."""
    from pytest_resilibench.base.names import FLAWS, SEVERITIES
    from pytest_resilibench.core.prompts import Variant, render_prompt
    from tests.solver.sample_tasks import NOTICING

    optimal = str(render_prompt(NOTICING, Variant("optimal"), registry=REGISTRY))
    for flaw in FLAWS:
        for severity in SEVERITIES:
            flawed = render_prompt(NOTICING, Variant("flawed", flaw, severity), registry=REGISTRY)
            assert str(flawed) != optimal, (flaw, severity)


def test_keeps_reads_only_what_it_needs_and_says_what_the_marks_say() -> None:
    """`_Plan.keeps` reads the asked marks lazily, cheapest first; its answer is the rule
    over the whole `marks()` (each edit of every step of sampled default plans: every
    prefix-drop and swap), and `makes_sense` is `not sense_problems`."""
    from itertools import combinations

    from pytest_resilibench.core.flaws import HARD_MARKS, _Plan
    from pytest_resilibench.core.flow_sense import makes_sense, sense_problems
    from pytest_resilibench.core.prompts import Variant, plan_for
    from pytest_resilibench.core.tasks import load_tasks

    registry = default_registry()
    names = [t.name for t in registry]
    checked = 0
    for task in list(load_tasks())[::97]:
        genuine, _ = plan_for(task, Variant("optimal"), registry)
        assert genuine is not None
        plan = _Plan(list(genuine.steps), task, registry, DrawStream("t"))
        marks = plan.marks()
        for i, j in combinations(range(len(plan.steps) + 1), 2):
            for tool in (None, names[(i * 7 + j) % len(names)]):
                edited = _Plan(list(genuine.steps), task, registry, DrawStream("t"))
                del edited.steps[i:j]
                if tool is not None and edited.steps:
                    edited.steps[0] = PlanStep(tool=tool, purpose="", arguments={})
                now = edited.marks()
                for which in (range(len(marks)), HARD_MARKS, (*HARD_MARKS, 1), (0,)):
                    rule = all(now.unused <= marks.unused if k == 0
                               else bool(now[k]) or not marks[k] for k in which)
                    assert edited.keeps(marks, which) == rule
                tools = [s.tool for s in edited.steps]
                assert makes_sense(tools, registry) == (not sense_problems(tools, registry))
                checked += 1
    assert checked > 500
