"""The run's options for the model requests of an agent a `py:` factory builds with a framework
adapter (`pytest_resilibench.adapters`): the session sets them around the factory's call, the
adapter reads them when it routes its framework's client through the provider's retries and
limiter (`transport.py`), so `--resili-retries`, `--resili-concurrency`, `--resili-rpm` ...
apply to adapters as to the direct path. A context variable: set for that call alone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

__all__ = ["request_options", "run_request_options"]

_OPTIONS: ContextVar[Mapping[str, Any]] = ContextVar(
    "resilibench_request_options", default=MappingProxyType({}))


def request_options() -> Mapping[str, Any]:
    """The run's options (`OpenAIAgent` keyword arguments); empty outside a run."""
    return _OPTIONS.get()


@contextlib.contextmanager
def run_request_options(options: Mapping[str, Any]) -> Iterator[None]:
    """`request_options()` is `options` inside the block."""
    token = _OPTIONS.set(MappingProxyType(dict(options)))
    try:
        yield
    finally:
        _OPTIONS.reset(token)
