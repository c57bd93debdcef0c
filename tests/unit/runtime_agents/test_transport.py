"""RetryingTransport (runtime/agents/transport.py): an openai client's copy whose requests go
through the provider's retries and limiter, against the loopback test server (never mocked)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from pytest_resilibench.runtime.agent_boundary import is_own_agent
from pytest_resilibench.runtime.agents.run_options import run_request_options
from pytest_resilibench.runtime.agents.transport import (
    model_failure,
    provider_for,
    retrying_client,
)
from pytest_resilibench.runtime.protocol import InfrastructureError, ModelLimitError
from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer

FAST: dict[str, Any] = {"backoff_base_s": 0.002, "backoff_max_s": 0.01, "timeout_s": 30.0}
HELLO: Any = [{"role": "user", "content": "hello"}]


def ask(client: openai.AsyncOpenAI, model: str, times: int = 1) -> list[Any]:
    async def main() -> list[Any]:
        try:
            return [await client.chat.completions.create(model=model, messages=HELLO)
                    for _ in range(times)]
        finally:
            await client.close()

    return asyncio.run(main())


def test_a_routed_client_retries_as_the_direct_path_and_counts_it() -> None:
    faults = FaultConfig(rate=0.3, kinds=("429", "500", "malformed"), retry_after_s=0.005)
    with OpenAITestServer(faults=faults, seed=3) as server:
        plain = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        provider = provider_for(plain, "builtin:follower", FAST)
        replies = ask(retrying_client(plain, provider), "builtin:follower", 40)
        injected = sum(server.stats.faults.values())
    assert len(replies) == 40 and injected >= 5
    stats = provider.stats
    assert (stats.requests, stats.infra_errors) == (40, 0)
    assert stats.retries == injected and stats.api_calls == 40 + injected


def test_a_refusal_is_not_retried_and_its_error_is_the_direct_paths() -> None:
    with OpenAITestServer() as server:
        plain = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        provider = provider_for(plain, "no-such-model", FAST)
        with pytest.raises(Exception) as raised:
            ask(retrying_client(plain, provider), "no-such-model")
    failure = model_failure(raised.value, model="no-such-model")
    assert isinstance(failure, InfrastructureError) and failure.status == 404
    assert "after 1 attempt" in str(failure) and provider.stats.api_calls == 1


def test_a_plain_clients_errors_are_read_as_the_direct_path_reads_them() -> None:
    def overflow(request: Any) -> Any:
        raise ValueError("maximum context length is 8 tokens")

    with OpenAITestServer({"small": overflow}) as server:
        plain = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.BadRequestError) as raised:
            ask(plain, "small")
    failure = model_failure(raised.value, model="small")
    assert isinstance(failure, ModelLimitError) and failure.stop_reason == "context_overflow"
    assert model_failure(ValueError("the agent's own"), model="small") is None


def test_the_runs_request_options_reach_the_provider_and_explicit_ones_win() -> None:
    plain = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    with run_request_options({"max_retries": 2, "max_concurrency": 3}):
        provider = provider_for(plain, "m", {"max_retries": 4})
    assert (provider.max_retries, provider.limiter.cap) == (4, 3)
    assert provider_for(plain, "m").max_retries == 6  # outside a run: the defaults


def test_an_adapter_is_not_counted_as_our_own_code() -> None:
    from pytest_resilibench.adapters.agents_sdk import AgentsSdkAgent
    from pytest_resilibench.runtime.agents.builtin import make_builtin

    assert not is_own_agent(AgentsSdkAgent.__new__(AgentsSdkAgent))
    assert is_own_agent(make_builtin("follower"))
