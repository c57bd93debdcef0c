"""What a user's agent gets and how its mistakes read, end to end through the plugin: a `py:`
agent's requests carry no task facts (only `builtin:oracle` reads them), `aclose` is
optional, the agent's `name` labels the tables, bad specs are named (and skipped when asked),
a hook spec's typo says no hook built it, and a `-k` looking for the benchmark without asking
for it gets one hint line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.plugin.conftest import load

SMALL = ["--resili-sample=1", "-p", "no:cacheprovider"]

SPY = '''
import json, os
from pytest_resilibench import ModelReply, ModelRequest

LOG = os.environ["SPY_LOG"]

class Spy:
    """A turn agent that writes down what each request carries, then says it is done."""
    name = "spy"

    async def complete(self, request: ModelRequest) -> ModelReply:
        with open(LOG, "a") as log:
            plan = "Execution plan:" in request.messages[1]["content"]
            log.write(json.dumps({"agent": self.name, "context": repr(dict(request.context)),
                                  "task": request.task_id, "plan": plan,
                                  "fields": sorted(vars(request)),
                                  "messages": request.messages}) + "\\n")
        return ModelReply(content="TASK_COMPLETED")

class Claims(Spy):
    """Says it is privileged: an attribute is no privilege."""
    name = "claims"
    privileged = True

class LoopSpy:
    name = "loop-spy"

    async def run(self, episode) -> None:
        with open(LOG, "a") as log:
            log.write(json.dumps({"agent": self.name, "task": episode.task_id,
                                  "plan": "Execution plan:" in episode.messages[1]["content"],
                                  "public": sorted(n for n in dir(episode)
                                                   if not n.startswith("_"))}) + "\\n")
        episode.finish()

def make_spy():
    return Spy()

def make_claims():
    return Claims()

def make_loop():
    return LoopSpy()

def broken():
    raise RuntimeError("set TEAM_KEY")
'''


@pytest.fixture
def spies(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The suite with spy_agents importable (PYTHONPATH, as a team's package); the log."""
    folder = suite.mkdir("agents")
    (folder / "spy_agents.py").write_text(SPY)
    monkeypatch.setenv("PYTHONPATH", str(folder))
    log = suite.path / "spy.log"
    monkeypatch.setenv("SPY_LOG", str(log))
    return log


def test_a_py_agents_requests_carry_no_task_facts(suite: pytest.Pytester, spies: Path) -> None:
    report = suite.path / "run.json"
    result = suite.runpytest_subprocess(
        *SMALL, "--resili-variants=baseline,flawed", "--resili-flaws=missing_step",
        "--resili-model=py:spy_agents:make_spy,py:spy_agents:make_claims,"
        "py:spy_agents:make_loop,builtin:oracle", f"--resili-report={report}", "-n", "2")
    assert result.ret == 0, result.stdout.str()[-2000:]
    lines = [json.loads(line) for line in spies.read_text().splitlines()]
    turns = [line for line in lines if "context" in line]
    assert {line["agent"] for line in turns} == {"spy", "claims"}
    # Two agents, two variants, 15 tasks (an episode may be played twice when it is run
    # ahead: count each once).
    played = {(line["agent"], line["task"], line["plan"]) for line in turns}
    assert len(played) == 2 * 2 * 15
    for line in turns:
        # No context at all (no task, required tools, constraints, plan, flaw record) and no
        # other field: the prompt, the tools, the task id and the repeat.
        assert line["context"] == "{}"
        assert line["fields"] == ["context", "messages", "repeat", "task_id", "tools"]
        assert [m["role"] for m in line["messages"]] == ["system", "user"]
    # the baseline prompt shows no plan; the flawed one does
    assert sum(not plan for _, _, plan in played) == 2 * 15
    loops = [line for line in lines if "public" in line]
    assert len({(line["task"], line["plan"]) for line in loops}) == 2 * 15
    assert {tuple(line["public"]) for line in loops} == {(
        "add_usage", "call", "fault", "finish", "max_turns", "messages", "over", "repeat",
        "stop_reason", "task_id", "tools")}
    # The oracle, which reads the task, still plays the optimal policy: it completes tasks.
    episodes = load(report)["episodes"]
    oracle = [ep for ep in episodes if ep["model"] == "builtin:oracle"]
    assert sum(ep["outcome"] == "full" for ep in oracle) >= 20


