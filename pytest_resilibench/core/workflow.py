"""Workflows: the plans shown to models (optimal, or flawed) as plain frozen data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PlanStep", "Workflow"]


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan: which tool, why, with which key argument values, and what to do
    if it fails."""

    tool: str
    purpose: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    on_failure: str = "retry"

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "purpose": self.purpose,
            "arguments": dict(self.arguments),
            "on_failure": self.on_failure,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlanStep:
        return cls(
            tool=data["tool"],
            purpose=data.get("purpose", ""),
            arguments=dict(data.get("arguments", {})),
            on_failure=data.get("on_failure", "retry"),
        )


@dataclass(frozen=True)
class Workflow:
    """An ordered plan plus general advice (retry/contingency) shown with it."""

    steps: tuple[PlanStep, ...]
    advice: str = ""

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(step.tool for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {"steps": [s.to_json() for s in self.steps], "advice": self.advice}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Workflow:
        return cls(
            steps=tuple(PlanStep.from_json(s) for s in data.get("steps", ())),
            advice=data.get("advice", ""),
        )
