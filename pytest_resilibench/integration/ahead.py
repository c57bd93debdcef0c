"""CPU-bound episodes computed ahead in forked helper processes, on cores pytest leaves idle.

A scripted agent on the simulator does no I/O: its episode is pure CPU (about as long as
pytest's own work for the item), so without xdist one core does everything while the others
idle. `ForkedEpisodes` forks helpers once the process knows its items; each helper computes
cases in the announced order and writes each record down its own pipe; the item takes its
record from there.

Work is shared, not split: each case is claimed once, under a lock, in a byte array shared by
all (0: free, k + 1: helper k, 255: this process). A helper claims the first free case from
the front, but never one of the `LEAD` cases after the one the items took last; an item whose
case is still free claims it and computes it in its own process. So when the helpers are
ahead, the item only reads its record; when they fall behind, this process computes the cases
they have not reached and the helpers skip them: every process stays busy whatever the ratio
of pytest's cost to an episode's. (Without the lead, a helper that falls behind starts each
time the very case the next item needs, and the items wait for every episode in lockstep.)
An item whose record a helper is still computing does not sit idle meanwhile: it claims the
next free case (within the lead) and computes that one, so both cores stay busy where a
helper and the items run at about the same pace. The pipe and a bounded outbox behind it are
the window (`_Outbox`): a helper that is that far ahead waits. Without xdist the helpers fork as
soon as the cases are known, while pytest still collects its items (`EpisodeRunner.prestart`),
on all the cases in their order; the items announced at the start of the test loop narrow them
(`announce`) or, in another order, have them forked anew. Records are pure
functions of their case (every draw is keyed, see rng.py), so which process computed one
changes nothing but `wall_time_s`.

Forking is used only where it is safe: on Linux, from a process with one thread (an xdist
worker has execnet's receiver thread: it never forks, and its cores are the other workers'
anyway).
A helper shares the parent's memory copy-on-write: tasks, registry and agents come for free.
Anything a helper cannot deliver (it died, the case failed there) is computed by the item
itself, so a helper can only save time, never change or lose a result.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import itertools
import mmap
import multiprocessing
import os
import pickle
import select
import signal
import struct
import sys
import threading
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Sequence
from typing import IO, Any, cast

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.integration.cases import Case

__all__ = ["MIN_CASES", "ForkedEpisodes", "can_fork", "idle_cores"]

# A helper starts no case within this many after the items' latest: far enough that the items
# (~1 ms of pytest each) cannot reach it before its episode is done.
LEAD = 8
# Below this many cases a fork (tens of ms, and a cold helper) saves nothing worth having.
MIN_CASES = 64
# A bigger pipe lets a helper run a few dozen records ahead instead of in lockstep with the
# items (Linux: F_SETPIPE_SZ; 1 MiB is the default unprivileged maximum, pipe-max-size).
_PIPE_BYTES = 1 << 20
# What a helper holds beyond its pipe while the parent reads nothing (`_Outbox`): ~2,500
# records, ~3 s of episodes.
_OUTBOX_BYTES = 64 << 20
_FREE, _PARENT = 0, 255
_TAKEN = struct.Struct("q")
# A helper holds the claim lock for microseconds; waiting longer means it died holding it.
_LOCK_TIMEOUT_S = 10.0

Compute = Callable[[Case], Awaitable[EpisodeRecord]]
ComputeHere = Callable[[Case], EpisodeRecord]


def idle_cores() -> int:
    """Cores this process may use beyond its own."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(0, cores - 1)


def can_fork() -> bool:
    """Whether forking here is safe: Linux (fork is the platform's way), one thread (a fork
    copies only the calling thread; locks held by others would stay locked in the child).
    Threads are counted by the kernel (`/proc/self/task`): an xdist worker's execnet receiver
    is started with `_thread`, which `threading.active_count()` does not see."""
    if sys.platform != "linux" or threading.active_count() != 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no procfs: no way to be sure
        return False


