"""The agent boundary: every call into an agent's code, and whose failure what comes back is.

An exception that comes out of a user's agent (`py:MODULE:FACTORY`, or one a conftest builds)
while it answers a turn (`complete`) or plays its loop (`run`) is the agent's failure: the
episode ends with stop reason `agent_error`, a failed episode, and the item fails. Two kinds
pass through as they are: `InfrastructureError` (the agent says its backend could not be
reached: an infra error) and `ModelLimitError` (its model's own limit: scored). The built-in
agents and the model providers are this package's code: what they raise is a harness bug.
The framework adapters (`pytest_resilibench.adapters`) are not counted as ours: they play a
user's framework agent, and turn its model's failures into those two kinds themselves.

Everything an agent can throw is caught here, not only `Exception`: a `SystemExit`, a
`GeneratorExit`, a `CancelledError` the agent's code raised on its own, a `KeyboardInterrupt`
its code raised. Raised inside a task on the runner's event loop, `SystemExit` and
`KeyboardInterrupt` would leave the loop itself (asyncio re-raises them out of `run_forever`),
and every episode after it would wait for ever. Two of them are not the agent's:
- a cancellation of our own task (the run is being stopped): it goes on as a cancellation;
- a `KeyboardInterrupt` on the main thread: there it may be the user's Ctrl-C (signals reach
  only the main thread), so it interrupts the run. On any other thread (the runner's episode
  loop, where every user's agent runs in the plugin) no signal can raise it: it is the agent's.

An agent that never answers is bounded by `AgentLimits`: a turn (a `complete`; a loop-level
agent's time from the start of `run` or its last call to its next call) and the whole episode.
Past either, the agent's call is cancelled and left behind, whatever it does with the
cancellation, and the episode is an agent error naming the limit and the agent's line where it
was waiting. docs/API.md ("When your agent fails") says what an agent author sees.

What a loop-level agent's `run` raises may come from our code too: `LoopEpisode.call` runs
inside it. The handle remembers what its own code raised (loop_episode.py), and that wins
over whatever the agent made of it.
"""

from __future__ import annotations

import asyncio
import os
import sysconfig
import threading
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from pytest_resilibench.base.redact import redact
from pytest_resilibench.runtime.protocol import InfrastructureError, ModelLimitError

__all__ = ["CLOSE_TIMEOUT_S", "AgentClock", "AgentError", "AgentLimits", "call_agent",
           "close_agent", "from_agent", "is_own_agent", "is_privileged", "raised_where"]

_T = TypeVar("_T")
_PACKAGE = Path(__file__).resolve().parents[1]  # pytest_resilibench/
_PACKAGE_NAME = _PACKAGE.name
_ADAPTERS = f"{_PACKAGE_NAME}.adapters"
_MESSAGE_LIMIT = 300  # characters of the exception's message: one line in a table
CLOSE_TIMEOUT_S = 10.0  # how long an agent's `aclose()` may take (start-up check, run's end)


