"""Forked helpers: the same records as in process, work shared by claims, a dead helper costs
nothing but time."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from dataclasses import replace

import pytest

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.ahead import ForkedEpisodes, can_fork
from pytest_resilibench.integration.cases import Case, build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.runner import EpisodeRunner
from pytest_resilibench.runtime.agents import make_agent
from tests.unit.sample_records import record_of

# The runner forks on its own only where `can_fork()`; these tests fork on purpose, also in an
# xdist worker (its threads are execnet's: a helper never touches them).
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="helpers fork: Linux only")

CONFIG = RunConfig(models=("builtin:follower",), variants=("optimal", "flawed"),
                   flaws=("missing_step", "semantic_drift"), sample=1)


def cases(config: RunConfig = CONFIG) -> list[Case]:
    return build_cases(config, list(load_tasks()))


def gated(go: object) -> object:
    """A compute that waits for `go` (an inherited multiprocessing Event) before each case,
    so the test decides when the helper gets anywhere."""

    async def compute(case: Case) -> EpisodeRecord:
        go.wait()  # type: ignore[attr-defined]
        return record_of(case)

    return compute


def test_helpers_give_the_records_computed_in_process() -> None:
    def records(helpers: int) -> tuple[list[dict[str, object]], int]:
        runner = EpisodeRunner(CONFIG, default_registry(), agent_factory=make_agent,
                               inline=lambda case: True, helpers=helpers)
        try:
            todo = cases()
            runner.start(todo)
            forked = runner.helper_processes
            got = [runner.result(c).summary_json() for c in todo]
        finally:
            runner.close()
        for record in got:
            record.pop("wall_time_s")
        return got, forked

    alone, none = records(0)
    shared, two = records(2)
    assert (none, two) == (0, 2)
    assert shared == alone
    assert [r["id"] for r in shared] == [c.id for c in cases()]


def test_a_case_no_helper_has_started_is_the_callers() -> None:
    go = multiprocessing.get_context("fork").Event()
    todo = cases()[:8]
    ahead = ForkedEpisodes(gated(go), todo, 1)  # type: ignore[arg-type]
    try:
        wait_for_claim(ahead, 0)  # the helper holds the first case and waits on `go`
        assert ahead.take(todo[-1].id) is None  # free: now the caller's
        assert ahead.take(todo[-1].id) is None  # never handed out twice
        go.set()
        first = ahead.take(todo[0].id)
        rest = [ahead.take(c.id) for c in todo[1:-1]]
        claims = list(ahead._claims[:len(todo)])
    finally:
        ahead.close()
    assert first is not None and first.id == todo[0].id
    # Every other case came from the helper, with its own id, or was free and so the caller's
    # (the caller here does not compute, so it may overtake the helper): none was lost.
    for case, record, claim in zip(todo[1:-1], rest, claims[1:-1], strict=True):
        assert (record.id, claim) == (case.id, 1) if record is not None else claim == 255
    assert claims[-1] == 255


def test_an_item_waiting_for_a_helper_computes_the_next_free_cases() -> None:
    from pytest_resilibench.integration.ahead import LEAD

    go = multiprocessing.get_context("fork").Event()
    todo = cases()[:LEAD + 4]
    here: list[str] = []

    def compute_here(case: Case) -> EpisodeRecord:
        here.append(case.id)
        if len(here) == 3:  # the helper may deliver from now on
            go.set()
        return record_of(case)

    ahead = ForkedEpisodes(gated(go), todo, 1,  # type: ignore[arg-type]
                           compute_here=compute_here)
    # Should the caller not work while it waits, the test fails instead of waiting forever.
    import threading

    unblock = threading.Timer(30, go.set)
    unblock.start()
    try:
        wait_for_claim(ahead, 0)  # the helper holds the first case and waits on `go`
        first = ahead.take(todo[0].id)
        spare = [ahead.take(c.id) for c in todo[1:len(here) + 1]]
        claims = list(ahead._claims[:len(todo)])
    finally:
        unblock.cancel()
        ahead.close()
    assert first is not None and first.id == todo[0].id
    # While the helper held the first case, the caller computed the next ones (never past
    # the lead, which is the items' own), and they are its items' records now.
    assert 3 <= len(here) < LEAD
    assert here == [c.id for c in todo[1:len(here) + 1]]
    assert [r.id if r is not None else None for r in spare] == here
    assert claims[1:len(here) + 1] == [255] * len(here)


def wait_for_claim(ahead: ForkedEpisodes, index: int) -> None:
    while ahead._claims[index] == 0:
        os.sched_yield()


def test_unannounced_cases_are_the_callers() -> None:
    go = multiprocessing.get_context("fork").Event()
    todo = cases()
    ahead = ForkedEpisodes(gated(go), todo[:2], 1)  # type: ignore[arg-type]
    try:
        assert ahead.take(todo[5].id) is None
        assert ahead.take(replace(todo[0], id="other").id) is None
    finally:
        go.set()
        ahead.close()


def test_a_dead_helper_leaves_its_cases_to_the_caller() -> None:
    go = multiprocessing.get_context("fork").Event()
    todo = cases()[:4]
    ahead = ForkedEpisodes(gated(go), todo, 1)  # type: ignore[arg-type]
    try:
        pid = ahead._helpers[0].pid
        wait_for_claim(ahead, 0)  # then the helper blocks on `go`
        os.kill(pid, signal.SIGKILL)
        assert ahead.take(todo[0].id) is None  # claimed by the dead helper: never delivered
        assert ahead.take(todo[1].id) is None  # free: the caller's
    finally:
        ahead.close()


def test_close_stops_helpers_that_are_still_working() -> None:
    go = multiprocessing.get_context("fork").Event()
    ahead = ForkedEpisodes(gated(go), cases(), 2)  # type: ignore[arg-type]
    pids = [helper.pid for helper in ahead._helpers]
    ahead.close()
    for pid in pids:
        with pytest.raises(ChildProcessError):  # reaped: no zombie left behind
            os.waitpid(pid, os.WNOHANG)


def test_no_fork_where_another_thread_runs() -> None:
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
    finally:
        stop.set()
        thread.join()


def test_no_fork_beside_a_thread_threading_does_not_see() -> None:
    """An xdist worker's execnet receiver is started with `_thread`, not `threading`."""
    import _thread
    import threading

    started, stop = threading.Event(), threading.Event()

    def run() -> None:
        started.set()
        stop.wait()

    _thread.start_new_thread(run, ())
    started.wait()
    try:
        assert not can_fork()
    finally:
        stop.set()


