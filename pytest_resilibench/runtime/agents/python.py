"""Agents written in Python: `py:MODULE:FACTORY` names a callable that takes no arguments and
returns an agent of either shape (runtime/protocol.py: a turn-level `Agent` or a `LoopAgent`).

The module must be importable in every pytest process: installed, on PYTHONPATH, or in a folder
named by pytest's `pythonpath` ini key. xdist's local workers start from the controller's
`sys.path` as it was at interpreter start-up, not as a conftest may have changed it since
(xdist/plugin.py `_sys_path`, xdist/workermanage.py `change_sys_path`), and each worker calls the
factory itself. Everything that can go wrong here is a ValueError that says what to fix, so
the plugin's start-up check (`ResiliSession.check_models`) turns it into one usage error.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from pytest_resilibench.runtime.protocol import AnyAgent, agent_shape

__all__ = ["build_agent", "load_factory", "make_python_agent"]

_FORM = "py:MODULE:FACTORY (e.g. py:my_agents:make_agent)"


def make_python_agent(target: str, **options: Any) -> AnyAgent:
    """The agent `py:TARGET` names (`TARGET` is `MODULE:FACTORY`). It takes no options: its
    factory configures it."""
    if options:
        raise ValueError(f"py:{target} takes no options (got {', '.join(sorted(options))}): "
                         "its factory configures it")
    return build_agent(load_factory(target), f"py:{target}")


def load_factory(target: str) -> Callable[[], object]:
    """The callable `MODULE:FACTORY` names (FACTORY may be dotted: `Class.create`)."""
    module_name, colon, attribute = target.partition(":")
    module_name, attribute = module_name.strip(), attribute.strip()
    if not (colon and module_name and attribute):
        raise ValueError(f"a Python agent is named {_FORM}, got 'py:{target}'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise ValueError(
                f"no module named {missing!r}: install it, add its folder to PYTHONPATH or "
                "to pytest's `pythonpath` ini key, or run `python -m pytest` from its folder"
            ) from None
        raise ValueError(f"importing {module_name!r} failed: {_said(exc)}") from None
    except Exception as exc:  # the module's own code: any error is the user's to see
        raise ValueError(f"importing {module_name!r} failed: {_said(exc)}") from None
    try:
        factory = functools.reduce(getattr, attribute.split("."), module)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(factory):
        raise ValueError(f"{module_name}:{attribute} is a {type(factory).__name__}, not a "
                         "callable that returns an agent")
    return factory


def build_agent(make: Callable[[], object], what: str) -> AnyAgent:
    """Call a factory and check what it made (`agent_shape`); `what` names it in errors."""
    made = call_factory(make, what)
    if made is None:
        raise ValueError(f"{what} returned None, not an agent")
    return checked_agent(made, what)


def call_factory(make: Callable[[], object], what: str) -> object:
    """What `make()` returns; its exceptions, and a coroutine (an `async def` factory), as a
    ValueError naming `what`."""
    try:
        made = make()
    except Exception as exc:  # the user's code: any error is theirs to see, once
        raise ValueError(f"{what} raised {_said(exc)}") from None
    if inspect.isawaitable(made):
        if inspect.iscoroutine(made):
            made.close()  # never awaited: close it, so Python does not warn about it
        raise ValueError(f"{what} returned an awaitable: the factory must be a plain function "
                         "(open connections lazily, in the agent's first async call)")
    return made


def checked_agent(made: object, what: str) -> AnyAgent:
    try:
        agent_shape(made)
    except ValueError as exc:
        raise ValueError(f"{what} returned an unusable agent: {exc}") from None
    return made  # type: ignore[return-value]


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
