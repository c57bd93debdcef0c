"""The loopback OpenAI-compatible server, driven by the real `openai` client (never mocked)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest, ToolCall
from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer, completion_json

MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "read /data/a.csv"}]


def tool_policy(request: ModelRequest) -> ModelReply:
    last = str(request.messages[-1]["content"])
    return ModelReply(content=None, tool_calls=(
        ToolCall(id="call_1", name="read_file", arguments=json.dumps({"path": last})),))


def text_policy(request: ModelRequest) -> ModelReply:
    return ModelReply(content="TASK_COMPLETED", usage={"prompt_tokens": 11,
                                                      "completion_tokens": 3})


class CountingAgent:
    """An `Agent` (async), as the built-in agents are; records what it was asked."""

    name = "counting"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(content=f"seen {len(self.requests)}")

    async def aclose(self) -> None:
        return None


def client(server: OpenAITestServer, *, timeout: float = 5.0) -> Any:
    """The real client, typed `Any`: these tests send raw JSON (partial, forged and foreign
    items) that the server must judge, which openai's TypedDicts refuse statically."""
    return openai.OpenAI(api_key="test", base_url=server.base_url, max_retries=0,
                         timeout=timeout)


@pytest.fixture
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer({"tools": tool_policy, "text": text_policy}) as running:
        yield running


def test_tool_call_reply_parses_with_the_openai_types(server: OpenAITestServer) -> None:
    completion = client(server).chat.completions.create(model="tools", messages=MESSAGES)
    call = completion.choices[0].message.tool_calls[0]
    assert call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "read /data/a.csv"}
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.model == "tools"


def test_text_reply_carries_the_policys_usage(server: OpenAITestServer) -> None:
    completion = client(server).chat.completions.create(model="text", messages=MESSAGES)
    assert completion.choices[0].message.content == "TASK_COMPLETED"
    assert completion.choices[0].message.tool_calls is None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (11, 3)
    assert completion.usage.total_tokens == 14


def test_models_lists_the_served_models(server: OpenAITestServer) -> None:
    assert sorted(m.id for m in client(server).models.list()) == ["text", "tools"]


def test_unknown_model_is_a_404(server: OpenAITestServer) -> None:
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client(server).chat.completions.create(model="gpt-nonexistent", messages=MESSAGES)


def test_bad_request_body_is_a_400(server: OpenAITestServer) -> None:
    request = urllib.request.Request(server.base_url + "/chat/completions", data=b"{not json",
                                     headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400


def test_agent_policy_gets_messages_tools_episode_and_params() -> None:
    agent = CountingAgent()
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    with OpenAITestServer(agent) as running:
        reply = client(running).chat.completions.create(
            model="any-name", messages=MESSAGES, tools=tools, temperature=0.0, seed=7,
            extra_headers={"x-resilibench-task": "t0042", "x-resilibench-repeat": "3"})
    assert reply.choices[0].message.content == "seen 1"
    (seen,) = agent.requests
    assert seen.messages == MESSAGES and seen.tools == tools
    assert (seen.task_id, seen.repeat) == ("t0042", 3)
    assert seen.context["request"] == {"model": "any-name", "temperature": 0.0, "seed": 7}


def test_async_callable_policy_and_policy_errors() -> None:
    async def async_policy(request: ModelRequest) -> ModelReply:
        await asyncio.sleep(0)
        return ModelReply(content="async")

    def broken(request: ModelRequest) -> ModelReply:
        raise RuntimeError("scripted policy bug")  # deterministic: a 400, not retried

    with OpenAITestServer({"a": async_policy, "b": broken}) as running:
        c = client(running)
        assert c.chat.completions.create(model="a", messages=MESSAGES).choices[0].message.content \
            == "async"
        with pytest.raises(openai.BadRequestError, match="scripted policy bug"):
            c.chat.completions.create(model="b", messages=MESSAGES)


def test_models_are_resolved_lazily_by_name() -> None:
    asked: list[str] = []

    def resolve(model: str) -> Any:
        asked.append(model)
        if model != "builtin:echo":
            raise KeyError(model)
        return text_policy

    with OpenAITestServer(resolve_model=resolve) as running:
        c = client(running)
        for _ in range(2):
            c.chat.completions.create(model="builtin:echo", messages=MESSAGES)
        with pytest.raises(openai.NotFoundError):
            c.chat.completions.create(model="builtin:nope", messages=MESSAGES)
        assert [m.id for m in c.models.list()] == ["builtin:echo"]
    assert asked == ["builtin:echo", "builtin:nope"]  # resolved once, then remembered


def test_port_zero_binds_a_free_port_and_stop_releases_it() -> None:
    first, second = OpenAITestServer(text_policy), OpenAITestServer(text_policy)
    assert first.port != second.port and first.port > 0
    with first, second:
        assert client(first).models.list() is not None
    with pytest.raises(openai.APIConnectionError):
        client(first, timeout=1).models.list()


def test_latency_is_injected() -> None:
    """Replies wait on the server: four requests sent together are all in flight at once."""
    # Long enough that four threads started together overlap on a loaded machine too.
    with OpenAITestServer(text_policy, latency_ms=1000) as running:
        c = client(running)
        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(
                lambda _: c.chat.completions.create(model="m", messages=MESSAGES), range(4)))
        assert len(replies) == 4 and running.stats.peak_in_flight == 4


