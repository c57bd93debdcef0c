"""pytest-resilibench: does an LLM agent finish the job when tools fail and the plan is wrong?

The names below are the public API for writing an agent (docs/API.md): import them from here,
`from pytest_resilibench import ModelReply`. They stay here whatever moves inside the
package; the modules they live in are internal.

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
    from pytest_resilibench.base.names import COMPLETION_SIGNAL as COMPLETION_SIGNAL
    from pytest_resilibench.core.prompts import parse_plan as parse_plan
    from pytest_resilibench.core.prompts import parse_task_inputs as parse_task_inputs
    from pytest_resilibench.core.workflow import PlanStep as PlanStep
    from pytest_resilibench.core.workflow import Workflow as Plan
    from pytest_resilibench.integration.chaos import ToolFault as ToolFault
    from pytest_resilibench.runtime.agents import make_agent as make_agent
    from pytest_resilibench.runtime.loop_episode import EpisodeOver as EpisodeOver
    from pytest_resilibench.runtime.protocol import Agent as Agent
    from pytest_resilibench.runtime.protocol import AnyAgent as AnyAgent
    from pytest_resilibench.runtime.protocol import Episode as Episode
    from pytest_resilibench.runtime.protocol import InfrastructureError as InfrastructureError
    from pytest_resilibench.runtime.protocol import LoopAgent as LoopAgent
    from pytest_resilibench.runtime.protocol import ModelLimitError as ModelLimitError
    from pytest_resilibench.runtime.protocol import ModelReply as ModelReply
    from pytest_resilibench.runtime.protocol import ModelRequest as ModelRequest
    from pytest_resilibench.runtime.protocol import Observation as Observation
    from pytest_resilibench.runtime.protocol import Progress as Progress
    from pytest_resilibench.runtime.protocol import ToolCall as ToolCall
    from pytest_resilibench.runtime.protocol import agent_shape as agent_shape
    from pytest_resilibench.runtime.protocol import read_observation as read_observation
    from pytest_resilibench.runtime.protocol import task_text as task_text

__version__ = "0.1.0"

# Public name -> (module, name there). pytest imports `pytest_resilibench.plugin` (and so this
# package) in every run of every project in the venv: the names load on first use (PEP 562).
_PUBLIC: dict[str, tuple[str, str]] = {
    "Agent": ("runtime.protocol", "Agent"),
    "AnyAgent": ("runtime.protocol", "AnyAgent"),
    "COMPLETION_SIGNAL": ("base.names", "COMPLETION_SIGNAL"),
    "Episode": ("runtime.protocol", "Episode"),
    "EpisodeOver": ("runtime.loop_episode", "EpisodeOver"),
    "InfrastructureError": ("runtime.protocol", "InfrastructureError"),
    "LoopAgent": ("runtime.protocol", "LoopAgent"),
    "ModelLimitError": ("runtime.protocol", "ModelLimitError"),
    "ModelReply": ("runtime.protocol", "ModelReply"),
    "ModelRequest": ("runtime.protocol", "ModelRequest"),
    "Observation": ("runtime.protocol", "Observation"),
    "Plan": ("core.workflow", "Workflow"),
    "PlanStep": ("core.workflow", "PlanStep"),
    "Progress": ("runtime.protocol", "Progress"),
    "ToolCall": ("runtime.protocol", "ToolCall"),
    "ToolFault": ("integration.chaos", "ToolFault"),
    "agent_shape": ("runtime.protocol", "agent_shape"),
    "make_agent": ("runtime.agents", "make_agent"),
    "parse_plan": ("core.prompts", "parse_plan"),
    "parse_task_inputs": ("core.prompts", "parse_task_inputs"),
    "read_observation": ("runtime.protocol", "read_observation"),
    "task_text": ("runtime.protocol", "task_text"),
}


def __getattr__(name: str) -> Any:
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module 'pytest_resilibench' has no attribute {name!r}")
    module, attribute = where
    return getattr(importlib.import_module(f"pytest_resilibench.{module}"), attribute)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


__all__ = [
    "COMPLETION_SIGNAL",
    "Agent",
    "AnyAgent",
    "Episode",
    "EpisodeOver",
    "InfrastructureError",
    "LoopAgent",
    "ModelLimitError",
    "ModelReply",
    "ModelRequest",
    "Observation",
    "Plan",
    "PlanStep",
    "Progress",
    "ToolCall",
    "ToolFault",
    "__version__",
    "agent_shape",
    "make_agent",
    "parse_plan",
    "parse_task_inputs",
    "read_observation",
    "task_text",
]
