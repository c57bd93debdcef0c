"""Environments: where an episode's tool calls go.

The episode runner talks to an `Environment`; the simulator is one, an MCP tool server or the
live HTTP services are others. All answer with a `CallResult`, so scoring never cares which.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pytest_resilibench.core.simulator import CallResult, Simulator

__all__ = ["Environment", "SimulatedEnvironment"]


@runtime_checkable
class Environment(Protocol):
    """Tool calls for one episode. `call` never raises on what an agent sends."""

    @property
    def tool_names(self) -> tuple[str, ...]: ...

    async def call(self, name: str, arguments: Any) -> CallResult: ...

    async def aclose(self) -> None: ...


class SimulatedEnvironment:
    """The stochastic simulator as an environment (in-process, no I/O)."""

    def __init__(self, simulator: Simulator) -> None:
        self.simulator = simulator

    @property
    def tool_names(self) -> tuple[str, ...]:
        return self.simulator.registry.names

    async def call(self, name: str, arguments: Any) -> CallResult:
        return self.simulator.call(name, arguments)

    async def aclose(self) -> None:
        return None
