"""The model-call cache is never load-bearing (runtime/agents/cache.py): a real run whose cache
lies on a real small file system that fills mid-run goes on, every reply kept, and ends with
one line naming the cache; a disk already full at start-up is a usage error naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest
from pytest_resilibench.servers.testserver import OpenAITestServer
from tests.full_disk import fill
from tests.plugin.conftest import load

ARGS = ["-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
        "--resili-model=o3", "--resili-sample=1", "--resili-variants=optimal"]


def test_a_disk_that_fills_mid_run_costs_no_reply(suite: pytest.Pytester, small_fs: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    adaptive = make_builtin("adaptive")
    episodes_asked: list[str] = []

    async def policy(request: ModelRequest) -> ModelReply:
        if request.task_id != "resilibench-probe" and not episodes_asked:
            fill(small_fs)  # the start-up probe was stored; from the first episode on, full
        episodes_asked.append(request.task_id)
        return await adaptive.complete(request)

    cache, report = small_fs / "calls.sqlite", suite.path / "run.json"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cachefull-0123456789")
    with OpenAITestServer({"o3": policy}) as server:
        result = suite.runpytest_subprocess(*ARGS, f"--resili-base-url={server.base_url}",
                                            f"--resili-cache={cache}",
                                            f"--resili-report={report}")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, text[-3000:]
    assert "Traceback" not in text and "INTERNALERROR" not in text
    episodes = load(report)["episodes"]
    assert len(episodes) == 15 and all(ep["outcome"] != "error" for ep in episodes)
    lines = [line for line in text.splitlines() if "model-call cache" in line]
    assert lines == [f"resilibench: the model-call cache {cache} could not be written "
                     "(database or disk is full): the run went on without it (replies kept, "
                     "not stored)"], lines


def test_a_disk_full_at_start_up_is_a_usage_error(suite: pytest.Pytester, small_fs: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache opens, then the disk fills before the start-up probe's reply is stored (the
    case that ended in INTERNALERROR): one line naming the file, before any episode."""
    adaptive = make_builtin("adaptive")

    async def policy(request: ModelRequest) -> ModelReply:
        fill(small_fs)
        return await adaptive.complete(request)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cachefull-0123456789")
    with OpenAITestServer({"o3": policy}) as server:
        result = suite.runpytest_subprocess(*ARGS, f"--resili-base-url={server.base_url}",
                                            f"--resili-cache={small_fs / 'calls.sqlite'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()[-2000:]
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [f"ERROR: --resili-cache: {small_fs / 'calls.sqlite'} could not be "
                      "written (database or disk is full)"], errors