def test_a_small_run_forks_no_helper() -> None:
    from pytest_resilibench.integration.ahead import MIN_CASES

    todo = cases()
    assert len(todo) < MIN_CASES
    runner = EpisodeRunner(CONFIG, default_registry(), agent_factory=make_agent,
                           inline=lambda case: True)
    try:
        runner.start(todo)
        assert runner.helper_processes == 0
    finally:
        runner.close()


def test_a_helper_keeps_its_lead_on_the_items() -> None:
    from pytest_resilibench.integration.ahead import LEAD

    go = multiprocessing.get_context("fork").Event()
    todo = cases()[:LEAD + 8]
    ahead = ForkedEpisodes(gated(go), todo, 1)  # type: ignore[arg-type]
    try:
        wait_for_claim(ahead, 0)  # the helper holds the first case and waits on `go`
        assert ahead.take(todo[2].id) is None  # free: the caller's, and the items are at 2
        go.set()
        wait_for_claim(ahead, 2 + LEAD)  # the helper's next case: past the lead
        claims = list(ahead._claims[:2 + LEAD])
    finally:
        ahead.close()
    # The cases the items reach first are left to them, not started under their feet.
    assert claims == [1, 0, 255] + [0] * (LEAD - 1)


def test_cases_claimed_for_a_batch_here_are_skipped_by_the_helpers() -> None:
    go = multiprocessing.get_context("fork").Event()
    todo = cases()[:8]
    ahead = ForkedEpisodes(gated(go), todo, 1)  # type: ignore[arg-type]
    try:
        wait_for_claim(ahead, 0)  # the helper holds the first case and waits on `go`
        claimed = ahead.claim_after(todo[0].id, 3)
        assert ahead.claim_after(todo[0].id, 3) == []  # never claimed twice
        go.set()
        first = ahead.take(todo[0].id)
        mine = [ahead.take(c.id) for c in todo[1:4]]  # this process's: None, to compute
        rest = [ahead.take(c.id) for c in todo[4:]]
        claims = list(ahead._claims[:len(todo)])
    finally:
        ahead.close()
    assert [c.id for c in claimed] == [c.id for c in todo[1:4]]
    assert first is not None and mine == [None] * 3
    assert claims[:4] == [1, 255, 255, 255]
    for case, record, claim in zip(todo[4:], rest, claims[4:], strict=True):
        assert (record.id, claim) == (case.id, 1) if record is not None else claim == 255


