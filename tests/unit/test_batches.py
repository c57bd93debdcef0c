"""Episodes computed here a batch at a time: the same records, nothing lost, bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.batches import BATCH, Batches
from pytest_resilibench.integration.cases import Case, build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.runner import EpisodeRunner
from tests.unit.sample_records import record_of, summaries


def cases(n: int) -> list[Case]:
    config = RunConfig(models=("builtin:follower",), sample=None)
    return build_cases(config, list(load_tasks()))[:n]


class Computing:
    """Records each computed case and each batch; fails on the ids in `broken` (the first
    `times` times)."""

    def __init__(self, broken: Sequence[str] = (), times: int = 1) -> None:
        self.computed: list[str] = []
        self.batches: list[list[str]] = []
        self.broken = {case_id: times for case_id in broken}

    def __call__(self, cases: Sequence[Case]) -> list[EpisodeRecord | Exception]:
        self.batches.append([case.id for case in cases])
        return [self._one(case) for case in cases]

    def _one(self, case: Case) -> EpisodeRecord | Exception:
        self.computed.append(case.id)
        if self.broken.get(case.id, 0) > 0:
            self.broken[case.id] -= 1
            return RuntimeError(f"broken {case.id}")
        return record_of(case)


def test_each_case_is_computed_once_a_batch_at_a_time() -> None:
    todo = cases(2 * BATCH + 3)
    compute = Computing()
    batches = Batches(todo, compute)
    got = [batches.take(case).id for case in todo]
    assert got == [case.id for case in todo]
    assert sorted(compute.computed) == sorted(got)  # none twice
    # The first item computed its own case and the next BATCH - 1, back to back, in one call.
    assert compute.batches[0] == got[:BATCH]
    assert [len(batch) for batch in compute.batches] == [BATCH, BATCH, 3]
    assert len(batches._done) == 0


def test_records_kept_for_later_items_stay_within_a_batch() -> None:
    todo = cases(3 * BATCH)
    batches = Batches(todo, Computing())
    for case in todo:
        batches.take(case)
        assert len(batches._done) < BATCH


def test_a_later_case_that_fails_is_left_to_its_own_item() -> None:
    todo = cases(8)
    compute = Computing(broken=[todo[3].id])
    batches = Batches(todo, compute)
    assert batches.take(todo[0]).id == todo[0].id  # the batch's failure is not this item's
    for case in todo[1:3]:
        assert batches.take(case).id == case.id
    assert batches.take(todo[3]).id == todo[3].id  # computed again, by its own item
    assert compute.computed.count(todo[3].id) == 2


def test_an_items_own_failure_is_its_own() -> None:
    todo = cases(4)
    batches = Batches(todo, Computing(broken=[todo[0].id]))
    with pytest.raises(RuntimeError, match="broken"):
        batches.take(todo[0])


def test_items_out_of_order_and_unannounced_cases_are_computed_once() -> None:
    todo = cases(10)
    compute = Computing()
    batches = Batches(todo[:8], compute)
    order = [todo[5], todo[0], *todo[1:5], *todo[6:8], todo[9]]  # todo[9]: unannounced
    got = [batches.take(case).id for case in order]
    assert got == [case.id for case in order]
    assert sorted(compute.computed) == sorted(got)


def test_only_claimed_cases_are_computed_with_a_batch() -> None:
    todo = cases(10)
    compute = Computing()
    asked: list[tuple[str, int]] = []

    def claim(case_id: str, n: int) -> list[Case]:  # as ahead.py's: helpers hold odd cases
        asked.append((case_id, n))
        i = [c.id for c in todo].index(case_id)
        return [c for c in todo[i + 1: i + 1 + n] if todo.index(c) % 2 == 0]

    batches = Batches(todo, compute, claim)
    batches.take(todo[0])
    assert asked == [(todo[0].id, BATCH - 1)]
    assert compute.computed == [c.id for c in todo[::2]]


def test_the_runner_gives_the_records_of_one_at_a_time() -> None:
    """Batched (the runner's way without helpers) or one by one: the same records."""
    from pytest_resilibench.core.registry import default_registry
    from pytest_resilibench.runtime.agents import make_agent

    config = RunConfig(models=("builtin:follower",), variants=("baseline", "flawed"),
                       flaws=("missing_step",), sample=2)
    todo = build_cases(config, list(load_tasks()))
    assert len(todo) > BATCH

    def records(announce: bool) -> list[dict[str, object]]:
        # announced: batched; not: each computed as its item asks
        return summaries(EpisodeRunner(config, default_registry(), agent_factory=make_agent,
                                       inline=lambda case: True, helpers=0),
                         todo, announce=announce)

    assert records(True) == records(False)


def test_the_runner_computes_a_batch_in_one_loop_run_and_keeps_a_failure_to_its_case() -> None:
    """One run of the item thread's loop a batch; a case whose episode could not even start
    (its environment failed) raises at its own item, and the batch's other records stand."""
    from pytest_resilibench.core.registry import default_registry
    from pytest_resilibench.runtime.agents import make_agent

    config = RunConfig(models=("builtin:follower",), sample=1)
    todo = build_cases(config, list(load_tasks()))[:BATCH]
    broken = todo[5].id

    def environment(case: Case) -> None:
        if case.id == broken:
            raise RuntimeError(f"no environment for {case.id}")

    runner = EpisodeRunner(config, default_registry(), agent_factory=make_agent,
                           environment_factory=environment, inline=lambda case: True,
                           helpers=0)
    runs = 0
    loop = runner._local_loop = asyncio.new_event_loop()  # the item thread's, counted
    original = loop.run_until_complete
    try:

        def counted(future: object) -> object:
            nonlocal runs
            runs += 1
            return original(future)  # type: ignore[arg-type]

        loop.run_until_complete = counted  # type: ignore[method-assign,assignment]
        runner.start(todo)
        got = [runner.result(case).id for case in todo[:5]]
        with pytest.raises(RuntimeError, match="no environment"):
            runner.result(todo[5])
        got += [runner.result(case).id for case in todo[6:]]
        runs_for_items = runs  # closing runs the loop once more, to close the agents
    finally:
        runner.close()
    assert got == [case.id for case in todo if case.id != broken]
    # The batch, then the broken case again, alone, for its own item.
    assert runs_for_items == 2
