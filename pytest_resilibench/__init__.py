"""pytest-resilibench: does an LLM agent finish the job when tools fail and the plan is wrong?

The plugin (`plugin.py`) is loaded by pytest through the `pytest11` entry point; the library
modules beside it hold the logic. Heavy or optional dependencies (openai, torch, mcp) are
imported only where they are used.
"""

from pytest_resilibench.registry import Role, ToolRegistry, ToolSpec, default_registry
from pytest_resilibench.simulator import (
    DEFAULT_BASE_SUCCESS,
    CallResult,
    EpisodeKey,
    Simulator,
    success_probability,
)

__version__ = "0.1.0"

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
