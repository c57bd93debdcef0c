"""The adaptive concurrency limiter: AIMD, the rate-limit headers, sharing between processes.

No wall-clock assertions: a controllable clock, counts and orderings.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.runtime.agents.limiter import (
    AdaptiveLimiter,
    FileStore,
    Limits,
    MemoryStore,
    RateLimitWait,
    Ticket,
    parse_duration,
    read_limits,
    shared_path,
)
from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest, ToolCall
from pytest_resilibench.servers.testserver import OpenAITestServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(ceiling: int = 16, **options: Any) -> AdaptiveLimiter:
    return AdaptiveLimiter(ceiling, clock=options.pop("clock", Clock()), **options)


def take(lim: AdaptiveLimiter) -> Ticket:
    return asyncio.run(lim.acquire(float("inf"), lambda: "never"))


# --- headers ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "seconds"), [
    ("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5s", 0.5),
    ("2", 2.0), ("7.66s", 7.66), ("1m30s", 90.0)])
def test_reset_durations_in_openai_form(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1x", "s", "1s garbage", None])
def test_unreadable_durations_are_none(text: str | None) -> None:
    assert parse_duration(text) is None


def test_every_openai_rate_limit_header_is_read() -> None:
    limits = read_limits({"x-ratelimit-limit-requests": "60",
                          "x-ratelimit-remaining-requests": "0",
                          "x-ratelimit-remaining-tokens": "149984",
                          "x-ratelimit-reset-requests": "1s",
                          "x-ratelimit-reset-tokens": "6m0s",
                          "retry-after": "3"})
    assert limits == Limits(retry_after_s=3.0, remaining_requests=0, remaining_tokens=149984,
                            reset_requests_s=1.0, reset_tokens_s=360.0)
    assert limits.exhausted_for_s() == 1.0  # the requests' budget is spent, not the tokens'


def test_retry_after_forms() -> None:
    assert read_limits({"retry-after-ms": "250", "retry-after": "9"}).retry_after_s == 0.25
    assert read_limits({"retry-after": "1.5"}).retry_after_s == 1.5
    assert read_limits({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}).retry_after_s == 0.0
    assert read_limits({"retry-after": "soon"}).retry_after_s is None
    assert read_limits({}) == Limits()
    tokens = read_limits({"x-ratelimit-remaining-tokens": "0",
                          "x-ratelimit-reset-tokens": "20ms"})
    assert tokens.exhausted_for_s() == pytest.approx(0.02)


# --- AIMD ---------------------------------------------------------------------------------------
def test_starts_at_the_ceiling_and_never_passes_it() -> None:
    lim = limiter(4)
    assert lim.cap == 4
    for _ in range(50):
        lim.release(take(lim), "ok")
    assert lim.window == 4 and lim.cap == 4


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.updates = 0

    def update(self, change: Any) -> Any:
        self.updates += 1
        return super().update(change)


def test_while_no_limit_is_met_a_reply_writes_only_what_is_new(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47: the shared state's lock, read and write on every reply were 40% of a run's
    CPU. In the first round (every process at its ceiling) a success at a level the state
    already holds writes nothing, and the state is looked at again once `QUIET_LOOK_S` has
    passed; once a limit is met every reply is written again (the recovery)."""
    from pytest_resilibench.runtime.agents import limiter as module

    now = [0.0]
    monkeypatch.setattr(module, "_monotonic", lambda: now[0])
    store = CountingStore()
    lim = limiter(4, store=store)
    held = [take(lim) for _ in range(4)]
    start = store.updates
    for ticket in held:  # levels 4, 3, 2, 1: the first is new, the others are not
        lim.release(ticket, "ok")
    for _ in range(50):  # a full window waits for nothing: each at level 1
        lim.release(take(lim), "ok")
    assert store.updates - start == 1
    now[0] += module.QUIET_LOOK_S  # stale: looked at again with the next reply
    lim.release(take(lim), "ok")
    assert store.updates - start == 2
    lim.release(take(lim), "limited")  # a limit met: every reply counts again
    start = store.updates
    for _ in range(5):
        lim.release(take(lim), "ok")
    assert store.updates - start == 5
    assert lim.window == 2 + 2  # fast recovery to the level the first round's successes saw


