"""Fixtures the unit tests share."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_resilibench.core.fixture_files import write_fixture_file
from pytest_resilibench.core.task_set_schemas import MANIFEST_SCHEMA


@pytest.fixture
def fixtures_dir(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A fixtures folder holding the test module's `TASK` alone, listed in its manifest like
    the real fixtures (so `load_tasks` and `--fixtures` read it as they read those)."""
    line = json.dumps(request.module.TASK.to_json()).encode() + b"\n"
    write_fixture_file(tmp_path, "tasks.jsonl.gz", gzip.compress(line),
                       {"schema": MANIFEST_SCHEMA, "total": 1})
    return tmp_path
