"""Whose failure an exception is: the agent's own code, or ours.

An exception that comes out of a user's agent (`py:MODULE:FACTORY`, or one a conftest builds)
while it answers a turn (`complete`) or plays its loop (`run`) is the agent's failure: the
episode ends with stop reason `agent_error`, a failed episode, and the item fails. Two kinds
pass through as they are: `InfrastructureError` (the agent says its backend could not be
reached: an infra error) and `ModelLimitError` (its model's own limit: scored). The built-in
agents and the model providers are this package's code: what they raise is a harness bug.
The framework adapters (`pytest_resilibench.adapters`) are not counted as ours: they play a
user's framework agent, and turn its model's failures into those two kinds themselves.

What a loop-level agent's `run` raises may come from our code too: `LoopEpisode.call` runs
inside it. The handle remembers what its own code raised (loop_episode.py), and that wins
over whatever the agent made of it.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Awaitable
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from pytest_resilibench.base.redact import redact
from pytest_resilibench.runtime.protocol import InfrastructureError, ModelLimitError

__all__ = ["AgentError", "from_agent", "is_own_agent", "raised_where"]

_T = TypeVar("_T")
_PACKAGE = Path(__file__).resolve().parents[1]  # pytest_resilibench/
_PACKAGE_NAME = _PACKAGE.name
_ADAPTERS = f"{_PACKAGE_NAME}.adapters"
_MESSAGE_LIMIT = 300  # characters of the exception's message: one line in a table


class AgentError(Exception):
    """The agent's own code raised (`line` says what and where, redacted); `run_episode`
    catches it as stop reason `agent_error`."""

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


async def from_agent(call: Awaitable[_T], *passing: type[BaseException]) -> _T:
    """Await a call into a user's agent; an exception it raises becomes `AgentError`, but for
    `InfrastructureError`, `ModelLimitError` and the kinds in `passing`."""
    try:
        return await call
    except Exception as exc:
        if isinstance(exc, (InfrastructureError, ModelLimitError, *passing)):
            raise
        raise AgentError(raised_where(exc)) from exc


def raised_where(exc: BaseException) -> str:
    """`ValueError: message at path/agent.py:12 in complete`: the exception and the last frame
    of the user's code it went through (not ours, not the standard library's nor an installed
    package's when there is one such), the path relative to the working directory when it is
    inside it; redacted, on one line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_ours(f.filename)]
    own = [f for f in frames if not _is_library(f.filename)]
    message = " ".join(str(exc).split())
    if len(message) > _MESSAGE_LIMIT:
        message = message[: _MESSAGE_LIMIT - 1] + "…"
    line = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if own or frames:
        frame = (own or frames)[-1]
        line += f" at {_shown_path(frame.filename)}:{frame.lineno} in {frame.name}"
    return redact(line)


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