class AgentError(Exception):
    """The agent's own code raised, or went past a limit (`line` says what and where,
    redacted); `run_episode` catches it as stop reason `agent_error`."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def is_own_agent(agent: object) -> bool:
    """Whether `agent` is this package's code (a built-in agent, a model provider): what it
    raises is then a harness bug, not the agent's failure. A framework adapter is not: it
    runs a user's agent (their framework, model and code), so what comes out of it is the
    agent's, but for the model failures the adapter reads as the direct path reads them
    (`InfrastructureError`, `ModelLimitError`: adapters/common.py)."""
    module = type(agent).__module__ or ""
    if module == _ADAPTERS or module.startswith(_ADAPTERS + "."):
        return False
    return module == _PACKAGE_NAME or module.startswith(_PACKAGE_NAME + ".")


def is_privileged(agent: object) -> bool:
    """Whether `agent` may read the task itself (`ModelRequest.context`): only this package's
    agents that say so (`builtin:oracle`). Every other agent, a user's own above all, gets
    the prompt alone, whatever attributes it sets."""
    return getattr(type(agent), "privileged", False) is True and is_own_agent(agent)


# --- limits -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentLimits:
    """Wall-clock limits of a user's agent, in seconds (None: none). `turn_s` bounds one turn,
    `episode_s` the whole episode (integration/options.py: their options and defaults)."""

    turn_s: float | None = None
    episode_s: float | None = None


NO_LIMITS = AgentLimits()


class AgentClock:
    """One episode's deadlines on the event loop's clock: the episode's, set when the agent
    starts, and the turn's, moved on at each turn (`next_turn`)."""

    def __init__(self, limits: AgentLimits, now: Callable[[], float] | None = None) -> None:
        self.limits = limits
        self._now = now or asyncio.get_running_loop().time
        start = self._now()
        self._episode_end = None if limits.episode_s is None else start + limits.episode_s
        self._turn_end: float | None = None
        self.next_turn()

    def next_turn(self) -> None:
        """A turn starts now: its own limit counts from here."""
        turn_s = self.limits.turn_s
        self._turn_end = None if turn_s is None else self._now() + turn_s

    def remaining(self) -> float | None:
        """Seconds to the nearer deadline (None: no limit)."""
        ends = [end for end in (self._turn_end, self._episode_end) if end is not None]
        return None if not ends else max(0.0, min(ends) - self._now())

    def passed(self) -> str | None:
        """Which limit has passed ("turn", "episode"), if one has: the episode's first."""
        now = self._now()
        if self._episode_end is not None and now >= self._episode_end:
            return "episode"
        if self._turn_end is not None and now >= self._turn_end:
            return "turn"
        return None


# --- calling the agent ------------------------------------------------------------------------
async def from_agent(call: Awaitable[_T], *passing: type[BaseException],
                     clock: AgentClock | None = None, waiting_for: str = "reply") -> _T:
    """Await a call into a user's agent. What it raises becomes `AgentError`, but for
    `InfrastructureError`, `ModelLimitError`, the kinds in `passing` and what is not the
    agent's (the module's docstring); past a limit of `clock` it is `AgentError` too."""
    if clock is None or clock.remaining() is None:
        return await _in_this_task(call, passing)
    return await _in_own_task(call, passing, clock, waiting_for)


async def call_agent(call: Awaitable[_T], *, timeout_s: float, what: str) -> _T:
    """Await one of a user's agent's own calls outside an episode (its `aclose`), with a
    limit: AgentError for whatever it raises or past the limit."""
    clock = AgentClock(AgentLimits(turn_s=timeout_s))
    return await _in_own_task(call, (), clock, what, option=None)


async def close_agent(agent: object, *, timeout_s: float | None = None) -> None:
    """Await the agent's `aclose()`, when it has one (it is optional). A user's agent's
    failure there (anything it raises, or, with `timeout_s`, not returning in time) is
    `AgentError`; this package's agents' passes as it is."""
    aclose = getattr(agent, "aclose", None)
    if aclose is None:
        return
    if is_own_agent(agent):
        await aclose()
    elif timeout_s is None:
        await from_agent(aclose())
    else:
        await call_agent(aclose(), timeout_s=timeout_s, what="aclose()")


async def _in_this_task(call: Awaitable[_T], passing: tuple[type[BaseException], ...]) -> _T:
    try:
        return await call
    except BaseException as exc:  # everything: the agent's code may raise anything at all
        raise _read(exc, passing, ours_cancelled=_task_cancelled()) from exc


async def _in_own_task(call: Awaitable[_T], passing: tuple[type[BaseException], ...],
                       clock: AgentClock, waiting_for: str,
                       option: str | None = "--resili-turn-timeout") -> _T:
    """The call as a task of its own, so that one that ignores its cancellation is left
    behind at its limit rather than waited for."""
    task = asyncio.ensure_future(_Guarded(call).run())
    try:
        while not task.done():
            await asyncio.wait((task,), timeout=clock.remaining())
            limit = None if task.done() else clock.passed()
            if limit is not None:
                line = _past_limit(task, clock, limit, waiting_for, option)
                task.cancel()
                task.add_done_callback(_forget)
                raise AgentError(line)
    except asyncio.CancelledError:  # our own task was cancelled: the call goes with it
        task.cancel()
        task.add_done_callback(_forget)
        raise
    raised, value = task.result()
    if raised is not None:
        raise _read(raised, passing, ours_cancelled=False) from raised
    return value  # type: ignore[return-value]


