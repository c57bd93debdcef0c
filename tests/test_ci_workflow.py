"""docs/ci/github-actions.yml, read as GitHub would read it: the release's report is the
baseline, fork pull requests skip with a notice, the gate is the fixed one, the tables go to
the job summary and the HTML report to an artifact."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML (the [dev] extra) is not installed")

WORKFLOW = Path(__file__).resolve().parents[1] / "docs" / "ci" / "github-actions.yml"


@pytest.fixture(scope="module")
def steps() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as True.
    triggers = data.get("on", data.get(True))
    assert triggers["push"] == {"tags": ["v*"]} and "pull_request" in triggers
    (job,) = data["jobs"].values()
    return {step.get("name") or step.get("uses", ""): step for step in job["steps"]}


def test_fork_pull_requests_skip_every_step_with_a_notice(steps: dict[str, Any]) -> None:
    fork = steps["Fork pull requests have no API key"]
    assert fork["id"] == "fork"
    assert "github.event.pull_request.head.repo.full_name" in fork["run"]
    assert "::notice" in fork["run"] and "GITHUB_STEP_SUMMARY" in fork["run"]
    for name, step in steps.items():
        if step is not fork:
            assert "steps.fork.outputs.skip != 'true'" in step.get("if", ""), name


def test_the_baseline_is_the_last_release_tags_artifact(steps: dict[str, Any]) -> None:
    baseline = steps["Baseline (the last release's report)"]["run"]
    assert "gh release view" in baseline and 'gh run list' in baseline
    assert '--branch "$tag"' in baseline and 'gh run download "$run_id"' in baseline
    upload = steps["Upload the reports (on a release tag, the next baseline) and the JUnit XML"]
    assert upload["with"]["name"] == "${{ env.ARTIFACT }}"
    assert {"report.json", "report.html", "junit.xml"} <= set(upload["with"]["path"].split())


def test_the_gate_is_fixed_so_fail_under_judges_every_episode(steps: dict[str, Any]) -> None:
    command = steps["Benchmark"]["run"]
    words = shlex.split(command.replace("\\\n", " "), comments=True)
    assert "--resili-gate=fixed" in words and "--resili-fail-under=50%" in words
    assert not any("sequential" in word for word in words)


def test_the_tables_go_to_the_job_summary(steps: dict[str, Any]) -> None:
    run = steps["Summary and HTML report"]["run"]
    assert re.search(r"resilibench report report\.json --markdown report\.md --html report\.html",
                     run)
    assert 'cat report.md >> "$GITHUB_STEP_SUMMARY"' in run
