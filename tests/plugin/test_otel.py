"""`--resili-otel` (integration/otel.py) against a real OTLP receiver, Arize Phoenix on loopback
(otel_receiver.py), its spans read back through its API (issue 49): one trace per episode,
a chat span per model reply and an execute_tool span per tool call, attributes equal to the
report's fields, at -n 0 and -n 2, with the built-in agents and with a real model on the
loopback OpenAI test server; no secret in anything the receiver stored; without the [otel]
extra the option stops at start-up; and off, nothing imports opentelemetry."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest
from pytest_resilibench.servers.testserver import OpenAITestServer
from tests.plugin.conftest import load
from tests.plugin.otel_receiver import Phoenix, running_phoenix

pytestmark = pytest.mark.xdist_group("otel-phoenix")  # one receiver for the module

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-oteltest-KEY0123456789abcdef"
HEADER_KEY = "hdr-otel-secret-5d1c9a"
RUN = ("-p", "no:cacheprovider", "-p", "no:randomly", "--resili-sample=1",
       "--resili-variants=baseline,flawed", "--resili-flaws=missing_step",
       "--resili-task-types=simple_task,basic_task", "--resili-repeats=2",
       "--resili-trajectories", "--resili-resume=off", "--resili-otel")
# The report's fields the agent span carries as `resilibench.<field>`.
FIELDS = ("id", "model", "variant", "flaw", "severity", "task_id", "task_type", "difficulty",
          "repeat", "seed", "base_success", "tool_mode", "max_turns", "outcome", "coverage",
          "order_adherence", "turns", "tool_calls", "errors_met", "errors_recovered",
          "protocol_errors", "stop_reason")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as receiver:
        yield receiver


def _run(suite: pytest.Pytester, phoenix: Phoenix, project: str, *extra: str,
         monkeypatch: pytest.MonkeyPatch, status: int = 0) -> dict[str, Any]:
    """A run exporting to its own Phoenix project (the standard resource variable)."""
    for name, value in phoenix.otlp_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
    report = suite.path / f"{project}.json"
    result = suite.runpytest_subprocess(*RUN, f"--resili-report={report}", *extra)
    assert result.ret == status, result.stdout.str()[-3000:]
    return load(report)


def _traces(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        by_trace[span["context"]["trace_id"]].append(span)
    return by_trace


def check_traces(report: dict[str, Any], spans: list[dict[str, Any]]) -> None:
    """One trace per episode, whose spans say what the report says."""
    episodes = {e["id"]: e for e in report["episodes"]}
    traces = _traces(spans)
    assert len(traces) == len(episodes)
    for trace_spans in traces.values():
        (root,) = [s for s in trace_spans if s["name"].startswith("invoke_agent ")]
        attributes = root["attributes"]
        episode = episodes.pop(attributes["resilibench.id"])
        assert root["parent_id"] is None
        for field in FIELDS:
            if episode.get(field) is not None:
                assert attributes[f"resilibench.{field}"] == episode[field], field
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["gen_ai.conversation.id"] == episode["id"]
        assert attributes["gen_ai.usage.input_tokens"] == episode["tokens"]["prompt"]
        assert attributes["gen_ai.usage.output_tokens"] == episode["tokens"]["completion"]
        evaluations = {e["attributes"]["gen_ai.evaluation.name"]: e["attributes"]
                       for e in root["events"] if e["name"] == "gen_ai.evaluation.result"}
        assert evaluations["resilibench.outcome"]["gen_ai.evaluation.score.label"] == \
            episode["outcome"]
        assert evaluations["resilibench.coverage"]["gen_ai.evaluation.score.value"] == \
            episode["coverage"]
        children = [s for s in trace_spans if s is not root]
        assert all(s["parent_id"] == root["context"]["span_id"] for s in children)
        chats = [s for s in children if s["name"].startswith("chat ")]
        tools = sorted((s for s in children if s["name"].startswith("execute_tool ")),
                       key=lambda s: s["attributes"]["resilibench.tool.turn"])
        assert len(chats) + len(tools) == len(children)
        replies = [m for m in episode["messages"] if m["role"] == "assistant"]
        assert len(chats) == len(replies)
        assert len(tools) == episode["tool_calls"] == len(episode["calls"])
        # Turns: a reply each, but the last when it ended the episode unplayed.
        assert episode["turns"] <= len(chats) <= episode["turns"] + 1
        assert sum(s["attributes"].get("gen_ai.usage.input_tokens", 0) for s in chats) == \
            episode["tokens"]["prompt"]
        for span, call in zip(tools, episode["calls"], strict=True):
            said = span["attributes"]
            assert said["gen_ai.tool.name"] == call["tool"]
            assert said["resilibench.tool.turn"] == call["turn"]
            assert said.get("error.type") == call["error_code"]
            assert said["resilibench.tool.ok"] == call["ok"]
            if not call["ok"]:
                assert said["resilibench.fault.injected"] == (
                    call.get("event") or ("none" if call["deterministic"] else "random_failure"))
    assert not episodes  # every episode had its trace


@pytest.fixture
def o3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAITestServer]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAITestServer({"o3": make_builtin("adaptive")}, api_key=KEY) as server:
        yield server


@pytest.mark.parametrize("workers", ["0", "2"])
def test_traces_match_the_report_builtin(suite: pytest.Pytester, phoenix: Phoenix,
                                         monkeypatch: pytest.MonkeyPatch, workers: str) -> None:
    project = f"builtin-n{workers}"
    report = _run(suite, phoenix, project, "-n", workers, "--resili-faults=realistic",
                  "--resili-model=builtin:adaptive,builtin:follower", monkeypatch=monkeypatch)
    assert len(report["episodes"]) == 48
    check_traces(report, phoenix.wait_for_spans(
        sum(1 + len(e["calls"]) + e["turns"] for e in report["episodes"]), project))


@pytest.mark.parametrize("workers", ["0", "2"])
def test_traces_match_the_report_real_model(suite: pytest.Pytester, phoenix: Phoenix,
                                            o3_server: OpenAITestServer,
                                            monkeypatch: pytest.MonkeyPatch,
                                            workers: str) -> None:
    project = f"o3-n{workers}"
    report = _run(suite, phoenix, project, "-n", workers, "--resili-model=o3",
                  "--resili-tool-mode=native", f"--resili-base-url={o3_server.base_url}",
                  monkeypatch=monkeypatch)
    spans = phoenix.wait_for_spans(
        sum(1 + len(e["calls"]) + e["turns"] for e in report["episodes"]), project)
    check_traces(report, spans)
    chats = [s["attributes"] for s in spans if s["name"] == "chat o3"]
    assert all(a["gen_ai.request.model"] == "o3" and a["gen_ai.provider.name"] == "openai"
               for a in chats)
    assert {tuple(a["gen_ai.response.finish_reasons"]) for a in chats} <= {("tool_calls",),
                                                                          ("stop",)}
    assert all(a["gen_ai.usage.output_tokens"] > 0 for a in chats)
    tools = [s["attributes"] for s in spans if s["name"].startswith("execute_tool ")]
    assert all(a["gen_ai.tool.call.id"].startswith("call") for a in tools)  # the model's ids
    # Contents only when asked for.
    assert not any("gen_ai.input.messages" in s["attributes"] for s in spans)


def test_no_span_holds_a_secret(suite: pytest.Pytester, phoenix: Phoenix,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With contents captured, against a server that echoes the Authorization header in its
    errors (test_secrets.py's), nothing Phoenix stored holds the key, the header key or their
    base64: every text on a span is redacted as the report is."""
    adaptive = make_builtin("adaptive")

    async def policy(request: ModelRequest) -> ModelReply:
        if any(m.get("role") == "assistant" for m in request.messages):
            raise ValueError("refused")  # a 400 whose body ends with the Authorization header
        return await adaptive.complete(request)

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAITestServer({"o3": policy}, echo_request=True) as server:
        report = _run(suite, phoenix, "secrets", "--resili-model=o3", "--resili-otel-content",
                      f"--resili-base-url={server.base_url}", "--resili-max-infra-errors=100%",
                      f'--resili-model-args={{"extra_headers": {{"api-key": "{HEADER_KEY}"}}}}',
                      monkeypatch=monkeypatch, status=1)  # every episode an infra error
    assert any(e["outcome"] == "error" for e in report["episodes"])
    spans = phoenix.wait_for_spans(len(report["episodes"]) * 2, "secrets")
    assert any("gen_ai.input.messages" in s["attributes"] for s in spans)
    assert any("Authorization: Bearer ***" in str(s["attributes"].get("resilibench.error"))
               for s in spans)
    stored = phoenix.stored_bytes() + str(spans).encode()
    for secret in (KEY, HEADER_KEY):
        assert secret.encode() not in stored
        assert base64.b64encode(secret.encode()) not in stored


