"""OpenAIAgent: the real `openai` client against the loopback test server (never mocked)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest

from pytest_resilibench.base.names import ToolMode
from pytest_resilibench.runtime.agents.openai_provider import (
    PLACEHOLDER_KEY,
    MalformedReply,
    OpenAIAgent,
    parse_completion,
)
from pytest_resilibench.runtime.agents.probe import probe_agent
from pytest_resilibench.runtime.protocol import (
    Agent,
    InfrastructureError,
    ModelLimitError,
    ModelReply,
    ModelRequest,
    ToolCall,
)
from pytest_resilibench.servers.testserver import FAULT_KINDS, FaultConfig, OpenAITestServer

SECRET = "sk-test-DO-NOT-LEAK-1234567890"
_T = TypeVar("_T")


def scripted(request: ModelRequest) -> ModelReply:
    """A deterministic policy: every few turns text, otherwise a tool call, both depending on
    the whole conversation."""
    turn = len(request.messages)
    digest = sum(len(json.dumps(m)) for m in request.messages)
    if turn % 3 == 0:
        return ModelReply(content=f"thinking {digest} TASK_COMPLETED")
    return ModelReply(content=None, tool_calls=(ToolCall(
        id=f"call_{turn}", name="read_file",
        arguments=json.dumps({"path": f"/data/{digest}.csv", "task": request.task_id})),))


def requests(n: int) -> list[ModelRequest]:
    return [ModelRequest(messages=[{"role": "system", "content": "You call tools."},
                                   {"role": "user", "content": f"task {i}"}]
                         + [{"role": "assistant", "content": "ok"}] * (i % 3),
                         task_id=f"t{i:04d}", repeat=i % 2)
            for i in range(n)]


def run(coro: Awaitable[_T]) -> _T:
    async def main() -> _T:
        return await coro
    return asyncio.run(main())


async def ask_all(agent: OpenAIAgent, batch: list[ModelRequest]) -> list[ModelReply]:
    try:
        return list(await asyncio.gather(*(agent.complete(r) for r in batch)))
    finally:
        await agent.aclose()


def fast_agent(server: OpenAITestServer, **options: Any) -> OpenAIAgent:
    # A timeout no reply reaches on a loaded machine: a spurious one would be a retry the
    # server did not cause. Tests of timeouts give their own.
    settings: dict[str, Any] = {"api_key": SECRET, "timeout_s": 30.0, "backoff_base_s": 0.005,
                                "backoff_max_s": 0.02}
    settings.update(options)
    return OpenAIAgent("scripted", base_url=server.base_url, **settings)


def visible(reply: ModelReply) -> tuple[Any, ...]:
    return reply.content, reply.tool_calls, dict(reply.usage)


def test_is_an_agent_and_round_trips_text_and_tool_calls() -> None:
    with OpenAITestServer(scripted) as server:
        agent = fast_agent(server)
        assert isinstance(agent, Agent)
        batch = requests(6)
        replies = run(ask_all(agent, batch))
    for request, reply in zip(batch, replies, strict=True):
        expected = scripted(request)
        assert (reply.content, reply.tool_calls) == (expected.content, expected.tool_calls)
        assert reply.usage["prompt_tokens"] > 0 and reply.usage["completion_tokens"] > 0
        assert reply.raw is not None and reply.raw["object"] == "chat.completion"
    assert agent.stats.requests == agent.stats.api_calls == 6 and agent.stats.retries == 0


def test_with_20_percent_faults_every_request_gets_the_fault_free_reply() -> None:
    """Nothing is lost, nothing changes: the same replies as without faults, retries counted."""
    batch = requests(60)
    with OpenAITestServer(scripted) as clean:
        baseline = run(ask_all(fast_agent(clean), batch))
    # The timeout far above a reply's time on a loaded machine (a spurious timeout would be
    # a retry the server did not cause), the hold far beyond it (it ends when the client
    # hangs up).
    faults = FaultConfig(rate=0.2, kinds=FAULT_KINDS, retry_after_s=0.01, hold_s=300.0)
    with OpenAITestServer(scripted, faults=faults, seed=5) as faulty:
        agent = fast_agent(faulty, timeout_s=3.0, max_retries=8)
        replies = run(ask_all(agent, batch))
        injected = sum(faulty.stats.faults.values())
    assert [visible(r) for r in replies] == [visible(r) for r in baseline]
    assert [r.raw for r in replies] == [r.raw for r in baseline]  # byte-identical bodies
    assert injected >= 5  # 20% of >= 60 attempts
    assert agent.stats.retries == injected == sum(agent.stats.faults.values())
    assert agent.stats.api_calls == 60 + injected and agent.stats.infra_errors == 0
    assert set(agent.stats.faults) <= {"rate_limit", "server_error", "timeout", "connection",
                                       "malformed"}


def test_exhausted_retries_raise_infrastructure_error() -> None:
    faults = FaultConfig(rate=1.0, kinds=("503", "reset", "malformed"))
    with OpenAITestServer(scripted, faults=faults) as server:
        agent = fast_agent(server, max_retries=3)
        with pytest.raises(InfrastructureError, match="after 4 attempts"):
            run(ask_all(agent, requests(1)))
    assert agent.stats.api_calls == 4 and agent.stats.retries == 3
    assert agent.stats.infra_errors == 1 and sum(agent.stats.faults.values()) == 4


def test_refusals_are_not_retried() -> None:
    with OpenAITestServer({"other": scripted}) as server:  # "scripted" is an unknown model
        agent = fast_agent(server, max_retries=5)
        with pytest.raises(InfrastructureError, match=r"HTTP 404.*does not exist"):
            run(ask_all(agent, requests(1)))
    assert agent.stats.api_calls == 1 and agent.stats.faults == {"refused": 1}


def test_timeouts_are_retried_and_counted() -> None:
    faults = FaultConfig(rate=1.0, kinds=("timeout",), hold_s=1.0)
    with OpenAITestServer(scripted, faults=faults) as server:
        agent = fast_agent(server, timeout_s=0.2, max_retries=1)
        with pytest.raises(InfrastructureError, match="timed out"):
            run(ask_all(agent, requests(1)))
    assert agent.stats.faults == {"timeout": 2}


def test_retry_after_is_honoured_and_429s_spend_no_retry() -> None:
    """A 429 is the provider's limit: its Retry-After is waited out, again and again, without
    spending the retries meant for faults; only the waiting budget ends it, naming the 429."""
    faults = FaultConfig(rate=1.0, kinds=("429",), retry_after_s=0.3)
    with OpenAITestServer(scripted, faults=faults) as server:
        agent = fast_agent(server, max_retries=0, max_wait_s=1.0)
        waits: list[float] = []
        backoff = agent._backoff_s
        def recorded(*args: Any) -> float:
            waits.append(backoff(*args))
            return waits[-1]

        agent._backoff_s = recorded  # type: ignore[method-assign,assignment]
        with pytest.raises(InfrastructureError, match=r"rate limited.*--resili-max-wait.*429"):
            run(ask_all(agent, requests(1)))
    # max_retries=0, yet the request went again after each 429: the server's Retry-After,
    # not the < 0.02 s backoff; the last wait would pass the budget, so it ends there.
    assert len(waits) >= 2 and set(waits) == {0.3}
    assert agent.stats.faults == {"rate_limit": len(waits)}
    assert agent.stats.infra_errors == 1


def test_rpm_at_the_providers_limit_meets_no_429() -> None:
    """A provider that enforces 600 a minute over seconds, as OpenAI does (a bucket of 10
    refilled at 10 a second): `rpm=600` paces the requests under it, while the same burst
    without it is refused (and the adaptive window copes)."""
    with OpenAITestServer(scripted, rpm=600) as server:
        paced = fast_agent(server, rpm=600, max_concurrency=16)
        replies = run(ask_all(paced, requests(40)))
        assert len(replies) == 40 and server.stats.rpm_limited == 0
        assert paced.stats.faults.get("rate_limit", 0) == 0
        unpaced = fast_agent(server, max_concurrency=16)
        assert len(run(ask_all(unpaced, requests(40)))) == 40
        assert server.stats.rpm_limited > 0
        assert unpaced.stats.faults["rate_limit"] == server.stats.rpm_limited


def test_backoff_is_exponential_capped_jittered_and_deterministic() -> None:
    agent = OpenAIAgent("m", base_url="http://127.0.0.1:9/v1", backoff_base_s=0.5,
                        backoff_max_s=4.0)
    delays = [agent._backoff_s(attempt, 42, None) for attempt in range(6)]
    assert delays == [agent._backoff_s(attempt, 42, None) for attempt in range(6)]
    for attempt, delay in enumerate(delays):
        ceiling = min(4.0, 0.5 * 2**attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert delays != [agent._backoff_s(attempt, 43, None) for attempt in range(6)]
    assert agent._backoff_s(0, 42, retry_after_s=3.0) == 3.0


def test_concurrency_is_bounded_and_used() -> None:
    """Requests wait on the server until eight are in flight (no clock: a slow machine only
    takes longer), so the bound is reached whenever the client overlaps them, and a ninth
    in flight would show."""
    in_flight = peak = 0
    all_in: asyncio.Event | None = None

    async def gathered(request: ModelRequest) -> ModelReply:
        nonlocal in_flight, peak, all_in
        all_in = all_in or asyncio.Event()  # on the server's loop
        in_flight += 1
        peak = max(peak, in_flight)
        if peak >= 8:
            all_in.set()
        try:
            await asyncio.wait_for(all_in.wait(), timeout=60)  # not reached: peak says so
        finally:
            in_flight -= 1
        return ModelReply(content="done")

    with OpenAITestServer(gathered) as server:
        agent = fast_agent(server, max_concurrency=8, timeout_s=120.0, max_retries=0)
        run(ask_all(agent, requests(40)))
    assert peak == 8  # the bound is reached (requests overlap) and never passed


def test_generation_parameters_are_sent() -> None:
    seen: list[dict[str, Any]] = []

    def record(request: ModelRequest) -> ModelReply:
        seen.append(dict(request.context["request"]))
        return ModelReply(content="x")

    with OpenAITestServer(record) as server:
        run(ask_all(fast_agent(server, temperature=0.7, seed=11), requests(1)))
        run(ask_all(fast_agent(server, temperature=None), requests(1)))
    assert seen == [{"model": "scripted", "temperature": 0.7, "seed": 11},
                    {"model": "scripted"}]


@pytest.mark.parametrize(("model", "api", "extra_body"), [
    ("gpt-4o-mini", "chat", {"user": "resili-user"}),
    ("o3", "responses", {"user": "resili-user"}),
    ("gemini-2.5-flash", "chat", {"top_p": 0.5}),  # a field of Gemini's own list
])
def test_extra_headers_query_and_body_go_where_the_openai_client_puts_them(
        model: str, api: str, extra_body: dict[str, Any]) -> None:
    """`--resili-model-args` `extra_headers`/`extra_query`/`extra_body` are the `openai`
    client's request options (`create(..., extra_headers=...)`): HTTP headers, URL query and
    extra body fields, not body fields of those names (which OpenAI refuses as unknown)."""
    transport = {"extra_headers": {"X-Team": "bench", "OpenAI-Organization": "org-resili"},
                 "extra_query": {"trace": "on"}, "extra_body": extra_body}
    with OpenAITestServer(scripted, strict=True, record_requests=True) as server:
        agent = OpenAIAgent(model, base_url=server.base_url, api_key=SECRET, api=api,
                            model_args={**transport, "temperature": 1})
        run(ask_all(agent, requests(1)))
        assert server.stats.refused == {} and server.stats.replies == 1
    (seen,) = server.recorded
    assert seen.headers["x-team"] == "bench"
    assert seen.headers["openai-organization"] == "org-resili"
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert seen.headers["x-resilibench-task"] == "t0000"  # ours still go
    assert seen.query == {"trace": "on"}
    assert seen.body.items() >= {**extra_body, "temperature": 1}.items()
    assert not set(transport) & set(seen.body)
    assert "bench" not in json.dumps(seen.body)


def test_extra_request_options_of_the_wrong_shape_are_refused_by_name() -> None:
    for args in ({"extra_headers": "X-Team: bench"}, {"extra_headers": {"X-Team": 3}},
                 {"extra_query": ["trace"]}, {"extra_body": 1}):
        with pytest.raises(ValueError, match=f"--resili-model-args: {next(iter(args))}"):
            OpenAIAgent("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", model_args=args)


def test_odd_tool_arguments_pass_through_raw() -> None:
    def odd(request: ModelRequest) -> ModelReply:
        return ModelReply(content=None, tool_calls=(
            ToolCall(id="", name="read_file", arguments="{'path': not json"),))

    with OpenAITestServer(odd) as server:
        (reply,) = run(ask_all(fast_agent(server), requests(1)))
    assert reply.tool_calls == (ToolCall(id="call_0", name="read_file",
                                         arguments="{'path': not json"),)


def test_parse_completion_tolerates_what_real_servers_send() -> None:
    reply = parse_completion({"choices": [{"message": {
        "content": None,
        "tool_calls": [{"function": {"name": "a", "arguments": {"x": 1}}},
                       {"id": "c2", "function": {"name": "b", "arguments": None}},
                       "garbage", {"id": "c3"}]}}]})
    assert reply.content is None
    assert reply.tool_calls == (ToolCall("call_0", "a", '{"x": 1}'), ToolCall("c2", "b", ""))
    assert reply.usage == {"prompt_tokens": 0, "completion_tokens": 0}  # missing usage

    legacy = parse_completion({"choices": [{"message": {
        "content": [{"type": "text", "text": "part one, "}, {"type": "text", "text": "two"}],
        "function_call": {"name": "f", "arguments": "{}"}}}],
        "usage": {"prompt_tokens": "many", "completion_tokens": 5}})
    assert legacy.content == "part one, two"
    assert legacy.tool_calls == (ToolCall("call_0", "f", "{}"),)
    assert legacy.usage == {"prompt_tokens": 0, "completion_tokens": 5}

    bad: object
    for bad in ([], {"choices": []}, {"choices": ["x"]}, {"choices": [{"message": None}]}):
        with pytest.raises(MalformedReply):
            parse_completion(bad)


def test_the_key_never_leaks() -> None:
    faults = FaultConfig(rate=1.0, kinds=("500",))
    with OpenAITestServer(scripted, faults=faults) as server:
        agent = fast_agent(server, max_retries=1)
        with pytest.raises(InfrastructureError) as info:
            run(ask_all(agent, requests(1)))
    for text in (str(info.value), repr(info.value), repr(agent), json.dumps(agent.stats.to_json()),
                 repr(vars(agent).get("params"))):
        assert SECRET not in text


def test_url_user_info_never_leaks_though_the_server_echoes_its_basic_header(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx sends `http://user:pass@host` as `Authorization: Basic base64(user:pass)`, which
    this server quotes in its error bodies: the agent registers every form of it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the user info alone authenticates
    password = "url-pass-4242"
    basic = base64.b64encode(f"agent:{password}".encode()).decode()
    faults = FaultConfig(rate=1.0, kinds=("500",))
    with OpenAITestServer(scripted, faults=faults, echo_request=True) as server:
        agent = OpenAIAgent("scripted", base_url=server.base_url.replace(
            "://", f"://agent:{password}@"), max_retries=0)
        with pytest.raises(InfrastructureError) as info:
            run(ask_all(agent, requests(1)))
    assert "with Authorization: Basic ***" in str(info.value)
    for text in (str(info.value), repr(agent), json.dumps(agent.stats.to_json())):
        assert password not in text and basic not in text


def test_a_base_url_with_user_info_and_an_api_key_is_refused_naming_openai_api_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx turns a URL's user info into `Authorization: Basic ...`, which replaces the
    client's `Bearer KEY`: with both, the key would silently never be sent."""
    import openai

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAITestServer(scripted, record_requests=True) as server:
        url = server.base_url.replace("://", "://alice:url-pass-5150@")
        client = openai.OpenAI(api_key=SECRET, base_url=url, max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        client.close()
        basic = "Basic " + base64.b64encode(b"alice:url-pass-5150").decode()
        assert server.recorded[-1].headers["authorization"] == basic  # the key is not sent
        for given, env in ((SECRET, None), (None, SECRET)):
            if env is not None:
                monkeypatch.setenv("OPENAI_API_KEY", env)
            with pytest.raises(ValueError, match="OPENAI_API_KEY") as refused:
                OpenAIAgent("m", base_url=url, api_key=given)
            assert "user info" in str(refused.value)
            assert "url-pass-5150" not in str(refused.value) and SECRET not in str(refused.value)
        monkeypatch.delenv("OPENAI_API_KEY")
        # The user info alone authenticates as the URL says (a proxy's Basic auth).
        run(ask_all(OpenAIAgent("m", base_url=url, max_retries=0), requests(1)))
        assert server.recorded[-1].headers["authorization"] == basic


def test_key_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    local = OpenAIAgent("m", base_url="http://127.0.0.1:8000/v1")
    assert local._client.api_key == PLACEHOLDER_KEY
    with pytest.raises(ValueError, match="OPENAI_API_KEY is not set"):
        OpenAIAgent("o3")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert OpenAIAgent("o3")._client.api_key == SECRET
    assert OpenAIAgent("openai:gpt-4o", api_key="explicit")._client.api_key == "explicit"


def test_model_names_and_bad_options() -> None:
    agent = OpenAIAgent("openai:gpt-4o", base_url="http://127.0.0.1:8000/v1")
    assert (agent.model, agent.name) == ("gpt-4o", "gpt-4o")
    assert OpenAIAgent("m", base_url="http://x/v1", name="mine").name == "mine"
    bad: list[Callable[[], object]] = [
        lambda: OpenAIAgent("openai:", base_url="http://x/v1"),
        lambda: OpenAIAgent("m", base_url="http://x/v1", max_concurrency=0),
        lambda: OpenAIAgent("m", base_url="http://x/v1", timeout_s=0),
        lambda: OpenAIAgent("m", base_url="http://x/v1", backoff_base_s=-1),
    ]
    for make in bad:
        with pytest.raises(ValueError):
            make()


def test_unreachable_endpoint_is_an_infrastructure_error() -> None:
    with OpenAITestServer(scripted) as server:
        base_url = server.base_url
    agent = OpenAIAgent("m", base_url=base_url, max_retries=1, backoff_base_s=0.001)
    with pytest.raises(InfrastructureError, match="connection error"):
        run(ask_all(agent, requests(1)))
    assert agent.stats.faults == {"connection": 2}



def test_episodes_through_the_server_are_identical_with_and_without_faults() -> None:
    """The built-in agents served over HTTP play the same episodes whether or not 20% of the
    provider's responses fail: nothing is lost, only retries are added, counted apart."""
    from pytest_resilibench.core.prompts import Variant
    from pytest_resilibench.core.tasks import load_tasks
    from pytest_resilibench.runtime.episode import run_episode

    all_tasks = list(load_tasks())
    tasks = all_tasks[:: len(all_tasks) // 8][:8]
    variants = [Variant("optimal"), Variant("flawed", flaw="missing_step", severity="medium")]
    players: list[tuple[str, ToolMode]] = [
        ("builtin:follower", "text"), ("builtin:adaptive", "native"), ("builtin:random", "text")]
    episodes = [(t, v, m, mode) for t in tasks for v in variants for m, mode in players]

    def play(faults: FaultConfig) -> tuple[list[dict[str, Any]], int]:
        with OpenAITestServer(faults=faults, seed=9) as server:
            # A timeout well above a loaded machine's reply time, so only injected faults
            # are retried; the injected hold outlasts it.
            agents = {m: OpenAIAgent(m, base_url=server.base_url, timeout_s=4.0,
                                     max_retries=10, backoff_base_s=0.002, backoff_max_s=0.01,
                                     max_concurrency=16)
                      for m, _ in players}

            async def all_episodes() -> list[Any]:
                try:
                    return list(await asyncio.gather(*(
                        run_episode(t, v, agents[m], seed=3, repeat=1, tool_mode=mode)
                        for t, v, m, mode in episodes)))
                finally:
                    for agent in agents.values():
                        await agent.aclose()

            records = asyncio.run(all_episodes())
        assert sum(a.stats.infra_errors for a in agents.values()) == 0
        rows = [{k: v for k, v in r.to_json().items() if k != "wall_time_s"} for r in records]
        return rows, sum(a.stats.retries for a in agents.values())

    clean, clean_retries = play(FaultConfig())
    # Timeouts far above a reply's time on a loaded machine; holds end when the client leaves.
    faulty, faulty_retries = play(FaultConfig(rate=0.2, hold_s=300.0, retry_after_s=0.005))
    outcomes = [row["outcome"] for row in clean]
    assert "error" not in outcomes and "full" in outcomes
    assert clean == faulty
    assert clean_retries == 0 and faulty_retries >= 10


# --- real models: profiles, fail fast, stops, tokens and cost ---------------------------------
def refusing(request: ModelRequest) -> ModelReply:
    """Answers the start-up probe, refuses every episode's request (a 400 from the server)."""
    if request.task_id != "resilibench-probe":
        raise ValueError("this deployment refuses the benchmark's prompts")
    return ModelReply(content="OK")


def test_the_default_timeout_is_sized_for_reasoning_models() -> None:
    agent = OpenAIAgent("o3", base_url="http://127.0.0.1:9/v1")
    assert agent._client.timeout == 600.0  # the openai client's own default
    run(agent.aclose())


def test_o3_through_chat_on_the_strict_server_sends_what_o3_takes() -> None:
    seen: list[dict[str, Any]] = []

    def policy(request: ModelRequest) -> ModelReply:
        seen.append(dict(request.context["request"]))
        return scripted(request)

    with OpenAITestServer({"o3": policy}, strict=True, api_key=SECRET) as server:
        agent = OpenAIAgent("o3", base_url=server.base_url, api_key=SECRET, seed=5,
                            model_args={"reasoning_effort": "low"})
        replies = run(ask_all(agent, requests(6)))
        assert server.stats.refused == {}
    assert seen[0] == {"model": "o3", "seed": 5, "reasoning_effort": "low"}
    assert all(r.usage["reasoning_tokens"] == 16 for r in replies)
    assert agent.stats.reasoning_tokens == 6 * 16


def test_the_strict_server_refuses_what_the_old_provider_sent_o3() -> None:
    with OpenAITestServer({"o3": scripted}, strict=True) as server:
        agent = OpenAIAgent("o3", base_url=server.base_url, api_key=SECRET)
        agent.params = {"temperature": 0.0}  # what every request carried before the profiles
        with pytest.raises(InfrastructureError, match="does not support 0") as caught:
            run(ask_all(agent, requests(1)))
    assert caught.value.status == 400 and not caught.value.retryable
    assert server.stats.refused == {"unsupported_value": 1}


def test_probe_is_one_small_request_and_a_wrong_key_fails_it() -> None:
    with OpenAITestServer({"o3": scripted}, strict=True, api_key=SECRET) as server:
        agent = OpenAIAgent("o3", base_url=server.base_url, api_key=SECRET,
                            model_args={"max_completion_tokens": 4000})
        run(probe_agent(agent, "o3"))
        assert server.stats.requests == 1 and agent.stats.api_calls == 1
        wrong = OpenAIAgent("o3", base_url=server.base_url, api_key="sk-wrong-key-000000")
        with pytest.raises(InfrastructureError, match="HTTP 401: Incorrect API key") as caught:
            run(probe_then_close(wrong))
        assert caught.value.status == 401 and server.stats.requests == 2  # not retried
        assert server.stats.refused == {"invalid_api_key": 1}


async def probe_then_close(agent: OpenAIAgent) -> None:
    try:
        await agent.probe()
    finally:
        await agent.aclose()


def test_consecutive_refusals_stop_the_model_and_the_rest_is_not_sent() -> None:
    with OpenAITestServer({"scripted": refusing}) as server:
        agent = fast_agent(server, max_consecutive_errors=3, max_concurrency=1)

        async def each() -> list[str]:
            reasons = []
            try:
                for request in requests(8):
                    try:
                        await agent.complete(request)
                    except InfrastructureError as exc:
                        reasons.append(str(exc))
            finally:
                await agent.aclose()
            return reasons

        reasons = run(each())
    assert server.stats.requests == 3
    assert agent.stats.not_sent == 5 and agent.stats.infra_errors == 3
    assert reasons[3].startswith("not sent: 3 requests to scripted failed in a row "
                                 "(--resili-max-consecutive-errors); the last: ")
    assert "refuses the benchmark's prompts" in reasons[-1]


def test_max_cost_stops_starting_new_episodes() -> None:
    from pytest_resilibench.runtime.agents.pricing import Price

    first_turns = [r for r in requests(9) if len(r.messages) == 2]
    later = [r for r in requests(9) if len(r.messages) > 2]
    with OpenAITestServer({"scripted": scripted}) as server:
        agent = fast_agent(server, price=Price(1e6, 1e6, 1e6), max_cost_usd=1.0,
                           max_concurrency=1)

        async def each() -> tuple[int, int]:
            refused = 0
            try:
                for request in first_turns + later:
                    try:
                        await agent.complete(request)
                    except InfrastructureError as exc:
                        assert "--resili-max-cost" in str(exc)
                        refused += 1
            finally:
                await agent.aclose()
            return refused, server.stats.requests

        refused, sent = run(each())
    # the first new episode passes the cap; the other new ones are not sent, turns of
    # episodes already started still are
    assert refused == len(first_turns) - 1 and sent == 1 + len(later)
    assert agent.stats.cost_usd is not None and agent.stats.cost_usd > 1.0
    with pytest.raises(ValueError, match="no price known"):
        OpenAIAgent("qwen", base_url="http://127.0.0.1:9/v1", max_cost_usd=1.0)


def test_usage_details_are_read_from_chat_completions() -> None:
    reply = parse_completion({"choices": [{"message": {"content": "hi"}}], "usage": {
        "prompt_tokens": 2000, "completion_tokens": 300,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 256}}})
    assert reply.usage == {"prompt_tokens": 2000, "completion_tokens": 300,
                           "cached_tokens": 1024, "reasoning_tokens": 256}


def test_unknown_api_and_refused_options_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="api must be one of"):
        OpenAIAgent("o3", base_url="http://127.0.0.1:9/v1", api="completions")
    with pytest.raises(ValueError, match="--resili-temperature"):
        OpenAIAgent("o3", base_url="http://127.0.0.1:9/v1", temperature=0.0)