class ForkedEpisodes:
    def __init__(self, compute: Compute, cases: Sequence[Case], processes: int, *,
                 compute_here: ComputeHere | None = None) -> None:
        """Fork up to `processes` helpers computing `cases` (in this order) with `compute`;
        `compute_here` computes a case in this process while an item waits for a helper."""
        self._cases = list(cases)
        self._compute_here = compute_here
        self._spare: dict[str, EpisodeRecord] = {}  # computed here while waiting
        self._position = {case.id: i for i, case in enumerate(cases)}
        self._index = dict(self._position)  # the cases the items will take, not taken yet
        self._claims = mmap.mmap(-1, max(1, len(cases)))  # anonymous: shared with the forks
        # The index of the case the items took last (a signed 8-byte int), read by helpers.
        self._taken = mmap.mmap(-1, _TAKEN.size)
        _TAKEN.pack_into(self._taken, 0, -LEAD)
        self._lock = multiprocessing.get_context("fork").Lock()
        self._helpers: list[_Helper] = []
        for k in range(min(processes, len(cases), _PARENT - 1)):
            self._helpers.append(_Helper.fork(compute, cases, k + 1, self._claims,
                                              self._taken, self._lock))

    @property
    def processes(self) -> int:
        return len(self._helpers)

    def announce(self, cases: Sequence[Case]) -> bool:
        """Narrow the work to the cases the items will take, when the helpers were forked
        before they were known (`EpisodeRunner.prestart`): they must be among the forked
        cases, in the same order. The others are claimed here, so no helper starts them; the
        records of those computed already are dropped when read. False when the cases do
        not fit (nothing changes then: the caller forks anew)."""
        if any(case.id not in self._position for case in cases):
            return False
        positions = [self._position[case.id] for case in cases]
        if any(b <= a for a, b in itertools.pairwise(positions)):
            return False
        wanted = set(positions)
        if not self._lock.acquire(timeout=_LOCK_TIMEOUT_S):
            return False
        try:
            for j in range(len(self._cases)):
                if j not in wanted and self._claims[j] == _FREE:
                    self._claims[j] = _PARENT
        finally:
            self._lock.release()
        self._index = {case.id: j for case, j in zip(cases, positions, strict=True)}
        for helper in self._helpers:
            helper.keep_only(self._index)
        return True

    def take(self, case_id: str) -> EpisodeRecord | None:
        """The record of an announced case, waiting for its helper; None if this process
        is to compute it: no helper has started it (it is now this process's), it was not
        announced or was taken already, or its helper could not deliver it."""
        i = self._index.pop(case_id, None)
        if i is None or not self._lock.acquire(timeout=_LOCK_TIMEOUT_S):
            return None
        try:
            _TAKEN.pack_into(self._taken, 0, i)
            owner = self._claims[i]
            if owner == _FREE:
                self._claims[i] = _PARENT
        finally:
            self._lock.release()
        if owner in (_FREE, _PARENT) or owner > len(self._helpers):
            return self._spare.pop(case_id, None)
        helper = self._helpers[owner - 1]
        while not helper.ready(case_id) and self._work_while_waiting(i):
            pass
        return helper.take(case_id)

    def claim_after(self, case_id: str, n: int) -> list[Case]:
        """Claim for this process the cases still free among the `n` after `case_id` (it
        computes them with that case: `batches.py`); the helpers then skip them."""
        i = self._position.get(case_id)
        return [] if i is None else self._claim_free(i + 1, i + 1 + n)

    def _claim_free(self, start: int, stop: int, most: int | None = None) -> list[Case]:
        """Claim for this process the free cases (at most `most`) among `start:stop`."""
        if not self._lock.acquire(timeout=_LOCK_TIMEOUT_S):
            return []
        try:
            free = [j for j in range(start, min(stop, len(self._cases)))
                    if self._claims[j] == _FREE][:most]
            for j in free:
                self._claims[j] = _PARENT
        finally:
            self._lock.release()
        return [self._cases[j] for j in free]

    def _work_while_waiting(self, i: int) -> bool:
        """Claim the first free case of the `LEAD` after case `i` and compute it here; False
        when there is none (or nothing computes here)."""
        if self._compute_here is None:
            return False
        claimed = self._claim_free(i + 1, i + LEAD, most=1)
        if not claimed:
            return False
        case = claimed[0]
        # A failure leaves the case claimed here and not spare: its item computes it again and
        # shows what went wrong.
        with contextlib.suppress(Exception):
            self._spare[case.id] = self._compute_here(case)
        return True

    def close(self) -> None:
        """Stop the helpers (a run may end before its items do: -x, a decided gate)."""
        for helper in self._helpers:
            helper.close()
        self._helpers.clear()
        self._index.clear()
        self._spare.clear()
        self._claims.close()
        self._taken.close()