class _Guarded(Generic[_T]):
    """The call, its every exception kept as a value: raised out of a task, `SystemExit` and
    `KeyboardInterrupt` would stop the event loop itself."""

    def __init__(self, call: Awaitable[_T]) -> None:
        self._call = call

    async def run(self) -> tuple[BaseException | None, _T | None]:
        try:
            return None, await self._call
        except BaseException as exc:  # kept, read by the awaiting task (`_read`)
            return exc, None


def _forget(task: asyncio.Future[Any]) -> None:
    """A call left behind: whatever it ends with was already accounted for."""
    if not task.cancelled():
        task.exception()


def _task_cancelled() -> bool:
    """Whether the running task has a cancellation pending (ours, not one the agent raised)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _read(exc: BaseException, passing: tuple[type[BaseException], ...], *,
          ours_cancelled: bool) -> BaseException:
    """What an exception out of a user's agent becomes: itself where it passes through or is
    not the agent's (the module's docstring), else `AgentError`."""
    if isinstance(exc, (InfrastructureError, ModelLimitError, *passing)):
        return exc
    if isinstance(exc, asyncio.CancelledError) and ours_cancelled:
        return exc
    if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
        return exc
    return AgentError(raised_where(exc))


def _past_limit(task: asyncio.Task[object], clock: AgentClock, limit: str,
                waiting_for: str, option: str | None) -> str:
    seconds = clock.limits.episode_s if limit == "episode" else clock.limits.turn_s
    if option is None:  # a call of its own (`call_agent`)
        what = f"{waiting_for} did not return within {seconds:g} s"
    elif limit == "episode":
        what = f"the episode went past its limit ({seconds:g} s; --resili-episode-timeout)"
    else:
        what = f"no {waiting_for} within the turn limit ({seconds:g} s; {option})"
    return redact(f"TimeoutError: {what}{_agent_frame(_awaiting(task))}")


def _awaiting(task: asyncio.Task[Any]) -> list[tuple[str, int | None, str]]:
    """The frames a suspended task is waiting in, outermost first: its coroutine, then what
    each awaits in turn (`Task.get_stack` gives the outermost alone)."""
    frames = []
    inner: Any = task.get_coro()
    for _ in range(64):  # bounded: an await chain is shallow, a cycle is not ours to follow
        frame = getattr(inner, "cr_frame", None) or getattr(inner, "gi_frame", None)
        if frame is None:
            break
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        inner = getattr(inner, "cr_await", None) or getattr(inner, "gi_yieldfrom", None)
    return frames


# --- the agent's line -------------------------------------------------------------------------
def raised_where(exc: BaseException) -> str:
    """`ValueError: message at path/agent.py:12 in complete`: the exception and the last frame
    of the user's code it went through (not ours, not the standard library's nor an installed
    package's when there is one such), the path relative to the working directory when it is
    inside it; redacted, on one line."""
    message = " ".join(str(exc).split())
    if len(message) > _MESSAGE_LIMIT:
        message = message[: _MESSAGE_LIMIT - 1] + "…"
    line = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    return redact(line + _agent_frame(frames))


def _agent_frame(frames: Iterable[tuple[str, int | None, str]]) -> str:
    """` at path:line in name` of the innermost frame of the user's code (else of a library's
    called from it), or "" where none is outside this package."""
    outside = [f for f in frames if not _is_ours(f[0])]
    own = [f for f in outside if not _is_library(f[0])]
    if not (own or outside):
        return ""
    filename, lineno, name = (own or outside)[-1]
    return f" at {_shown_path(filename)}:{lineno} in {name}"


@lru_cache(maxsize=256)
def _is_ours(filename: str) -> bool:
    return Path(os.path.realpath(filename)).is_relative_to(_PACKAGE)


@lru_cache(maxsize=256)
def _is_library(filename: str) -> bool:
    path = Path(os.path.realpath(filename))
    if {"site-packages", "dist-packages"} & set(path.parts):
        return True
    return any(path.is_relative_to(root) for root in _stdlib_roots())


@lru_cache(maxsize=1)
def _stdlib_roots() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple({Path(os.path.realpath(paths[k])) for k in ("stdlib", "platstdlib") if k in paths})


def _shown_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if relative.startswith(os.pardir) else relative
