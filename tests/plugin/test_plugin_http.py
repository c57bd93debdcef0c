"""The whole path over real HTTP: plugin -> runner -> real openai client -> loopback server.

The server plays the built-in scripted agents (`model=builtin:NAME`), so a run through HTTP must
give exactly the episodes of the same agent run in-process — with or without injected faults.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer
from tests.plugin.conftest import load

ARGS = ["--resili-sample=1", "-p", "no:cacheprovider", "--resili-variants=optimal,flawed",
        "--resili-flaws=missing_step", "-k", "easy or hard"]
# What legitimately differs between an in-process agent and the same agent over HTTP.
TRANSPORT_FIELDS = ("wall_time_s", "tokens", "model", "id")


def episodes(path: object) -> dict[str, dict[str, object]]:
    data = load(path)  # type: ignore[arg-type]
    return {ep["task_id"] + ep["variant"]: {k: v for k, v in ep.items()
                                            if k not in TRANSPORT_FIELDS}
            for ep in data["episodes"]}


@pytest.fixture
def faulty_server() -> Iterator[OpenAITestServer]:
    faults = FaultConfig(rate=0.2, kinds=("429", "500", "503", "malformed", "truncated",
                                          "reset"), retry_after_s=0.01)
    with OpenAITestServer(latency_ms=2, faults=faults, seed=3) as server:
        yield server


def test_http_with_20pct_faults_gives_the_in_process_episodes(
    suite: pytest.Pytester, faulty_server: OpenAITestServer
) -> None:
    local, remote = suite.path / "local.json", suite.path / "remote.json"
    suite.runpytest(*ARGS, "--resili-model=builtin:follower", f"--resili-report={local}")
    result = suite.runpytest(*ARGS, "--resili-model=openai:builtin:follower",
                             f"--resili-base-url={faulty_server.base_url}",
                             "--resili-retries=8", f"--resili-report={remote}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert sum(faulty_server.stats.faults.values()) > 0, "faults were injected"
    assert episodes(remote) == episodes(local), "nothing lost, nothing changed"
    assert all(ep["outcome"] != "error" for ep in load(remote)["episodes"])


def test_exhausted_retries_at_start_up_stop_the_run_with_their_cause(
    suite: pytest.Pytester,
) -> None:
    """The start-up probe meets the outage first: the run stops before any episode, quoting
    the server (infra errors during a run: tests/plugin/test_real_models.py)."""
    with OpenAITestServer(faults=FaultConfig(rate=1.0, kinds=("500",))) as server:
        result = suite.runpytest(*ARGS, "--resili-model=openai:builtin:follower",
                                 f"--resili-base-url={server.base_url}", "--resili-retries=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HTTP 500*after 2 attempts*"])


def test_cache_replays_a_run_without_the_server(suite: pytest.Pytester) -> None:
    """`--resili-cache`: the second run reaches no server (its URL is dead) and still gives
    the same episodes, because every model call is answered from the cache."""
    cache, first, second = (suite.path / n for n in ("calls.sqlite", "a.json", "b.json"))
    with OpenAITestServer(latency_ms=1) as server:
        url = server.base_url
        suite.runpytest(*ARGS, "--resili-model=openai:builtin:adaptive", f"--resili-base-url={url}",
                        f"--resili-cache={cache}", f"--resili-report={first}")
    result = suite.runpytest(*ARGS, "--resili-model=openai:builtin:adaptive",
                             f"--resili-base-url={url}", "--resili-retries=0",
                             f"--resili-cache={cache}", f"--resili-report={second}")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert episodes(second) == episodes(first)
    assert all(ep["outcome"] != "error" for ep in load(second)["episodes"])
