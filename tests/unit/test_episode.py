import asyncio
import dataclasses
import inspect
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.episode import (
    MAX_CONSECUTIVE_ERRORS,
    REPEAT_LIMIT,
    EpisodeSlots,
    EpisodeSpec,
    TurnKeeper,
    run_episode,
    run_episodes,
)
from pytest_resilibench.runtime.protocol import (
    InfrastructureError,
    ModelLimitError,
    ModelReply,
    ModelRequest,
    ToolCall,
    read_observation,
)

READER, WRITER = "file_operations_reader", "file_operations_writer"
TASK = Task(
    id="t9000", type="simple_task", difficulty="easy",
    description="Read the csv file /data/in.csv and write the result to /out/result.csv.",
    inputs={"format": "csv", "path": "/data/in.csv", "destination": "/out/result.csv"},
    expected_outputs={"deliverable": "/out/result.csv"},
    required_tools=(READER, WRITER),
    step_arguments={READER: {"path": "/data/in.csv"}, WRITER: {"destination": "/out/result.csv"}},
)
OPTIMAL = Variant("optimal")


def call(tool: str, **arguments: Any) -> str:
    return f'<tool_call>{json.dumps({"name": tool, "arguments": arguments})}</tool_call>'


READ = call(READER, path="/data/in.csv")
WRITE = call(WRITER, destination="/out/result.csv")


class Scripted:
    """Replies from a script (the last entry repeats); remembers the requests."""

    def __init__(self, replies: Sequence[str | ModelReply | Exception], name: str = "scripted"):
        self.name = name
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, ModelReply):
            return reply
        return ModelReply(content=reply, usage={"prompt_tokens": 10, "completion_tokens": 2})

    async def aclose(self) -> None:
        return None


class Retrying(Scripted):
    """Calls each required tool until it succeeds, then completes (reads observations)."""

    def __init__(self) -> None:
        super().__init__([], name="retrying")

    async def complete(self, request: ModelRequest) -> ModelReply:
        done = {o["tool"] for m in request.messages
                if (o := read_observation(m)) and o["status"] == "success"}
        for tool, text in ((READER, READ), (WRITER, WRITE)):
            if tool not in done:
                return ModelReply(content=text)
        return ModelReply(content="TASK_COMPLETED")


def run(agent: Any, **options: Any) -> Any:
    options.setdefault("seed", 1)
    return asyncio.run(run_episode(TASK, options.pop("variant", OPTIMAL), agent, **options))


def lucky_seed() -> int:
    """A seed under which the two straight calls both succeed."""
    for seed in range(100):
        rec = run(Scripted([READ, WRITE, "TASK_COMPLETED"]), seed=seed)
        if rec.outcome == "full":
            return seed
    raise AssertionError("no lucky seed")


def test_full_episode_text_mode() -> None:
    agent = Scripted([READ, WRITE, "All done. TASK_COMPLETED"])
    rec = run(agent, seed=lucky_seed())
    assert rec.outcome == "full" and rec.stop_reason == "completed"
    assert (rec.turns, rec.tool_calls, rec.errors_met) == (2, 2, 0)
    assert rec.tokens == {"prompt": 30, "completion": 6, "total": 36, "reasoning": 0, "cached": 0,
                          "replayed": 0}
    assert rec.sim_time_s > 0  # simulated clock; wall time belongs to bench/
    assert rec.deviation is not None and rec.deviation["not_followed"] == []
    # observations are user messages with the result and progress, nothing hidden
    obs = rec.messages[3]
    assert obs["role"] == "user" and obs["content"].startswith("<tool_response>")
    payload = read_observation(obs)
    assert payload is not None and payload["status"] == "success"
    assert payload["progress"] == {"turn": 1, "turns_left": 9, "calls": 1, "succeeded": 1,
                                   "failed": 0}
    assert "success_probability" not in obs["content"]
    assert "file_operations_writer" not in obs["content"]  # what is left is the model's job
    # an agent outside this package gets no task facts; the messages grow turn by turn
    assert all(not r.context for r in agent.requests)
    assert [len(r.messages) for r in agent.requests] == [2, 4, 6]


