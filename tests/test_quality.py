"""The code stays lint-clean and type-checked: CI runs ruff and mypy through the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# The tools' caches go in the test's own folder (both take `--cache-dir`), never into the
# working tree: a test run leaves the checkout as it found it.
@pytest.mark.parametrize("command", [["ruff", "check", "."], ["mypy"]], ids=["ruff", "mypy"])
def test_tool_is_clean(command: list[str], tmp_path: Path) -> None:
    exe = shutil.which(command[0], path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip(f"{command[0]} is not installed (pip install -e '.[dev]')")
    cache = tmp_path / "cache"
    result = subprocess.run([exe, *command[1:], f"--cache-dir={cache}"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert cache.is_dir()  # the tool wrote its cache where it was told