class _Helper:
    def __init__(self, pid: int, reader: IO[bytes]) -> None:
        self.pid = pid
        self._reader: IO[bytes] | None = reader
        # Records read past while looking for another (items out of the announced order).
        self._early: dict[str, EpisodeRecord | None] = {}
        self._wanted: Container[str] | None = None  # None: every case's record is kept

    def keep_only(self, case_ids: Container[str]) -> None:
        """Drop the records of other cases when read (`ForkedEpisodes.announce`)."""
        self._wanted = case_ids
        for case_id in [c for c in self._early if c not in case_ids]:
            del self._early[case_id]

    @classmethod
    def fork(cls, compute: Compute, cases: Sequence[Case], mark: int, claims: mmap.mmap,
             taken: mmap.mmap, lock: Any) -> _Helper:
        read_fd, write_fd = os.pipe()
        with contextlib.suppress(AttributeError, OSError):
            import fcntl

            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        pid = os.fork()
        if pid == 0:  # the helper: never returns
            os.close(read_fd)
            _serve(compute, cases, write_fd, mark, claims, taken, lock)
        os.close(write_fd)
        return cls(pid, os.fdopen(read_fd, "rb"))

    def ready(self, case_id: str) -> bool:
        """Whether `take` would not wait on the helper: the record was read already, or the
        pipe has bytes (or its end) to read now. (Bytes the reader buffered earlier are not
        seen: then the caller computes a case it will need anyway, a little early.)"""
        if case_id in self._early or self._reader is None:
            return True
        readable, _, _ = select.select([self._reader], [], [], 0)
        return bool(readable)

    def take(self, case_id: str) -> EpisodeRecord | None:
        if case_id in self._early:
            return self._early.pop(case_id)
        while self._reader is not None:
            try:
                got, packed = cast("tuple[str, tuple[dict[str, Any], bytes] | None]",
                                   pickle.load(self._reader))
            except (EOFError, OSError, pickle.UnpicklingError):  # the helper is gone
                self._reader.close()
                self._reader = None
                break
            if got != case_id and self._wanted is not None and got not in self._wanted:
                continue  # a case the items will not take (`keep_only`)
            record = EpisodeRecord.from_pack(*packed) if packed is not None else None
            if got == case_id:
                return record
            self._early[got] = record
        return None

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._early.clear()


def _serve(compute: Compute, cases: Sequence[Case], write_fd: int, mark: int,
           claims: mmap.mmap, taken: mmap.mmap, lock: Any) -> None:
    """The helper's whole life: compute, write, exit without running anything of pytest's
    (no atexit, no finalizers, no flush of inherited buffers: `os._exit`)."""
    status = 1
    try:
        # The inherited heap is the parent's: keep the collector from walking (and so
        # copying) it (a plugin run also freezes what survives each full collection: the
        # callback of heap.py, inherited). Ctrl-C is the parent's to handle; it kills the
        # helpers on close.
        gc.freeze()  # (full collections are deferred too: heap.py, inherited)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        out = _Outbox(write_fd)
        # One run of one loop for all of them: a run costs more than a scripted episode's
        # own awaits.
        loop = asyncio.new_event_loop()
        loop.run_until_complete(_compute_all(compute, _claimed(cases, mark, claims, taken, lock),
                                             out))
        out.drain()
        status = 0
    finally:  # also after an error (the parent went away: a broken pipe): just stop
        os._exit(status)


async def _compute_all(compute: Compute, cases: Iterable[Case], out: _Outbox) -> None:
    for case in cases:
        try:  # packed: the parent seldom reads the trajectory (record.py)
            record = await compute(case)
            blob = pickle.dumps((case.id, record.pack()), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # the item computes it again and shows what went wrong
            blob = pickle.dumps((case.id, None), protocol=pickle.HIGHEST_PROTOCOL)
        out.send(blob)


class _Outbox:
    """A helper's end of its pipe, with the records the pipe has no room for yet held here
    (up to `_OUTBOX_BYTES`): while the parent collects pytest's items or imports what its
    summary needs, it reads nothing, and a helper that waited on a full pipe (~40 records)
    would idle through it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        os.set_blocking(fd, False)
        self._queue: collections.deque[memoryview] = collections.deque()
        self._held = 0

    def send(self, blob: bytes) -> None:
        self._queue.append(memoryview(blob))
        self._held += len(blob)
        self._write(until=_OUTBOX_BYTES)

    def drain(self) -> None:
        self._write(until=0)

    def _write(self, *, until: int) -> None:
        """Write what the pipe takes now, and wait for room while more than `until` bytes
        are held (a broken pipe, the parent gone, raises: the helper stops)."""
        while self._queue:
            try:
                written = os.write(self._fd, self._queue[0])
            except BlockingIOError:
                if self._held <= until:
                    return
                select.select([], [self._fd], [])
                continue
            self._held -= written
            if written == len(self._queue[0]):
                self._queue.popleft()
            else:
                self._queue[0] = self._queue[0][written:]


def _claimed(cases: Sequence[Case], mark: int, claims: mmap.mmap, taken: mmap.mmap,
             lock: Any) -> Iterator[Case]:
    """The cases this helper claims, in order: each time the first one still free at least
    `LEAD` cases after the one the items took last."""
    k = 0
    while True:
        with lock:
            k = max(k, _TAKEN.unpack_from(taken, 0)[0] + LEAD)
            while k < len(cases) and claims[k] != _FREE:
                k += 1
            if k == len(cases):
                return
            claims[k] = mark
        yield cases[k]