def test_native_mode_answers_every_call_id() -> None:
    seed = lucky_seed()
    replies = [
        ModelReply(content=None, tool_calls=(
            ToolCall("a1", READER, json.dumps({"path": "/data/in.csv"})),
            ToolCall("a2", WRITER, "{}"))),
        ModelReply(content=None, tool_calls=(
            ToolCall("b1", WRITER, json.dumps({"destination": "/out/result.csv"})),)),
        ModelReply(content="TASK_COMPLETED"),
    ]
    agent = Scripted(replies)
    rec = run(agent, seed=seed, tool_mode="native")
    assert rec.outcome == "full"
    assert agent.requests[0].tools is not None
    tool_messages = [m for m in rec.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["a1", "a2", "b1"]
    first = json.loads(tool_messages[0]["content"])
    assert "One tool call per turn" in first["note"]
    assert json.loads(tool_messages[1]["content"])["error_code"] == "NOT_EXECUTED"
    assert rec.messages[2]["tool_calls"][0]["function"]["name"] == READER


def test_several_calls_in_text_execute_the_first() -> None:
    rec = run(Scripted([READ + WRITE, "TASK_COMPLETED"]), seed=lucky_seed())
    assert [c["tool"] for c in rec.calls] == [READER]
    assert "only the first" in rec.messages[3]["content"]


def test_signal_beside_a_call_is_not_taken() -> None:
    rec = run(Scripted([READ + " TASK_COMPLETED", "TASK_COMPLETED"]), seed=lucky_seed())
    assert rec.turns == 1 and rec.stop_reason == "completed"
    assert "only accepted in a reply without a tool call" in rec.messages[3]["content"]


def test_format_errors_are_answered_and_counted() -> None:
    agent = Scripted(["", "<tool_call>{oops</tool_call>", "x" * 40_000, READ, WRITE,
                      "TASK_COMPLETED"])
    rec = run(agent, seed=lucky_seed(), max_turns=10)
    assert rec.protocol_errors == 3 and rec.errors_met >= 3
    assert rec.turns == 5
    errors = [read_observation(m) for m in rec.messages[3:8:2]]
    assert [e["error_code"] for e in errors if e] == ["FORMAT_ERROR"] * 3
    assert "malformed JSON" in str(errors[1])


def test_unknown_tool_and_missing_arguments_go_to_the_environment() -> None:
    rec = run(Scripted([call("no_such_tool"), call(READER), READ, WRITE, "TASK_COMPLETED"]),
              seed=lucky_seed())
    codes = [c["error_code"] for c in rec.calls[:2]]
    assert codes == ["UNKNOWN_TOOL", "INVALID_INPUT"]
    assert rec.errors_met == 2


def test_max_turns_then_one_reply_for_the_signal() -> None:
    agent = Scripted([READ, call(READER, path="/data/in.csv", encoding="ascii"),
                      call(READER, path="/data/in.csv", encoding="latin-1"), WRITE])
    rec = run(agent, max_turns=3)
    assert rec.turns == 3 and rec.stop_reason == "max_turns"
    assert len(agent.requests) == 4  # the fourth reply is read for the signal only
    assert rec.tool_calls == 3 and WRITER not in [c["tool"] for c in rec.calls]
    assert "no turns left" in rec.messages[-2]["content"]


def test_completion_after_the_budget_costs_no_turn() -> None:
    rec = run(Scripted([READ, WRITE, "TASK_COMPLETED"]), seed=lucky_seed(), max_turns=2)
    assert rec.outcome == "full" and rec.turns == 2
    # Every turn was spent: the budget ended the episode, though the signal is credited.
    assert rec.stop_reason == "max_turns" and rec.conditions["completion"]


def test_completion_with_turns_left_reads_completed() -> None:
    rec = run(Scripted([READ, WRITE, "TASK_COMPLETED"]), seed=lucky_seed(), max_turns=3)
    assert (rec.outcome, rec.turns, rec.stop_reason) == ("full", 2, "completed")


def test_repeated_identical_calls_stop() -> None:
    seed = lucky_seed()
    rec = run(Scripted([READ]), seed=seed)  # the first read succeeds; repeating it is a loop
    assert rec.stop_reason == "repeated_call" and rec.tool_calls == REPEAT_LIMIT


def test_retries_after_random_failures_are_never_stopped() -> None:
    for seed in range(40):
        rec = run(Retrying(), seed=seed, max_turns=10, base_success=0.3)
        assert rec.stop_reason in ("completed", "max_turns"), rec.stop_reason


def test_consecutive_errors_stop() -> None:
    replies = [call("tool_a"), call("tool_b"), "nothing", call("tool_c"), call("tool_d")]
    rec = run(Scripted(replies))
    assert rec.stop_reason == "consecutive_errors" and rec.turns == MAX_CONSECUTIVE_ERRORS


def test_infrastructure_error_is_not_the_agents_failure() -> None:
    rec = run(Scripted([READ, InfrastructureError("429 after 6 retries")]))
    assert rec.outcome == "error" and rec.stop_reason == "infra_error"
    assert rec.infra_error == "429 after 6 retries"
    assert rec.tool_calls == 1  # the trajectory so far is kept


def test_harness_bug_becomes_error_with_a_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: TurnKeeper, reply: ModelReply) -> None:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(TurnKeeper, "receive", broken)  # a bug in our books, not the agent's
    rec = run(Scripted([READ]))
    assert rec.outcome == "error" and rec.stop_reason == "harness_error"
    assert rec.infra_error is not None and "ZeroDivisionError: boom" in rec.infra_error
    assert rec.agent_error is None


