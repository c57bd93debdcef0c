"""Loop-level agents (`loop_episode.py`): the episode handle, scored through the same books as
a model's episode."""

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from pytest_resilibench.core.prompts import Variant, render_prompt
from pytest_resilibench.runtime.episode import (
    MAX_CONSECUTIVE_ERRORS,
    REPEAT_LIMIT,
    TurnKeeper,
    run_episode,
)
from pytest_resilibench.runtime.loop_episode import BUDGET_EXHAUSTED, EpisodeOver
from pytest_resilibench.runtime.protocol import (
    Episode,
    InfrastructureError,
    ModelReply,
    ModelRequest,
    Observation,
    ToolCall,
)
from tests.unit.test_episode import READER, TASK, WRITER, lucky_seed

READ_ARGS = {"path": "/data/in.csv"}
WRITE_ARGS = {"destination": "/out/result.csv"}
# Calls a model might make: straight, retried, unknown tool, broken arguments, none at all.
CALLS: list[tuple[Any, Any]] = [
    (READER, READ_ARGS), (None, {}), (READER, READ_ARGS), ("no_such_tool", {}),
    (READER, "{not json"), (WRITER, WRITE_ARGS), (WRITER, [1, 2]), (WRITER, WRITE_ARGS)]


class Loop:
    """A loop-level agent that runs a coroutine on its episode."""

    name = "loop"

    def __init__(self, play: Callable[[Episode], Awaitable[None]]) -> None:
        self.play = play
        self.seen: list[Episode] = []

    async def run(self, episode: Episode) -> None:
        self.seen.append(episode)
        await self.play(episode)

    async def aclose(self) -> None:
        return None


def calling(calls: Sequence[tuple[Any, Any]], *, finish: bool = True
            ) -> Callable[[Episode], Awaitable[None]]:
    async def play(episode: Episode) -> None:
        for name, arguments in calls:
            await episode.call(name, arguments)
        if finish:
            episode.finish()
    return play


class Replaying:
    """A turn-level agent sending, turn by turn, the replies a model makes for `calls`
    (written here as a model writes them), then TASK_COMPLETED."""

    name = "loop"

    def __init__(self, calls: Sequence[tuple[Any, Any]]) -> None:
        self.calls = list(calls)

    async def complete(self, request: ModelRequest) -> ModelReply:
        turn = sum(m["role"] == "assistant" for m in request.messages)
        if turn == len(self.calls):
            return ModelReply(content="TASK_COMPLETED")
        name, arguments = self.calls[turn]
        name = name if isinstance(name, str) else ""
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        if request.tools is not None:
            return ModelReply(content=None, tool_calls=(ToolCall(f"call_{turn + 1}", name, raw),))
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        return ModelReply(content="<tool_call>" + json.dumps({"name": name, "arguments": value})
                          + "</tool_call>")

    async def aclose(self) -> None:
        return None


def run(agent: Any, **options: Any) -> Any:
    options.setdefault("seed", 3)
    return asyncio.run(run_episode(TASK, options.pop("variant", Variant("optimal")), agent,
                                   **options))


def comparable(record: Any) -> dict[str, Any]:
    data = record.to_json()
    del data["wall_time_s"]
    return data


@pytest.mark.parametrize("tool_mode", ["text", "native"])
@pytest.mark.parametrize("max_turns", [10, 5])
def test_a_loop_agent_and_a_model_making_the_same_calls_get_identical_records(
    tool_mode: str, max_turns: int,
) -> None:
    for seed in range(4):
        options = {"seed": seed, "tool_mode": tool_mode, "max_turns": max_turns}
        loop = run(Loop(calling(CALLS)), **options)
        model = run(Replaying(CALLS), **options)
        assert comparable(loop) == comparable(model)
    # the calls above meet every kind of turn: make sure they did
    assert loop.protocol_errors >= 1 and loop.tool_calls >= 3
    assert loop.stop_reason == ("completed" if max_turns == 10 else "max_turns")


