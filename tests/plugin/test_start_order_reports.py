"""Longest first changes when episodes start, never what they give (issue 47): a real model on
the loopback server, with several episodes in flight, reports the same at -n 0 and -n 2."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.servers.testserver import OpenAITestServer
from tests.plugin.conftest import comparable, load

KEY = "sk-test-start-order-0123456789"


@pytest.fixture
def o3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAITestServer]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAITestServer({"o3": make_builtin("adaptive")}, api_key=KEY) as server:
        yield server


def _without_timing(report: dict[str, Any]) -> tuple[Any, ...]:
    config, episodes, summary = comparable(report)
    # The providers' counters hold clock times and waits: how the run went, not its results.
    return config, episodes, {k: v for k, v in summary.items() if k != "providers"}


def test_reports_are_the_same_at_n0_and_n2(suite: pytest.Pytester,
                                           o3_server: OpenAITestServer) -> None:
    reports = {}
    for workers in ("0", "2"):
        report = suite.path / f"run-{workers}.json"
        result = suite.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", "--resili-sample=1",
            "--resili-variants=optimal,flawed", "--resili-flaws=missing_step",
            "-k", "easy or hard", "--resili-repeats=2", "--resili-concurrency=3",
            "--resili-model=o3", f"--resili-base-url={o3_server.base_url}",
            f"--resili-report={report}", "-n", workers)
        assert result.ret == 0, result.stdout.str()[-3000:]
        reports[workers] = load(report)
    assert len(reports["0"]["episodes"]) == 40
    assert _without_timing(reports["0"]) == _without_timing(reports["2"])
