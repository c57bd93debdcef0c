"""Agents: the protocol, the built-in scripted agents and the real model providers."""

from typing import Any

from pytest_resilibench.agents.base import (
    Agent,
    InfrastructureError,
    ModelReply,
    ModelRequest,
    ToolCall,
)

__all__ = ["Agent", "InfrastructureError", "ModelReply", "ModelRequest", "ToolCall",
           "make_agent"]


def make_agent(spec: str, **options: Any) -> Agent:
    """The agent a spec names: `builtin:NAME` (oracle, follower, adaptive, random), or
    `openai:NAME` / a bare model name for an OpenAI-compatible provider (imported lazily)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"an agent spec must be a non-empty string, got {spec!r}")
    prefix, colon, name = spec.strip().partition(":")
    if colon and prefix == "builtin":
        from pytest_resilibench.agents.builtin import make_builtin

        return make_builtin(name, **options)
    model = name if colon and prefix == "openai" else spec.strip()
    if not model:
        raise ValueError(f"no model name in agent spec {spec!r}")
    from pytest_resilibench.agents.openai_provider import OpenAIAgent

    return OpenAIAgent(model, **options)
