"""Real models out of the box, against the strict loopback server (OpenAI's documented rules,
`testserver_rules.py`): o3 through chat completions and the Responses API, a wrong key, a
server that always fails, refusals in a row, a cost cap, and causes, tokens and cost shown."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest
from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer
from tests.plugin.conftest import load

KEY = "sk-test-real-models-0123456789"
ARGS = ["--resili-sample=1", "-p", "no:cacheprovider", "-p", "no:randomly",
        "--resili-variants=optimal,flawed", "--resili-flaws=missing_step", "-k", "easy or hard",
        "--resili-model=o3"]


@pytest.fixture
def o3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAITestServer]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAITestServer({"o3": make_builtin("adaptive")}, strict=True,
                          api_key=KEY) as server:
        yield server


@pytest.mark.parametrize(("api", "mode", "more"), [
    ("chat", "text", []), ("responses", "text", []), ("responses", "native", ["-n", "2"])])
def test_o3_runs_with_zero_infra_errors_and_keeps_its_reasoning(
        suite: pytest.Pytester, o3_server: OpenAITestServer, api: str, mode: str,
        more: list[str]) -> None:
    report = suite.path / "run.json"
    result = suite.runpytest(*ARGS, f"--resili-base-url={o3_server.base_url}",
                             f"--resili-api={api}", f"--resili-tool-mode={mode}",
                             f"--resili-report={report}", "--resili-summary=full", *more)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert o3_server.stats.refused == {}
    data = load(report)
    episodes = data["episodes"]
    assert len(episodes) == 20 and all(ep["outcome"] != "error" for ep in episodes)
    assert all(ep["tokens"]["reasoning"] > 0 and "cached" in ep["tokens"] for ep in episodes)
    assert any(ep["tokens"]["cached"] > 0 for ep in episodes)
    assert all(ep["cost_usd"] > 0 for ep in episodes)
    (usage,) = data["summary"]["usage"]
    assert usage["model"] == "o3" and usage["cost_usd"] == pytest.approx(
        sum(ep["cost_usd"] for ep in episodes), abs=1e-5)
    assert data["summary"]["providers"]["o3"]["api_calls"] == o3_server.stats.requests - 1
    assert data["config"]["api"] == api
    reasoning = o3_server.stats.to_json()["reasoning"]
    if api == "responses":  # every turn after the first sent back the reasoning before it
        assert reasoning["missing"] == 0 and reasoning["returned"] > 0
        assert data["summary"]["providers"]["o3"]["reasoning_items_sent"] == reasoning[
            "returned"]
    out = result.stdout.str()
    assert "Tokens and cost by model" in out and "Model requests" in out


def test_model_args_reach_the_server_and_the_report(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    adaptive = make_builtin("adaptive")

    async def policy(request: ModelRequest) -> ModelReply:
        seen.append(dict(request.context["request"]))
        return await adaptive.complete(request)

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    report = suite.path / "run.json"
    with OpenAITestServer({"o3": policy}, strict=True, api_key=KEY) as server:
        result = suite.runpytest(*ARGS, f"--resili-base-url={server.base_url}",
                                 '--resili-model-args={"reasoning_effort": "low"}',
                                 f"--resili-report={report}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert all(params.get("reasoning_effort") == "low" for params in seen)
    assert "temperature" not in seen[-1]
    assert load(report)["config"]["model_args"] == {"reasoning_effort": "low"}


def test_a_refused_option_is_a_usage_error_before_any_request(
        suite: pytest.Pytester, o3_server: OpenAITestServer) -> None:
    result = suite.runpytest(*ARGS, f"--resili-base-url={o3_server.base_url}",
                             "--resili-temperature=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resili-temperature: o3 is a reasoning model*"])
    assert o3_server.stats.requests == 0


def test_a_wrong_key_stops_the_run_at_start_up(
        suite: pytest.Pytester, o3_server: OpenAITestServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-000000")
    result = suite.runpytest(*ARGS, f"--resili-base-url={o3_server.base_url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HTTP 401: Incorrect API key provided*check OPENAI_API_KEY*"])
    assert o3_server.stats.requests == 1


def test_a_server_that_always_fails_ends_with_its_cause(suite: pytest.Pytester) -> None:
    with OpenAITestServer(faults=FaultConfig(rate=1.0, kinds=("500",))) as server:
        result = suite.runpytest(*ARGS[:-1], "--resili-model=openai:builtin:follower",
                                 f"--resili-base-url={server.base_url}", "--resili-retries=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HTTP 500: The server had an error (injected)*"])
    assert server.stats.requests == 2  # the probe and its one retry


def refuse_episodes(request: ModelRequest) -> ModelReply:
    """Answers the start-up probe; refuses the benchmark's requests (a 400)."""
    if request.task_id != "resilibench-probe":
        raise ValueError("content filter: prompt refused")
    return ModelReply(content="OK")


