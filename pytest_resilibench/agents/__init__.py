"""Agents: the protocol, the built-in scripted agents and the real model providers."""

from pytest_resilibench.agents.base import (
    Agent,
    InfrastructureError,
    ModelReply,
    ModelRequest,
    ToolCall,
)

__all__ = ["Agent", "InfrastructureError", "ModelReply", "ModelRequest", "ToolCall"]