def test_a_429_halves_the_window_once_a_round() -> None:
    lim = limiter(16)
    first, second = take(lim), take(lim)  # both sent in round 0
    lim.release(first, "limited")
    assert lim.window == 8
    lim.release(second, "limited")  # sent before the decrease: nothing new
    assert lim.window == 8
    lim.release(take(lim), "limited")  # sent after it: halves again
    assert lim.window == 4
    for _ in range(10):
        lim.release(take(lim), "limited")
    assert lim.window == 1 and lim.cap == 1  # never below one request


def test_other_failures_say_nothing_of_limits() -> None:
    lim = limiter(8)
    lim.release(take(lim), "other")
    assert lim.window == 8


def test_increase_is_additive() -> None:
    lim = limiter(64)
    lim.release(take(lim), "limited")  # 32, and no success seen this round
    assert lim.window == 32
    lim.release(take(lim), "ok")  # above the level a 429 came at: a slow probe
    assert lim.window == pytest.approx(32 + 1 / 32**2)


def test_fast_recovery_to_the_level_the_provider_took() -> None:
    lim = limiter(32)
    tickets = [take(lim) for _ in range(10)]
    for ticket in tickets[:9]:
        lim.release(ticket, "ok")  # successes seen with up to 10 in flight
    lim.release(tickets[9], "limited")
    assert lim.window == 16
    # Recovery: one a success back to the level the successes were seen at.
    lim.release(take(lim), "ok")
    assert lim.window == 17 or lim.window == pytest.approx(16 + 1 / 256)


def test_fast_recovery_below_that_level() -> None:
    lim = limiter(32)
    for _ in range(3):
        lim.release(take(lim), "limited")  # 32 -> 16 -> 8 -> 4, nothing succeeded
    assert lim.window == 4
    tickets = [take(lim) for _ in range(4)]
    for ticket in tickets:
        lim.release(ticket, "ok")  # successes at 4, 3, 2, 1 in flight
    lim.release(take(lim), "limited")  # this round's successes were seen at 4 in flight
    assert lim.window == pytest.approx((4 + 4 / 4**2) / 2, abs=0.2)
    before = lim.window
    lim.release(take(lim), "ok")
    assert lim.window == before + 1  # below 4: one a success


def test_a_spent_budget_holds_new_requests_until_its_reset() -> None:
    clock = Clock()
    lim = limiter(8, clock=clock)
    spent = Limits(remaining_requests=0, reset_requests_s=2.5)
    lim.release(take(lim), "ok", spent)
    assert lim.hold_until == clock.now + 2.5
    assert lim.window == 4  # and the window halves, as for a 429


def test_the_waiting_budget_ends_with_the_cause() -> None:
    lim = limiter(1)
    held = take(lim)

    async def second() -> None:
        await lim.acquire(0.0, lambda: "waited too long: HTTP 429")  # the clock is past it

    with pytest.raises(RateLimitWait, match="waited too long: HTTP 429"):
        asyncio.run(second())
    lim.release(held, "ok")


def test_a_full_window_waits_for_a_release() -> None:
    lim = AdaptiveLimiter(2)
    order: list[str] = []

    async def scenario() -> None:
        a = await lim.acquire(float("inf"), str)
        b = await lim.acquire(float("inf"), str)
        order.append("two in")

        async def third() -> None:
            ticket = await lim.acquire(float("inf"), str)
            order.append("third in")
            lim.release(ticket, "ok")

        task = asyncio.create_task(third())
        for _ in range(5):
            await asyncio.sleep(0)
        order.append("release")
        lim.release(a, "ok")
        await task
        lim.release(b, "ok")

    asyncio.run(scenario())
    assert order == ["two in", "release", "third in"]
    assert lim.in_flight == 0


async def _settle_loop() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_the_line_goes_by_fewest_turns_then_arrival() -> None:
    """One slot, five waiting: the request of the episode with the fewest turns behind it
    goes first (least attained service), first come first served among equals."""
    lim = AdaptiveLimiter(1)
    order: list[str] = []

    async def scenario() -> None:
        held = await lim.acquire(float("inf"), str)

        async def ask(name: str, rank: int) -> None:
            ticket = await lim.acquire(float("inf"), str, rank)
            order.append(name)
            await _settle_loop()  # holds the slot while the others look
            lim.release(ticket, "ok")

        tasks = []
        for name, rank in [("late-a", 3), ("early-a", 1), ("new", 0), ("early-b", 1),
                           ("late-b", 3)]:
            tasks.append(asyncio.create_task(ask(name, rank)))
            await _settle_loop()  # each in line before the next arrives
        lim.release(held, "ok")
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    assert order == ["new", "early-a", "early-b", "late-a", "late-b"]
    assert lim.in_flight == 0