def test_refusals_in_a_row_stop_the_model_and_the_terminal_says_why(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAITestServer({"o3": refuse_episodes}, strict=True, api_key=KEY) as server:
        result = suite.runpytest(*ARGS, f"--resili-base-url={server.base_url}", "-v",
                                 "--resili-concurrency=1", "--resili-max-consecutive-errors=3")
    assert server.stats.requests == 1 + 3  # the probe, then three refusals; the rest not sent
    out = result.stdout.str()
    assert out.count("INFRA-ERROR (HTTP 400: policy for 'o3' raised ValueError: content "
                     "filter") == 3
    assert out.count("INFRA-ERROR (not sent: 3 requests to o3 failed in a row") == 17
    result.stdout.fnmatch_lines([
        "*Infra errors (outside every rate)*",
        "*o3*17*not sent: 3 requests to o3 failed in a row (--resili-max-consecutive-errors)*",
        "*o3*3*HTTP 400: policy for 'o3' raised ValueError: content filter: prompt refused*",
        "*20 infra errors*"])


def test_the_cost_cap_stops_new_episodes_and_says_so(
        suite: pytest.Pytester, o3_server: OpenAITestServer) -> None:
    report = suite.path / "run.json"
    result = suite.runpytest(*ARGS, f"--resili-base-url={o3_server.base_url}",
                             "--resili-concurrency=1", "--resili-max-cost=0.0001",
                             f"--resili-report={report}")
    episodes = load(report)["episodes"]
    assert sum(ep["outcome"] != "error" for ep in episodes) == 1  # the one that passed it
    assert all("passed --resili-max-cost" in ep["infra_error"]
               for ep in episodes if ep["outcome"] == "error")
    assert "passed --resili-max-cost" in result.stdout.str()


@pytest.mark.parametrize("credential", ["echoed key", "url user info"])
def test_credentials_never_reach_the_report_junit_or_terminal(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, credential: str) -> None:
    """A key the server echoes in its error message, and a password in the URL's user info
    (a proxy's Basic auth: with no API key beside it, which the provider refuses), are masked
    in the JSON report, the JUnit XML and the terminal (`redact.py`)."""
    def echo_key(request: ModelRequest) -> ModelReply:
        if request.task_id == "resilibench-probe":
            return ModelReply(content="OK")
        raise ValueError(f"refused: your key {KEY} is over quota")

    with OpenAITestServer({"o3": echo_key}) as server:
        url = server.base_url
        if credential == "echoed key":
            monkeypatch.setenv("OPENAI_API_KEY", KEY)
        else:
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
            url = url.replace("http://", "http://ci-user:url-pass-31337@")
        report, junit = suite.path / "r.json", suite.path / "junit.xml"
        result = suite.runpytest(*ARGS, f"--resili-base-url={url}", "-v", "-rA",
                                 f"--resili-report={report}", f"--junitxml={junit}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # every episode an infra error
    data = load(report)
    assert all(ep["outcome"] == "error" and "is over quota" in ep["infra_error"]
               for ep in data["episodes"])
    for text in (report.read_text(), junit.read_text(), result.stdout.str(),
                 result.stderr.str()):
        assert "url-pass-31337" not in text
        if credential == "echoed key":
            assert KEY not in text
    if credential == "echoed key":
        assert "your key sk-*** is over quota" in junit.read_text()


def test_a_secret_in_model_args_is_masked_and_the_run_still_resumes(
        suite: pytest.Pytester, o3_server: OpenAITestServer) -> None:
    """A key-like field of `--resili-model-args` is sent to the server but written nowhere
    (`redact.register_secrets_in`); a resumed run with the same options still matches the
    report's (masked) config."""
    secret = "gw-secret-5555555"
    args = [*ARGS, f"--resili-base-url={o3_server.base_url}", "--resili-api=chat",
            "--resili-model-args=" + json.dumps({"metadata": {"gateway_token": secret}})]
    report, junit = suite.path / "run.json", suite.path / "junit.xml"
    first = suite.runpytest(*args, f"--resili-report={report}", f"--junitxml={junit}", "-rA")
    assert first.ret == 0, first.stdout.str()[-3000:]
    assert load(report)["config"]["model_args"] == {"metadata": {"gateway_token": "***"}}
    for text in (report.read_text(), junit.read_text(), first.stdout.str()):
        assert secret not in text
    again = suite.runpytest(*args, f"--resili-report={suite.path / 'again.json'}",
                            f"--resili-resume={report}")
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert "resuming from" in again.stdout.str()
    assert load(suite.path / "again.json")["episodes"] == load(report)["episodes"]


def test_a_run_where_every_episode_is_an_infra_error_fails_saying_why_in_one_line(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No episode reached the model: there is no result to read, and the run says so."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAITestServer({"o3": refuse_episodes}, strict=True, api_key=KEY) as server:
        result = suite.runpytest(*ARGS, f"--resili-base-url={server.base_url}",
                                 "--resili-concurrency=1", "--resili-max-consecutive-errors=3")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (line,) = [line for line in result.outlines if line.startswith("resilibench: every")]
    assert fnmatch.fnmatch(line, (
        "resilibench: every one of the 20 episodes was an infra error (most common cause, 17 "
        "of 20: not sent: 3 requests to o3 failed in a row*HTTP 400*content filter*)"
        ": no result"))
