"""The live services as a `ToolRegistry`: the same schema and error taxonomy as the simulator's
30 tools, so prompts, flaws and scoring treat a live task like any other.

Each service's failure modes are its faults under their taxonomy names (a 429 is RATE_LIMITED,
a 5xx OPERATION_FAILED, a malformed or truncated body INVALID_RESPONSE, a hang TIMEOUT), weighted
by how often the service commits them; NETWORK_ERROR is what an unreachable service gives.
"""

from __future__ import annotations

from pytest_resilibench.core.registry import ToolRegistry, ToolSpec
from pytest_resilibench.servers.live.services import SERVICES, ServiceSpec

__all__ = ["DEFAULT_TIMEOUT_S", "LIVE_CATEGORY", "live_registry", "tool_spec"]

LIVE_CATEGORY = "live"
# The client's per-request timeout: well above any service's normal latency (tens of ms),
# well below a hanging service's `hang_s`.
DEFAULT_TIMEOUT_S = 1.0
# Floors so every tool lists the common three codes, as every simulated tool does.
_INVALID_INPUT_WEIGHT = 0.01
_FLOOR = 0.005
_NETWORK_WEIGHT = 0.005


def tool_spec(service: ServiceSpec, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> ToolSpec:
    m = service.misbehaviour
    modes = [
        ("INVALID_INPUT", _INVALID_INPUT_WEIGHT),
        ("OPERATION_FAILED", max(m.server_error, _FLOOR)),
        ("TIMEOUT", max(m.timeout, _FLOOR)),
        ("NETWORK_ERROR", _NETWORK_WEIGHT),
    ]
    if m.rate_limit:
        modes.append(("RATE_LIMITED", m.rate_limit))
    if m.malformed or m.truncated:
        modes.append(("INVALID_RESPONSE", m.malformed + m.truncated))
    return ToolSpec(
        name=service.name,
        category=LIVE_CATEGORY,
        operation=service.name,
        role=service.role,
        description=service.description,
        keywords=service.keywords,
        parameters=service.parameters,
        returns=service.returns,
        failure_modes=tuple(modes),
        latency_s=m.latency_ms / 1000.0,
        timeout_s=timeout_s,
        output_format="json",
    )


_REGISTRY: ToolRegistry | None = None


def live_registry() -> ToolRegistry:
    """The 23 live tools (built once per process)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = ToolRegistry(tuple(tool_spec(s) for s in SERVICES))
    return _REGISTRY