FAULT_ERRORS = {
    "429": openai.RateLimitError,
    "500": openai.InternalServerError,
    "503": openai.InternalServerError,
    "timeout": openai.APITimeoutError,
    "reset": openai.APIConnectionError,
    "truncated": openai.APIConnectionError,
}


@pytest.mark.parametrize("kind", sorted(FAULT_ERRORS))
def test_each_fault_reaches_the_client_as_its_error(kind: str) -> None:
    faults = FaultConfig(rate=1.0, kinds=(kind,), hold_s=2.0, retry_after_s=0.25)
    with OpenAITestServer(text_policy, faults=faults) as running:
        with pytest.raises(FAULT_ERRORS[kind]) as info:
            client(running, timeout=0.3).chat.completions.create(model="m", messages=MESSAGES)
        assert running.stats.faults == {kind: 1} and running.stats.replies == 0
    if kind == "429":
        headers = info.value.response.headers  # type: ignore[attr-defined]
        assert headers["retry-after"] == "0.25" and headers["retry-after-ms"] == "250"
    if kind in ("reset", "truncated"):  # a real RST (ECONNRESET), a body cut short
        cause = {"reset": "ReadError", "truncated": "RemoteProtocolError"}[kind]
        assert type(info.value.__cause__).__name__ == cause


def test_malformed_bodies_are_200s_that_are_not_chat_completions() -> None:
    faults = FaultConfig(rate=1.0, kinds=("malformed",))
    with OpenAITestServer(text_policy, faults=faults) as running:
        c = client(running)
        bodies = []
        for i in range(12):
            raw = c.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": str(i)}])
            assert raw.status_code == 200
            bodies.append(raw.text)
    broken = [b for b in bodies if not _is_json(b)]
    wrong_shape = [b for b in bodies if _is_json(b)]
    assert broken and wrong_shape  # both forms occur
    assert all("choices" not in json.loads(b) for b in wrong_shape)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def test_timeout_hold_shorter_than_the_client_timeout_is_just_a_slow_reply() -> None:
    faults = FaultConfig(rate=1.0, kinds=("timeout",), hold_s=0.2)
    with OpenAITestServer(text_policy, faults=faults) as running:
        reply = client(running, timeout=5).chat.completions.create(model="m", messages=MESSAGES)
        assert reply.choices[0].message.content == "TASK_COMPLETED"
        assert running.stats.faults["timeout"] == 1 and running.stats.replies == 1


def _outcomes(seed: int, rate: float, n: int = 40, tries: int = 3) -> list[list[str]]:
    """For each of n distinct requests, what each of `tries` identical attempts got."""
    kinds = ("429", "500", "503", "malformed")
    with OpenAITestServer(text_policy, seed=seed,
                          faults=FaultConfig(rate=rate, kinds=kinds)) as running:
        c = client(running)
        table = []
        for i in range(n):
            row = []
            for _ in range(tries):
                try:
                    raw = c.chat.completions.with_raw_response.create(
                        model="m", messages=[{"role": "user", "content": f"request {i}"}])
                    row.append("ok" if "choices" in raw.text and _is_json(raw.text)
                               else "malformed")
                except openai.APIStatusError as exc:
                    row.append(str(exc.status_code))
            table.append(row)
    return table


def test_fault_decisions_are_keyed_by_seed_body_and_attempt() -> None:
    first, again, other_seed = _outcomes(1, 0.5), _outcomes(1, 0.5), _outcomes(2, 0.5)
    assert first == again  # reproducible, whatever the timing
    assert first != other_seed
    # the attempt number is in the key: a retried body can fare differently
    assert any(len(set(row)) > 1 for row in first)
    share = sum(cell != "ok" for row in first for cell in row) / (40 * 3)
    assert 0.3 < share < 0.7


