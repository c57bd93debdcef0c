"""Scoring that sees what a judge sees (issue 50; docs/BENCHMARK.md: Scoring, Excess runs): the
deliverable's format, side effects the task never asked for, and steps run more often than
the task allows. Unit tests on hand-made calls, then replays of the two episodes the issue
read closely, through the real episode loop on real tasks."""

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.scoring import (
    NO_RERUNS,
    Conditions,
    deliverable_of,
    excess_runs,
    outcome,
    score_calls,
)
from pytest_resilibench.core.tasks import Task, load_tasks, task_set_dir
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest, read_observation

F, V, W = "network_fetcher", "data_processing_validator", "file_operations_writer"
POSTER, COMPRESSOR = "network_poster", "file_operations_compressor"
URL, DEST = "https://api.example.com/v1/orders", "/reports/orders.csv"
REQUIRED = (F, V, W)


def task(*constraints: str) -> Task:
    return Task(id="t1", type="simple_task", difficulty="easy", description="",
                inputs={"url": URL, "format": "csv", "destination": DEST},
                expected_outputs={"deliverable": DEST, "format": "csv", "kind": "file"},
                required_tools=REQUIRED, constraints=constraints,
                step_arguments={F: {"url": URL}, V: {}, W: {"destination": DEST}})


DELIVERABLE = deliverable_of(task(), default_registry())
STRICT = deliverable_of(task(NO_RERUNS), default_registry())


