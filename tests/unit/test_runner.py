"""The episode runner: ahead of the items, bounded, order-tolerant, failure-isolated."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.cases import Case, build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.runner import EpisodeRunner, expected_turns
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest
from tests.unit.sample_records import summaries

CONFIG = RunConfig(models=("scripted",), variants=("optimal",), sample=1, concurrency=4)


class CountingAgent:
    """Finishes at once; records how many requests were in flight together."""

    name = "scripted"

    def __init__(self, delay: float = 0.01, explode_on: str | None = None) -> None:
        self.delay = delay
        self.explode_on = explode_on
        self.in_flight = 0
        self.peak = 0
        self.seen: list[str] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.seen.append(request.task_id)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return ModelReply(content="TASK_COMPLETED")

    async def aclose(self) -> None:
        return None


def cases(config: RunConfig = CONFIG) -> list[Case]:
    return build_cases(config, list(load_tasks()))


def runner(agent: CountingAgent, config: RunConfig = CONFIG, window: int | None = None
           ) -> EpisodeRunner:
    return EpisodeRunner(config, default_registry(), agent_factory=lambda _: agent,
                         window=window)


def test_runs_ahead_with_bounded_concurrency() -> None:
    agent = CountingAgent()
    r = runner(agent)
    try:
        todo = cases()
        r.start(todo)
        records = [r.result(c) for c in todo]
    finally:
        r.close()
    assert [rec.id for rec in records] == [c.id for c in todo]
    assert all(rec.outcome in ("failed", "partial") for rec in records)
    assert 1 < agent.peak <= CONFIG.concurrency


def _start_order(todo: list[Case]) -> list[str]:
    """The task ids of `todo` in the order the runner started their episodes (one slot)."""
    agent = CountingAgent(delay=0.0)
    r = runner(agent, replace(CONFIG, concurrency=1))
    try:
        r.start(todo)
        records = [r.result(c) for c in todo]
    finally:
        r.close()
    assert [rec.id for rec in records] == [c.id for c in todo]  # items keep their order
    return list(dict.fromkeys(agent.seen))


def test_the_longest_planned_episodes_start_first_in_any_partition() -> None:
    """Longest plan first, equals by case id; the same in a second session, and each share
    of a two-worker partition (xdist's round robin) starts in the one-worker order
    restricted to it (issue 47, start_order.py)."""
    todo = cases()
    order = _start_order(todo)
    by_task = {c.task.id: c for c in todo}
    assert [(-expected_turns(by_task[t]), by_task[t].id) for t in order] == sorted(
        (-expected_turns(c), c.id) for c in todo)
    assert expected_turns(by_task[order[0]]) > expected_turns(by_task[order[-1]])
    assert _start_order(cases()) == order
    for share in (todo[0::2], todo[1::2]):
        mine = {c.task.id for c in share}
        assert _start_order(share) == [t for t in order if t in mine]


def test_window_bounds_unclaimed_results() -> None:
    agent = CountingAgent(delay=0.0)
    r = runner(agent, window=3)
    try:
        todo = cases()
        r.start(todo)
        r.result(todo[0])
        asyncio.run(asyncio.sleep(0.3))  # let the feeder run as far as it may
        started = len(set(agent.seen))
        assert started <= 1 + 3, "never more than the window ahead of the items"
        for c in todo[1:]:
            r.result(c)
    finally:
        r.close()


def test_items_out_of_announced_order_do_not_deadlock() -> None:
    agent = CountingAgent()
    r = runner(agent, window=2)
    try:
        todo = cases()
        r.start(todo)
        late = [r.result(c) for c in reversed(todo)]  # the last case first
    finally:
        r.close()
    assert [rec.id for rec in late] == [c.id for c in reversed(todo)]


def test_unannounced_case_runs_on_demand() -> None:
    agent = CountingAgent()
    r = runner(agent)
    try:
        case = cases()[0]
        assert r.result(case).id == case.id
    finally:
        r.close()


def test_one_broken_case_leaves_the_others_alone() -> None:
    agent = CountingAgent()
    r = runner(agent)
    todo = cases()
    broken = replace(todo[1], task=replace(todo[1].task, inputs={"format": "docx"}))
    try:
        r.start([todo[0], broken, *todo[2:]])
        first = r.result(todo[0])
        bad = r.result(broken)
        rest = [r.result(c) for c in todo[2:]]
    finally:
        r.close()
    assert first.outcome != "error"
    assert bad.outcome == "error" and bad.stop_reason == "harness_error"
    assert all(rec.outcome != "error" for rec in rest)


def _results_within(r: EpisodeRunner, todo: list[Case], guard_s: float = 120) -> list[object]:
    """Each case's record or the exception its result raised; a hang fails the test after
    `guard_s` (a guard against hanging, not a timing claim: a daemon thread, left behind)."""
    import threading

    out: list[object] = []

    def collect() -> None:
        for case in todo:
            try:
                out.append(r.result(case))
            except Exception as exc:
                out.append(exc)

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    thread.join(guard_s)
    assert not thread.is_alive(), f"an item still waits for its record after {guard_s} s"
    return out


def test_an_agent_its_factory_cannot_make_fails_each_case_and_hangs_none() -> None:
    """(An xdist worker whose `py:` factory fails after the controller's check passed.)"""
    def factory(model: str) -> CountingAgent:
        raise RuntimeError("no credentials in this process")

    r = EpisodeRunner(CONFIG, default_registry(), agent_factory=factory)
    todo = cases()[:6]
    try:
        r.start(todo)  # does not raise: the items do, each with the factory's message
        got = _results_within(r, todo)
    finally:
        r.close()
    assert all(isinstance(g, RuntimeError) and "no credentials" in str(g) for g in got)


def test_a_feeder_that_breaks_fails_the_waiting_cases_instead_of_hanging_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The feeder fails after it claimed a case (its item then waits for the feeder): that
    item gets the error; the cases it never reached run on demand."""
    def broken(self: EpisodeRunner, model: str) -> object:
        raise RuntimeError("slots broke")

    monkeypatch.setattr(EpisodeRunner, "_slots_of", broken)
    r = runner(CountingAgent())
    todo = cases()[:6]
    try:
        r.start(todo)
        got = _results_within(r, todo)
    finally:
        r.close()
    failed = [g for g in got if isinstance(g, Exception)]
    assert failed and all(isinstance(g, RuntimeError) and "slots broke" in str(g)
                          for g in failed)
    assert all(g.id == c.id for g, c in zip(got, todo, strict=True)  # type: ignore[attr-defined]
               if not isinstance(g, Exception))


def test_close_is_idempotent_and_cancels_queued_work() -> None:
    agent = CountingAgent(delay=0.05)
    r = runner(agent)
    r.start(cases())
    r.close()
    r.close()
    assert len(agent.seen) < len(cases())


@pytest.mark.parametrize("per_slot", [None, 1])
def test_a_model_that_queues_its_requests_gets_more_episodes_than_requests(
        per_slot: int | None) -> None:
    """A real model's provider keeps its requests to `concurrency` itself (its limiter), so
    the runner keeps EPISODES_PER_REQUEST_SLOT times as many episodes in flight (unless told
    1: live tools at a user's own URLs): the server never sees more than `concurrency`
    requests at once."""
    from pytest_resilibench.integration.runner import EPISODES_PER_REQUEST_SLOT
    from pytest_resilibench.runtime.agents.builtin import make_builtin
    from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
    from pytest_resilibench.servers.testserver import OpenAITestServer

    config = replace(CONFIG, models=("o3",), concurrency=2)
    todo = cases(config)
    assert len(todo) > EPISODES_PER_REQUEST_SLOT * config.concurrency
    with OpenAITestServer({"o3": make_builtin("follower")}, latency_ms=20) as server:
        r = EpisodeRunner(config, default_registry(), agent_factory=lambda model: OpenAIAgent(
            model, base_url=server.base_url, api_key="sk-test",
            max_concurrency=config.concurrency),
            episodes_per_slot=per_slot or EPISODES_PER_REQUEST_SLOT)
        try:
            r.start(todo)
            records = [r.result(c) for c in todo]
        finally:
            r.close()
        assert all(rec.outcome != "error" for rec in records)
        assert r.peak_in_flight == (per_slot or EPISODES_PER_REQUEST_SLOT) * config.concurrency
        assert server.stats.peak_in_flight == config.concurrency


def _records(concurrency: int) -> list[dict[str, object]]:
    from pytest_resilibench.runtime.agents import make_agent

    config = replace(CONFIG, models=("builtin:adaptive",), concurrency=concurrency,
                     variants=("baseline", "flawed"), flaws=("missing_step",))
    return summaries(EpisodeRunner(config, default_registry(), agent_factory=make_agent),
                     cases(config))


def test_results_do_not_depend_on_concurrency() -> None:
    assert _records(1) == _records(8)


def test_cpu_bound_cases_run_inline_in_the_item_thread() -> None:
    import threading

    threads: list[str] = []

    class ThreadNoting(CountingAgent):
        async def complete(self, request: ModelRequest) -> ModelReply:
            threads.append(threading.current_thread().name)
            return await super().complete(request)

    agent = ThreadNoting(delay=0.0)
    r = EpisodeRunner(CONFIG, default_registry(), agent_factory=lambda _: agent,
                      inline=lambda case: True)
    try:
        todo = cases()
        r.start(todo)  # nothing runs ahead
        assert threads == []
        records = [r.result(c) for c in todo]
    finally:
        r.close()
    assert [rec.id for rec in records] == [c.id for c in todo]
    assert set(threads) == {threading.current_thread().name}


def test_the_report_text_is_the_episode_as_it_ran() -> None:
    """Kept right after the episode, it travels with the record (a helper's pickle) and no
    later change to the record reaches it; it is no field of the record."""
    import dataclasses
    import json
    import pickle

    from pytest_resilibench.runtime.agents import make_agent

    config = replace(CONFIG, models=("builtin:follower",))
    r = EpisodeRunner(config, default_registry(), agent_factory=make_agent,
                      inline=lambda case: True,
                      report_text=lambda record: json.dumps(record.summary_json()))
    try:
        todo = cases(config)
        r.start(todo)
        records = [r.result(c) for c in todo]
    finally:
        r.close()
    for record in records:
        text = record.report_text()
        assert text is not None and json.loads(text) == record.summary_json()
        assert pickle.loads(pickle.dumps(record)).report_text() == text
        ran = record.outcome
        record.outcome = "full" if ran != "full" else "failed"  # a test that edits its record
        assert record.report_text() == text and json.loads(text)["outcome"] == ran
        assert "_report_text" not in record.to_json()
        assert dataclasses.replace(record).report_text() is None
