"""Default output locations: `.resilibench/`, a folder that git ignores by itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_resilibench.base import outputs
from pytest_resilibench.reporting.report import write_report


def test_a_resilibench_folder_ignores_itself(tmp_path: Path) -> None:
    target = outputs.prepare(tmp_path / ".resilibench" / "deep" / "run.json")
    assert target.parent.is_dir()
    ignore = tmp_path / ".resilibench" / ".gitignore"
    assert ignore.read_text().splitlines()[-1] == "*"
    ignore.write_text("custom\n")  # a user's own edit stays
    outputs.prepare(tmp_path / ".resilibench" / "other.html")
    assert ignore.read_text() == "custom\n"


def test_other_folders_get_no_gitignore(tmp_path: Path) -> None:
    outputs.prepare(tmp_path / "reports" / "run.json")
    assert not (tmp_path / "reports" / ".gitignore").exists()


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                    reason="needs git")
def test_git_status_stays_clean(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write_report(tmp_path / ".resilibench" / "run.json", {"schema": "x"}, [json.dumps({})])
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=tmp_path, capture_output=True, text=True, check=True)
    assert (tmp_path / ".resilibench" / "run.json").is_file()
    assert status.stdout == ""
