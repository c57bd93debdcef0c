"""The plugin in somebody else's repository: inert until asked, the suite without a test file,
the verdict as a JUnit test case, a clear error for a missing extra."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.plugin.conftest import comparable, load

OWN_TESTS = """
import json, os, sys

def test_one():
    assert 1 + 1 == 2

def test_two():
    with open(os.environ["MODULES_OUT"], "w") as fh:
        json.dump(sorted(sys.modules), fh)
"""
# The hook spec too: a conftest's `pytest_resilibench_make_agent` needs it registered first;
# and preload, which takes the package off pytest's assertion-rewriting list as it registers.
# The two layer packages are docstring-only `__init__`s, imported as the modules' parents.
OURS = {"pytest_resilibench", "pytest_resilibench.plugin", "pytest_resilibench.hookspec",
        "pytest_resilibench.base", "pytest_resilibench.base.names",
        "pytest_resilibench.integration", "pytest_resilibench.integration.options",
        "pytest_resilibench.integration.gate_policy", "pytest_resilibench.integration.preload",
        "pytest_resilibench.integration.foreign_plugins"}


def _modules(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> set[str]:
    out = pytester.path / "modules.json"
    monkeypatch.setenv("MODULES_OUT", str(out))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=2)
    return set(json.loads(out.read_text()))


def test_an_unrelated_project_loads_only_the_hooks_and_options(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_own=OWN_TESTS)
    with_plugin = _modules(pytester, monkeypatch)
    without = _modules(pytester, monkeypatch, "-p", "no:resilibench")
    assert with_plugin - without == OURS
    # langsmith's plugin, which the [langgraph] extra installs, stays out (foreign_plugins.py).
    assert not [m for m in with_plugin if m.split(".")[0] == "langsmith"]
    assert not [m for m in ("numpy", "openai", "jsonschema", "scipy", "httpx", "starlette")
                if m in with_plugin - without]
    assert not list(pytester.path.glob("**/*.jsonl*"))  # nothing written either


ANYIO_TEST = """
import pytest

@pytest.mark.anyio
async def test_async():
    assert True
"""


def test_a_project_using_anyio_s_plugin_runs_as_without_us(pytester: pytest.Pytester) -> None:
    """anyio's pytest plugin (openai, httpx, starlette bring anyio) is the project's to use:
    installing this plugin changes nothing for its async tests."""
    pytest.importorskip("anyio")
    pytester.makepyfile(test_own=ANYIO_TEST)
    pytester.makeini("[pytest]\naddopts = --strict-markers -p no:cacheprovider\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
    pytester.runpytest_subprocess("-p", "no:resilibench").assert_outcomes(passed=1)


def test_langsmith_s_plugin_is_off_unless_asked_for(pytester: pytest.Pytester) -> None:
    """The [langgraph] extra installs langsmith (langchain-core needs it), a pytest plugin."""
    pytest.importorskip("langsmith")
    pytester.makepyfile(test_own="import pytest\n\n@pytest.mark.langsmith\n"
                                 "def test_tracked():\n    pass\n")
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.langsmith: off in this run (-p langsmith_plugin)"])
    result = pytester.runpytest("--markers", "-p", "langsmith_plugin")
    result.stdout.fnmatch_lines(["@pytest.mark.langsmith: mark test to be tracked in LangSmith"])
    result = pytester.runpytest("--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*run with -p langsmith_plugin*"])


def test_a_plugin_loaded_before_ours_is_unregistered_all_the_same() -> None:
    """The venv lists its distributions in file-system order: where langsmith's entry point
    came first, the run still behaves as where it came after ours (no hooks, no fixtures)."""
    from pytest_resilibench.integration.foreign_plugins import block_unasked

    config = pytest.Config(pytest.PytestPluginManager())
    manager = config.pluginmanager
    manager.register(object(), "langsmith_plugin")  # stands for the module loaded before us
    block_unasked(manager)
    assert manager.get_plugin("langsmith_plugin") is None
    assert manager.is_blocked("langsmith_plugin") and not manager.is_blocked("anyio")


def test_an_unrelated_project_keeps_xdist_load_scheduling(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    result = pytester.runpytest_subprocess("-n", "2", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*scheduling tests via LoadScheduling*"])
    assert "ResiliBench results" not in result.stdout.str()


def test_the_benchmark_runs_without_a_test_file_beside_the_repo_s_tests(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    report = pytester.path / "run.json"
    args = ("--resili-model=builtin:oracle", "--resili-sample=1", "--resili-variants=optimal",
            "-p", "no:cacheprovider", f"--resili-report={report}")
    result = pytester.runpytest_subprocess(*args, "-n", "2", "-v")
    result.stdout.fnmatch_lines(["*scheduling tests via RoundRobinScheduling*",
                                 "*resilibench::test_resilibench*optimal*"])
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 2  # the repository's own tests
    data = load(report)
    assert data["complete"] and data["received"] == data["expected"] == 15
    assert {ep["variant"] for ep in data["episodes"]} == {"optimal"}
    solo = pytester.runpytest_subprocess(*args, f"--resili-report={pytester.path / 'solo.json'}")
    assert solo.ret == 0
    assert comparable(load(pytester.path / "solo.json")) == comparable(data)


def test_the_ini_key_asks_for_the_benchmark(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nresili_model = builtin:follower\nresili_sample = 1\n"
                     "resili_variants = baseline\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--co", "-q")
    items = [line for line in result.stdout.lines if line.startswith("resilibench::")]
    assert len(items) == 15 and all("builtin_follower-baseline-" in line for line in items)


def test_the_gate_is_a_junit_test_case(pytester: pytest.Pytester) -> None:
    base = ("--resili-sample=1", "--resili-variants=optimal", "-p", "no:cacheprovider")
    failing = pytester.path / "fail.xml"
    result = pytester.runpytest_subprocess("--resili-model=builtin:random",
                                           "--resili-fail-under=0.9", f"--junitxml={failing}",
                                           *base)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED resilibench::gate - builtin:random: full-success*"])
    gate = _testcase(failing, "gate")
    assert gate.find("failure") is not None
    assert "fail-under 90.0%" in (gate.find("failure").get("message") or "")  # type: ignore[union-attr]
    passing = pytester.path / "pass.xml"
    result = pytester.runpytest_subprocess("--resili-model=builtin:oracle",
                                           "--resili-fail-under=0.5", f"--junitxml={passing}",
                                           *base)
    assert result.ret == pytest.ExitCode.OK
    gate = _testcase(passing, "gate")
    assert gate.find("failure") is None and gate.get("classname") == "resilibench"


def _testcase(path: Path, name: str) -> ET.Element:
    cases = [case for case in ET.parse(path).iter("testcase") if case.get("name") == name]
    assert len(cases) == 1
    return cases[0]


def test_a_feature_without_its_extra_names_the_install_command(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_resilibench.base.extras as extras

    monkeypatch.setattr(extras, "find_spec", lambda name: None)  # as if mcp were not installed
    result = pytester.runpytest("--resili-env=mcp", "--resili-sample=1", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: --resili-env=mcp needs the 'mcp' extra (mcp is not installed): "
            'pip install "pytest-resilibench[mcp]"') in result.stderr.lines