def test_fault_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="rate"):
        FaultConfig(rate=1.5)
    with pytest.raises(ValueError, match="subset"):
        FaultConfig(rate=0.1, kinds=("429", "gremlins"))
    with pytest.raises(ValueError, match="latency"):
        OpenAITestServer(text_policy, latency_ms=-1)


def test_lognormal_latency_is_seeded_and_has_its_mean_and_sd() -> None:
    """`latency_sd_ms`: each request's latency a lognormal draw of that mean and sd, a pure
    function of (seed, request, attempt) (no clock read; issue 47's tail benchmark)."""
    import statistics

    server = OpenAITestServer(text_policy, latency_ms=500, latency_sd_ms=500, seed=3)
    draws = [server._latency(f"req-{i}", 0) for i in range(4000)]
    assert draws == [OpenAITestServer(text_policy, latency_ms=500, latency_sd_ms=500,
                                      seed=3)._latency(f"req-{i}", 0) for i in range(4000)]
    assert server._latency("req-0", 1) != draws[0]  # a retry draws anew
    assert all(d > 0 for d in draws)
    assert statistics.mean(draws) == pytest.approx(0.5, rel=0.1)
    assert statistics.stdev(draws) == pytest.approx(0.5, rel=0.2)
    fixed = OpenAITestServer(text_policy, latency_ms=500)
    assert fixed._latency("req-0", 0) == 0.5
    with pytest.raises(ValueError, match="latency"):
        OpenAITestServer(text_policy, latency_ms=500, latency_sd_ms=-1)


def test_completion_json_estimates_missing_usage() -> None:
    reply = ModelReply(content="x" * 40)
    body = completion_json(reply, model="m", request_id="r", messages=MESSAGES)
    assert body["usage"]["completion_tokens"] == 10
    assert body["usage"]["prompt_tokens"] > 0
    assert body["choices"][0]["finish_reason"] == "stop"


def test_identical_bodies_of_different_episodes_count_attempts_apart() -> None:
    """Two episodes' identical first turns do not share an attempt counter, so concurrent
    episodes cannot change each other's fault draws."""
    faults = FaultConfig(rate=0.5, kinds=("500",))

    def run(order: list[str]) -> dict[str, list[str]]:
        seen: dict[str, list[str]] = {}
        with OpenAITestServer(text_policy, seed=3, faults=faults) as running:
            c = client(running)
            for task in order:
                try:
                    c.chat.completions.create(model="m", messages=MESSAGES,
                                              extra_headers={"x-resilibench-task": task})
                    seen.setdefault(task, []).append("ok")
                except openai.InternalServerError:
                    seen.setdefault(task, []).append("500")
        return seen

    interleaved = run(["a", "b"] * 6)
    in_turn = run(["a"] * 6 + ["b"] * 6)
    assert interleaved == in_turn


def test_cli_serves_on_the_printed_port() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_resilibench.cli", "serve-openai", "--port", "0",
         "--latency-ms", "1"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving http://127.0.0.1:"), line
        base_url = line.split()[1]
        c = openai.OpenAI(api_key="test", base_url=base_url, max_retries=0, timeout=5)
        assert list(c.models.list()) == []  # nothing asked for yet
        with pytest.raises(openai.NotFoundError):  # only builtin:NAME models are served
            c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_cli_rejects_unknown_fault_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_resilibench.cli import main

    assert main(["serve-openai", "--fault-rate", "0.1", "--faults", "429,gremlins"]) == 2
    assert "gremlins" in capsys.readouterr().err


def test_builtin_agents_are_served_by_name() -> None:
    with OpenAITestServer() as running:
        c = client(running)
        reply = c.chat.completions.create(model="builtin:random", messages=MESSAGES)
        assert reply.choices[0].message.content  # the random agent always says something
        with pytest.raises(openai.NotFoundError, match="builtin:genius"):
            c.chat.completions.create(model="builtin:genius", messages=MESSAGES)
        with pytest.raises(openai.BadRequestError, match="needs the task"):  # no context
            c.chat.completions.create(model="builtin:oracle", messages=MESSAGES)


# --- strict mode: OpenAI's documented rules ------------------------------------------------
@pytest.fixture
def strict() -> Iterator[OpenAITestServer]:
    policies = {"o3": tool_policy, "gpt-4o": text_policy}
    with OpenAITestServer(policies, strict=True, api_key="test") as running:
        yield running


