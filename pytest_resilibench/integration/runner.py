"""Runs episodes ahead of pytest's items, concurrently, on an asyncio loop in a thread.

pytest runs one item at a time; a real model answers in seconds. So once this process knows
its items (all of them without xdist, its round-robin share with it), the runner starts their
episodes longest first (each block of `window` cases in item order: start_order.py),
`concurrency` at a time, and each item just waits for its own result. A model agent that
keeps its requests in line itself (the OpenAI provider's limiter: at most `concurrency`
requests in flight) gets `EPISODES_PER_REQUEST_SLOT` times as many episodes: while one
episode works on its reply (tools, the next prompt) another's request takes the slot, and in
the run's last minutes the long episodes share the slots with many others instead of leaving
them idle one by one (bench/bench_throughput.py; docs/REPRODUCTION.md).
Run-ahead is bounded by a window so finished-but-unclaimed records never pile up in memory.
A case that was not announced (an xdist re-schedule after a worker crash) runs on demand.

Cases that do no I/O at all (a scripted agent on the simulator: `inline(case)`) gain nothing
from running ahead, and a second CPU-bound thread would make pytest's thread wait for the GIL
(up to the 5 ms switch interval) on every item; they run in the item's own thread instead, a
batch at a time, back to back (`batches.py`), and where cores are idle also ahead in forked
helper processes (`ahead.py`), forked before pytest's collection ends where the session can
tell the cases beforehand (`prestart`). The background loop and its thread start only when a case
needs them, so that such a fork happens with one thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.core.registry import ToolRegistry
from pytest_resilibench.integration.ahead import MIN_CASES, ForkedEpisodes, can_fork, idle_cores
from pytest_resilibench.integration.batches import Batches
from pytest_resilibench.integration.cases import Case
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.preload import import_before_threads
from pytest_resilibench.integration.start_order import longest_first
from pytest_resilibench.runtime.agent_boundary import CLOSE_TIMEOUT_S as BOUNDARY_CLOSE_TIMEOUT_S
from pytest_resilibench.runtime.agent_boundary import AgentError, AgentLimits, close_agent
from pytest_resilibench.runtime.agents.limiter import AdaptiveLimiter
from pytest_resilibench.runtime.environment import Environment
from pytest_resilibench.runtime.protocol import AnyAgent

if TYPE_CHECKING:
    from pytest_resilibench.runtime.episode import EpisodeSlots

__all__ = ["EPISODES_PER_REQUEST_SLOT", "EpisodeRunner"]

# Episodes in flight per request slot for a model that queues its own requests (a simulation
# from the episodes' own turns: 16 slots, 150 episodes: 91% of Little's law at 1, 95% at 2,
# 97% at 4; more buys little and holds more conversations in memory).
EPISODES_PER_REQUEST_SLOT = 4

# The least run-ahead window: the start order is longest first over a window of cases
# (start_order.py), so a larger one shortens the tail of larger runs; the records waiting for
# their items are about 1024 conversations at most (tens of MB) however long the run.
MIN_WINDOW = 1024

AgentFactory = Callable[[str], AnyAgent]
# May be async: opening an MCP connection is.
EnvironmentFactory = Callable[[Case], Environment | Awaitable[Environment] | None]


# How long an agent's `aclose()` may take at the end of a run.
CLOSE_TIMEOUT_S = BOUNDARY_CLOSE_TIMEOUT_S


class EpisodeRunner:
    def __init__(
        self,
        config: RunConfig,
        registry: ToolRegistry,
        *,
        agent_factory: AgentFactory,
        environment_factory: EnvironmentFactory | None = None,
        inline: Callable[[Case], bool] | None = None,
        window: int | None = None,
        helpers: int | None = None,
        report_text: Callable[[EpisodeRecord], str] | None = None,
        episodes_per_slot: int = EPISODES_PER_REQUEST_SLOT,
    ) -> None:
        """`episodes_per_slot`: episodes in flight per request slot of a model that queues
        its own requests (1: `concurrency` episodes whatever the agent). `helpers`:
        processes computing inline cases ahead; None: one per idle core, where forking is safe
        (`ahead.can_fork`), for runs of at least `ahead.MIN_CASES` such cases. `report_text`:
        the JSON text an item's report carries, kept on each record right after its episode
        (`EpisodeRecord.keep_report_text`)."""
        self.config = config
        self.registry = registry
        self._agent_factory = agent_factory
        self._environment_factory = environment_factory
        self._inline = inline or (lambda case: False)
        self._report_text = report_text
        self._episodes_per_slot = max(1, episodes_per_slot)
        self._window = window or max(MIN_WINDOW,
                                     2 * self._episodes_per_slot * config.concurrency)
        self._agents: dict[str, AnyAgent] = {}
        # One line per agent whose `aclose` raised or hung (the run goes on; the summary says).
        self.close_problems: list[str] = []
        self._futures: dict[str, concurrent.futures.Future[EpisodeRecord]] = {}
        # Who started each case: the feeder (holds a window slot) or an item on demand.
        self._started_by: dict[str, str] = {}
        # The feeder starts each window-sized block of an announcement longest first
        # (start_order.py): each announced case's block, and how many cases of each block
        # no item has taken yet (`_reachable`).
        self._block_of: dict[str, tuple[int, int]] = {}
        self._untaken: dict[tuple[int, int], int] = {}
        self._announcements = 0
        self._lock = threading.Lock()
        self._local_loop: asyncio.AbstractEventLoop | None = None  # inline cases, item thread
        self._helpers = helpers
        self._ahead: ForkedEpisodes | None = None
        self._batches: Batches | None = None  # inline cases this process computes
        self._background: asyncio.AbstractEventLoop | None = None  # see `_loop`
        self._thread: threading.Thread | None = None
        self._closed = False
        self._feeder: concurrent.futures.Future[None] | None = None
        self._claimed: asyncio.Semaphore | None = None  # window: unclaimed results ahead
        # Episodes in flight, by whether their agent queues its own requests (`_slots_of`).
        self._slots: dict[bool, EpisodeSlots] = {}
        self._limits = AgentLimits(turn_s=config.turn_limit, episode_s=config.episode_timeout)

    # --- called from pytest's thread ----------------------------------------------------------
    def prestart(self, cases: Sequence[Case]) -> None:
        """Fork the helpers now on cases this process will probably run in this order (all of
        a run's cases, before pytest has collected them), so that they compute while pytest
        collects; `start` keeps them if its cases are among these, in the same order."""
        if self._ahead is None and self._batches is None:
            self._fork_helpers([case for case in cases if self._inline(case)])

    def start(self, cases: Sequence[Case]) -> None:
        """Announce the cases this process will run, in the order it will run them."""
        inline = [case for case in cases if self._inline(case)]
        if self._ahead is not None and self._batches is None and not (
                inline and self._ahead.announce(inline)):
            self._ahead.close()  # forked on other cases (`prestart`): fork anew
            self._ahead = None
        if inline and self._batches is None:
            if self._ahead is None:
                self._fork_helpers(inline)  # before the background loop's thread may start
            claim = self._ahead.claim_after if self._ahead is not None else None
            self._batches = Batches(inline, self._episodes_here, claim)
        fresh = []
        with self._lock:
            for case in cases:
                if not self._inline(case) and case.id not in self._futures:
                    self._futures[case.id] = concurrent.futures.Future()
                    fresh.append(case)
            self._announcements += 1
            for index, case in enumerate(fresh):
                block = self._block_of[case.id] = (self._announcements, index // self._window)
                self._untaken[block] = self._untaken.get(block, 0) + 1
        if fresh:
            for model in dict.fromkeys(case.model for case in fresh):
                # Made on pytest's thread: its imports too (preload.py). A factory that fails
                # here (in an xdist worker, after the controller's check passed) fails each of
                # its items with its own message, as it will again there, not the run.
                with contextlib.suppress(Exception):
                    self._agent(model)
            self._feeder = asyncio.run_coroutine_threadsafe(self._feed(fresh), self._loop)

    def result(self, case: Case) -> EpisodeRecord:
        """The record of `case`, waiting for it. A case that was never announced, or whose
        turn the feeder has not reached (items run out of the announced order), runs now."""
        if self._inline(case):
            if self._ahead is not None and (record := self._ahead.take(case.id)) is not None:
                return record
            return self._batches.take(case) if self._batches else self._episode_here(case)
        with self._lock:
            future = self._futures.get(case.id)
            # Not started yet: the feeder will start it (longest first) if every earlier
            # block is taken, so the item waits for it; else it runs now.
            if case.id not in self._started_by and not self._reachable(case.id):
                self._started_by[case.id] = "item"
            started_by = self._started_by.get(case.id, "feeder")
            self._take(case.id)
        if future is None or started_by == "item":
            with self._lock:
                self._futures.pop(case.id, None)
            self._agent(case.model)  # made here, on pytest's thread (preload.py)
            return asyncio.run_coroutine_threadsafe(self._in_slot(case), self._loop).result()
        try:
            return future.result()
        finally:
            with self._lock:
                self._futures.pop(case.id, None)
                self._started_by.pop(case.id, None)
            if self._claimed is not None:  # let the feeder run one more case ahead
                self._loop.call_soon_threadsafe(self._claimed.release)

    def close(self) -> None:
        """Stop what is still queued and the helpers, close the agents, stop the loops."""
        if self._closed:
            return
        self._closed = True
        if self._ahead is not None:
            self._ahead.close()
        if self._batches is not None:
            self._batches.close()
        if self._feeder is not None:
            self._feeder.cancel()
        if self._background is not None:
            loop = self._background
            asyncio.run_coroutine_threadsafe(self._aclose(), loop).result(
                timeout=CLOSE_TIMEOUT_S * (len(self._agents) + 1))
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            loop.close()
        elif self._agents:  # only inline cases ran: close their agents here
            closing = self._local_loop or asyncio.new_event_loop()
            closing.run_until_complete(self._aclose())
            if closing is not self._local_loop:
                closing.close()
        if self._local_loop is not None:
            self._local_loop.close()
            self._local_loop = None

    def _reachable(self, case_id: str) -> bool:
        """Whether the feeder will start `case_id` with no more results taken: every case of
        the blocks before its own is taken (the feeder holds a block's worth of window, and
        starts a block's cases before the next block's). Under `_lock`."""
        block = self._block_of.get(case_id)
        return block is not None and not any(
            left for other, left in self._untaken.items() if other < block)

    def _take(self, case_id: str) -> None:
        """`case_id`'s item has asked for its result: one fewer untaken in its block."""
        block = self._block_of.pop(case_id, None)
        if block is not None:
            self._untaken[block] -= 1
            if not self._untaken[block]:
                del self._untaken[block]

    @property
    def peak_in_flight(self) -> int:
        """The most episodes that were in flight at once on the loop (of one kind of agent:
        those that queue their own requests, or the others)."""
        return max((slots.peak for slots in self._slots.values()), default=0)

    @property
    def helper_processes(self) -> int:
        """How many helper processes compute inline cases ahead (0: none)."""
        return self._ahead.processes if self._ahead is not None else 0

    def _episode_here(self, case: Case) -> EpisodeRecord:
        """An inline case's episode, in the item's thread."""
        (result,) = self._episodes_here([case])
        if isinstance(result, Exception):
            raise result
        return result

    def _episodes_here(self, cases: Sequence[Case]) -> list[EpisodeRecord | Exception]:
        """Inline cases' episodes one after another in the item's thread, in one run of the
        local loop (a run costs more than a scripted episode's own awaits); each case's
        record, or what computing it raised."""
        if self._local_loop is None:
            self._local_loop = asyncio.new_event_loop()
        return self._local_loop.run_until_complete(self._in_turn(cases))

    async def _in_turn(self, cases: Sequence[Case]) -> list[EpisodeRecord | Exception]:
        results: list[EpisodeRecord | Exception] = []
        for case in cases:
            try:
                results.append(await self._episode(case))
            except Exception as exc:  # that case's item shows it; the others go on
                results.append(exc)
        return results

    def _fork_helpers(self, inline: Sequence[Case]) -> None:
        if self._helpers is None:  # one per idle core, for enough cases, where safe
            processes = idle_cores() if len(inline) >= MIN_CASES and can_fork() else 0
        else:  # the caller's choice (tests)
            processes = self._helpers
        if processes > 0:
            self._ahead = ForkedEpisodes(self._episode, inline, processes,
                                         compute_here=self._episode_here)

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        """The background loop, started on first use in its own (daemon) thread."""
        if self._background is None:
            # Whatever the thread may import, imported now, on pytest's thread (preload.py).
            import_before_threads()
            self._background = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._background.run_forever,
                                            name="resili-episodes", daemon=True)
            self._thread.start()
        return self._background

    # --- on the loop --------------------------------------------------------------------------
    async def _feed(self, cases: Sequence[Case]) -> None:
        if self._claimed is None:
            self._claimed = asyncio.Semaphore(self._window)
        claimed = self._claimed
        pending: set[asyncio.Task[None]] = set()
        try:
            # Longest first, a window at a time: a shorter tail (start_order.py). Every case of
            # a window starts before its items wait, so none runs on demand.
            for case in longest_first(cases, self._window, expected_turns, _case_id):
                await claimed.acquire()  # released when an item takes its result
                with self._lock:
                    taken = self._started_by.setdefault(case.id, "feeder") != "feeder"
                if taken:  # its item already ran it on demand
                    claimed.release()
                    continue
                slots = self._slots_of(case.model)
                task = await slots.start(functools.partial(self._settle, case))
                pending.add(task)
                task.add_done_callback(pending.discard)
            if pending:
                await asyncio.gather(*pending)
        except asyncio.CancelledError:
            for task in pending:
                task.cancel()
            raise
        except Exception as exc:  # a harness bug: every waiting item shows it, none hangs
            with self._lock:
                waiting = [f for f in self._futures.values() if not f.done()]
            for future in waiting:
                future.set_exception(exc)

    def _slots_of(self, model: str) -> EpisodeSlots:
        """The bound on episodes in flight of `model`'s kind (runtime/episode.py), made on the
        loop it serves: `concurrency`, times `episodes_per_slot` for an agent that keeps its
        own requests to `concurrency` (any other, a user's `py:` agent calling its own API
        say, gets no more episodes than the option says)."""
        try:
            agent: AnyAgent | None = self._agent(model)
        except Exception:  # its factory failed: each of its episodes raises that, one a slot
            agent = None
        queues = isinstance(getattr(agent, "limiter", None), AdaptiveLimiter)
        slots = self._slots.get(queues)
        if slots is None:
            from pytest_resilibench.runtime.episode import EpisodeSlots

            per_slot = self._episodes_per_slot if queues else 1
            slots = self._slots[queues] = EpisodeSlots(per_slot * self.config.concurrency)
        return slots

    async def _in_slot(self, case: Case) -> EpisodeRecord:
        """An on-demand case: it skips the window (its item is waiting for it now) but not
        the concurrency bound."""
        slots = self._slots_of(case.model)
        return await (await slots.start(functools.partial(self._episode, case)))

    async def _settle(self, case: Case) -> None:
        with self._lock:
            future = self._futures.get(case.id)
        try:
            record = await self._episode(case)
        except BaseException as exc:  # a harness bug: the item shows it, the others go on
            if future is not None and not future.done():
                future.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            if future is not None and not future.done():
                future.set_result(record)

    def _agent(self, model: str) -> AnyAgent:
        with self._lock:  # the item thread (inline cases) and the loop thread both ask
            agent = self._agents.get(model)
            if agent is None:
                agent = self._agents[model] = self._agent_factory(model)
        return agent

    async def _episode(self, case: Case) -> EpisodeRecord:
        """`_run_episode`, but that nothing but an `Exception` (or our own cancellation, or
        the user's Ctrl-C on the main thread) leaves it: raised out of a task on the loop, a
        `SystemExit` would stop the loop itself, and every item after it would wait for ever."""
        try:
            return await self._run_episode(case)
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and \
                    threading.current_thread() is threading.main_thread():
                raise
            raise RuntimeError(f"{type(exc).__name__} escaped the episode: "
                               f"{exc}".rstrip(": ")) from exc

    async def _run_episode(self, case: Case) -> EpisodeRecord:
        from pytest_resilibench.runtime.episode import run_episode

        made = self._environment_factory(case) if self._environment_factory else None
        environment = await made if inspect.isawaitable(made) else made
        try:
            record = await run_episode(
                case.task, case.variant, self._agent(case.model),
                seed=self.config.seed, repeat=case.repeat, base_success=case.base_success,
                max_turns=self.config.max_turns, tool_mode=self.config.tool_mode,
                registry=self.registry, environment=environment, model_name=case.model,
                faults=self.config.faults, limits=self._limits,
            )
        finally:
            if environment is not None:
                await environment.aclose()
        record.id = case.id
        if not case.model.startswith("builtin:"):  # a scripted agent has no price
            from pytest_resilibench.runtime.agents.pricing import episode_cost, load_prices

            # The spec's price, the agent's name's, else its models' (adapters name them).
            names = (case.model, str(getattr(self._agent(case.model), "name", "")))
            record.cost_usd = episode_cost(record.tokens, record.tokens_by_model,
                                           [n for n in names if n],
                                           load_prices(self.config.prices))
        if self._report_text is not None:
            record.keep_report_text(self._report_text(record))
        return record

    def agent_stats(self) -> dict[str, dict[str, Any]]:
        """Each real model provider's counters (`ProviderStats.to_json()`), by model."""
        with self._lock:
            agents = dict(self._agents)
        return {model: stats.to_json() for model, agent in agents.items()
                if (stats := getattr(agent, "stats", None)) is not None
                and hasattr(stats, "to_json")}

    async def _aclose(self) -> None:
        for model, agent in self._agents.items():
            # A model-call cache that failed went quiet for the run (agents/cache.py): say so.
            problem = getattr(getattr(agent, "cache", None), "problem", None)
            if isinstance(problem, str):
                self.close_problems.append(problem)
            # A user's `aclose` that raises or never returns must neither crash nor hang the
            # end of the run, nor keep the other agents open: it is noted and passed.
            # (agent_boundary.py: whatever it raises, SystemExit included, and one that
            # ignores its cancellation is left behind.)
            try:
                await close_agent(agent, timeout_s=CLOSE_TIMEOUT_S)
            except AgentError as exc:
                if exc.line.startswith("TimeoutError: aclose() did not return"):
                    self.close_problems.append(
                        f"resilibench: the agent of {model} did not close within "
                        f"{CLOSE_TIMEOUT_S:g} s (its aclose() was left running)")
                else:
                    self.close_problems.append(
                        f"resilibench: closing the agent of {model} failed: {exc.line}")
            except Exception as exc:  # one of ours: a harness bug, said as such
                from pytest_resilibench.runtime.agent_boundary import raised_where

                self.close_problems.append(f"resilibench: closing the agent of {model} failed: "
                                           f"{raised_where(exc)}")
        self._agents.clear()


def expected_turns(case: Case) -> int:
    """What an episode's length is expected from: its task's reference plan's steps (a turn
    each, about: the plan the agent is given differs from it by a flaw's step or two)."""
    return len(case.task.reference_workflow().steps)


def _case_id(case: Case) -> str:
    return case.id
