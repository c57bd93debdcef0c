"""Bring your own agent, end to end: `--resili-model=py:MODULE:FACTORY` from a module outside
the test directory (both shapes: the docs/examples agents), and the
`pytest_resilibench_make_agent` hook from a conftest.py, with and without xdist."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.plugin.conftest import comparable, load

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
PLANNER, TURN = "py:planner_agent:make_agent", "py:turn_agent:make_agent"
SMALL = ["--resili-sample=1", "--resili-variants=optimal", "-p", "no:cacheprovider"]
VERDICT = ("outcome", "conditions", "turns", "tool_calls", "stop_reason", "task_id")


@pytest.fixture
def outside(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The suite, with docs/examples importable through PYTHONPATH only (not the test folder):
    how a team's agent package reaches pytest and every xdist worker."""
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLES))
    return suite


def by_model(report: dict) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for ep in sorted(report["episodes"], key=lambda ep: ep["task_id"]):
        out.setdefault(ep["model"], []).append(tuple(str(ep[k]) for k in VERDICT))
    return out


def test_both_shapes_from_an_outside_module_match_the_plan_follower_with_and_without_xdist(
    outside: pytest.Pytester,
) -> None:
    reports = {}
    for workers in ("0", "2"):
        path = outside.path / f"n{workers}.json"
        result = outside.runpytest_subprocess(
            *SMALL, f"--resili-model={PLANNER},{TURN},builtin:follower", "-n", workers,
            f"--resili-report={path}")
        assert result.ret == 0, result.stdout.str()[-2000:]
        reports[workers] = load(path)
    assert comparable(reports["0"]) == comparable(reports["2"])
    verdicts = by_model(reports["0"])
    assert len(verdicts[PLANNER]) == 15
    # Both examples follow the optimal plan with retries, as builtin:follower does: the same
    # verdict on every task, so they reach the optimal plan's success.
    assert verdicts[PLANNER] == verdicts[TURN] == verdicts["builtin:follower"]