def test_helpers_forked_before_the_items_are_known_keep_to_those_announced() -> None:
    """`prestart` forks on all the cases; `start` narrows the helpers to the items' cases when
    they are among them in the same order (a deselection), so the others are never started
    and their records, computed already or not, never reach an item; in any other order the
    runner forks anew. The records are those of a runner that knew its items from the start."""
    todo = cases()
    picked = todo[1::3]

    def run(prestart: list[Case] | None,
            announced: list[Case]) -> tuple[list[dict[str, object]], int]:
        runner = EpisodeRunner(CONFIG, default_registry(), agent_factory=make_agent,
                               inline=lambda case: True, helpers=1)
        try:
            if prestart is not None:
                runner.prestart(prestart)
                early = runner._ahead
                assert early is not None and runner.helper_processes == 1
            runner.start(announced)
            kept = runner._ahead is early if prestart is not None else False
            got = [runner.result(c).summary_json() for c in announced]
        finally:
            runner.close()
        for record in got:
            record.pop("wall_time_s")
        return got, int(kept)

    expected, _ = run(None, picked)
    assert run(todo, picked) == (expected, 1)  # narrowed: the same helper goes on
    reordered = picked[::-1]
    again, kept = run(todo, reordered)
    assert kept == 0 and again == run(None, reordered)[0]  # forked anew


def test_announcing_claims_the_cases_left_out_for_this_process() -> None:
    go = multiprocessing.get_context("fork").Event()
    todo = cases()[:12]
    ahead = ForkedEpisodes(gated(go), todo, 1)  # type: ignore[arg-type]
    try:
        wait_for_claim(ahead, 0)  # the helper holds the first case and waits on `go`
        assert not ahead.announce([todo[3], todo[2]])  # another order: refused, no change
        assert ahead._claims[1] == 0
        assert ahead.announce([todo[0], todo[5], todo[9]])
        claims = list(ahead._claims[:len(todo)])
        go.set()
        first = ahead.take(todo[0].id)
        assert ahead.take(todo[1].id) is None  # not announced
    finally:
        ahead.close()
    assert first is not None and first.id == todo[0].id
    assert claims == [1] + [255 if j not in (5, 9) else 0 for j in range(1, 12)]


def test_a_helper_runs_on_past_a_full_pipe_while_nothing_is_read() -> None:
    """While the parent reads nothing (pytest collecting, the summary's imports), a helper
    holds the records its pipe has no room for and goes on; none is lost or reordered."""
    big = "x" * (256 << 10)  # four records fill the 1 MiB pipe

    async def compute(case: Case) -> EpisodeRecord:
        record = record_of(case)
        record.messages = [{"role": "system", "content": big}]
        return record

    todo = cases()[:24]
    ahead = ForkedEpisodes(compute, todo, 1)
    try:
        deadline = time.monotonic() + 120  # a guard against hanging, not a timing claim
        while ahead._claims[len(todo) - 1] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        reached = ahead._claims[len(todo) - 1] != 0  # the last case, with nothing read
        got = [ahead.take(c.id) for c in todo]
    finally:
        ahead.close()
    assert reached
    assert [r.id if r is not None else None for r in got] == [c.id for c in todo]
    assert all(r is not None and r.messages[0]["content"] == big for r in got)


def test_records_computed_before_announcing_for_cases_left_out_are_dropped() -> None:
    async def compute(case: Case) -> EpisodeRecord:
        return record_of(case)

    todo = cases()[:12]
    ahead = ForkedEpisodes(compute, todo, 1)
    try:
        wait_for_claim(ahead, 4)  # the helper got to case 4: cases 1 to 3 are computed
        assert ahead.announce([todo[0], todo[4], todo[6]])
        # Case 6 is the helper's once it claims it (it is free: announce left it); taken any
        # sooner, on a loaded machine, it would be this process's to compute (None).
        wait_for_claim(ahead, 6)
        got = [ahead.take(c.id) for c in (todo[0], todo[4])]  # reads past 1 to 3
        early = dict(ahead._helpers[0]._early)
        last = ahead.take(todo[6].id)
    finally:
        ahead.close()
    assert [r.id if r is not None else None for r in got] == [todo[0].id, todo[4].id]
    assert set(early) <= {todo[6].id}  # none of the cases left out is kept
    assert last is not None and last.id == todo[6].id
