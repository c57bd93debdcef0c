"""The code stays lint-clean and type-checked: CI runs ruff and mypy through the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# No caches written into the working tree (mypy documents `--cache-dir=/dev/null` as "write no
# cache" on POSIX; ruff has `--no-cache`): a test run leaves the checkout as it found it.
@pytest.mark.parametrize("command", [["ruff", "check", "--no-cache", "."],
                                     ["mypy", "--cache-dir=/dev/null"]], ids=["ruff", "mypy"])
def test_tool_is_clean(command: list[str]) -> None:
    exe = shutil.which(command[0], path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip(f"{command[0]} is not installed (pip install -e '.[dev]')")
    result = subprocess.run([exe, *command[1:]], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
