"""Shared test configuration.

pytester's in-process runs (`pytester.runpytest`) snapshot `sys.modules` and drop whatever a
run imported. A module first imported inside such a run is imported again later as a second
copy, with its own classes: `except httpcore2.ReadError` (built lazily by httpx2) or
`except InfrastructureError` then misses the other copy's exceptions, and tests fail depending
on their order. Importing these modules here, before any snapshot, keeps one copy of each.
"""

from __future__ import annotations

import importlib

for _name in (
    "anyio", "httpcore", "httpx", "httpcore2", "httpx2", "openai", "uvicorn", "starlette",
    "pytest_resilibench.runtime.agents.builtin",
    "pytest_resilibench.runtime.agents.cache",
    "pytest_resilibench.runtime.agents.openai_provider",
    "pytest_resilibench.reporting.analysis",
    "pytest_resilibench.runtime.episode",
    "pytest_resilibench.servers.live.environment",
    "pytest_resilibench.servers.live.server",
    "pytest_resilibench.core.prompts",
    "pytest_resilibench.reporting.report",
    "pytest_resilibench.integration.session",
    "pytest_resilibench.servers.testserver",
):
    importlib.import_module(_name)
