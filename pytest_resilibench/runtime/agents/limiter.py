"""How many requests a provider takes at once: an adaptive concurrency limit per (model, base URL).

AIMD, as TCP's congestion window: every reply that succeeds adds to the window (one a reply
while below the level a 429 interrupted, `1/window**2` a reply above it: slow probing where
the provider already said no), a 429 (or a reply saying an `x-ratelimit-remaining-*` budget
is at 0) halves it, once per round: a refusal of a request sent before the last decrease says
nothing new. `--resili-concurrency` is the ceiling, per process. The refused request waits
out `Retry-After` alone; a success whose remaining budget is 0 holds every new request until
that budget's `x-ratelimit-reset-*` (OpenAI: "the time until the rate limit resets to its
initial state", https://platform.openai.com/docs/guides/rate-limits, "Rate limits in
headers"; values such as `1s`, `6m0s`, `20ms`). `--resili-rpm` / `--resili-tpm` pace
requests and tokens (usage) evenly, as token buckets whose burst is one second's share at
most: providers enforce a per-minute limit over shorter periods (OpenAI: "60,000
requests/minute may be enforced as 1,000 requests/second", the rate-limits guide), so a
minute's budget sent at once is refused although the minute's total is within it. The request
bucket keeps one request of its second's share back, for the jitter between sending and
arriving.

Shared by every process on the host that talks to the same model and base URL (xdist
workers): the state is a small JSON file in the temp folder, read and written under
`fcntl.flock`. Each live process holds a share of the window (at least one request); a
process that exits or crashes stops counting when its pid is gone (or unseen for
`STALE_S`), so no slot leaks. A file whose processes are all gone starts afresh. While no
limit has been met (the first round: every process has its whole ceiling) and no tpm is set, a
reply that would change nothing there but its process's heartbeat is not written, and the file
is looked at again at most every `QUIET_LOOK_S` (issue 47: the file's lock, read and write on
every request were 40% of the client's busy time at concurrency 64 on a loaded machine,
its slots idle meanwhile: docs/REPRODUCTION.md).

Within a process, requests wait for a slot in line. The runner keeps more episodes in flight
than the ceiling (integration/runner.py), so that a reply's episode, busy with its tools, leaves
its slot to one whose request is ready. The line goes by rank, the provider's: the request of
the episode with the fewest turns behind it first (least attained service), so episodes move
on about together and none is left alone with many turns to go at the end of the run, slots
idle around it; first come first served among equals.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import fcntl
import functools
import hashlib
import itertools
import json
import math
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

__all__ = [
    "DEFAULT_MAX_WAIT_S",
    "AdaptiveLimiter",
    "FileStore",
    "Limits",
    "MemoryStore",
    "RateLimitWait",
    "parse_duration",
    "read_limits",
    "shared_path",
]

DEFAULT_MAX_WAIT_S = 600.0  # what one request may wait on limits before it is an infra error
# The burst the rpm and tpm buckets allow: one second's share (module docstring).
BURST_S = 1.0
BETA = 0.5  # multiplicative decrease
STALE_S = 120.0  # a process unseen this long holds no share any more
POLL_S = 0.25  # how often a waiting request looks at the shared window again
QUIET_LOOK_S = 0.1  # how stale the shared state may be while no limit was met (docstring)
_monotonic = time.monotonic  # the quiet looks' clock (a test holds it still)
_T = TypeVar("_T")
Outcome = Literal["ok", "limited", "other"]


class RateLimitWait(Exception):
    """A request waited its whole budget on limits; the message says for what."""


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")


def parse_duration(text: str | None) -> float | None:
    """Seconds of an OpenAI reset value: `1s`, `6m0s`, `20ms`, `1h2m3.5s`, or bare seconds."""
    if text is None:
        return None
    text = text.strip().lower()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    total, at = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != at:
            return None
        number, unit = float(match.group(1)), match.group(2)
        total += number * {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}[unit]
        at = match.end()
    return total if at == len(text) and at else None


@dataclass(frozen=True)
class Limits:
    """What a reply's headers say about the provider's limits (None: not said)."""

    retry_after_s: float | None = None
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests_s: float | None = None
    reset_tokens_s: float | None = None

    def exhausted_for_s(self) -> float | None:
        """Seconds until a budget at 0 resets (the longest), None when none is at 0."""
        waits = [reset or 0.0 for left, reset in
                 ((self.remaining_requests, self.reset_requests_s),
                  (self.remaining_tokens, self.reset_tokens_s)) if left is not None and left <= 0]
        return max(waits) if waits else None


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text is not None else None
    except (ValueError, OverflowError):
        return None


def read_limits(headers: Mapping[str, str]) -> Limits:
    """OpenAI's rate-limit headers (https://platform.openai.com/docs/guides/rate-limits):
    `x-ratelimit-remaining-requests`/`-tokens`, `x-ratelimit-reset-requests`/`-tokens`;
    `retry-after-ms` (OpenAI's), else `Retry-After` in seconds or as an HTTP date."""
    from email.utils import parsedate_to_datetime

    retry: float | None = None
    with contextlib.suppress(ValueError, TypeError, OverflowError):
        if headers.get("retry-after-ms") is not None:
            retry = max(0.0, float(headers["retry-after-ms"]) / 1000.0)
        elif (value := headers.get("retry-after")) is not None:
            try:
                retry = max(0.0, float(value))
            except ValueError:
                retry = max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    return Limits(retry_after_s=retry,
                  remaining_requests=_int(headers.get("x-ratelimit-remaining-requests")),
                  remaining_tokens=_int(headers.get("x-ratelimit-remaining-tokens")),
                  reset_requests_s=parse_duration(headers.get("x-ratelimit-reset-requests")),
                  reset_tokens_s=parse_duration(headers.get("x-ratelimit-reset-tokens")))


# --- where the state lives --------------------------------------------------------------------
class Store(Protocol):
    def update(self, change: Callable[[dict[str, Any]], _T]) -> _T: ...


class MemoryStore:
    """One process's state (tests, and where no shared file can be had)."""

    def __init__(self) -> None:
        self._state: dict[str, Any] = {}

    def update(self, change: Callable[[dict[str, Any]], _T]) -> _T:
        return change(self._state)


class FileStore:
    """The state in a JSON file, changed under an exclusive `flock` (processes on one host).
    A file that cannot be parsed (a crash mid-write cannot happen under the lock, but a
    stranger's file could) starts afresh. A change that leaves the state empty (the last
    process left) removes the file, so runs leave nothing in the temp folder."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def update(self, change: Callable[[dict[str, Any]], _T]) -> _T:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not self._still_there(fd):  # removed while we waited for the lock
                    continue
                with os.fdopen(os.dup(fd), "r+", encoding="utf-8") as file:
                    try:
                        state = json.loads(file.read() or "{}")
                    except ValueError:
                        state = {}
                    if not isinstance(state, dict):
                        state = {}
                    result = change(state)
                    if not state:
                        self.path.unlink(missing_ok=True)  # under the lock: see _still_there
                    else:
                        file.seek(0)
                        file.truncate()
                        file.write(json.dumps(state))
                return result
            finally:
                os.close(fd)  # releases the lock

    def _still_there(self, fd: int) -> bool:
        """Whether the open file is still the one at `path` (not unlinked by the last process
        to leave while this one waited for the lock)."""
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def shared_path(model: str, base_url: str | None) -> Path:
    """The state file of a (model, base URL): in the temp folder, keyed by a hash (the URL may
    hold credentials), per user."""
    key = hashlib.sha256(f"{model}\0{base_url or ''}".encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"resilibench-limit-{os.getuid()}-{key}.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Ticket:
    """A request let through: the round (`epoch`) it was sent in."""

    epoch: int


class _Place:
    """A request's place in line: woken when a slot may have come free for it."""

    def __init__(self, rank: int, arrival: int) -> None:
        self.rank, self.arrival = rank, arrival
        self._woken = asyncio.Event()

    def order(self) -> tuple[int, int]:
        return self.rank, self.arrival

    def wake(self) -> None:
        self._woken.set()

    async def wait(self, timeout: float) -> None:
        """Until woken or `timeout` s pass. A timer sets the event rather than `wait_for`
        timing out: on Python 3.11 `wait_for` can turn a cancellation that meets its timeout
        into the TimeoutError (CPython gh-86296), and a request cancelled while it waits in
        line (an interrupted run) would then poll on for ever."""
        handle = asyncio.get_running_loop().call_later(max(0.0, timeout), self._woken.set)
        try:
            await self._woken.wait()
        finally:
            handle.cancel()
        self._woken.clear()


@dataclass(frozen=True)
class _View:
    cap: int  # this process's share of the window
    window: float
    epoch: int
    hold_until: float  # no new request before (blocked, or the rpm/tpm buckets)
    procs: int  # processes sharing the window


class AdaptiveLimiter:
    """The window of one (model, base URL), this process's share of it, and the waits.

    `ceiling`: this process's most requests in flight (`--resili-concurrency`). `store`:
    where the state lives (`FileStore(shared_path(...))` to share it between processes).
    `clock` is wall time (`time.time`, comparable between processes); tests pass their own.
    """

    def __init__(self, ceiling: int, *, store: Store | None = None, rpm: float | None = None,
                 tpm: float | None = None, clock: Callable[[], float] = time.time,
                 pid: int | None = None,
                 alive: Callable[[int], bool] = _pid_alive) -> None:
        if ceiling < 1:
            raise ValueError(f"the ceiling must be >= 1, got {ceiling}")
        if (rpm is not None and rpm <= 0) or (tpm is not None and tpm <= 0):
            raise ValueError("rpm and tpm must be > 0")
        self.ceiling = ceiling
        self.rpm, self.tpm = rpm, tpm
        self._store: Store = store or MemoryStore()
        self._clock = clock
        self._pid = os.getpid() if pid is None else pid
        self._alive = alive
        self.in_flight = 0
        self._wanting = 0  # requests inside `acquire`
        self._line: list[_Place] = []  # requests waiting for a slot, by `_Place.order`
        self._arrivals = itertools.count()
        self._looked_at = -math.inf  # _monotonic() of the last look at the shared state
        self._ok_seen = 0  # the state's success level of this round, as last looked at
        self._view = self._store.update(self._look)
        # What the report shows: time-weighted in-flight, waits, the first and last moments.
        self.wait_s = 0.0  # wall time while at least one request waited on a limit
        self._held = 0  # requests waiting on a limit now
        self._held_since = 0.0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self._busy = 0.0  # integral of in_flight over time
        self._mark: float | None = None

    # --- the shared state (each of these runs under the store's lock) ----------------------
    def _look(self, state: dict[str, Any]) -> _View:
        """Prune gone processes, register this one, and this process's share."""
        now = self._clock()
        # pid -> [last seen, ceiling, demand: requests in flight or waiting]
        procs: dict[str, list[float]] = {
            pid: seen for pid, seen in (state.get("procs") or {}).items()
            if isinstance(seen, list) and len(seen) == 3 and now - seen[0] < STALE_S
            and (int(pid) == self._pid or self._alive(int(pid)))}
        if not procs:  # nobody left of an earlier run: its window says nothing of this one
            state.clear()
        joins = str(self._pid) not in procs
        procs[str(self._pid)] = [now, float(self.ceiling), float(self._demand)]
        state["procs"] = procs
        top = sum(entry[1] for entry in procs.values())
        window = float(state.get("window", top))
        if joins and not state.get("epoch"):  # no limit met yet: the ceilings add up
            window += self.ceiling
        window = min(top, window)
        state["window"] = window
        state.setdefault("epoch", 0)
        cap = _share(procs, str(self._pid), max(1, math.floor(window)))
        hold = max(float(state.get("blocked_until", 0.0)),
                   float(state.get("tokens_at", 0.0)) - BURST_S)
        self._looked_at = _monotonic()
        self._ok_seen = int(state.get("ok", 0)) if state.get("ok_epoch") == state["epoch"] else 0
        return _View(cap=min(cap, self.ceiling), window=window, epoch=int(state["epoch"]),
                     hold_until=hold, procs=len(procs))

    def _decrease(self, state: dict[str, Any], epoch: int) -> None:
        if epoch != state.get("epoch", 0):
            return  # sent before the last decrease: already accounted for
        window = float(state.get("window", self.ceiling))
        # Recover fast only to the level this round's successes were seen at: a level the
        # provider took until now (none this round: probe slowly from the halved window).
        took = state.get("ok", 0) if state.get("ok_epoch") == epoch else 0
        state["recover_to"] = float(took)
        state["window"] = max(1.0, window * BETA)
        state["epoch"] = epoch + 1

    def _increase(self, state: dict[str, Any], level: int) -> None:
        window = float(state.get("window", self.ceiling))
        state["ok"] = max(int(state.get("ok", 0)), level) if state.get("epoch", 0) \
            == state.get("ok_epoch", -1) else level
        state["ok_epoch"] = state.get("epoch", 0)
        if window < float(state.get("recover_to", 0.0)):
            window += 1.0  # back to a level the provider took
        elif state.get("recover_to") is None:
            window += 1.0 / window  # no refusal yet: classic additive increase
        else:
            window += 1.0 / (window * window)  # where it refused before: probe slowly
        state["window"] = window

    def _settle(self, ticket: Ticket, outcome: Outcome, limits: Limits, tokens: int,
                level: int) -> _View:
        def change(state: dict[str, Any]) -> _View:
            now = self._clock()
            exhausted = limits.exhausted_for_s()
            if outcome == "limited":
                self._decrease(state, ticket.epoch)
            elif outcome == "ok":
                if exhausted is not None:
                    self._decrease(state, ticket.epoch)
                    state["blocked_until"] = max(float(state.get("blocked_until", 0.0)),
                                                 now + exhausted)
                else:
                    self._increase(state, level)
                if self.tpm is not None and tokens > 0:
                    start = max(float(state.get("tokens_at", 0.0)), now)
                    state["tokens_at"] = start + tokens * 60.0 / self.tpm
            return self._look(state)

        return self._store.update(change)

    def _take_request(self, state: dict[str, Any], deadline: float) -> float:
        """rpm: the moment this request may go. GCRA: `requests_at` is the theoretical
        arrival time; a burst of one second's share less one request (at least one), then
        one each 60/rpm s. Taken only when it can go by `deadline`."""
        assert self.rpm is not None
        now, every = self._clock(), 60.0 / self.rpm
        due = float(state.get("requests_at", 0.0))
        go = max(now, due - max(0.0, BURST_S - 2.0 * every))
        if go <= deadline:
            state["requests_at"] = max(due, go) + every
        return go

    # --- the API --------------------------------------------------------------------------
    @property
    def window(self) -> float:
        """The whole window (all processes), as last seen."""
        return self._view.window

    @property
    def cap(self) -> int:
        """This process's share, as last seen."""
        return self._view.cap

    @property
    def hold_until(self) -> float:
        """No new request before this (clock time), as last seen: a budget at 0 until its
        reset, or the rpm/tpm buckets."""
        return self._view.hold_until

    def refresh(self) -> None:
        """Look at the shared state again (what other processes changed)."""
        self._view = self._store.update(self._look)

    def _quiet(self) -> bool:
        """No limit met yet (each process has its whole ceiling), no tpm, and the shared state
        looked at less than `QUIET_LOOK_S` ago: nothing there this request needs."""
        view = self._view
        return (view.epoch == 0 and view.cap >= self.ceiling and self.tpm is None
                and _monotonic() - self._looked_at < QUIET_LOOK_S)

    @property
    def busy_s(self) -> float:
        """Integral of requests in flight over time (mean concurrency = busy / span)."""
        return self._busy

    @property
    def _demand(self) -> int:
        return self.in_flight + self._wanting

    def _tick(self, now: float, delta: int) -> None:
        if self._mark is not None:
            self._busy += self.in_flight * max(0.0, now - self._mark)
        self._mark = now
        self.in_flight += delta

    async def acquire(self, deadline: float, why: Callable[[], str], rank: int = 0) -> Ticket:
        """Wait for a slot in this process's share and for the limits' holds, in line by
        `rank` (lowest first; first come first served among equals); raises `RateLimitWait`
        (its message from `why()`) when `deadline` (clock time) passes. Only a wait on a limit
        spends that budget: time in line behind this process's own requests while the window
        is whole moves the deadline on, and is no wait on limits (`wait_s`)."""
        self._wanting += 1
        place = _Place(rank, next(self._arrivals))
        bisect.insort(self._line, place, key=_Place.order)
        try:
            if self.in_flight >= self._view.cap and not self._quiet():  # say so: the others
                self.refresh()  # may have slots to spare
            while True:
                now = self._clock()
                if now >= deadline:
                    raise RateLimitWait(why())
                view = self._view
                limited = now < view.hold_until or view.cap < self.ceiling
                if now < view.hold_until:
                    async with self.held():
                        await asyncio.sleep(min(view.hold_until, deadline) - now)
                    self.refresh()
                elif self._line[0] is place and self.in_flight < view.cap:
                    go = now if self.rpm is None else self._store.update(
                        functools.partial(self._take_request, deadline=deadline))
                    if go > deadline:
                        raise RateLimitWait(why())
                    self._tick(now, +1)  # the slot is this request's while it waits its turn
                    self._leave_line(place)  # the next in line may take a slot meanwhile
                    if go > now:
                        try:
                            async with self.held():
                                await asyncio.sleep(go - now)
                        except BaseException:  # cancelled in its turn: the slot goes back
                            self._tick(self._clock(), -1)
                            self._wake_first()
                            raise
                    if self.first_at is None:
                        self.first_at = self._clock()
                    return Ticket(epoch=view.epoch)
                else:
                    async with self.held() if limited else contextlib.nullcontext():
                        await place.wait(min(POLL_S, deadline - now))
                    if self._view is view and not self._quiet():  # nothing settled here
                        self.refresh()  # meanwhile: another process may have
                    if not limited:
                        deadline += max(0.0, self._clock() - now)
        finally:
            self._wanting -= 1
            self._leave_line(place)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """A request waits on a limit meanwhile (a hold, a shrunk window, the rpm pace, a
        429's Retry-After): `wait_s` counts the wall time while any does."""
        if self._held == 0:
            self._held_since = self._clock()
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            if self._held == 0:
                self.wait_s += max(0.0, self._clock() - self._held_since)

    def _leave_line(self, place: _Place) -> None:
        if place in self._line:
            head = self._line[0] is place
            self._line.remove(place)
            if head:
                self._wake_first()

    def _wake_first(self) -> None:
        if self._line:
            self._line[0].wake()

    def release(self, ticket: Ticket, outcome: Outcome, limits: Limits = Limits(),
                tokens: int = 0) -> None:
        """A request is over: `ok` (its `tokens` from usage), `limited` (a 429) or `other`
        (any other failure: no news about limits)."""
        now = self._clock()
        level = self.in_flight
        self._tick(now, -1)
        self.last_at = now
        if outcome == "other" and not self.tpm:
            view = self._view
        elif (outcome == "ok" and limits.exhausted_for_s() is None and self._quiet()
              and level * self._view.procs <= self._ok_seen):
            view = self._view  # the state would stay as it is (module docstring)
        else:
            view = self._settle(ticket, outcome, limits, tokens, level * self._view.procs)
        self._view = view
        self._wake_first()

    def leave(self) -> None:
        """This process no longer sends: its share goes to the others."""
        def change(state: dict[str, Any]) -> None:
            procs = state.get("procs") or {}
            procs.pop(str(self._pid), None)
            if not procs:  # the last one out: the next run starts afresh anyway (_look)
                state.clear()

        with contextlib.suppress(OSError):
            self._store.update(change)

    def to_json(self) -> dict[str, Any]:
        return {"window": self._view.cap, "first_at": self.first_at, "last_at": self.last_at,
                "busy_s": round(self._busy, 3), "limit_wait_s": round(self.wait_s, 3)}


def _share(procs: Mapping[str, list[float]], me: str, window: int) -> int:
    """`me`'s slots of `window`, max-min fair by demand (capped by each ceiling): a process
    wanting less than an even split leaves the rest to the others; each one that wants gets
    at least one; what nobody wants now is headroom for everyone."""
    wants = {pid: min(entry[1], entry[2]) for pid, entry in procs.items()}
    order = sorted(wants, key=lambda pid: (wants[pid], int(pid)))
    left: float = window
    shares: dict[str, float] = {}
    for i, pid in enumerate(order):
        shares[pid] = min(wants[pid], left // (len(order) - i) if i < len(order) - 1 else left)
        left -= shares[pid]
    return max(1, int(shares[me] + left))