def test_the_agents_name_labels_the_tables_and_the_spec_stays_in_the_id(
    suite: pytest.Pytester, spies: Path,
) -> None:
    report = suite.path / "run.json"
    result = suite.runpytest_subprocess(
        *SMALL, "--resili-variants=optimal", "--resili-model=py:spy_agents:make_loop", "-v",
        f"--resili-report={report}")
    assert result.ret == 0, result.stdout.str()[-2000:]
    out = result.stdout.str()
    assert "test_resilibench[py_spy_agents_make_loop-optimal-" in out
    table = out[out.index("Outcomes by model and variant"):]
    assert "loop-spy" in table and "py:spy_agents:make_loop " not in table
    data = load(report)
    assert data["config"]["agent_names"] == {"py:spy_agents:make_loop": "loop-spy"}
    assert {ep["model"] for ep in data["episodes"]} == {"py:spy_agents:make_loop"}


def test_bad_specs_are_named_in_one_message(suite: pytest.Pytester, spies: Path) -> None:
    result = suite.runpytest_subprocess(
        *SMALL, "--resili-variants=optimal",
        "--resili-model=builtin:follower,py:spy_agents:broken,py:no_such_module:make")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*--resili-model py:spy_agents:broken: py:spy_agents:broken raised RuntimeError: "
        "set TEAM_KEY",
        "--resili-model py:no_such_module:make: no module named 'no_such_module'*",
        "(--resili-skip-bad-agents runs the others: builtin:follower)"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("workers", ["0", "2"])
def test_skip_bad_agents_runs_the_good_ones(suite: pytest.Pytester, spies: Path,
                                            workers: str) -> None:
    report = suite.path / "run.json"
    result = suite.runpytest_subprocess(
        *SMALL, "--resili-variants=optimal", "--resili-skip-bad-agents", "-n", workers,
        "--resili-model=builtin:follower,py:spy_agents:broken", f"--resili-report={report}")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["resilibench: skipped --resili-model py:spy_agents:broken: "
                                 "py:spy_agents:broken raised RuntimeError: set TEAM_KEY"])
    data = load(report)
    assert data["received"] == data["expected"] == 15
    assert {ep["model"] for ep in data["episodes"]} == {"builtin:follower"}
    assert data["config"]["models"] == ["builtin:follower"]
    assert list(data["config"]["skipped_agents"]) == ["py:spy_agents:broken"]


def test_skip_bad_agents_with_no_good_one_still_stops(suite: pytest.Pytester,
                                                     spies: Path) -> None:
    result = suite.runpytest_subprocess(*SMALL, "--resili-skip-bad-agents",
                             "--resili-model=py:spy_agents:broken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*py:spy_agents:broken raised RuntimeError: set TEAM_KEY"])


def test_a_hook_specs_typo_says_no_hook_built_it(suite: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suite.makeconftest(textwrap.dedent('''
        import pytest

        @pytest.hookimpl(optionalhook=True)
        def pytest_resilibench_make_agent(config, spec):
            return None
    '''))
    result = suite.runpytest(*SMALL, "--resili-model=team:typo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resili-model team:typo: no hook built agent 'team:typo'*"])


def test_an_agent_without_aclose_runs(suite: pytest.Pytester, spies: Path) -> None:
    result = suite.runpytest_subprocess(*SMALL, "--resili-variants=optimal",
                             "--resili-model=py:spy_agents:make_loop")
    assert result.ret == 0, result.stdout.str()[-2000:]


def test_a_k_naming_a_flaw_without_asking_prints_one_hint(pytester: pytest.Pytester) -> None:
    """A user's repository: no suite folder asks for the benchmark, no option is given."""
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    hint = "resilibench: -k names 'semantic_drift', but the benchmark runs only when asked*"
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "-k", "semantic_drift")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([hint])
    assert result.stdout.str().count("resilibench:") == 1
    for args in (["-k", "mine"], ["-k", "semantic_drift", "--resili-sample=1",
                                  "--resili-variants=optimal"]):
        result = pytester.runpytest("-p", "no:cacheprovider", "-q", *args)
        assert "benchmark runs only when asked" not in result.stdout.str()


@pytest.mark.parametrize("markexpr", ["resilibench", "resilibench and not slow", "optimal"])
def test_a_m_looking_for_the_benchmark_without_asking_prints_one_hint(
        pytester: pytest.Pytester, markexpr: str) -> None:
    """`-m resilibench` alone deselects the user's tests and says nothing else but this."""
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "-m", markexpr)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*1 deselected*"])
    word = markexpr.split()[0]
    result.stdout.fnmatch_lines([f"resilibench: -m names {word!r}, but the benchmark runs only "
                                 "when asked: add --resili-model=MODEL*"])
    assert result.stdout.str().count("resilibench:") == 1


@pytest.mark.parametrize("args", [["-m", "not resilibench"], ["-k", "not semantic_drift"],
                                  ["-m", "slow"]])
def test_a_selection_that_leaves_the_benchmark_out_prints_no_hint(
        pytester: pytest.Pytester, args: list[str]) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", *args)
    assert "benchmark runs only when asked" not in result.stdout.str()
