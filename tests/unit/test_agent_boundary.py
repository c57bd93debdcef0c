"""The agent boundary (runtime/agent_boundary.py): whatever a user's agent throws, and an agent
that never answers, ends its episode as an agent error with the agent's line; our own
cancellation and the user's Ctrl-C on the main thread go on as they are."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.runtime.agent_boundary import (
    AgentClock,
    AgentError,
    AgentLimits,
    close_agent,
)
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.runtime.protocol import Episode, ModelReply, ModelRequest
from tests.unit.test_episode import READ, READER, TASK

READ_ARGS = {"path": "/data/in.csv"}

KINDS: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),
    "CancelledError": asyncio.CancelledError,
    "GeneratorExit": GeneratorExit,
    "KeyboardInterrupt": KeyboardInterrupt,
}


class Raising:
    """A turn-level agent that makes a call each turn and raises `kind` at turn `at`."""

    def __init__(self, kind: str, at: int) -> None:
        self.name, self.kind, self.at, self.turns = "raising", kind, at, 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.turns += 1
        if self.turns > self.at:
            raise KINDS[self.kind]()
        return ModelReply(content=READ)


class RaisingLoop:
    """The loop-level agent of the same."""

    def __init__(self, kind: str, at: int) -> None:
        self.name, self.kind, self.at = "raising-loop", kind, at

    async def run(self, episode: Episode) -> None:
        for _ in range(self.at):
            await episode.call(READER, READ_ARGS)
        raise KINDS[self.kind]()


def off_main_thread(play: Callable[[], Any]) -> Any:
    """`play()` on a loop of another thread, as the plugin's runner plays users' agents; the
    loop is closed as the runner closes its own, with no wait for a call left behind
    (`asyncio.run` would wait for ever on a stubborn one)."""
    def in_thread() -> Any:
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(play())
        finally:
            loop.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(in_thread).result(timeout=60)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("at", [0, 2])
@pytest.mark.parametrize("shape", ["turn", "loop"])
def test_whatever_an_agent_raises_is_its_error_at_its_line(kind: str, at: int,
                                                           shape: str) -> None:
    agent = Raising(kind, at) if shape == "turn" else RaisingLoop(kind, at)
    record: EpisodeRecord = off_main_thread(
        lambda: run_episode(TASK, Variant("optimal"), agent, seed=0))
    assert (record.outcome, record.stop_reason) == ("failed", "agent_error")
    assert record.agent_error is not None
    assert record.agent_error.startswith(kind)
    assert "test_agent_boundary.py:" in record.agent_error
    assert record.tool_calls == at


def test_a_keyboard_interrupt_on_the_main_thread_is_the_users_ctrl_c() -> None:
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_episode(TASK, Variant("optimal"), Raising("KeyboardInterrupt", 1),
                                seed=0))


class Hanging:
    """Never answers; `stubborn`: swallows its cancellation and waits on."""

    def __init__(self, stubborn: bool = False, at: int = 0) -> None:
        self.name, self.stubborn, self.at, self.turns = "hanging", stubborn, at, 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.turns += 1
        if self.turns <= self.at:
            return ModelReply(content=READ)
        await self.wait()
        raise AssertionError("unreachable")

    async def wait(self) -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if not self.stubborn:
                    raise


class HangingLoop:
    """The loop-level agent of the same."""

    def __init__(self, stubborn: bool = False, at: int = 0) -> None:
        self.name, self.turns, self.hanging = "hanging-loop", 0, Hanging(stubborn)
        self.at = at

    async def run(self, episode: Episode) -> None:
        for _ in range(self.at):
            await episode.call(READER, READ_ARGS)
        self.turns = 1
        await self.hanging.wait()


@pytest.mark.parametrize("stubborn", [False, True])
@pytest.mark.parametrize("agent_type", [Hanging, HangingLoop])
@pytest.mark.parametrize(("limits", "which"), [
    (AgentLimits(turn_s=0.05), "turn limit (0.05 s; --resili-turn-timeout)"),
    (AgentLimits(episode_s=0.05), "its limit (0.05 s; --resili-episode-timeout)"),
])
def test_an_agent_that_never_answers_ends_at_its_limit(
        stubborn: bool, agent_type: type[Hanging | HangingLoop], limits: AgentLimits,
        which: str) -> None:
    agent = agent_type(stubborn, at=1)
    record: EpisodeRecord = off_main_thread(
        lambda: run_episode(TASK, Variant("optimal"), agent, seed=0, limits=limits))
    assert (record.outcome, record.stop_reason) == ("failed", "agent_error")
    assert record.agent_error is not None
    assert record.agent_error.startswith("TimeoutError: ")
    assert which in record.agent_error
    assert record.agent_error.endswith(" in wait")  # where it was waiting: the agent's line
    assert record.tool_calls == 1


@pytest.mark.parametrize("limits", [AgentLimits(), AgentLimits(turn_s=3600)])
@pytest.mark.parametrize("agent", [Hanging(), HangingLoop()])
def test_our_own_cancellation_stays_a_cancellation(limits: AgentLimits,
                                                   agent: Hanging | HangingLoop) -> None:
    async def main() -> None:
        task = asyncio.ensure_future(run_episode(TASK, Variant("optimal"), agent, seed=0,
                                                 limits=limits))
        while agent.turns == 0:  # the agent is waiting
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_the_clock_keeps_the_nearer_deadline() -> None:
    now = [100.0]
    clock = AgentClock(AgentLimits(turn_s=10, episode_s=25), now=lambda: now[0])
    assert clock.remaining() == 10 and clock.passed() is None
    now[0] = 110.0
    assert clock.passed() == "turn"
    clock.next_turn()
    assert clock.remaining() == 10 and clock.passed() is None
    now[0] = 118.0
    clock.next_turn()
    assert clock.remaining() == 7  # the episode's end is nearer
    now[0] = 125.0
    assert clock.passed() == "episode"
    assert AgentClock(AgentLimits(), now=lambda: 0.0).remaining() is None


class Closing:
    name = "closing"

    def __init__(self, how: str) -> None:
        self.how = how

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(content="TASK_COMPLETED")

    async def aclose(self) -> None:
        if self.how == "hangs":
            while True:
                with contextlib.suppress(asyncio.CancelledError):  # stubborn: left behind
                    await asyncio.sleep(3600)
        raise KINDS[self.how]()


@pytest.mark.parametrize("how", [*KINDS, "hangs"])
def test_an_aclose_that_raises_anything_or_hangs_is_the_agents_error(how: str) -> None:
    with pytest.raises(AgentError) as caught:
        off_main_thread(lambda: close_agent(Closing(how), timeout_s=0.05))
    expected = "TimeoutError: aclose() did not return within 0.05 s" if how == "hangs" else how
    assert caught.value.line.startswith(expected)
    assert "test_agent_boundary.py:" in caught.value.line