def made(*steps: tuple[str, bool] | tuple[str, bool, dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls as the simulator records them: each success's output names its input (the
    latest output: a straight chain) and its format (csv, binary after the compressor)."""
    out: list[dict[str, Any]] = []
    latest: str | None = None
    fmt = "csv"
    for i, (tool, ok, *extra) in enumerate(steps):
        call: dict[str, Any] = {"tool": tool, "ok": ok, "arguments": {},
                                **(extra[0] if extra else {})}
        if ok:
            fmt = "binary" if tool == COMPRESSOR else fmt
            call["output"] = {"ref": f"{tool}#{i}", "format": fmt,
                              "inputs": [latest] if latest else []}
            latest = call["output"]["ref"]
        out.append(call)
    return out


CLEAN = made((F, True), (V, True), (W, True))


def score(calls: Sequence[dict[str, Any]], deliverable: Any = DELIVERABLE) -> Any:
    return score_calls(calls, REQUIRED, completed=True, deliverable=deliverable)


def test_the_clean_episode_is_full() -> None:
    assert score(CLEAN).outcome == "full" and score(CLEAN, STRICT).outcome == "full"
    assert (score(CLEAN).excess_runs, score(CLEAN).penalties) == (0, ())


# --- the format ------------------------------------------------------------------------------
def test_the_deliverable_in_another_format_is_not_the_deliverable() -> None:
    """A binary archive written to the task's csv destination is not its csv file: the
    output condition fails though every step ran in order with the task's values."""
    archived = made((F, True), (V, True), (COMPRESSOR, True), (W, True))
    assert archived[-1]["output"]["format"] == "binary"
    result = score(archived)
    assert result.conditions.coverage and result.conditions.order
    assert not result.conditions.output and result.outcome == "partial"
    # Where the task states no format, the format is not judged (the lineage still is).
    loose = deliverable_of(dataclasses.replace(task(), expected_outputs={}),
                           default_registry())
    assert loose.format is None and score(archived, loose).outcome == "full"


# --- side effects ----------------------------------------------------------------------------
def test_a_side_effect_the_task_did_not_ask_fails_the_output() -> None:
    """The fetched data POSTed where the task named no destination: the deliverable was made,
    but the job also did something nobody asked for. Any tool that acts outside the data
    counts (a file, a post, a notification, a route, a schedule, an enqueue); a failed call
    did nothing."""
    posted = [*CLEAN[:1], *made((POSTER, True, {"arguments": {"target_url": URL}})), *CLEAN[1:]]
    result = score(posted)
    assert result.conditions.coverage and result.conditions.order
    assert not result.conditions.output and result.outcome == "partial"
    for tool in ("utility_notifier", "integration_queue", "integration_scheduler",
                 "network_router"):
        assert score([*CLEAN, *made((tool, True))]).outcome == "partial", tool
    assert score([*CLEAN[:1], *made((POSTER, False)), *CLEAN[1:]]).outcome == "full"
    # A tool that acts on nothing outside the data (a parser) is no side effect, however
    # needless.
    assert score([*CLEAN, *made(("data_processing_parser", True))]).outcome == "full"


def test_an_asked_step_done_with_another_target_is_a_side_effect() -> None:
    """A step's tool with another destination than the task's (`deviations`) wrote a file the
    task never named, even if the right file was written too."""
    elsewhere = made((W, True, {"deviations": ["destination"]}))
    result = score([*CLEAN[:2], *elsewhere, CLEAN[2]])
    assert result.conditions.coverage and not result.conditions.output
    # A step that does not act outside the data, done with another option, is another step
    # (issue 34), not a side effect: redone right, the episode is full.
    other = made((V, True, {"deviations": ["schema"]}))
    assert score([CLEAN[0], *other, *CLEAN[1:]]).outcome == "full"


# --- excess runs -----------------------------------------------------------------------------
def test_a_step_rerun_after_it_succeeded_is_an_excess_run() -> None:
    rerun = made((F, True), (V, True), (F, True), (V, True), (F, True), (W, True))
    assert excess_runs(rerun, REQUIRED, STRICT) == 3
    # A retry after a failure is no rerun; a rerun counts by its success.
    assert excess_runs(made((F, False), (F, True), (V, False), (V, True), (W, True)),
                       REQUIRED, STRICT) == 0
    assert excess_runs(made((F, True), (F, False), (V, True), (W, True)),
                       REQUIRED, STRICT) == 0
    assert excess_runs(made((F, True), (F, False), (F, True), (V, True), (W, True)),
                       REQUIRED, STRICT) == 1
    # Another option (a call with deviations) did another step, not this one again.
    assert excess_runs(made((F, True), (V, True), (V, True, {"deviations": ["schema"]}),
                            (W, True)), REQUIRED, STRICT) == 0


def test_redoing_an_unsound_run_is_no_excess_run() -> None:
    """A step whose earlier success was silently empty or built on empty data (realistic
    profile), or whose data did not come through the steps before it (run too early), is
    redone as a repair."""
    silent = made((F, True, {"event": "silent"}), (V, True, {"event": "tainted"}), (F, True),
                  (V, True), (W, True))
    assert excess_runs(silent, REQUIRED, STRICT) == 0
    early = made((V, True), (F, True), (V, True), (W, True))  # the first validation read nothing
    assert early[0]["output"]["inputs"] == []
    assert excess_runs(early, REQUIRED, STRICT) == 0
    assert excess_runs([*early, *made((V, True))], REQUIRED, STRICT) == 1


def test_a_step_asked_twice_runs_twice_without_excess() -> None:
    n = "utility_notifier"
    twice = (F, n, V, n, W)
    strict = deliverable_of(dataclasses.replace(
        task(NO_RERUNS), required_tools=twice, inputs={**task().inputs, "recipient": "#ops"}),
        default_registry())
    steps = made((F, True), (n, True), (V, True), (n, True), (W, True))
    assert excess_runs(steps, twice, strict) == 0
    assert excess_runs([*steps[:4], *made((V, True)), steps[4]], twice, strict) == 1


def test_an_excess_run_costs_a_level_where_the_task_says_so() -> None:
    """Full becomes partial, partial becomes failed, where the task's constraints say "do not
    run a step more often than needed"; elsewhere the count is kept and costs nothing."""
    rerun = made((F, True), (V, True), (V, True), (W, True))
    strict = score(rerun, STRICT)
    assert (strict.outcome, strict.excess_runs, strict.penalties) == (
        "partial", 1, ("excess_runs",))
    assert strict.conditions.count == 4  # the conditions hold; the penalty is apart
    lenient = score(rerun)
    assert (lenient.outcome, lenient.excess_runs, lenient.penalties) == ("full", 1, ())
    unfinished = score_calls(rerun, REQUIRED, completed=False, deliverable=STRICT)
    assert unfinished.outcome == "failed"
    assert score_calls(rerun, REQUIRED, completed=False, deliverable=DELIVERABLE
                       ).outcome == "partial"


@pytest.mark.parametrize(("conds", "levels"), [
    (Conditions(True, True, True, True), ("full", "partial", "failed", "failed")),
    (Conditions(True, True, False, True), ("partial", "failed", "failed", "failed")),
    (Conditions(True, False, False, True), ("failed", "failed", "failed", "failed")),
])
def test_each_penalty_costs_one_level(conds: Conditions, levels: tuple[str, ...]) -> None:
    assert tuple(outcome(conds, n) for n in range(4)) == levels


# --- the two episodes, replayed through the episode loop -------------------------------------
class Replay:
    """A scripted loop agent: each action is (tool, arguments); it retries an action after a
    failure and moves on after a success (it reads the observations), then says done."""

    name = "replay"

    def __init__(self, actions: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.actions = list(actions)
        self.at = 0
        self.sent = False

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self.sent:
            seen = read_observation(request.messages[-1])
            if seen is not None and seen.get("status") == "success":
                self.at += 1
        if self.at >= len(self.actions):
            return ModelReply(content="TASK_COMPLETED")
        self.sent = True
        tool, arguments = self.actions[self.at]
        return ModelReply(content=f"<tool_call>{json.dumps({'name': tool, 'arguments': arguments})}"
                                  "</tool_call>")

    async def aclose(self) -> None:
        return None


PAPER = load_tasks(task_set_dir("paper")).by_id
SEMANTIC_DRIFT = Variant("flawed", "semantic_drift")


def play(task: Task, actions: Sequence[tuple[str, dict[str, Any]]], seed: int) -> Any:
    return asyncio.run(run_episode(task, SEMANTIC_DRIFT, Replay(actions), seed=seed,
                                   max_turns=40))


def steps(task: Task) -> list[tuple[str, dict[str, Any]]]:
    return [(t, dict(task.step_arguments.get(t, {}))) for t in task.required_tools]


def clean_seed(task: Task) -> int:
    """A seed whose clean replay is full (every step retried until it succeeds)."""
    for seed in range(50):
        if play(task, steps(task), seed).outcome == "full":
            return seed
    raise AssertionError("no clean full episode")


def test_replay_a_post_to_the_source_url_then_reruns() -> None:
    """Issue 50's semantic_drift episode: after network_fetcher the model POSTed the fetched
    data to the source URL (a destination the task never names), then re-ran one step 4 times
    and another 3 times. Scored full before; the post fails the output condition, the reruns
    cost a level (the task says "do not run a step more often than needed")."""
    task = PAPER["t0084"]  # fetch weather observations, validate, write a csv: frozen set
    assert task.required_tools == REQUIRED and NO_RERUNS in task.constraints
    assert POSTER not in task.required_tools
    seed = clean_seed(task)
    fetch, validate, write = steps(task)
    post = (POSTER, {"target_url": task.inputs["url"], "source": F})
    posted = play(task, [fetch, post, validate, write], seed)
    assert any(c["tool"] == POSTER and c["ok"] for c in posted.calls)
    assert (posted.outcome, posted.conditions["output"], posted.penalties) == (
        "partial", False, None)
    reruns = [fetch, validate, fetch, validate, fetch, validate, fetch, write]
    rerun = play(task, reruns, seed)
    assert (rerun.outcome, rerun.conditions["output"], rerun.penalties) == (
        "partial", True, {"excess_runs": 5})
    both = play(task, [fetch, post, *reruns[1:]], seed)
    assert both.outcome == "failed" and both.penalties == {"excess_runs": 5}
    assert both.to_json()["penalties"] == {"excess_runs": 5}
    assert "penalties" not in play(task, steps(task), seed).to_json()


def test_replay_a_binary_archive_written_to_the_csv_destination() -> None:
    """Issue 50's paper-set episode: the data compressed, then written with format binary to
    the task's .csv destination. Scored met before; the deliverable is not the csv asked."""
    task = PAPER["t0084"]
    assert task.expected_outputs["format"] == "csv"
    assert str(task.inputs["destination"]).endswith(".csv")
    seed = clean_seed(task)
    fetch, validate, (_, write) = steps(task)
    archive = play(task, [fetch, validate, (COMPRESSOR, {"source": V}),
                          (W, {**write, "format": "binary", "source": COMPRESSOR})], seed)
    written = [c for c in archive.calls if c["tool"] == W and c["ok"]]
    assert written and written[-1]["output"]["format"] == "binary"
    assert not written[-1].get("deviations")  # the simulator accepts it: only scoring judges
    assert archive.conditions["coverage"] and archive.conditions["order"]
    assert (archive.outcome, archive.conditions["output"]) == ("partial", False)