def test_a_reply_does_not_let_its_episode_jump_the_line() -> None:
    """The request that just got its reply asks again at once; one already waiting goes
    first."""
    lim = AdaptiveLimiter(1)
    order: list[str] = []

    async def scenario() -> None:
        first = await lim.acquire(float("inf"), str)

        async def waiting() -> None:
            lim.release(await lim.acquire(float("inf"), str), "ok")
            order.append("waiting")

        task = asyncio.create_task(waiting())
        await _settle_loop()
        lim.release(first, "ok")
        again = await lim.acquire(float("inf"), str)  # same rank, arrived later
        order.append("again")
        lim.release(again, "ok")
        await task

    asyncio.run(scenario())
    assert order == ["waiting", "again"]


def test_waiting_behind_own_requests_spends_no_limit_budget() -> None:
    """With the window whole, a long wait for one of this process's own slots is no wait on
    a limit: the deadline moves on and `wait_s` stays 0. Once a 429 shrank the window, the
    same wait spends the budget and ends with the cause."""
    clock = Clock()
    lim = limiter(1, clock=clock)

    async def wait_behind(deadline: float) -> str:
        held = await lim.acquire(float("inf"), str)
        task = asyncio.create_task(lim.acquire(deadline, lambda: "waited on the limit"))
        await _settle_loop()
        clock.now += 30.0  # far past the deadline while it waited in line
        await asyncio.sleep(0.3)  # one poll of the line (limiter.POLL_S)
        lim.release(held, "ok")
        try:
            lim.release(await task, "ok")
        except RateLimitWait as exc:
            return str(exc)
        return "through"

    assert asyncio.run(wait_behind(clock.now + 1.0)) == "through"
    assert lim.wait_s == 0.0

    shrunk = limiter(4, clock=clock)
    shrunk.release(take(shrunk), "limited")  # the window halves: 2 of a ceiling of 4
    tickets = [take(shrunk), take(shrunk)]

    async def wait_on_the_limit() -> None:
        task = asyncio.create_task(shrunk.acquire(clock.now + 1.0, lambda: "waited on it"))
        await _settle_loop()
        clock.now += 30.0
        await task

    with pytest.raises(RateLimitWait, match="waited on it"):
        asyncio.run(wait_on_the_limit())
    assert shrunk.wait_s == pytest.approx(30.0)
    for ticket in tickets:
        shrunk.release(ticket, "ok")


def test_wait_s_is_wall_time_while_any_request_waits_on_a_limit() -> None:
    """Two requests held by the same limit for the same 5 s count 5 s, not 10."""
    clock = Clock()
    lim = limiter(8, clock=clock)

    async def two_held() -> None:
        async def hold() -> None:
            async with lim.held():
                await _settle_loop()

        first = asyncio.create_task(hold())
        second = asyncio.create_task(hold())
        await asyncio.sleep(0)
        clock.now += 5.0
        await asyncio.gather(first, second)

    asyncio.run(two_held())
    assert lim.wait_s == pytest.approx(5.0)


def test_tpm_paces_the_tokens_spent_with_a_burst_of_one_second() -> None:
    clock = Clock()
    lim = limiter(8, clock=clock, tpm=6000)  # 100 tokens a second
    lim.release(take(lim), "ok", tokens=90)
    assert lim.hold_until <= clock.now  # within one second's share: go on
    lim.release(take(lim), "ok", tokens=110)
    # 200 tokens at 100 a second: one second of burst, one second over it
    assert lim.hold_until == pytest.approx(clock.now + 1.0)


def test_rpm_lets_one_second_s_share_less_one_go_then_paces_evenly() -> None:
    """A provider enforces rpm over seconds (60,000 a minute as 1,000 a second): a minute's
    budget at once would be refused. At 600 a minute: 9 at once, then one each 0.1 s."""
    clock = Clock()
    lim = limiter(100, clock=clock, rpm=600)

    async def burst_then_pace() -> None:
        for _ in range(9):
            lim.release(await lim.acquire(clock.now + 0.01, str), "ok")
        with pytest.raises(RateLimitWait, match="paced"):
            await lim.acquire(clock.now + 0.01, lambda: "paced")  # the next in 0.1 s
        clock.now += 0.1
        lim.release(await lim.acquire(clock.now + 0.01, str), "ok")
        with pytest.raises(RateLimitWait, match="paced"):
            await lim.acquire(clock.now + 0.01, lambda: "paced")

    asyncio.run(burst_then_pace())
    assert lim.in_flight == 0


