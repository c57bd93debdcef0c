"""The optional extras and what needs them: a feature used without its extra is one clear
error naming the install command, at start-up, never an ImportError per item.

Extras (pyproject.toml): `solver` (torch, tqdm: PPO training), `mcp` (the MCP server and
`--resili-env=mcp`), `report` (matplotlib: PNG plots on request, `resilibench report --png`; the
HTML report needs none), `otel` (the OpenTelemetry SDK: `--resili-otel`), `dev`.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

__all__ = ["MissingExtra", "check_run", "require"]


class MissingExtra(ValueError):
    """A feature was asked for whose optional dependencies are not installed."""


def require(extra: str, module: str, feature: str) -> None:
    """Raise `MissingExtra` unless `module` can be imported (looked up, not imported)."""
    try:
        found = find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtra(f"{feature} needs the '{extra}' extra ({module} is not installed): "
                           f'pip install "pytest-resilibench[{extra}]"')


def check_run(config: Any) -> None:
    """The extras a benchmark run's options need (a `RunConfig`)."""
    if config.env == "mcp":
        require("mcp", "mcp", "--resili-env=mcp")
    if config.otel:
        require("otel", "opentelemetry.sdk", "--resili-otel")