class Crashing(Scripted):
    """A user's turn-level agent whose own code raises on its second turn, inside a library
    call (json), with a key in its message."""

    def __init__(self) -> None:
        super().__init__([READ], name="crashing")
        self.line = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        if request.messages[-1]["role"] == "user" and len(request.messages) > 2:
            self.line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            json.loads("{sk-abcdefghijklmnop0123")
        return await super().complete(request)


def test_an_exception_of_the_agents_own_code_is_an_agent_error_at_its_line() -> None:
    """Not a harness bug: the agent's failure, with the agent's last frame (not json's) and
    the message redacted; a failed episode (in the rates), never an error kept out of them."""
    agent = Crashing()
    rec = run(agent)
    assert (rec.outcome, rec.stop_reason, rec.infra_error) == ("failed", "agent_error", None)
    assert rec.agent_error == (f"JSONDecodeError: Expecting property name enclosed in double "
                               f"quotes: line 1 column 2 (char 1) at "
                               f"{os.path.relpath(__file__)}:{agent.line} in complete")
    assert rec.tool_calls == 1 and rec.conditions["completion"] is False  # kept, scored
    rec = run(Scripted([READ, ValueError("token sk-abcdefghijklmnop0123 refused\n  twice")]))
    assert rec.stop_reason == "agent_error"
    assert rec.agent_error is not None
    assert rec.agent_error.startswith("ValueError: token sk-*** refused twice at ")


def test_a_reply_that_is_no_model_reply_is_the_agents_error() -> None:
    rec = run(Scripted([READ, ModelReply(content=None, tool_calls=({"name": READER},))]))  # type: ignore[arg-type]
    assert (rec.outcome, rec.stop_reason) == ("failed", "agent_error")
    assert rec.agent_error is not None and "not a ToolCall" in rec.agent_error

    class Plain(Scripted):
        async def complete(self, request: ModelRequest) -> ModelReply:
            return "TASK_COMPLETED"  # type: ignore[return-value]

    rec = run(Plain([]))
    assert rec.stop_reason == "agent_error"
    assert rec.agent_error is not None and "returned str, not a ModelReply" in rec.agent_error


