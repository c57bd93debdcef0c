"""The JSON Schema pieces tool definitions are written with, for the simulated catalog
(`catalog.py`) and the live services (`servers/live/services.py`) alike, so both spell a
parameter object and a text parameter the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["parameters", "text"]


def parameters(required: Sequence[str] = (), **props: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameter object: exactly `props`, of which `required` must be given."""
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


def text(description: str, **extra: Any) -> dict[str, Any]:
    """A non-empty string parameter (`extra`: pattern, enum, ...)."""
    return {"type": "string", "minLength": 1, "description": description, **extra}