HIDER = '''
import importlib.abc
import sys


class HideOtel(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, HideOtel())
'''


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(cwd), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_without_the_extra_the_option_stops_at_start_up(tmp_path: Path) -> None:
    (tmp_path / "hide_otel.py").write_text(HIDER)
    done = _pytest(tmp_path, "-p", "hide_otel", "--resili-otel", "-n", "0")
    text = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, text[-2000:]
    assert 'pip install "pytest-resilibench[otel]"' in text and "Traceback" not in text


def test_off_nothing_imports_opentelemetry(tmp_path: Path) -> None:
    """An unrelated project's `pytest --co`, and a benchmark run without the option: no
    opentelemetry module loaded (the plugin is installed beside other projects' tests)."""
    (tmp_path / "conftest.py").write_text(
        "import sys\n\n\ndef pytest_unconfigure(config):\n"
        "    found = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "    (config.rootpath / 'loaded.txt').write_text(' '.join(found))\n")
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert True\n")
    done = _pytest(tmp_path, "--co", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "loaded.txt").read_text() == ""
    done = _pytest(tmp_path, "-n", "0", "--resili-sample=1", "--resili-variants=baseline",
                   "--resili-task-types=basic_task")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "loaded.txt").read_text() == ""


def test_a_bad_collector_url_is_one_usage_line(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")  # no scheme
    done = _pytest(tmp_path, "--resili-otel", "-n", "0", "--resili-sample=1")
    text = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, text[-2000:]
    assert "is not an http(s) URL" in text and "Traceback" not in text