def test_a_slow_rpm_paces_from_the_first_request() -> None:
    clock = Clock()
    lim = limiter(100, clock=clock, rpm=3)  # one each 20 s: no burst at all

    async def one_then_wait() -> None:
        lim.release(await lim.acquire(clock.now + 1.0, str), "ok")
        with pytest.raises(RateLimitWait, match="paced"):
            await lim.acquire(clock.now + 1.0, lambda: "paced")
        clock.now += 20.0
        lim.release(await lim.acquire(clock.now + 1.0, str), "ok")

    asyncio.run(one_then_wait())


# --- shared between processes -------------------------------------------------------------------
def _child(path: str, ready: Any, go: Any, out: Any) -> None:
    lim = AdaptiveLimiter(8, store=FileStore(Path(path)))
    held = [take(lim) for _ in range(8)]  # alone: its whole ceiling
    lim.refresh()  # its demand published (as every release and a full share do)
    out.put(("registered", lim.cap, len(held)))
    ready.set()
    go.wait(30)
    lim.refresh()
    out.put(("after", lim.cap))


def _bump(path: str, times: int) -> None:
    store = FileStore(Path(path))

    def add(state: dict[str, Any]) -> None:
        state["n"] = state.get("n", 0) + 1

    for _ in range(times):
        store.update(add)


def test_two_processes_share_the_window(tmp_path: Path) -> None:
    path = tmp_path / "limit.json"
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_child, args=(str(path), ready, go, out))
    child.start()
    try:
        assert ready.wait(60)
        assert out.get(timeout=30) == ("registered", 8, 8)
        lim = AdaptiveLimiter(8, store=FileStore(path))
        assert lim.window == 16  # no limit met yet: the two ceilings add up
        mine = [take(lim) for _ in range(8)]
        lim.release(mine.pop(), "limited")  # a 429 here halves the window for both
        assert lim.window == 8 and lim.cap == 4  # both want more than half: half each
        go.set()
        assert out.get(timeout=30) == ("after", 4)
    finally:
        go.set()
        child.join(30)
    # The child is gone: its share comes back, no slot leaks.
    lim.refresh()
    assert lim.cap == 8


def test_a_process_wanting_less_leaves_the_rest_to_the_other() -> None:
    from pytest_resilibench.runtime.agents.limiter import _share

    procs = {"1": [0.0, 16.0, 2.0], "2": [0.0, 16.0, 16.0]}
    assert _share(procs, "1", 8) == 2 and _share(procs, "2", 8) == 6
    idle = {"1": [0.0, 16.0, 0.0], "2": [0.0, 16.0, 3.0]}
    assert _share(idle, "1", 8) == 5 and _share(idle, "2", 8) == 8  # headroom for both
    assert _share({"1": [0.0, 4.0, 9.0], "2": [0.0, 4.0, 9.0]}, "1", 1) == 1  # at least one


