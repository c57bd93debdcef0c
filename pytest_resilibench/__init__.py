"""pytest-resilibench: does an LLM agent finish the job when tools fail and the plan is wrong?

The plugin (`plugin.py`) is loaded by pytest through the `pytest11` entry point; the library
modules beside it hold the logic. Heavy or optional dependencies (openai, torch, mcp) are
imported only where they are used.

PYTEST_DONT_REWRITE: the package holds no test asserts; pytest is told not to parse it
(`integration/preload.py` says why), and this marker keeps a second pytest run in one process
(pytester) from warning that the package was imported before it could be rewritten.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_resilibench.core.registry import Role, ToolRegistry, ToolSpec, default_registry
    from pytest_resilibench.core.simulator import (
        DEFAULT_BASE_SUCCESS,
        CallResult,
        EpisodeKey,
        Simulator,
        success_probability,
    )

__version__ = "0.1.0"

# pytest imports `pytest_resilibench.plugin` (and so this package) in every run of every
# project in the venv: the library names load on first use (PEP 562), not here.
_LAZY = {
    "Role": "registry", "ToolRegistry": "registry", "ToolSpec": "registry",
    "default_registry": "registry", "DEFAULT_BASE_SUCCESS": "simulator",
    "CallResult": "simulator", "EpisodeKey": "simulator", "Simulator": "simulator",
    "success_probability": "simulator",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_resilibench' has no attribute {name!r}")
    return getattr(importlib.import_module(f"pytest_resilibench.core.{module}"), name)

__all__ = [
    "DEFAULT_BASE_SUCCESS",
    "CallResult",
    "EpisodeKey",
    "Role",
    "Simulator",
    "ToolRegistry",
    "ToolSpec",
    "__version__",
    "default_registry",
    "success_probability",
]
