"""Runs that never crash: the real-model path (chat completions and the Responses API, against
the strict loopback server) and `py:` agents of both shapes (the README's examples), each
launched as a fresh pytest process from the installed wheel, at `-n 0` and `-n 2`; and the MCP
and live environments, whose clients and servers run beside the episodes.

CPython 3.11 and 3.12 could end such runs in INTERNALERROR when two threads were inside
`ast.parse` at once (integration/preload.py). A race shows in some launches only, so besides
the exit status each launch runs under `thread_audit` (beside this file), which records every
`ast.parse` and every import of this package made off the main thread, and every parse of this
package's files: the cause is checked directly, in every launch. `bench/bench_no_crash.py`
launches many more, on every Python the machine has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.servers.testserver import OpenAITestServer

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "docs" / "examples"
KEY = "sk-test-no-crash-0123456789"
SMALL = ["--resili-sample=1", "--resili-variants=optimal,flawed",
         "--resili-flaws=missing_step", "-q", "-p", "no:cacheprovider", "-p", "thread_audit"]
# What pytest parses of the package before any thread can start: plugin.py and the modules
# it imports at its top, up to `pytest_addhooks`, where the package leaves the rewriter's list.
PARSED_AT_REGISTRATION = {"__init__.py", "plugin.py", "hookspec.py", "base/__init__.py",
                          "base/names.py", "integration/__init__.py", "integration/options.py",
                          "integration/gate_policy.py", "integration/preload.py",
                          "integration/foreign_plugins.py"}
AGENTS = {
    "chat": ["--resili-model=o3", "--resili-api=chat"],
    "responses": ["--resili-model=o3", "--resili-api=responses", "--resili-tool-mode=native"],
    "turn": ["--resili-model=py:turn_agent:make_agent"],
    "loop": ["--resili-model=py:planner_agent:make_agent"],
}
# The environments whose servers and clients run on the episode thread too.
ENVIRONMENTS = {
    "mcp": ["--resili-env=mcp", "--resili-model=builtin:adaptive"],
    "live": ["--resili-env=live", "--resili-model=builtin:adaptive"],
}
LAUNCHES = [(agent, workers) for agent in sorted(AGENTS) for workers in ("0", "2")] + [
    (environment, "0") for environment in sorted(ENVIRONMENTS)]


@pytest.fixture(scope="module")
def o3_server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer({"o3": make_builtin("adaptive")}, strict=True,
                          api_key=KEY) as server:
        yield server


@pytest.mark.parametrize(("agent", "workers"), LAUNCHES)
def test_a_fresh_launch_from_the_wheel_parses_and_imports_nothing_off_the_main_thread(
        wheel_site: Path, o3_server: OpenAITestServer, tmp_path: Path, agent: str,
        workers: str) -> None:
    audit, report = tmp_path / "audit.txt", tmp_path / "run.json"
    env = {**os.environ, "OPENAI_API_KEY": KEY, "THREAD_AUDIT_OUT": str(audit),
           "PYTHONPATH": os.pathsep.join(map(str, (wheel_site, HERE, EXAMPLES)))}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *SMALL, *{**AGENTS, **ENVIRONMENTS}[agent], "-n", workers,
         f"--resili-base-url={o3_server.base_url}", f"--resili-report={report}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert "INTERNALERROR" not in out and run.returncode == 0, out[-3000:]
    data = json.loads(report.read_text())
    assert data["received"] == data["expected"] == (16 if agent == "live" else 30)
    assert not any(ep["outcome"] == "error" for ep in data["episodes"])
    lines = audit.read_text(encoding="utf-8").splitlines()
    off_main = [line for line in lines if line.split()[1] != "MainThread"]
    assert off_main == [], off_main[:10]
    package = str(wheel_site / "pytest_resilibench") + os.sep
    parsed = {line.split(maxsplit=2)[2].removeprefix(package).replace(os.sep, "/")
              for line in lines}
    assert "plugin.py" in parsed  # the audit saw pytest parse the plugin as it registered
    assert parsed <= PARSED_AT_REGISTRATION, sorted(parsed - PARSED_AT_REGISTRATION)
