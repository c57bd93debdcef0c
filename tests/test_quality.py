"""The code stays lint-clean and type-checked: CI runs ruff and mypy through the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["ruff", "check", "."], ["mypy"]], ids=["ruff", "mypy"])
def test_tool_is_clean(command: list[str]) -> None:
    exe = shutil.which(command[0], path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip(f"{command[0]} is not installed (pip install -e '.[dev]')")
    result = subprocess.run([exe, *command[1:]], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
