"""Prompt variants: rendering in text and native modes, and the exact inverses agents use."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.core.flaws import FLAWS, SEVERITIES
from pytest_resilibench.core.plan_text import shown_plan
from pytest_resilibench.core.prompts import (
    COMPLETION_SIGNAL,
    Variant,
    all_variants,
    parse_plan,
    parse_task_inputs,
    plan_for,
    render_plan,
    render_prompt,
)
from pytest_resilibench.core.registry import EXPLICIT_FLOW, default_registry
from pytest_resilibench.core.simulator import EpisodeKey, Simulator
from pytest_resilibench.core.tasks import Task, load_tasks
from pytest_resilibench.core.workflow import PlanStep, Workflow
from pytest_resilibench.runtime.agents.prompt_reader import shown_tools
from tests.unit.sample_tasks import SALES

REGISTRY = default_registry()

FORECAST = Task(
    id="t9002", type="simple_task", difficulty="hard",
    description="Our ops lead wants next quarter's outlook in her inbox.",
    inputs={"format": "json", "url": "https://api.example.com/metrics", "horizon": 90,
            "recipient": "lead@example.com"},
    expected_outputs={"notification": "forecast delivered"},
    required_tools=("network_fetcher", "computation_predictor", "utility_notifier"),
    step_arguments={
        "network_fetcher": {"url": "https://api.example.com/metrics"},
        "computation_predictor": {"horizon": 90},
        "utility_notifier": {"recipient": "lead@example.com"},
    },
)
TASKS = (SALES, FORECAST)
EVERY_VARIANT = [*all_variants()[:3],
                 *(Variant("flawed", f, s) for f in FLAWS for s in SEVERITIES)]


def user_text(task: Task, variant: Variant, **kw: Any) -> str:
    return str(render_prompt(task, variant, **kw).messages[1]["content"])


# --- variants ---------------------------------------------------------------------------------
def test_ten_variants_with_their_labels() -> None:
    labels = [v.label for v in all_variants()]
    assert labels == ["baseline", "cot", "optimal", *(f"flawed-{f}" for f in FLAWS)]
    assert {v.severity for v in all_variants("severe")[3:]} == {"severe"}
    assert Variant("flawed", "missing_step").severity == "medium"
    assert Variant.from_label("flawed-semantic_drift", severity="light") == Variant(
        "flawed", "semantic_drift", "light")
    assert Variant.from_label("cot") == Variant("cot")


@pytest.mark.parametrize(("args", "message"), [
    (("greedy",), "unknown variant 'greedy'"),
    (("flawed",), "needs a flaw"),
    (("flawed", "typo"), "needs a flaw"),
    (("flawed", "missing_step", "extreme"), "unknown severity"),
    (("optimal", "missing_step"), "takes no flaw"),
])
def test_bad_variants_are_clear_errors(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Variant(*args)


def test_bad_labels_and_tool_modes_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown variant label"):
        Variant.from_label("optimal-extra")
    with pytest.raises(ValueError, match="unknown tool mode 'xml'"):
        render_prompt(SALES, Variant("baseline"), tool_mode="xml")


# --- messages ---------------------------------------------------------------------------------
def test_text_mode_lists_every_tool_with_its_schema_and_the_rules() -> None:
    prompt = render_prompt(SALES, Variant("baseline"))
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert prompt.tools is None and prompt.plan is None and prompt.flaw_record is None
    system = prompt.messages[0]["content"]
    for spec in REGISTRY:
        schema = json.dumps(spec.to_openai()["function"]["parameters"], sort_keys=True)
        assert f"- {spec.name}: {spec.description} Parameters: {schema}" in system
    assert '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>' in system
    assert COMPLETION_SIGNAL in system and "one tool call per turn" in system
    assert "retry" in system


def test_native_mode_passes_every_tool_as_openai_tools() -> None:
    prompt = render_prompt(SALES, Variant("optimal"), tool_mode="native")
    assert prompt.tools == REGISTRY.to_openai() and len(prompt.tools) == 30
    system = prompt.messages[0]["content"]
    assert "<tool_call>" not in system and "file_operations_reader" not in system
    assert COMPLETION_SIGNAL in system and "function-calling" in system
    assert user_text(SALES, Variant("optimal"), tool_mode="native") == user_text(
        SALES, Variant("optimal"))


@pytest.mark.parametrize("tool_mode", ["text", "native"])
def test_the_data_flow_rule_is_told_where_the_agent_reads_it(tool_mode: str) -> None:
    """Issue 50: a task of a set with the explicit data flow is told, in the rules and in
    the `source` and `format` parameters themselves, what an omitted one reads; a task of
    the inferred flow (and any task under the realistic profile) sees what it always saw."""
    explicit = dataclasses.replace(SALES, data_flow="explicit")
    seen = {}
    for task, faults in ((SALES, "paper"), (explicit, "paper"), (explicit, "realistic")):
        prompt = render_prompt(task, Variant("optimal"), tool_mode=tool_mode, faults=faults)
        system = prompt.messages[0]["content"]
        tools = shown_tools(system, prompt.tools).tools  # what an agent reads
        assert len(tools) == len(REGISTRY)
        source = {t.properties["source"]["description"] for t in tools if t.takes_data}
        fmt = {t.properties["format"]["description"] for t in tools if "format" in t.properties}
        seen[task.data_flow, faults] = (system, source, fmt)
    system, source, fmt = seen["explicit", "paper"]
    assert source == {EXPLICIT_FLOW["source"]} and fmt == {EXPLICIT_FLOW["format"]}
    assert "latest output of any tool" in system and "as json" in system
    assert seen["inferred", "paper"] == seen["explicit", "realistic"]
    system, source, fmt = seen["inferred", "paper"]
    assert "latest output of any tool" not in system and EXPLICIT_FLOW["source"] not in source
    assert system == render_prompt(SALES, Variant("baseline"), tool_mode=tool_mode
                                   ).messages[0]["content"]


@pytest.mark.parametrize("tool_mode", ["text", "native"])
def test_the_system_message_is_the_same_for_every_variant(tool_mode: str) -> None:
    systems = {render_prompt(t, v, tool_mode=tool_mode).messages[0]["content"]
               for t in TASKS for v in EVERY_VARIANT}
    assert len(systems) == 1


def test_the_user_message_holds_the_task() -> None:
    text = user_text(SALES, Variant("baseline"))
    assert text.startswith(f"Task: {SALES.description}\n")
    assert parse_task_inputs(text) == SALES.inputs
    assert 'Expected outputs: {"report": "posted"}' in text
    assert "- Post the report only once." in text
    assert parse_plan(text) is None


def test_cot_adds_only_a_step_by_step_instruction() -> None:
    baseline, cot = user_text(SALES, Variant("baseline")), user_text(SALES, Variant("cot"))
    assert cot.startswith(baseline) and "step by step" in cot[len(baseline):]
    assert "step by step" not in baseline and parse_plan(cot) is None


def test_optimal_shows_the_reference_plan_step_by_step() -> None:
    prompt = render_prompt(SALES, Variant("optimal"))
    text = prompt.messages[1]["content"]
    assert prompt.plan is not None and prompt.plan.tools == SALES.required_tools
    assert parse_plan(text) == prompt.plan
    assert ('\n2. data_processing_parser — parse raw text or structured data into records with '
            'typed fields, extracting structure — arguments: {"format": "csv", "source": '
            '"file_operations_reader"} — if it fails: '
            'retry\n') in text


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_a_follower_of_the_optimal_plan_meets_only_random_failures(task: Task) -> None:
    plan = parse_plan(user_text(task, Variant("optimal")))
    assert plan is not None
    sim = Simulator(REGISTRY, EpisodeKey(3, task.id), task_tools=task.required_tools,
                    inputs=parse_task_inputs(user_text(task, Variant("optimal"))))
    for step in plan.steps:
        for _ in range(12):
            result = sim.call(step.tool, dict(step.arguments))
            assert not result.deterministic, result.message
            if result.ok:
                break
    assert all(sim.succeeded(t) for t in task.required_tools)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
@pytest.mark.parametrize("variant", EVERY_VARIANT[3:], ids=lambda v: f"{v.flaw}-{v.severity}")
def test_every_flawed_prompt_shows_its_flaw_without_naming_it(
    task: Task, variant: Variant
) -> None:
    optimal = render_prompt(task, Variant("optimal"))
    flawed = render_prompt(task, variant)
    text = flawed.messages[1]["content"]
    assert text != optimal.messages[1]["content"]
    assert parse_plan(text) == flawed.plan != optimal.plan
    assert flawed.flaw_record is not None and flawed.flaw_record["flaw"] == variant.flaw
    for message in flawed.messages:
        lowered = message["content"].lower()
        assert "flaw" not in lowered
        assert not [f for f in FLAWS if f in lowered or f.replace("_", " ") in lowered]


def test_rendering_is_deterministic() -> None:
    for variant in EVERY_VARIANT:
        assert render_prompt(SALES, variant) == render_prompt(SALES, variant)


# --- the inverses -----------------------------------------------------------------------------
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # not encodable: no text holds them
LINE = st.text(st.characters(blacklist_categories=_SURROGATES), max_size=30).map(
    lambda s: " ".join(s.split())).filter(lambda s: " — " not in s)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8,
)
STEPS = st.builds(PlanStep, tool=st.sampled_from(REGISTRY.names), purpose=LINE,
                  arguments=st.dictionaries(st.text(max_size=10), JSON, max_size=4),
                  on_failure=LINE)
WORKFLOWS = st.builds(Workflow, steps=st.lists(STEPS, max_size=7).map(tuple), advice=LINE)


@settings(max_examples=200, deadline=None)
@given(WORKFLOWS)
def test_parse_plan_inverts_render_plan(workflow: Workflow) -> None:
    assert parse_plan(render_plan(workflow)) == workflow
    assert parse_plan(f"Task: x\nInputs: {{}}\n\n{render_plan(workflow)}\n\nThink.") == workflow


def test_each_parse_has_arguments_of_its_own() -> None:
    step = PlanStep("file_operations_reader", "read", {"path": "/data/a.csv"}, "retry once")
    text = render_plan(Workflow((step,)))
    first, second = parse_plan(text), parse_plan(text)
    assert first is not None and second is not None
    first.steps[0].arguments["path"] = "/elsewhere"  # type: ignore[index]
    third = parse_plan(text)
    assert third is not None
    assert second.steps[0].arguments == third.steps[0].arguments == {"path": "/data/a.csv"}


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=10), JSON, max_size=6))
def test_parse_task_inputs_inverts_the_inputs_line(inputs: dict[str, Any]) -> None:
    task = Task(**{**SALES.__dict__, "inputs": inputs})
    assert parse_task_inputs(user_text(task, Variant("optimal"))) == inputs


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_the_parsers_never_raise_on_garbage(text: str) -> None:
    plan = parse_plan(text)
    assert plan is None or isinstance(plan, Workflow)
    assert isinstance(parse_task_inputs(text), dict)
    broken = "Execution plan:\n1. tool — p — arguments: {oops} — if it fails: retry\n" + text
    assert parse_plan(broken) == Workflow(())
    assert parse_task_inputs("Inputs: [1, 2]") == {} == parse_task_inputs("Inputs: {")


# --- every generated task ---------------------------------------------------------------------
def _fixture_tasks() -> list[Task]:
    try:
        return list(load_tasks())
    except FileNotFoundError as exc:
        pytest.skip(f"task fixtures absent ({exc})")


def test_every_task_and_flaw_gives_a_prompt_that_differs_from_the_optimal_one() -> None:
    """The precursor showed parameter_error and logical_inconsistency plans identical to the
    optimal plan. Compare plan blocks (the rest of the prompt is shared by construction)."""
    tasks = _fixture_tasks()
    same = []
    for task in tasks:
        optimal_plan, _ = plan_for(task, Variant("optimal"), REGISTRY)
        assert optimal_plan is not None
        optimal = render_plan(optimal_plan)
        for flaw in FLAWS:
            flawed_plan, _ = plan_for(task, Variant("flawed", flaw), REGISTRY)
            assert flawed_plan is not None
            if render_plan(flawed_plan) == optimal:
                same.append((task.id, flaw))
    assert len(tasks) == 5040
    assert same == []


def test_generated_prompts_round_trip_and_never_name_a_flaw() -> None:
    tasks = _fixture_tasks()[::97]
    pattern = re.compile("|".join(["flaw", *FLAWS, *(f.replace("_", " ") for f in FLAWS)]))
    for task in tasks:
        for variant in all_variants():
            prompt = render_prompt(task, variant)
            text = prompt.messages[1]["content"]
            assert parse_plan(text) == prompt.plan
            assert parse_task_inputs(text) == task.shown_inputs
            assert not pattern.search(text.lower())


# --- the `resilibench prompt` command -----------------------------------------------------------
def test_the_prompt_command_prints_the_messages(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_resilibench.cli import main

    task = _fixture_tasks()[421]
    assert main(["prompt", task.id, "--variant", "flawed", "--flaw", "missing_step",
                 "--severity", "severe"]) == 0
    out = capsys.readouterr().out
    flawed = render_prompt(task, Variant("flawed", "missing_step", "severe"))
    assert out == "".join(f"--- {m['role']} ---\n{m['content']}\n\n" for m in flawed.messages)

    assert main(["prompt", task.id, "--variant", "cot", "--tool-mode", "native", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    native = render_prompt(task, Variant("cot"), tool_mode="native")
    assert shown == {"messages": native.messages, "tools": native.tools, "plan": None,
                     "flaw_record": None}


def test_the_prompt_command_shows_what_a_run_with_those_options_shows(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--faults, --max-turns and --task-set mean what --resili-faults, --resili-max-turns
    and --resili-task-set mean in a run."""
    from pytest_resilibench.cli import main
    from pytest_resilibench.core.tasks import load_tasks, task_set_dir

    task = _fixture_tasks()[7]
    paper_task = load_tasks(task_set_dir("paper")).by_id[task.id]
    cases = [
        (["--faults", "realistic"], render_prompt(task, Variant("optimal"), faults="realistic")),
        (["--max-turns", "6"], render_prompt(task, Variant("optimal"), max_turns=6)),
        (["--task-set", "paper"], render_prompt(paper_task, Variant("optimal"))),
    ]
    for argv, expected in cases:
        assert main(["prompt", task.id, "--json", *argv]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["messages"] == expected.messages, argv
    assert "6 turns" in render_prompt(task, Variant("optimal"), max_turns=6).messages[1][
        "content"]
    with pytest.raises(SystemExit) as exited:  # argparse's one-line usage error
        main(["prompt", task.id, "--max-turns", "0"])
    assert exited.value.code == 2
    assert "--max-turns: 0 is not at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--variant", "flawed"], "needs a flaw"),
    (["--flaw", "missing_step"], "takes no flaw"),
    (["--variant", "flawed", "--flaw", "typo"], "needs a flaw"),
])
def test_the_prompt_command_rejects_bad_options_clearly(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_resilibench.cli import main

    task = _fixture_tasks()[0]
    assert main(["prompt", task.id, *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_prompt_command_names_an_unknown_task(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_resilibench.cli import main

    _fixture_tasks()
    assert main(["prompt", "t99999"]) == 2
    assert "no task 't99999'" in capsys.readouterr().err


def test_the_plan_shown_is_what_an_agent_reads_back() -> None:
    solved = Workflow(
        (PlanStep("file_operations_reader", "load the\nsales file", {"path": "data/sales_2025.csv"},
                  on_failure="retry up to 3 times;\n  then stop"),
         *shown_plan(SALES.reference_workflow(), SALES.required_tools, REGISTRY).steps[1:]),
        advice="Retry  TIMEOUTs.\nNever skip the parser.",
    )
    task = Task(**{**SALES.__dict__, "optimal": solved})
    for variant in EVERY_VARIANT[2:]:
        prompt = render_prompt(task, variant)
        assert parse_plan(prompt.messages[1]["content"]) == prompt.plan
    shown = render_prompt(task, Variant("optimal")).plan
    assert shown is not None and shown.steps[0].on_failure == "retry up to 3 times; then stop"
    # Purposes and the Advice are computed from the plan as shown (plan_text.py), whatever
    # the stored plan says: no step reads unlike the others.
    assert shown.steps[0].purpose.startswith("read the contents of a file")
    assert shown.advice == ""


# A generated task's constraints name the paper's budget (solver/generate.py).
BUDGETED = dataclasses.replace(FORECAST, id="t9003",
                               constraints=("finish within 10 turns", "Send it only once."))


def test_the_prompt_states_the_episode_s_turn_budget() -> None:
    """A run under another budget (`--resili-max-turns`) tells the model that budget; at the
    default one the prompt is the same text as without it (prompts are cached and hashed)."""
    default = render_prompt(BUDGETED, Variant("optimal"))
    assert render_prompt(BUDGETED, Variant("optimal"), max_turns=10) == default
    user = default.messages[1]["content"]
    assert "- finish within 10 turns\n" in user
    four = render_prompt(BUDGETED, Variant("optimal"), max_turns=4).messages[1]["content"]
    assert "10 turns" not in four
    assert four == user.replace("finish within 10 turns", "finish within 4 turns")
    one = user_text(BUDGETED, Variant("cot"), max_turns=1)
    assert "- finish within 1 turn\n" in one and "10 turns" not in one


def test_a_task_whose_constraints_name_no_budget_is_told_one_that_is_not_the_default() -> None:
    assert "turns" not in user_text(FORECAST, Variant("baseline"))  # as before
    assert user_text(FORECAST, Variant("baseline"), max_turns=6).endswith(
        "\nConstraints:\n- finish within 6 turns")


def test_the_realistic_profile_states_its_own_budget_whatever_max_turns_says() -> None:
    from pytest_resilibench.core.faults import task_faults

    budget = task_faults(BUDGETED, REGISTRY).max_turns
    for max_turns in (10, 4):
        text = user_text(BUDGETED, Variant("baseline"), faults="realistic", max_turns=max_turns)
        assert f"- finish within {budget} turns\n" in text
