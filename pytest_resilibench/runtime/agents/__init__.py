"""Agents: the protocols, the built-in scripted agents, the real model providers and agents
written in Python (`py:`)."""

from collections.abc import Callable
from typing import Any

from pytest_resilibench.runtime.protocol import (
    Agent,
    AnyAgent,
    InfrastructureError,
    LoopAgent,
    ModelReply,
    ModelRequest,
    ToolCall,
    agent_shape,
)

__all__ = ["FAMILIES", "Agent", "AnyAgent", "InfrastructureError", "LoopAgent", "ModelReply",
           "ModelRequest", "ToolCall", "agent_shape", "make_agent", "spec_family"]


def _builtin(name: str, **options: Any) -> AnyAgent:
    from pytest_resilibench.runtime.agents.builtin import make_builtin

    return make_builtin(name, **options)


def _python(target: str, **options: Any) -> AnyAgent:
    from pytest_resilibench.runtime.agents.python import make_python_agent

    return make_python_agent(target, **options)


def _openai(model: str, **options: Any) -> AnyAgent:
    if not model:
        raise ValueError("no model name in agent spec 'openai:'")
    from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent

    return OpenAIAgent(model, **options)


# Spec prefix -> the family that builds its agents (modules imported on first use). Any other
# spec is a model name for an OpenAI-compatible provider (a colon may be part of it: `qwen3:8b`).
FAMILIES: dict[str, Callable[..., AnyAgent]] = {
    "builtin": _builtin, "py": _python, "openai": _openai}


def spec_family(spec: str) -> str:
    """The family of an agent spec: a `FAMILIES` key ("openai" for a bare model name)."""
    prefix, colon, _ = spec.strip().partition(":")
    return prefix if colon and prefix in FAMILIES else "openai"


def make_agent(spec: str, **options: Any) -> AnyAgent:
    """The agent a spec names: `builtin:NAME` (oracle, follower, adaptive, random),
    `py:MODULE:FACTORY` (your own, agents/python.py), or `openai:NAME` / a bare model name
    for an OpenAI-compatible provider. `options` go to the family's constructor."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"an agent spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    family = spec_family(spec)
    prefix, colon, name = spec.partition(":")
    return FAMILIES[family](name if colon and prefix == family else spec, **options)