class _LimitHandler(BaseHTTPRequestHandler):
    """A chat-completions endpoint that answers each model's limit as real servers do."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body["model"]
        data: dict[str, Any]
        if model == "overflow":  # llama.cpp's / OpenAI's 400 for a context overflow
            status, data = 400, {"error": {
                "message": "This model's maximum context length is 8192 tokens. However, you "
                           "requested 8322 tokens.", "code": "context_length_exceeded"}}
        else:
            reason = {"cut": "length", "filtered": "content_filter"}.get(model, "stop")
            status, data = 200, {"choices": [{"index": 0, "finish_reason": reason, "message": {
                "role": "assistant", "content": "<tool_call>{\"name\": \"x\""}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 7}}
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.mark.parametrize(("model", "stop_reason"), [
    ("overflow", "context_overflow"), ("cut", "length"), ("filtered", "refusal")])
def test_model_limits_are_the_models_failure_not_infrastructure(
    model: str, stop_reason: str
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LimitHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        agent = OpenAIAgent(model, base_url=f"http://127.0.0.1:{server.server_port}/v1",
                            api_key=SECRET, timeout_s=5.0, backoff_base_s=0.005)

        async def ask() -> None:
            try:
                await agent.complete(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
            finally:
                await agent.aclose()

        with pytest.raises(ModelLimitError) as raised:
            asyncio.run(ask())
        assert raised.value.stop_reason == stop_reason
        assert not isinstance(raised.value, InfrastructureError)
        assert agent.stats.infra_errors == 0 and agent.stats.retries == 0
    finally:
        server.shutdown()
        server.server_close()


class RawServer:
    """A loopback HTTP server answering one request with 200 and `body` as given (bytes no
    well-behaved server would send), with `interval_s` > 0 one byte at a time: each read then
    gets data in time, the whole body takes `len(body) * interval_s`. It counts the bytes it
    sent and whether the client hung up before the end."""

    def __init__(self, body: bytes, interval_s: float = 0.0) -> None:
        import socket
        import threading

        self.body = body
        self.interval_s = interval_s
        self.sent = 0
        self.hung_up = threading.Event()
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self._socket.accept()
        except OSError:  # closed before any client came
            return
        with conn:
            conn.settimeout(30)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(self.body)}\r\n\r\n").encode()
            try:
                conn.sendall(head)
                if not self.interval_s:
                    conn.sendall(self.body)
                    self.sent = len(self.body)
                for byte in self.body[self.sent:]:
                    if self._stop.wait(self.interval_s):
                        return
                    conn.sendall(bytes([byte]))
                    self.sent += 1
                self.finished.set()
            except OSError:
                self.hung_up.set()

    def close(self) -> None:
        self._stop.set()
        self._socket.close()
        self._thread.join(timeout=10)


def test_the_timeout_bounds_the_whole_request_not_each_read() -> None:
    """httpx's read timeout restarts with every byte: the trickle (a byte every 50 ms, ~3 s
    for the body) never trips a 1 s read timeout; the whole-request bound must."""
    body = json.dumps({"choices": [{"message": {"content": "late " * 10}}]}).encode()
    server = RawServer(body, interval_s=0.05)
    try:
        agent = OpenAIAgent("m", base_url=server.base_url, api_key=SECRET, timeout_s=1.0,
                            max_retries=0)
        with pytest.raises(InfrastructureError, match="timed out"):
            run(ask_all(agent, requests(1)))
        assert server.hung_up.wait(timeout=30)  # the client left; the server saw it
    finally:
        server.close()
    assert not server.finished.is_set() and server.sent < len(server.body)
    assert agent.stats.faults == {"timeout": 1}


def test_a_lone_surrogate_and_an_absurd_usage_are_sanitised_at_the_boundary(
        tmp_path: Any) -> None:
    from pytest_resilibench.runtime.agents.cache import CallKey, ModelCallCache

    body = ('{"choices": [{"message": {"content": "bad \\ud800 text"}}], "usage": '
            '{"prompt_tokens": 1' + "0" * 3999 + ', "completion_tokens": 7}}').encode()
    server = RawServer(body)
    try:
        agent = OpenAIAgent("m", base_url=server.base_url, api_key=SECRET, max_retries=0)
        (reply,) = run(ask_all(agent, requests(1)))
    finally:
        server.close()
    assert reply.content == "bad \ufffd text"
    assert reply.usage["prompt_tokens"] == 0 and reply.usage["completion_tokens"] == 7
    assert agent.stats.prompt_tokens == 0
    # What used to fail later on it: encoding the text (the next request, the cache).
    with ModelCallCache(tmp_path / "c.sqlite") as cache:
        key = CallKey(model="m", base_url=server.base_url, messages=[], tools=None,
                      params={}, repeat=0)
        cache.put(key, reply)
        assert cache.get(key) is not None


def test_a_key_echoed_by_the_server_and_url_credentials_are_masked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = "gw-echo-KEY-0987654321"  # no known key shape: masked because the provider knows it
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def echo(request: ModelRequest) -> ModelReply:
        raise ValueError(f"request refused for key {key}")

    texts = []
    with OpenAITestServer({"m": echo}) as server:
        url = server.base_url.replace("http://", "http://alice:hunter2-pass@")
        # A key, or user info (never both: the user info would replace the key's header).
        for agent in (OpenAIAgent("m", base_url=server.base_url, api_key=key, max_retries=0),
                      OpenAIAgent("m", base_url=url, max_retries=0)):
            with pytest.raises(InfrastructureError) as info:
                run(ask_all(agent, requests(1)))
            texts.append(str(info.value))
    assert all("request refused for key ***" in text for text in texts)
    text = " ".join(texts)
    assert key not in text and "hunter2" not in text and "alice" not in text