def test_a_call_past_the_budget_answers_a_budget_error_and_ends_the_episode() -> None:
    answers: list[Observation] = []
    raised: list[str] = []

    async def play(episode: Episode) -> None:
        for _ in range(3):
            answers.append(await episode.call(READER, READ_ARGS))
        assert episode.over and episode.stop_reason == "max_turns"
        episode.finish()  # too late: ignored
        try:
            await episode.call(READER, READ_ARGS)
        except EpisodeOver as exc:
            raised.append(str(exc))
            raise

    rec = run(Loop(play), max_turns=2)
    assert [a["progress"]["turns_left"] for a in answers] == [1, 0, 0]
    assert "budget" in answers[1] and answers[2]["error_code"] == BUDGET_EXHAUSTED
    assert answers[2]["status"] == "error" and answers[2]["tool"] == READER
    assert raised == ["the episode is over (max_turns)"]
    assert (rec.stop_reason, rec.turns, rec.tool_calls) == ("max_turns", 2, 2)
    assert rec.outcome != "error" and not rec.conditions["completion"]


def test_finish_is_the_completion_signal_and_ends_the_episode() -> None:
    async def play(episode: Episode) -> None:
        for name, arguments in ((READER, READ_ARGS), (WRITER, WRITE_ARGS)):
            while (await episode.call(name, arguments))["status"] != "success":
                pass
        episode.finish()
        episode.finish()  # once is enough
        assert episode.over and episode.stop_reason == "completed"
        await episode.call(READER, READ_ARGS)  # raises EpisodeOver: ends run quietly

    rec = run(Loop(play))
    assert rec.stop_reason == "completed" and rec.conditions["completion"]
    assert rec.outcome == "full"
    assert rec.messages[-1] == {"role": "assistant", "content": "TASK_COMPLETED"}
    assert sum(m["role"] == "assistant" for m in rec.messages) == rec.turns + 1


def test_a_run_that_returns_without_finish_is_not_completed() -> None:
    rec = run(Loop(calling([(READER, READ_ARGS)], finish=False)))
    assert (rec.stop_reason, rec.turns) == ("run_returned", 1)
    assert not rec.conditions["completion"] and rec.outcome != "full"


@pytest.mark.parametrize("tool_mode", ["text", "native"])
def test_bad_calls_cost_a_turn_and_are_never_executed(tool_mode: str) -> None:
    answers: list[Observation] = []

    async def play(episode: Episode) -> None:
        wrong: tuple[tuple[Any, Any], ...] = ((None, {}), (42, READ_ARGS),
                                              (READER, {"path": {1, 2}}), (READER, "{broken"))
        for name, arguments in wrong:
            answers.append(await episode.call(name, arguments))

    rec = run(Loop(play), tool_mode=tool_mode)
    assert [a["status"] for a in answers] == ["error"] * 4
    assert [a["error_code"] for a in answers[:2]] == ["FORMAT_ERROR"] * 2
    assert rec.turns == 4 and all(not c["ok"] for c in rec.calls)
    assert rec.outcome != "error"
    json.dumps(rec.to_json())  # the record stays JSON whatever was passed


def test_every_turn_an_agent_wastes_counts_toward_the_early_stops() -> None:
    async def same_bad_call(episode: Episode) -> None:
        no_name: Any = None
        while True:
            await episode.call(no_name, {})

    rec = run(Loop(same_bad_call))
    assert (rec.stop_reason, rec.turns) == ("consecutive_errors", MAX_CONSECUTIVE_ERRORS)

    async def repeat_refused(episode: Episode) -> None:
        while True:
            await episode.call(READER, {"path": 3})

    rec = run(Loop(repeat_refused))
    assert rec.stop_reason in ("repeated_call", "consecutive_errors")
    assert rec.turns == min(REPEAT_LIMIT, MAX_CONSECUTIVE_ERRORS)


def test_concurrent_calls_are_played_one_turn_at_a_time() -> None:
    async def play(episode: Episode) -> None:
        answers = await asyncio.gather(*(episode.call(READER, {"path": f"/data/{n}.csv"})
                                         for n in range(4)))
        assert [a["progress"]["turn"] for a in answers] == [1, 2, 3, 4]

    rec = run(Loop(play))
    assert [c["turn"] for c in rec.calls] == [1, 2, 3, 4]
    assert [c["arguments"]["path"] for c in rec.calls] == [f"/data/{n}.csv" for n in range(4)]