def test_a_builtin_agent_that_raises_is_a_harness_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-in agents are our code: what they raise is ours to fix."""
    agent = make_builtin("follower", seed=1)

    async def broken(self: object, request: ModelRequest) -> ModelReply:
        raise KeyError("plan")

    monkeypatch.setattr(type(agent), "complete", broken)
    rec = run(agent)
    assert (rec.outcome, rec.stop_reason, rec.agent_error) == ("error", "harness_error", None)
    assert rec.infra_error is not None and "KeyError: 'plan'" in rec.infra_error


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="tool_mode"):
        run(Scripted(["TASK_COMPLETED"]), tool_mode="json")
    with pytest.raises(ValueError, match="max_turns"):
        run(Scripted(["TASK_COMPLETED"]), max_turns=0)


def test_same_seed_same_episode() -> None:
    a = run(Retrying(), seed=5).to_json()
    b = run(Retrying(), seed=5).to_json()
    a.pop("wall_time_s"), b.pop("wall_time_s")
    assert a == b


def test_flawed_variant_records_the_deviation() -> None:
    rec = run(Retrying(), variant=Variant("flawed", "tool_misuse", "light"), seed=3)
    assert rec.flaw == "tool_misuse" and rec.variant == "flawed-tool_misuse"
    assert rec.deviation is not None and rec.deviation["wrong_steps"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=200) | st.sampled_from([READ, WRITE, "TASK_COMPLETED",
                                                         "<tool_call>", "{}", "```json\n"]),
                min_size=1, max_size=12))
def test_nothing_a_model_says_raises(replies: list[str]) -> None:
    rec = run(Scripted(replies), max_turns=5)
    assert rec.outcome in ("full", "partial", "failed")
    assert rec.turns <= 5


def test_run_episodes_isolates_failures_and_bounds_concurrency() -> None:
    in_flight = peak = 0

    class Slow(Retrying):
        async def complete(self, request: ModelRequest) -> ModelReply:
            nonlocal in_flight, peak
            if request.repeat == 3:
                raise RuntimeError("only this episode breaks")
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.001)
            in_flight -= 1
            return await super().complete(request)

    specs = [EpisodeSpec(TASK, OPTIMAL, seed=1, repeat=r) for r in range(12)]

    async def collect() -> list[Any]:
        return [rec async for rec in run_episodes(specs, Slow(), concurrency=4)]

    records = asyncio.run(collect())
    assert sorted(r.repeat for r in records) == list(range(12))
    assert [r.repeat for r in records if r.stop_reason == "agent_error"] == [3]
    assert 1 < peak <= 4
    with pytest.raises(ValueError):
        asyncio.run(_first(run_episodes(specs, Slow(), concurrency=0)))


def test_episode_slots_bound_what_runs_and_free_on_any_end() -> None:
    """The one bound of run_episodes and the plugin's runner: the (n+1)th start waits until
    one ends (however it ends); a start cancelled while waiting makes no coroutine."""
    made: list[int] = []

    async def scenario() -> tuple[int, int, object, bool]:
        slots = EpisodeSlots(2)
        gate = asyncio.Event()

        async def episode(n: int) -> int:
            made.append(n)
            await gate.wait()
            if n == 1:
                raise RuntimeError("an episode that breaks frees its slot too")
            return n

        first = await slots.start(lambda: episode(0))
        second = await slots.start(lambda: episode(1))
        waiting = asyncio.ensure_future(slots.start(lambda: episode(2)))
        await asyncio.sleep(0)
        assert not waiting.done() and made == [0, 1]
        waiting.cancel()
        later = asyncio.ensure_future(slots.start(lambda: episode(3)))
        gate.set()
        third = await later
        results = await asyncio.gather(first, second, third, return_exceptions=True)
        return slots.peak, slots.in_flight, results[0], isinstance(results[1], RuntimeError)

    assert asyncio.run(scenario()) == (2, 0, 0, True)
    assert made == [0, 1, 3]
    with pytest.raises(ValueError):
        EpisodeSlots(0)


def test_a_model_limit_ends_the_episode_as_the_models_failure() -> None:
    """A context overflow (or a refusal, a reply cut by length) is scored, with its own stop
    reason; it is never an infrastructure error kept out of the rates."""
    rec = run(Scripted([READ, ModelLimitError("maximum context length", stop_reason=
                                              "context_overflow")]))
    assert (rec.outcome, rec.stop_reason, rec.infra_error) == ("failed", "context_overflow", None)
    assert rec.tool_calls == 1 and rec.conditions["completion"] is False


def test_notes_are_sentences_and_ignored_keys_are_reported() -> None:
    stray = ('{"name": "file_operations_reader", "arguments": {"path": "/data/in.csv"}, '
             '"source": "x#1"} {"name": "utility_logger", "arguments": {}} TASK_COMPLETED')
    agent = Scripted([stray, "TASK_COMPLETED"])
    rec = run(agent)
    first = read_observation(rec.messages[3])
    assert first is not None
    assert first["note"] == (
        "One tool call per turn: only the first was executed, 1 ignored. Ignored source beside "
        "arguments: the call ran without source; put every argument inside arguments. "
        "TASK_COMPLETED is only accepted in a reply without a tool call; send it once you "
        "have seen the results.")


async def _first(records: AsyncIterator[EpisodeRecord]) -> EpisodeRecord:
    return await anext(records)


def test_the_signal_sent_as_a_call_gets_a_hint_to_send_the_bare_word() -> None:
    """Issue 34: a model that wraps TASK_COMPLETED in a call has seen the results; the note
    says what to send, not to wait for results."""
    agent = Scripted(['<tool_call>{"name": "TASK_COMPLETED"}</tool_call>', "TASK_COMPLETED"])
    rec = run(agent)
    first = read_observation(rec.messages[3])
    assert first is not None
    assert first["note"] == ("TASK_COMPLETED is not a tool: to finish, reply with the bare word "
                             "TASK_COMPLETED and no tool call.")
    assert rec.stop_reason == "completed"


def test_the_model_is_told_the_episode_s_turn_budget() -> None:
    """`max_turns` reaches the prompt: the task's budget constraint states it."""
    budgeted = dataclasses.replace(TASK, constraints=("finish within 10 turns",))
    for max_turns, said in ((4, "finish within 4 turns"), (10, "finish within 10 turns")):
        agent = Scripted(["TASK_COMPLETED"])
        asyncio.run(run_episode(budgeted, OPTIMAL, agent, seed=1, max_turns=max_turns))
        user = agent.requests[0].messages[1]["content"]
        assert f"- {said}" in user and user.count("turns") == 1, max_turns


