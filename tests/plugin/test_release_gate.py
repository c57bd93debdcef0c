"""A release gate a team can trust (issue 45): three unchanged built-ins beside a new version of
the team's own `py:` agent that gives up after its first failed call. Every place that gives a
verdict — the run's gate lines and exit status, the JUnit `resilibench::gate` case, the
headline, the GitHub job summary and `resilibench report --compare` — names that agent as the
regression and fails; with the unchanged agent, all pass. The run's gate lines and the report
command's are the same bytes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_resilibench.cli import main

pytestmark = pytest.mark.xdist_group("release-gate")

AGENT = '''
import os

from pytest_resilibench import ModelReply, make_agent, read_observation


class AgentUnderTest:
    """builtin:adaptive; version 2 gives up (declares the task done) after its first failure."""

    name = "my-agent"

    def __init__(self) -> None:
        self.inner = make_agent("builtin:adaptive")
        self.gives_up = os.environ["AGENT_VERSION"] == "2"

    async def complete(self, request):
        seen = [o for m in request.messages if (o := read_observation(m))]
        if self.gives_up and any(o["status"] != "success" for o in seen):
            return ModelReply(content="TASK_COMPLETED")
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def make():
    return AgentUnderTest()
'''
MODELS = "builtin:oracle,builtin:adaptive,builtin:follower,py:agent_under_test:make"
RUN = ["--resili-sample=2", "--resili-variants=optimal,baseline", f"--resili-model={MODELS}",
       "-p", "no:cacheprovider", "--resili-max-drop=3"]


@pytest.fixture
def release(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    suite.makepyfile(agent_under_test=AGENT)
    monkeypatch.syspath_prepend(str(suite.path))
    monkeypatch.setenv("AGENT_VERSION", "1")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result = suite.runpytest(*RUN, f"--resili-report={suite.path / 'old.json'}")
    assert result.ret == 0, result.stdout.str()[-2000:]
    return suite


def gate_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("resilibench gate: ")]


def exit_line(text: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith("resilibench: exit ")]
    return line


def run_new(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, version: str
            ) -> tuple[pytest.RunResult, Path, Path]:
    monkeypatch.setenv("AGENT_VERSION", version)
    summary = suite.path / f"summary-{version}.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit = suite.path / f"junit-{version}.xml"
    result = suite.runpytest(*RUN, f"--resili-baseline={suite.path / 'old.json'}",
                             f"--resili-report={suite.path / f'new-{version}.json'}",
                             f"--junitxml={junit}")
    return result, summary, junit


def test_one_regressed_agent_among_unchanged_ones_fails_everywhere(
        release: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    result, summary, junit = run_new(release, monkeypatch, "2")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = gate_lines(out)
    verdicts = {name.group(1): line for line in lines
                if (name := re.match(r"resilibench gate: baseline (.+?): [a-z]+: ", line))}
    assert set(verdicts) == {"builtin:oracle", "builtin:adaptive", "builtin:follower",
                             "my-agent"}
    assert ": regression: " in verdicts["my-agent"]
    assert all(": regression: " not in verdicts[m] for m in
               ("builtin:oracle", "builtin:adaptive", "builtin:follower"))
    assert "allowed 3 pp at 95% confidence" in verdicts["my-agent"]
    assert exit_line(out) == "resilibench: exit 1: my-agent REGRESSION against the baseline"
    # the headline: the agent's own verdict, by its name
    headline = out[out.index("ResiliBench: "):]
    block = headline[headline.index("\nmy-agent\n"):]
    assert "vs its baseline partner: regression" in block.split("\nbuiltin:")[0]
    # JUnit: the gate case fails and names the agent
    case = next(c for c in ET.parse(junit).iter("testcase") if c.get("name") == "gate")
    failure = case.find("failure")
    assert failure is not None and "baseline my-agent: regression" in (
        failure.get("message", "") + (failure.text or ""))
    # the job summary GitHub shows: the failed gate marked, the rule named
    text = summary.read_text()
    assert "❌ **FAILED**: baseline my-agent: regression" in text
    assert text.count("❌") == 1
    assert "**resilibench: exit 1: my-agent REGRESSION against the baseline**" in text
    # `resilibench report --compare`: the same thresholds (recorded in the report), the same
    # verdicts, byte for byte, and the same exit status
    capsys.readouterr()
    code = main(["report", str(release.path / "new-2.json"), "--compare",
                 str(release.path / "old.json")])
    printed = capsys.readouterr().out
    assert code == 1
    assert gate_lines(printed) == lines
    assert printed.rstrip().splitlines()[-1] == (
        "resilibench: exit 1: my-agent REGRESSION against the baseline")


def test_the_unchanged_agents_pass_everywhere(
        release: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    result, summary, junit = run_new(release, monkeypatch, "1")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    lines = gate_lines(out)
    # 60 pairs a model cannot show a drop under 3 pp either: inconclusive, passing by default
    assert len(lines) == 4 and all(": inconclusive: drop +0.0 pp" in line and line.endswith(
        "[--resili-inconclusive=pass: passes]") for line in lines)
    assert exit_line(out) == "resilibench: exit 0: every gate passed (4 verdicts)"
    case = next(c for c in ET.parse(junit).iter("testcase") if c.get("name") == "gate")
    assert case.find("failure") is None
    text = summary.read_text()
    assert "❌" not in text and text.count("✅ passed") == 4
    capsys.readouterr()
    code = main(["report", str(release.path / "new-1.json"), "--compare",
                 str(release.path / "old.json")])
    printed = capsys.readouterr().out
    assert code == 0 and gate_lines(printed) == lines
    # told otherwise, the report judges by the options given: inconclusive now fails
    code = main(["report", str(release.path / "new-1.json"), "--compare",
                 str(release.path / "old.json"), "--confidence", "90", "--inconclusive", "fail"])
    printed = capsys.readouterr().out
    assert "allowed 3 pp at 90% confidence" in printed  # the run's max-drop, the given level
    assert code == 1 and "INCONCLUSIVE against the baseline" in exit_line(printed)
    code = main(["report", str(release.path / "new-1.json"), "--compare",
                 str(release.path / "old.json"), "--max-drop", "20"])
    printed = capsys.readouterr().out
    assert code == 0 and sum(": pass: drop +0.0 pp" in line and "allowed 20 pp" in line
                             for line in gate_lines(printed)) == 4


FLAKY = '''
from pytest_resilibench import InfrastructureError, make_agent


class Flaky:
    """builtin:adaptive whose first three requests find the backend down."""

    name = "flaky"

    def __init__(self) -> None:
        self.inner = make_agent("builtin:adaptive")
        self.calls = 0

    async def complete(self, request):
        self.calls += 1
        if self.calls <= 3:
            raise InfrastructureError("backend unreachable")
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def make():
    return Flaky()
'''


@pytest.mark.parametrize(("tolerance", "status", "line"), [
    (None, 1, "resilibench: exit 1: infra errors over"),
    ("3", 0, "resilibench: exit 0: no gate asked"),
    ("10%", 0, "resilibench: exit 0: no gate asked"),
    ("9%", 1, "resilibench: exit 1: infra errors over"),
    ("2", 1, "resilibench: exit 1: infra errors over"),
])
def test_infra_errors_fail_the_run_unless_tolerated(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tolerance: str | None,
        status: int, line: str) -> None:
    suite.makepyfile(flaky_agent=FLAKY)
    monkeypatch.syspath_prepend(str(suite.path))
    args = ["--resili-sample=2", "--resili-variants=optimal", "--resili-model=py:flaky_agent:make",
            "-p", "no:cacheprovider",
            *([f"--resili-max-infra-errors={tolerance}"] if tolerance else [])]
    result = suite.runpytest(*args)
    out = result.stdout.str()
    assert result.ret == status, out[-2000:] + result.stderr.str()
    assert "3 infra errors" in out.splitlines()[-1]  # pytest's own count is unchanged
    said = exit_line(out)
    assert said.startswith(line), said
    assert "infra errors: 3 of 30 episodes" in said or status == 1


def test_every_output_names_the_agent_by_its_name(
        release: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """The run's terminal, and the report's terminal, markdown and HTML, say `my-agent` where
    the spec `py:agent_under_test:make` ran; the JSON keeps the spec (it pairs episodes)."""
    old = release.path / "old.json"
    md, page = release.path / "old.md", release.path / "old.html"
    assert main(["report", str(old), "--markdown", str(md), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    for text in (printed, md.read_text()):
        assert "my-agent" in text and "py:agent_under_test:make" not in text
    html = page.read_text()  # its configuration table keeps the spec, as the JSON does
    assert 'data-model="my-agent"' in html and 'data-model="py:' not in html
    import json

    report = json.loads(old.read_text())
    assert report["config"]["agent_names"] == {"py:agent_under_test:make": "my-agent"}
    assert {ep["model"] for ep in report["episodes"]} >= {"py:agent_under_test:make"}
