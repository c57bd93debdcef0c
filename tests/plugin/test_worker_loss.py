"""A worker killed mid-run: xdist replaces it, the run goes on, the one episode that died with
it is reported missing instead of the report looking complete, and a re-run resumes from the
episode log to the report of an uninterrupted run."""

from __future__ import annotations

import pytest

from tests.plugin.conftest import TIMING, comparable, load

ARGS = ["--resili-sample=1", "--resili-variants=optimal,flawed",
        "--resili-flaws=missing_step", "-p", "no:cacheprovider", "-p", "no:randomly"]
KILLER = '''
import os, signal
from pathlib import Path

def pytest_runtest_setup(item):
    mark = Path(os.environ["RESILI_KILL_MARK"])
    if os.environ["RESILI_KILL_CASE"] in item.nodeid and not mark.exists():
        mark.write_text("killed")
        os.kill(os.getpid(), signal.SIGKILL)
'''


def test_a_killed_worker_is_replaced_its_episode_reported_missing_then_resumed(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = suite.path / "whole.json"
    suite.runpytest_subprocess(*ARGS, "-n", "2", f"--resili-report={whole}")
    expected = {ep["id"]: ep for ep in load(whole)["episodes"]}
    victim = sorted(ep["task_id"] for ep in expected.values() if ep["variant"] == "optimal")[7]
    case = next(line for line in suite.runpytest("--collect-only", "-q", *ARGS).outlines
                if f"-{victim}-" in line and "-optimal-" in line)
    case_id = case[case.index("[") + 1:-1]
    suite.makeconftest(KILLER)
    monkeypatch.setenv("RESILI_KILL_MARK", str(suite.path / "killed"))
    monkeypatch.setenv("RESILI_KILL_CASE", case_id)
    report = suite.path / "after.json"
    result = suite.runpytest_subprocess(*ARGS, "-n", "2", f"--resili-report={report}")
    assert (suite.path / "killed").exists()
    output = "\n".join(result.outlines + result.errlines)
    assert "INTERNALERROR" not in output
    result.stdout.fnmatch_lines(["*crashed*", "*1 of 30 planned episodes never arrived*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    data = load(report)
    assert data["complete"] is False and (data["expected"], data["received"]) == (30, 29)
    got = {ep["id"]: ep for ep in data["episodes"]}
    assert len(got) == 29 and set(got) < set(expected)

    def strip(ep: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in ep.items() if k not in TIMING}

    assert all(strip(ep) == strip(expected[i]) for i, ep in got.items())

    # The re-run replays the 29 from the log beside the report and runs the lost one.
    (suite.path / "conftest.py").unlink()
    result = suite.runpytest_subprocess(*ARGS, "-n", "2", f"--resili-report={report}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*29 episodes replayed from the resumed run, 1 run now*"])
    resumed = load(report)
    assert (resumed["complete"], resumed["resumed"]) == (True, 29)
    assert comparable(resumed) == comparable(load(whole))