def test_an_episode_counts_its_recovery_and_a_claim_over_a_failed_step() -> None:
    """The record's `recovery` (core/recovery.py) is counted as the episode is scored: a
    retrying agent recovers; one that says done after its write failed fabricates success;
    an episode where nothing failed keeps none."""
    unlucky = next(seed for seed in range(200)
                   if not (rec := run(Scripted([READ, WRITE, "TASK_COMPLETED"]), seed=seed))
                   .calls[-1]["ok"] and rec.calls[0]["ok"])
    liar = run(Scripted([READ, WRITE, "TASK_COMPLETED"]), seed=unlucky)
    assert liar.stop_reason == "completed" and liar.outcome != "full"
    assert liar.recovery is not None
    assert liar.recovery["failures"] == 1 and liar.recovery["fabricated"] == 1
    assert liar.recovery["gave_up"] == 1  # its write's error was retryable
    retrying = run(Retrying(), seed=unlucky)
    assert retrying.outcome == "full" and retrying.recovery is not None
    assert retrying.recovery["recovered"] >= 1 and retrying.recovery["fabricated"] == 0
    clean = run(Scripted([READ, WRITE, "TASK_COMPLETED"]), seed=lucky_seed())
    assert clean.recovery is None and "recovery" not in clean.summary_json()
    assert liar.summary_json()["recovery"] == liar.recovery  # without the trajectory
