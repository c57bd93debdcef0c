"""docs/ci/github-actions-shards.yml's steps, run as its jobs would run them: each matrix
shard's benchmark step (the REAL plugin of this tree, a small sample), then the merge job's
step over their reports; the merged report equals the unsharded run's, and a missing shard
fails the merge job, naming it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.plugin.conftest import comparable, load

yaml = pytest.importorskip("yaml", reason="PyYAML (the [dev] extra) is not installed")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "ci" / "github-actions-shards.yml"
SMALL = {"MODEL": "builtin:adaptive", "SAMPLE": "1", "WORKERS": "0"}


def _step(job: dict[str, Any], name: str) -> str:
    (step,) = [s for s in job["steps"] if s.get("name") == name]
    script: str = step["run"]
    return script


def _shims(folder: Path) -> Path:
    """`pytest` and `resilibench` on PATH as this tree's (the workflow pip-installs them)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name, module in (("pytest", "pytest"), ("resilibench", "pytest_resilibench.cli")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m {module} "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_the_matrix_and_merge_jobs_give_the_unsharded_report(tmp_path: Path) -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    shard_job, merge_job = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    shards = shard_job["strategy"]["matrix"]["shard"]
    assert merge_job["needs"] == "shard" and len(shards) == int(workflow["env"]["SHARDS"])
    work = tmp_path / "repo"
    (work / "suites").mkdir(parents=True)
    for name in ("conftest.py", "test_resilibench.py"):
        (work / "suites" / name).write_text((ROOT / "suites" / name).read_text())
    env = {**os.environ, **workflow["env"], **SMALL, "GITHUB_WORKSPACE": str(work),
           "PATH": f"{_shims(tmp_path)}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = _step(shard_job, "Benchmark (one shard)")
    for shard in shards:
        done = _bash(run, work, {**env, "SHARD": str(shard)})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    merge = _step(merge_job, "Merge and gate")
    # A missing shard: the merge job fails, naming it.
    (work / "shard-2.json").rename(tmp_path / "shard-2.json")
    done = _bash(merge, work, env)
    assert done.returncode == 2 and "shard 2/4 missing" in done.stderr, done.stderr
    (tmp_path / "shard-2.json").rename(work / "shard-2.json")
    done = _bash(merge, work, env)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    whole = work / "whole.json"
    unsharded = _bash(f'pytest -n 0 --resili-model="$MODEL" --resili-sample="$SAMPLE" '
                      f'--resili-fail-under="$FAIL_UNDER" '
                      f'--resili-max-infra-errors="$MAX_INFRA_ERRORS" --resili-report={whole}',
                      work, env)
    assert whole.exists(), unsharded.stdout[-2000:]
    merged, reference = load(work / "report.json"), load(whole)
    assert comparable(merged) == comparable(reference)
    assert merged["environment"]["gate"] == reference["environment"]["gate"]
    # The merge job's exit status is the unsharded run's gate.
    assert done.returncode == unsharded.returncode