@pytest.mark.parametrize(("model", "extra", "message"), [
    ("o3", {"temperature": 0}, "'temperature' does not support 0 with this model"),
    ("o3", {"max_tokens": 10}, "Use 'max_completion_tokens' instead"),
    ("o3", {"top_p": 0.5}, "Unsupported parameter: 'top_p'"),
    ("gpt-4o", {"reasoning_effort": "low"}, "Unsupported parameter: 'reasoning_effort'"),
])
def test_strict_chat_refuses_what_the_family_refuses(
        strict: OpenAITestServer, model: str, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(openai.BadRequestError, match=message):
        client(strict).chat.completions.create(model=model, messages=MESSAGES, **extra)


def test_strict_chat_accepts_what_each_family_takes(strict: OpenAITestServer) -> None:
    o3 = client(strict).chat.completions.create(
        model="o3", messages=MESSAGES, max_completion_tokens=100, reasoning_effort="low",
        seed=1, temperature=1)
    assert o3.usage.completion_tokens_details.reasoning_tokens == 16
    assert o3.usage.prompt_tokens_details.cached_tokens == 0
    gpt = client(strict).chat.completions.create(model="gpt-4o", messages=MESSAGES,
                                                 temperature=0, max_tokens=5)
    assert gpt.usage.completion_tokens_details.reasoning_tokens == 0
    assert strict.stats.refused == {}


def test_strict_refuses_unknown_fields_and_wrong_keys(strict: OpenAITestServer) -> None:
    with pytest.raises(openai.BadRequestError, match="Unrecognized request argument supplied"):
        client(strict).chat.completions.create(model="gpt-4o", messages=MESSAGES,
                                               extra_body={"frobnicate": 1})
    wrong = openai.OpenAI(api_key="sk-wrong-0000", base_url=strict.base_url, max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="Incorrect API key provided"):
        wrong.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    with pytest.raises(openai.BadRequestError, match="Unknown parameter: 'seed'"):
        client(strict).responses.create(model="o3", input="hi", extra_body={"seed": 1})
    assert strict.stats.refused == {"unknown_parameter": 2, "invalid_api_key": 1}


def test_echo_request_quotes_the_request_in_every_error_body() -> None:
    faults = FaultConfig(rate=1.0, kinds=("429",), retry_after_s=0.25)
    with OpenAITestServer(text_policy, echo_request=True, faults=faults) as running, \
            pytest.raises(openai.RateLimitError) as info:
        client(running).chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.body["message"].endswith(  # type: ignore[index]
        f"(injected) (got POST {running.base_url}/chat/completions with Authorization: "
        f"Bearer test)")
    assert info.value.response.headers["retry-after"] == "0.25"
    with OpenAITestServer(text_policy, echo_request=True, strict=True,
                          api_key="sk-right-0000") as running:
        wrong = openai.OpenAI(api_key="sk-wrong-0000", base_url=running.base_url,
                              max_retries=0)
        with pytest.raises(openai.AuthenticationError, match="Authorization: Bearer sk-wrong"):
            wrong.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        right = openai.OpenAI(api_key="sk-right-0000", base_url=running.base_url,
                              max_retries=0)
        reply = right.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        assert reply.choices[0].message.content == "TASK_COMPLETED"  # replies are untouched


def test_later_turns_find_their_prefix_cached() -> None:
    long = [{"role": "system", "content": "x" * 8000}, {"role": "user", "content": "go"}]
    reply = completion_json(ModelReply(content="ok"), model="gpt-4o", request_id="r",
                            messages=long)
    assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # a first turn
    later = [*long, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "on"}]
    reply = completion_json(ModelReply(content="ok"), model="gpt-4o", request_id="r",
                            messages=later)
    cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached % 128 == 0 and 1024 <= cached <= reply["usage"]["prompt_tokens"]


def test_responses_endpoint_returns_encrypted_reasoning_and_checks_it_back(
        strict: OpenAITestServer) -> None:
    api = client(strict)
    tools = [{"type": "function", "name": "read_file", "description": "",
              "parameters": {"type": "object"}, "strict": False}]
    first = api.responses.create(model="o3", input=MESSAGES, tools=tools, store=False,
                                 include=["reasoning.encrypted_content"])
    kinds = [item.type for item in first.output]
    assert kinds == ["reasoning", "function_call"]
    assert first.output[0].encrypted_content and first.usage.output_tokens_details.reasoning_tokens
    sent_back = [item.model_dump(exclude_none=True) for item in first.output]
    outputs = [{"type": "function_call_output", "call_id": first.output[1].call_id,
                "output": "{}"}]
    api.responses.create(model="o3", input=[*MESSAGES, *sent_back, *outputs], tools=tools,
                         store=False, include=["reasoning.encrypted_content"])
    assert strict.stats.reasoning_returned == 1 and strict.stats.reasoning_missing == 0
    # the function call without its reasoning item: served, but counted as missing
    api.responses.create(model="o3", input=[*MESSAGES, sent_back[1], *outputs], store=False)
    assert strict.stats.reasoning_missing == 1
    forged = {**sent_back[0], "encrypted_content": "forged"}
    with pytest.raises(openai.BadRequestError, match="could not be verified"):
        api.responses.create(model="o3", input=[*MESSAGES, forged, sent_back[1], *outputs])
    bare = {k: v for k, v in sent_back[0].items() if k != "encrypted_content"}
    with pytest.raises(openai.NotFoundError, match="Items are not persisted"):
        api.responses.create(model="o3", input=[*MESSAGES, bare, sent_back[1], *outputs],
                             store=False)
    with pytest.raises(openai.BadRequestError, match="Encrypted content is not supported"):
        api.responses.create(model="gpt-4o", input="hi", include=["reasoning.encrypted_content"])
    text = api.responses.create(model="gpt-4o", input="hi", temperature=0)
    assert text.output_text == "TASK_COMPLETED" and text.output[0].type == "message"