def test_the_shared_file_loses_no_update(tmp_path: Path) -> None:
    path = tmp_path / "count.json"
    ctx = mp.get_context("spawn")
    workers = [ctx.Process(target=_bump, args=(str(path), 300)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    seen: list[int] = []
    FileStore(path).update(lambda state: seen.append(state["n"]))
    assert seen == [600]


def test_a_file_of_dead_processes_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "limit.json"
    path.write_text('{"procs": {"999999999": [1000.0, 8.0]}, "window": 1.0, '
                    '"blocked_until": 9e99}')
    lim = AdaptiveLimiter(8, store=FileStore(path), clock=Clock())
    assert lim.window == 8 and lim.cap == 8 and lim.hold_until < 1e9


def test_shared_path_is_keyed_without_the_url() -> None:
    path = shared_path("o3", "http://user:secret@host/v1")
    assert "secret" not in str(path) and path != shared_path("o3", "http://other/v1")


# --- against the real test server ---------------------------------------------------------------
def _reply(request: ModelRequest) -> ModelReply:
    return ModelReply(content=None, tool_calls=(
        ToolCall(id="call_0", name="echo", arguments=f'{{"n": "{request.task_id}"}}'),))


def test_a_429_storm_ends_with_every_request_answered() -> None:
    """A provider that takes 2 requests at once, 40 sent with a ceiling of 16 and no retry to
    spend: every request is answered, none an infra error; the limiter brought the window
    down and every 429 the server sent was waited out."""
    batch = [ModelRequest(messages=[{"role": "user", "content": str(i)}], task_id=f"t{i}")
             for i in range(40)]
    with OpenAITestServer(_reply, latency_ms=20, max_in_flight=2,
                          limit_retry_after_s=0.01) as server:
        agent = OpenAIAgent("m", base_url=server.base_url, max_concurrency=16, max_retries=0,
                            backoff_base_s=0.005, backoff_max_s=0.02)

        async def ask() -> list[ModelReply]:
            try:
                return list(await asyncio.gather(*(agent.complete(r) for r in batch)))
            finally:
                await agent.aclose()

        replies = asyncio.run(ask())
        limited = server.stats.limited
    assert [r.tool_calls[0].arguments for r in replies] == [f'{{"n": "t{i}"}}'
                                                            for i in range(40)]
    assert limited > 0 and agent.stats.infra_errors == 0
    assert agent.stats.faults == {"rate_limit": limited}
    assert agent.stats.api_calls == 40 + limited
    assert agent.limiter.window < 16


def test_the_last_process_to_leave_removes_the_shared_file(tmp_path: Path) -> None:
    path = tmp_path / "limit.json"
    first = AdaptiveLimiter(8, store=FileStore(path), clock=Clock(), pid=1,
                            alive=lambda pid: True)
    second = AdaptiveLimiter(8, store=FileStore(path), clock=Clock(), pid=2,
                             alive=lambda pid: True)
    first.leave()
    assert json.loads(path.read_text())["procs"].keys() == {"2"}
    second.leave()
    assert not path.exists()


def test_an_update_that_waited_on_a_removed_file_goes_to_the_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last process removed the file while this one waited for its lock: the change
    must land in the file now at the path, not in the removed one."""
    import fcntl

    path = tmp_path / "limit.json"
    path.write_text('{"n": 1}')
    real_flock = fcntl.flock
    removed: list[bool] = []

    def flock(fd: int, op: int) -> None:
        if not removed:  # another process takes the lock first and removes the file
            removed.append(True)
            path.unlink()
        real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)

    def bump(state: dict[str, Any]) -> None:
        state["n"] = state.get("n", 0) + 10

    FileStore(path).update(bump)
    assert json.loads(path.read_text()) == {"n": 10}


# --- cancellation (an interrupted run) ------------------------------------------------------------
def test_a_request_cancelled_while_it_waits_in_line_leaves_it_at_once() -> None:
    """Cancelling a request that waits for a slot raises in it, whenever the cancel lands
    (`_Place.wait` never turns a cancellation into a timeout), and it leaves the line."""
    async def run() -> tuple[list[Ticket | BaseException], int]:
        lim = AdaptiveLimiter(1)
        held = await lim.acquire(float("inf"), lambda: "never")
        waiting = [asyncio.ensure_future(lim.acquire(float("inf"), lambda: "never"))
                   for _ in range(20)]
        for i, task in enumerate(waiting):  # cancels landing at every point of the polls
            await asyncio.sleep(0.0125 * (i % 4))
            task.cancel()
        got = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 60)
        lim.release(held, "ok")
        return got, len(lim._line)

    got, left_in_line = asyncio.run(run())
    assert all(isinstance(g, asyncio.CancelledError) for g in got)
    assert left_in_line == 0


def test_a_request_cancelled_in_flight_gives_its_slot_back() -> None:
    """One slot; the request holding it is cancelled while the server holds its answer: the
    next request gets the slot (before, it waited in line for ever)."""
    async def hold_first(request: Any) -> ModelReply:
        if request.messages[-1]["content"] == "first":
            await asyncio.sleep(30)  # the client gives up long before (cancelled)
        return ModelReply(content="TASK_COMPLETED")

    with OpenAITestServer(hold_first) as server:
        async def run() -> tuple[str | None, int]:
            agent = OpenAIAgent("gpt-test", base_url=server.base_url, api_key="sk-test",
                                max_concurrency=1, timeout_s=60)
            try:
                first = asyncio.ensure_future(agent.complete(
                    ModelRequest(messages=[{"role": "user", "content": "first"}])))
                while agent.limiter.in_flight == 0:  # it holds the one slot
                    await asyncio.sleep(0.01)
                first.cancel()
                await asyncio.gather(first, return_exceptions=True)
                second = await asyncio.wait_for(agent.complete(
                    ModelRequest(messages=[{"role": "user", "content": "second"}])), 60)
                return second.content, agent.limiter.in_flight
            finally:
                await agent.aclose()

        content, in_flight = asyncio.run(run())
    assert content == "TASK_COMPLETED" and in_flight == 0