@pytest.mark.parametrize("tool_mode", ["text", "native"])
def test_the_handle_shows_the_prompt_and_the_tools_and_hands_out_copies(tool_mode: str) -> None:
    prompt = render_prompt(TASK, Variant("optimal"), tool_mode=tool_mode)
    seen: list[Observation] = []

    async def play(episode: Episode) -> None:
        assert episode.messages == prompt.messages
        assert {t["type"] for t in episode.tools} == {"function"}
        assert READER in [t["function"]["name"] for t in episode.tools]
        episode.messages[1]["content"] = "changed"
        episode.tools[0]["function"]["name"] = "changed"
        seen.append(await episode.call(READER, READ_ARGS))
        seen[0]["output"]["injected"] = True  # the agent's copy, not the record's

    rec = run(Loop(play), tool_mode=tool_mode, seed=lucky_seed())
    assert seen[0]["status"] == "success"
    assert rec.messages[:2] == prompt.messages
    fresh = render_prompt(TASK, Variant("optimal"), tool_mode="native")  # shared tool schemas
    assert "changed" not in json.dumps([fresh.messages, fresh.tools, rec.to_json()])
    assert "injected" not in json.dumps(rec.to_json())


def test_errors_in_run_are_the_episodes_own() -> None:
    async def unreachable(episode: Episode) -> None:
        await episode.call(READER, READ_ARGS)
        raise InfrastructureError("backend down")

    rec = run(Loop(unreachable))
    assert (rec.outcome, rec.stop_reason, rec.infra_error) == ("error", "infra_error",
                                                              "backend down")

    async def buggy(episode: Episode) -> None:
        await episode.call(READER, READ_ARGS)
        raise KeyError("oops")

    rec = run(Loop(buggy))
    assert (rec.outcome, rec.stop_reason, rec.infra_error) == ("failed", "agent_error", None)
    line = buggy.__code__.co_firstlineno + 2
    assert rec.agent_error == f"KeyError: 'oops' at {os.path.relpath(__file__)}:{line} in buggy"
    assert rec.tool_calls == 1


def test_a_harness_bug_inside_a_call_stays_a_harness_error_whatever_run_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`call` is our code running inside the agent's `run`: what it raises is a harness bug
    (or an infra error), even when the agent lets it through, or catches it and goes on."""
    async def broken(self: object, reply: ModelReply, parsed: object) -> dict[str, Any]:
        raise ZeroDivisionError("our bug")

    monkeypatch.setattr(TurnKeeper, "answer", broken)

    async def lets_it_through(episode: Episode) -> None:
        await episode.call(READER, READ_ARGS)

    async def swallows_it(episode: Episode) -> None:
        with contextlib.suppress(Exception):
            await episode.call(READER, READ_ARGS)
        episode.finish()

    async def raises_another(episode: Episode) -> None:
        try:
            await episode.call(READER, READ_ARGS)
        except Exception as exc:
            raise RuntimeError("the agent's wrapper") from exc

    for play in (lets_it_through, swallows_it, raises_another):
        rec = run(Loop(play))
        assert (rec.outcome, rec.stop_reason, rec.agent_error) == (
            "error", "harness_error", None), play.__name__
        assert "ZeroDivisionError: our bug" in rec.infra_error

    async def down(self: object, reply: ModelReply, parsed: object) -> dict[str, Any]:
        raise InfrastructureError("tool backend down")

    monkeypatch.setattr(TurnKeeper, "answer", down)
    rec = run(Loop(swallows_it))
    assert (rec.outcome, rec.stop_reason, rec.infra_error) == ("error", "infra_error",
                                                              "tool backend down")


def test_the_end_of_the_episode_wrapped_by_an_agent_framework_still_ends_run_quietly() -> None:
    """Frameworks wrap what a tool raises (`raise ... from`, task groups): `EpisodeOver`
    inside is the end of `run`, not the agent's error."""
    async def wraps_it(episode: Episode) -> None:
        episode.finish()
        try:
            await episode.call(READER, READ_ARGS)
        except EpisodeOver as exc:
            raise RuntimeError("tool node failed") from exc

    async def in_a_group(episode: Episode) -> None:
        episode.finish()
        async with asyncio.TaskGroup() as group:
            group.create_task(episode.call(READER, READ_ARGS))

    for play in (wraps_it, in_a_group) if hasattr(asyncio, "TaskGroup") else (wraps_it,):
        rec = run(Loop(play))
        assert (rec.stop_reason, rec.agent_error) == ("completed", None), play.__name__


