"""A team's `resili_faults` tests in the run's own report, headline and gate (issue 48): the
report options alone do not start the benchmark; beside the benchmark's episodes they share
one JSON report (its `chaos` section), one headline, one `--resili-baseline` gate (each test
seed for seed, as each model against its partner) and `resilibench report merge`. Real pytest
subprocesses over the real suite file and a team's test file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.plugin.conftest import load

ROOT = Path(__file__).resolve().parents[2]
TEST = "test_team.py::test_agent_saves_the_rows"
# A small benchmark: one model, 15 optimal episodes.
BENCHMARK = ("--resili-model=builtin:oracle", "--resili-sample=1", "--resili-variants=optimal",
             "--resili-resume=off")

TEAM_TEST = '''
import os

import pytest

AGENT = os.environ.get("CHAOS_AGENT", "careful")


def fetch(key):
    return {"key": key, "rows": [1, 2, 3]}


def save(rows):
    return {"saved": len(rows)}


def ping():
    return "pong"


def run_agent(fetch, save, ping):
    tries = 6 if AGENT == "careful" else 1
    for _ in range(tries):  # the careful agent retries, and waits a rate limit out
        try:
            data = fetch("k")
            if data.get("rows"):
                break
        except Exception as exc:
            if getattr(exc, "retry_after", None):
                ping()
    else:
        return False
    for _ in range(tries):
        try:
            return save(data["rows"]).get("saved") == len(data["rows"])
        except Exception as exc:
            if getattr(exc, "retry_after", None):
                ping()
    return False


@pytest.mark.resili_faults(profile="realistic", seeds=24, spare=["ping"])
def test_agent_saves_the_rows(resili_faults):
    tools = resili_faults.wrap([fetch, save, ping])
    ok = run_agent(*tools)
    resili_faults.claim(ok, needed=["fetch", "save"])
    assert ok


def test_plain():
    assert True
'''


@pytest.fixture
def team(suite: pytest.Pytester) -> pytest.Pytester:
    """The real suite file beside a team's own test file."""
    suite.makepyfile(test_team=TEAM_TEST)
    return suite


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, agent: str,
         *args: str) -> Any:
    monkeypatch.setenv("CHAOS_AGENT", agent)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def _env() -> dict[str, str]:
    """The `resilibench` command of this checkout."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")])}


def test_the_report_options_alone_do_not_start_the_benchmark(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_team=TEAM_TEST)
    report = pytester.path / "team.json"
    result = _run(pytester, monkeypatch, "careful", f"--resili-report={report}",
                  "--resili-max-drop=3", "--resili-confidence=90", "--resili-summary=full")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 24 + 1 + 1  # no episode
    out = result.stdout.str()
    assert "ResiliBench results" not in out and "resilibench::" not in out
    data = load(report)
    assert data["episodes"] == [] and data["config"]["models"] == []
    assert data["config"]["confidence"] == 0.9
    runs = data["chaos"]["runs"]
    assert len(runs) == 25 and {r["test"] for r in runs} == {TEST}
    result.stdout.fnmatch_lines(["*ResiliBench resili_faults*", f"{TEST} [[]realistic[]]: *",
                                 f"JSON report: {report}"])
    # `resilibench report` reads it as any report: its headline names the test.
    shown = subprocess.run([sys.executable, "-m", "pytest_resilibench.cli", "report",
                            str(report)], cwd=pytester.path, env=_env(), capture_output=True,
                           text=True, timeout=300, check=False)
    assert shown.returncode == 0, shown.stderr
    assert f"resili_faults {TEST} [realistic]: clean 100%" in shown.stdout
    # A report of these tests alone is a baseline like any other: the next version of the
    # agent is judged against it seed for seed, and the gate's case reaches JUnit XML.
    again = _run(pytester, monkeypatch, "careful", f"--resili-baseline={report}",
                 "--junitxml=again.xml")
    again.stdout.fnmatch_lines([f"*resilibench gate: chaos {TEST}: *",
                                "*resilibench: exit *"])
    assert 'name="gate"' in (pytester.path / "again.xml").read_text()
    assert "ResiliBench results" not in again.stdout.str()


def test_a_bad_baseline_stops_a_run_of_resili_faults_tests_at_start_up(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_team=TEAM_TEST)
    (pytester.path / "bad.json").write_text('{"schema": "something else"}')
    result = _run(pytester, monkeypatch, "careful", "--resili-baseline=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resili-baseline: *expected schema*"])
    assert "passed" not in result.stdout.str()


def test_one_report_headline_and_gate_for_episodes_and_resili_faults_tests(
        team: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _run(team, monkeypatch, "careful", *BENCHMARK, "--resili-report=v1.json")
    v1 = load(team.path / "v1.json")
    assert len(v1["episodes"]) == 15 and len(v1["chaos"]["runs"]) == 25
    # The headline says both: the model's rates, and the test's rate clean and under faults.
    first.stdout.fnmatch_lines(["*ResiliBench: 15 episodes*", "builtin:oracle",
                                f"resili_faults {TEST} [[]realistic[]]: clean 100%*, under "
                                "faults *; drop *pp [[]*[]], * flipped seed*"])
    # The naive agent, the same model's episodes, judged against v1 in one gate (under xdist).
    second = _run(team, monkeypatch, "naive", *BENCHMARK, "--resili-report=v2.json",
                  "--resili-baseline=v1.json", "--junitxml=v2.xml", "-n", "2")
    v2 = load(team.path / "v2.json")
    chaos = v2["chaos"]
    verdict = chaos["comparison"][TEST]["verdict"]
    assert verdict["kind"] == "regression" and verdict["n"] == 24
    naive, careful = (report["chaos"]["summary"]["tests"][TEST] for report in (v2, v1))
    assert naive["faults"]["k"] < careful["faults"]["k"]
    assert naive["drop_ci_pp"][0] > 0  # the faults cost the naive agent, significantly
    gate = v2["environment"]["gate"]
    assert any(line.startswith("baseline builtin:oracle: ") for line in gate)
    assert any(line.startswith(f"chaos {TEST}: ") and "regression" in line for line in gate)
    second.stdout.fnmatch_lines([f"*resilibench gate: chaos {TEST}: *regression*",
                                 f"*resilibench: exit 1: *chaos {TEST} REGRESSION*"])
    junit = (team.path / "v2.xml").read_text()
    assert 'name="gate"' in junit and f"chaos {TEST}" in junit
    assert second.ret == 1
    # `resilibench report --compare` judges the two reports again: the run's verdicts, word for
    # word, the resili_faults test's among them.
    again = subprocess.run([sys.executable, "-m", "pytest_resilibench.cli", "report",
                            "v2.json", "--compare", "v1.json"], cwd=team.path, env=_env(),
                           capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 1, again.stdout + again.stderr
    assert all(f"resilibench gate: {line}" in again.stdout for line in gate)
    # The episodes' own recovery measures, per model, in the summary (no --resili-trajectories).
    (row,) = v2["summary"]["recovery"]
    assert row["model"] == "builtin:oracle" and row["episodes"] == 15
    counted = [ep["recovery"] for ep in v2["episodes"] if "recovery" in ep]
    assert row["met_failure"] == len(counted) > 0
    assert row["measures"]["failures"] == sum(r["failures"] for r in counted) > 0
    assert row["measures"]["fabricated"] == 0  # the oracle says done only when it is


def test_merged_shards_carry_the_resili_faults_tests_once(
        team: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in (1, 2):  # every shard's job runs the team's tests too
        _run(team, monkeypatch, "careful", *BENCHMARK, f"--resili-shard={k}/2",
             f"--resili-report=shard{k}.json")
    shards = [load(team.path / f"shard{k}.json") for k in (1, 2)]
    env = _env()
    done = subprocess.run([sys.executable, "-m", "pytest_resilibench.cli", "report", "merge",
                           "shard1.json", "shard2.json", "-o", "merged.json"], cwd=team.path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = load(team.path / "merged.json")
    assert merged["chaos"]["runs"] == shards[0]["chaos"]["runs"]
    assert merged["chaos"]["summary"] == shards[0]["chaos"]["summary"]
    assert len(merged["episodes"]) == sum(len(s["episodes"]) for s in shards) == 15
    # Shards whose runs of one test disagree are not one run's.
    flipped = json.loads((team.path / "shard2.json").read_text())
    row = flipped["chaos"]["runs"][0]
    row["outcome"] = "failed" if row["outcome"] == "passed" else "passed"
    (team.path / "shard2.json").write_text(json.dumps(flipped))
    refused = subprocess.run([sys.executable, "-m", "pytest_resilibench.cli", "report", "merge",
                              "shard1.json", "shard2.json", "-o", "bad.json"], cwd=team.path,
                             env=env, capture_output=True, text=True, timeout=300, check=False)
    assert refused.returncode != 0 and "disagree on" in refused.stdout + refused.stderr


def test_episodes_nothing_asked_for_under_xdist_are_named_not_dropped(
        suite: pytest.Pytester) -> None:
    """A suite file's functions ask for the benchmark as xdist's workers collect them; the
    controller, which collects nothing, never heard of it: the report options alone do not
    ask, so its end says where the episodes went rather than writing a report without them."""
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2",
                                        "--resili-report=r.json", "-k", "optimal-simple_task")
    result.stdout.fnmatch_lines(["*benchmark episodes ran on xdist workers, but nothing asked "
                                 "for the benchmark before collection*"])
    assert load(suite.path / "r.json")["episodes"] == []
    asked = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2",
                                       "--resili-report=r.json", "--resili-sample=1",
                                       "-k", "optimal-simple_task")
    assert "nothing asked" not in asked.stdout.str()
    assert load(suite.path / "r.json")["episodes"]
