"""A run split in shards (`--resili-shard=K/N`) and joined (`resilibench report merge`) is the
unsharded run (issue 49): the same episodes, summary and verdicts; and the merged report is a
baseline as good as the unsharded one, for the fixed and the sequential gate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.plugin.conftest import comparable, load

ROOT = Path(__file__).resolve().parents[2]
RUN = ("-p", "no:cacheprovider", "-p", "no:randomly", "--resili-sample=1",
       "--resili-variants=optimal,flawed", "--resili-flaws=missing_step,tool_misuse",
       "--resili-model=builtin:adaptive,builtin:follower", "--resili-repeats=2",
       "--resili-fail-under=20%", "--resili-resume=off")


def _run(suite: pytest.Pytester, report: Path, *extra: str) -> dict[str, Any]:
    result = suite.runpytest_subprocess(*RUN, f"--resili-report={report}", *extra)
    assert result.ret == 0, result.stdout.str()[-3000:]
    return load(report)


def _merge(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest_resilibench.cli", "report", "merge",
                           *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def _verdicts(report: dict[str, Any]) -> tuple[Any, ...]:
    return (report["environment"]["gate"], report["complete"], report["expected"],
            report["received"], report["prompt_cache"])


def test_four_shards_merged_are_the_unsharded_run(suite: pytest.Pytester) -> None:
    whole = _run(suite, suite.path / "whole.json", "-n", "0")
    shards = []
    for k in range(1, 5):  # -n 2 in two of them: a shard is a run like any other
        shard = _run(suite, suite.path / f"shard{k}.json", f"--resili-shard={k}/4",
                     "-n", "2" if k % 2 else "0")
        assert shard["config"]["shard"] == f"{k}/4"
        shards.append(shard)
    # Whole tasks per shard, no episode twice, every episode once.
    tasks = [{e["task_id"] for e in shard["episodes"]} for shard in shards]
    assert all(not (a & b) for i, a in enumerate(tasks) for b in tasks[i + 1:])
    assert sorted(len(s["episodes"]) for s in shards)[0] > 0
    files = [f"shard{k}.json" for k in (3, 1, 4, 2)]  # any order
    done = _merge(suite.path, *files, "-o", "merged.json")
    assert done.returncode == 0, done.stdout + done.stderr
    merged = load(suite.path / "merged.json")
    assert comparable(merged) == comparable(whole)
    assert _verdicts(merged) == _verdicts(whole)
    assert whole["environment"]["gate"]  # there is a verdict to compare

    # Missing and foreign shards are refused, each named.
    done = _merge(suite.path, "shard1.json", "shard2.json", "shard4.json", "-o", "bad.json")
    assert done.returncode == 2 and "shard 3/4 missing" in done.stderr, done.stderr
    foreign = _run(suite, suite.path / "foreign.json", "--resili-shard=3/4", "--resili-seed=5")
    assert foreign["config"]["seed"] == 5
    done = _merge(suite.path, "shard1.json", "shard2.json", "foreign.json", "shard4.json",
                  "-o", "bad.json")
    assert done.returncode == 2, done.stderr
    assert "foreign.json: not the same run as shard1.json: its config differs in seed" \
        in done.stderr
    assert "Traceback" not in done.stderr and not (suite.path / "bad.json").exists()

    # The merged report is a baseline like the unsharded one: the same verdicts.
    for gate in ("fixed", "sequential"):
        judged = {name: _run(suite, suite.path / f"{gate}-{name}.json", "-n", "0",
                             f"--resili-baseline={name}.json", f"--resili-gate={gate}")
                  for name in ("whole", "merged")}
        assert judged["whole"]["environment"]["gate"], gate
        assert _verdicts(judged["whole"]) == _verdicts(judged["merged"]), gate
        assert comparable(judged["whole"]) == comparable(judged["merged"]), gate