def test_cli_serves_a_strict_o3_behind_a_key() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_resilibench.cli", "serve-openai", "--port", "0",
         "--strict", "--api-key", "sk-cli", "--model", "o3=builtin:adaptive"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "models builtin:NAME, o3, strict" in line, line
        base_url = line.split()[1]
        good = openai.OpenAI(api_key="sk-cli", base_url=base_url, max_retries=0, timeout=5)
        with pytest.raises(openai.BadRequestError, match="'temperature' does not support 0"):
            good.chat.completions.create(model="o3", messages=MESSAGES, temperature=0)
        wrong = openai.OpenAI(api_key="sk-nope", base_url=base_url, max_retries=0, timeout=5)
        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(model="o3", messages=MESSAGES)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_in_flight_limit_answers_429_with_openai_rate_limit_headers() -> None:
    """Beyond `max_in_flight` requests at once: a 429 at once, Retry-After and the
    x-ratelimit-* headers in OpenAI's form; the replies carry them too."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()

    def post(url: str) -> tuple[int, dict[str, str]]:
        request = urllib.request.Request(url + "/chat/completions", data=body,
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers.items())
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers.items())

    with OpenAITestServer(text_policy, latency_ms=300, max_in_flight=2,
                          limit_retry_after_s=1.5) as server:
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(post, [server.base_url] * 6))
        stats = server.stats
    statuses = sorted(status for status, _ in answers)
    limited = [headers for status, headers in answers if status == 429]
    served = [headers for status, headers in answers if status == 200]
    assert statuses.count(429) == stats.limited >= 1 and stats.peak_in_flight <= 2
    assert statuses.count(200) == stats.replies == 6 - stats.limited
    for headers in limited:
        lower = {k.lower(): v for k, v in headers.items()}
        assert lower["retry-after"] == "1.5" and lower["retry-after-ms"] == "1500"
        assert lower["x-ratelimit-limit-requests"] == "2"
        assert lower["x-ratelimit-remaining-requests"] == "0"
        assert lower["x-ratelimit-reset-requests"] == "1.5s"
    for headers in served:
        lower = {k.lower(): v for k, v in headers.items()}
        assert int(lower["x-ratelimit-remaining-requests"]) >= 1  # its own slot frees


def test_reset_durations_are_written_as_openai_does() -> None:
    from pytest_resilibench.servers.testserver import _duration

    assert [_duration(s) for s in (0.02, 1.0, 1.5, 360.0, 61.0)] == [
        "20ms", "1s", "1.5s", "6m0s", "1m1s"]


def _has_ipv6_loopback() -> bool:
    import socket

    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _has_ipv6_loopback(),
                    reason="this machine has no IPv6 loopback (::1) to serve on")
def test_served_on_ipv6_loopback_its_urls_bracket_the_address() -> None:
    """A URL names an IPv6 host in brackets (RFC 3986, section 3.2.2): `http://[::1]:PORT`."""
    with OpenAITestServer(text_policy, host="::1") as server:
        assert server.base_url == f"http://[::1]:{server.port}/v1"
        assert server.azure_endpoint == f"http://[::1]:{server.port}"
        reply = client(server).chat.completions.create(model="m", messages=MESSAGES)
        azure = openai.AzureOpenAI(api_key="test", azure_endpoint=server.azure_endpoint,
                                   api_version="2024-10-21", max_retries=0, timeout=5.0)
        deployed = azure.chat.completions.create(model="m", messages=MESSAGES)
    assert reply.choices[0].message.content == deployed.choices[0].message.content \
        == "TASK_COMPLETED"