@pytest.mark.parametrize(("spec", "message"), [
    ("py:no_such_agents:make", "*--resili-model py:no_such_agents:make: no module named "
                               "'no_such_agents': install it*"),
    ("py:planner_agent:nothing", "*module 'planner_agent' has no attribute 'nothing'*"),
    ("py:team_agents:broken", "*py:team_agents:broken raised RuntimeError: set TEAM_KEY*"),
    ("py:team_agents:shapeless", "*returned an unusable agent: Shapeless object has neither*"),
    ("py:planner_agent", "*a Python agent is named py:MODULE:FACTORY*"),
])
def test_a_bad_py_spec_is_one_usage_error_at_start_up(
    suite: pytest.Pytester, spec: str, message: str,
) -> None:
    suite.syspathinsert(EXAMPLES)
    outside = suite.mkdir("outside")
    (outside / "team_agents.py").write_text(textwrap.dedent("""
        def broken():
            raise RuntimeError("set TEAM_KEY")

        class Shapeless:
            name = "shapeless"

        def shapeless():
            return Shapeless()
    """))
    suite.syspathinsert(outside)
    result = suite.runpytest(*SMALL, f"--resili-model={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


CONFTEST = '''
import os
import pytest
from planner_agent import Planner

@pytest.hookimpl(optionalhook=True)
def pytest_resilibench_make_agent(config, spec):
    with open(os.path.join(str(config.rootpath), "built.log"), "a") as log:
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        log.write(f"{worker} {spec}\\n")
    if spec == "team:planner":
        return Planner()
    if spec == "team:broken":
        raise RuntimeError("the team's agent server is not configured")
    if spec == "team:shapeless":
        return object()
    return None  # the plugin builds the others
'''


SPECS = {"team_planner": "team:planner", "builtin_follower": "builtin:follower"}  # id -> spec


def test_a_conftest_hook_builds_agents_for_any_spec_in_every_worker(
    outside: pytest.Pytester,
) -> None:
    outside.makeconftest(CONFTEST)
    log = outside.path / "built.log"
    reports = {}
    for workers in ("0", "2"):
        log.unlink(missing_ok=True)
        path = outside.path / f"n{workers}.json"
        result = outside.runpytest_subprocess(
            *SMALL, "--resili-model=team:planner,builtin:follower", "-n", workers, "-v",
            f"--resili-report={path}")
        assert result.ret == 0, result.stdout.str()[-2000:]
        reports[workers] = load(path)
        built = set(log.read_text().splitlines())
        # The controller checks each spec; each process that runs episodes builds its own
        # agent for each spec it ran (under xdist, which worker runs an item is xdist's work
        # stealing's choice: read it off `-v`'s "[gw0] [ 3%] FULL ...[<case id>]" lines).
        ran = {("main", spec) for spec in SPECS.values()} if workers == "0" else {
            (match[1], SPECS[match[2]]) for match in re.finditer(
                r"\[(gw\d+)\].*test_resilibench\[(team_planner|builtin_follower)-",
                result.stdout.str())}
        assert {worker for worker, _ in ran} <= {"main", "gw0", "gw1"}
        assert {spec for _, spec in ran} == set(SPECS.values())
        assert built == {f"main {s}" for s in SPECS.values()} | {f"{w} {s}" for w, s in ran}
    assert comparable(reports["0"]) == comparable(reports["2"])
    verdicts = by_model(reports["0"])
    assert verdicts["team:planner"] == verdicts["builtin:follower"]


def test_a_failing_hook_is_one_usage_error(outside: pytest.Pytester) -> None:
    outside.makeconftest(CONFTEST)
    outside.syspathinsert(EXAMPLES)
    for spec, message in [
        ("team:broken", "*--resili-model team:broken: the pytest_resilibench_make_agent hook "
                        "raised RuntimeError: the team's agent server is not configured*"),
        ("team:shapeless", "*--resili-model team:shapeless: the pytest_resilibench_make_agent "
                           "hook returned an unusable agent: object object has neither*"),
    ]:
        result = outside.runpytest(*SMALL, f"--resili-model={spec}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])
        assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_conftest_with_the_hook_loads_where_the_plugin_is_off(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST.replace("from planner_agent import Planner\n", ""))
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest("-p", "no:resilibench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


CRASHING = '''
from pytest_resilibench.runtime.agents import ModelReply


def parse(text):
    raise ValueError("the model's reply had no JSON")


class Turn:
    name = "crashing-turn"

    async def complete(self, request):
        return ModelReply(content=parse(request.messages[-1]["content"]))

    async def aclose(self):
        return None


class Loop:
    name = "crashing-loop"

    async def run(self, episode):
        await episode.call("file_operations_reader", {"path": "/nowhere"})
        raise RuntimeError("graph state lost")

    async def aclose(self):
        return None


def turn():
    return Turn()
'''


def line_of(text: str) -> int:
    """The line of CRASHING (as the file holds it) that holds `text`."""
    return next(n for n, line in enumerate(CRASHING.splitlines(), 1) if text in line)


CRASH_HOOK = '''
import pytest
from crashing_agents import Loop

@pytest.hookimpl(optionalhook=True)
def pytest_resilibench_make_agent(config, spec):
    return Loop() if spec == "team:crash" else None
'''


def test_an_agent_that_raises_fails_its_items_as_agent_errors_apart_from_infra_errors(
    suite: pytest.Pytester,
) -> None:
    """A `py:` turn-level agent and a conftest-built loop-level agent whose own code raises:
    each episode is an agent error at the agent's line (a failed episode in the rates), its
    item fails, and the counts keep agent errors apart from infra errors."""
    outside = suite.mkdir("outside")
    (outside / "crashing_agents.py").write_text(CRASHING)
    suite.syspathinsert(outside)
    suite.makeconftest(CRASH_HOOK)
    report = suite.path / "run.json"
    result = suite.runpytest(*SMALL, "-v", f"--resili-report={report}",
                             "--resili-model=py:crashing_agents:turn,team:crash,builtin:follower")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    data = load(report)
    where = {
        "py:crashing_agents:turn": "ValueError: the model's reply had no JSON at "
                                   f"outside/crashing_agents.py:{line_of('raise Value')} in parse",
        "team:crash": "RuntimeError: graph state lost at "
                      f"outside/crashing_agents.py:{line_of('raise Runtime')} in run"}
    for model, line in where.items():
        mine = [ep for ep in data["episodes"] if ep["model"] == model]
        assert len(mine) == 15
        assert {(ep["outcome"], ep["stop_reason"], ep["agent_error"], ep["infra_error"])
                for ep in mine} == {("failed", "agent_error", line, None)}
        assert out.count(f"AGENT-ERROR ({line})") == 15  # `-v` says why
        shown = {"py:crashing_agents:turn": "crashing-turn", "team:crash": "crashing-loop"}
        # its table, where the agent's name stands for its spec
        assert re.search(rf"{re.escape(shown[model])} +15 +{re.escape(line)}", out)
    assert {ep["tool_calls"] for ep in data["episodes"] if ep["model"] == "team:crash"} == {1}
    counts = data["summary"]["counts"]
    assert counts["outcomes"]["agent_error"] == 30 and counts["outcomes"]["infra_error"] == 0
    assert counts["errors"] == 0 and counts["scored"] == 45  # in every rate, as failed
    rates = {r["model"]: r for r in data["summary"]["by_model_variant"]}
    assert (rates["team:crash"]["n"], rates["team:crash"]["failed_rate"]) == (15, 1.0)
    full = counts["outcomes"]["full"]
    assert re.search(rf"45 episodes: {full} full, .*30 agent errors, 0 infra errors", out)
    assert "Agent errors (failed episodes in every rate)" in out
    assert re.search(r"30 agent errors in [\d.]+s", result.outlines[-1]), result.outlines[-1]
    assert "infra error" not in result.outlines[-1]


CLOSING = '''
import asyncio

from pytest_resilibench import ModelReply


class Closing:
    """Completes at once; its aclose() fails as `how` says once it has answered a turn
    (the start-up check closes a fresh one, which has not)."""

    def __init__(self, how):
        self.name, self.how, self.turns = f"closing-{how}", how, 0

    async def complete(self, request):
        self.turns += 1
        return ModelReply(content="TASK_COMPLETED")

    async def aclose(self):
        if self.how == "at-once" or self.turns:
            if self.how == "hangs":
                await asyncio.sleep(3600)
            raise RuntimeError("socket already closed")


def raises():
    return Closing("raises")


def not_in_workers():
    # The first process to build one (the controller's check) is the only one that can.
    import os
    from pathlib import Path

    mark = Path(os.environ["CLOSING_FIRST_PID"])
    if not mark.exists():
        mark.write_text(str(os.getpid()))
    if mark.read_text() != str(os.getpid()):
        raise RuntimeError("no credentials in this process")
    return Closing("raises")


def hangs():
    return Closing("hangs")


def at_once():
    return Closing("at-once")
'''


def test_an_agent_whose_aclose_raises_or_hangs_never_crashes_nor_holds_the_run(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the end of a run, an `aclose()` that raises or hangs (past `CLOSE_TIMEOUT_S`) is one
    yellow line of the summary, the report is written and the other agents close; at
    start-up (the check that builds and closes each agent) it is one usage error."""
    from pytest_resilibench.integration import runner

    monkeypatch.setattr(runner, "CLOSE_TIMEOUT_S", 0.5)
    outside = suite.mkdir("outside")
    (outside / "closing_agents.py").write_text(CLOSING)
    suite.syspathinsert(outside)
    monkeypatch.setenv("PYTHONPATH", str(outside))  # and in xdist's workers
    report = suite.path / "run.json"
    result = suite.runpytest(*SMALL, "-k", "simple_task and easy", f"--resili-report={report}",
                             "--resili-model=py:closing_agents:raises,py:closing_agents:hangs")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    assert len(load(report)["episodes"]) == 2
    assert "INTERNALERROR" not in out
    result.stdout.fnmatch_lines([
        "resilibench: closing the agent of py:closing_agents:raises failed: RuntimeError: "
        "socket already closed at outside/closing_agents.py:*",
        "resilibench: the agent of py:closing_agents:hangs did not close within 0.5 s*"])

    # Closed in an xdist worker: the worker's line reaches the controller's summary.
    result = suite.runpytest_subprocess(*SMALL, "-n", "2", "-k", "simple_task",
                                        "--resili-model=py:closing_agents:raises")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["resilibench: closing the agent of py:closing_agents:raises "
                                 "failed: RuntimeError: socket already closed at *"])

    # A factory that works in the controller's check and fails in the workers: each of its
    # items fails with the factory's message; the run itself goes on.
    monkeypatch.setenv("CLOSING_FIRST_PID", str(suite.path / "first.pid"))
    result = suite.runpytest_subprocess(*SMALL, "-n", "2", "-k", "simple_task and easy",
                                        "--resili-model=py:closing_agents:not_in_workers")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*RuntimeError: no credentials in this process*"])

    result = suite.runpytest(*SMALL, "--resili-model=py:closing_agents:at_once")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resili-model py:closing_agents:at_once: closing the agent "
                                 "failed: RuntimeError: socket already closed at *"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
