"""Helpers for running the benchmark suite inside pytester."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import pytest_resilibench.integration.suite
from pytest_resilibench.reporting.schemas import report_schema

SUITE = Path(pytest_resilibench.integration.suite.__file__)
TIMING = ("wall_time_s",)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory holding the real suite file."""
    pytester.makepyfile(test_resilibench=SUITE.read_text())
    return pytester


def load(path: Path) -> dict[str, Any]:
    """A report the plugin wrote, validated against its published JSON Schema
    (`resilibench schema report`): every report these tests read is checked."""
    data: dict[str, Any] = json.loads(path.read_text())
    jsonschema.validate(data, report_schema())
    return data


def comparable(report: dict[str, Any]) -> tuple[Any, ...]:
    """What must not depend on workers or timing."""
    episodes = [{k: v for k, v in ep.items() if k not in TIMING} for ep in report["episodes"]]
    return report["config"], episodes, report["summary"]