def test_usage_that_is_no_counts_is_the_agents_error() -> None:
    async def play(episode: Episode) -> None:
        episode.add_usage({"prompt_tokens": "many"})  # type: ignore[dict-item]

    rec = run(Loop(play))
    assert (rec.outcome, rec.stop_reason) == ("failed", "agent_error")
    assert rec.agent_error is not None
    assert rec.agent_error.startswith("ValueError: add_usage takes OpenAI usage counts")


def test_an_object_of_neither_shape_is_a_harness_error_naming_what_is_missing() -> None:
    class Neither:
        name = "neither"

        async def aclose(self) -> None:
            return None

    rec = run(Neither())
    assert rec.outcome == "error" and "neither of `async def complete" in rec.infra_error


def test_many_loop_episodes_at_once_keep_their_own_books() -> None:
    async def main() -> list[Any]:
        agent = Loop(calling([(READER, READ_ARGS), (WRITER, WRITE_ARGS)]))
        return list(await asyncio.gather(*(
            run_episode(TASK, Variant("optimal"), agent, seed=seed) for seed in range(8))))

    together = asyncio.run(main())
    alone = [run(Loop(calling([(READER, READ_ARGS), (WRITER, WRITE_ARGS)])), seed=seed)
             for seed in range(8)]
    assert [comparable(r) for r in together] == [comparable(r) for r in alone]


def test_the_tokens_a_loop_agent_reports_are_counted_as_a_models() -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 9, "reasoning_tokens": 4}

    async def play(episode: Episode) -> None:
        assert (episode.task_id, episode.repeat) == (TASK.id, 2)
        episode.add_usage(usage)
        await episode.call(READER, READ_ARGS)
        episode.add_usage(usage)
        episode.finish()

    rec = run(Loop(play), repeat=2)
    assert rec.tokens == {"prompt": 240, "completion": 18, "total": 258, "reasoning": 8,
                          "cached": 0, "replayed": 0}


def test_usage_naming_its_model_is_kept_by_model_too() -> None:
    async def play(episode: Episode) -> None:
        episode.add_usage({"prompt_tokens": 100, "completion_tokens": 5}, model="gpt-4o")
        episode.add_usage({"prompt_tokens": 10, "completion_tokens": 1, "cached_tokens": 4},
                          model="gpt-4o")
        episode.add_usage({"prompt_tokens": 7, "completion_tokens": 2}, model="o3")
        episode.finish()

    rec = run(Loop(play))
    assert rec.tokens["prompt"] == 117 and rec.tokens["completion"] == 8
    assert rec.tokens_by_model == {"gpt-4o": {"prompt": 110, "completion": 6, "cached": 4},
                                   "o3": {"prompt": 7, "completion": 2, "cached": 0}}
    assert rec.to_json()["tokens_by_model"] == rec.tokens_by_model
    assert "tokens_by_model" not in run(Loop(_finish)).to_json()


def test_a_model_that_is_no_name_is_the_agents_error() -> None:
    async def play(episode: Episode) -> None:
        episode.add_usage({"prompt_tokens": 1}, model=42)  # type: ignore[arg-type]

    rec = run(Loop(play))
    assert rec.stop_reason == "agent_error" and rec.agent_error is not None
    assert "add_usage(model=) takes a model name, got 42" in rec.agent_error


async def _finish(episode: Episode) -> None:
    episode.finish()
