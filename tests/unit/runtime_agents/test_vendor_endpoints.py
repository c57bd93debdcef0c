"""Azure OpenAI and Anthropic's and Google's OpenAI-compatible endpoints (agents/profiles.py):
the provider sends each what it takes, refuses at start-up what it would refuse, and passes
the strict test server's rules for each (servers/testserver_rules.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
from pytest_resilibench.runtime.agents.profiles import family_of, request_params
from pytest_resilibench.runtime.protocol import InfrastructureError, ModelRequest
from pytest_resilibench.servers.testserver import OpenAITestServer

REQUEST = ModelRequest(messages=[{"role": "system", "content": "You call tools."},
                                 {"role": "user", "content": "Task: t0001"}], task_id="t0001")
CLAUDE, GEMINI = "claude-sonnet-4-5", "gemini-2.5-flash"


def ask(agent: OpenAIAgent) -> Any:
    async def main() -> Any:
        try:
            await agent.probe()
            return await agent.complete(REQUEST)
        finally:
            await agent.aclose()
    return asyncio.run(main())


def raw_status(base_url: str, **body: Any) -> int:
    """The status the strict server answers a raw chat request with."""
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    try:
        client.chat.completions.create(messages=[{"role": "user", "content": "hi"}], **body)
    except openai.APIStatusError as exc:
        return exc.status_code
    return 200


def test_families_by_model_name() -> None:
    assert family_of(CLAUDE).name == "anthropic" and family_of("anthropic/claude-opus-4") \
        .name == "anthropic"
    assert family_of(GEMINI).name == "gemini" and family_of("google/gemini-3-pro").name == "gemini"


def test_gemini_gets_no_seed_and_refuses_unknown_fields_at_start_up() -> None:
    assert request_params(GEMINI, seed=3) == {"temperature": 0.0}
    assert request_params(CLAUDE, seed=3) == {"temperature": 0.0, "seed": 3}  # ignored there
    with pytest.raises(ValueError, match=r"does not take frequency_penalty, seed \(see "
                                         r"https://ai.google.dev/gemini-api/docs/openai\)"):
        request_params(GEMINI, model_args={"seed": 1, "frequency_penalty": 0.5})
    with pytest.raises(ValueError, match="does not take n"):
        request_params(CLAUDE, model_args={"n": 2})
    assert request_params(GEMINI, model_args={"reasoning_effort": "low"})["reasoning_effort"]


@pytest.mark.parametrize("model", [CLAUDE, GEMINI])
def test_no_responses_api_for_other_vendors(model: str) -> None:
    with pytest.raises(ValueError, match=r"--resili-api=responses: .* chat completions only"):
        OpenAIAgent(model, base_url="http://127.0.0.1:9/v1", api_key="k", api="responses")


@pytest.mark.parametrize("model", [CLAUDE, GEMINI])
def test_the_provider_passes_each_vendors_strict_rules(model: str) -> None:
    with OpenAITestServer({model: make_builtin("follower")}, strict=True) as server:
        agent = OpenAIAgent(model, base_url=server.base_url, api_key="sk-test", seed=7,
                            max_retries=0)
        reply = ask(agent)
        refused = dict(server.stats.refused)
    assert reply.content and not refused


def test_the_strict_server_refuses_what_each_vendor_refuses() -> None:
    with OpenAITestServer({GEMINI: make_builtin("follower"),
                           CLAUDE: make_builtin("follower"),
                           "gpt-4o": make_builtin("follower")}, strict=True) as server:
        url = server.base_url
        assert raw_status(url, model=GEMINI, seed=1) == 400
        assert raw_status(url, model=GEMINI, store=False) == 400
        assert raw_status(url, model="gpt-4o", seed=1, store=False) == 200
        assert raw_status(url, model=CLAUDE, n=2) == 400
        assert raw_status(url, model=CLAUDE, n=1, seed=1) == 200
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model=CLAUDE, input="hi")
        refused = dict(server.stats.refused)
    assert refused == {"INVALID_ARGUMENT": 2, "invalid_request_error": 1, "not_found": 1}


def test_a_gemini_refusal_is_quoted_at_start_up() -> None:
    """A seed passed through by hand reaches the server, whose 400 the probe quotes."""
    with OpenAITestServer({GEMINI: make_builtin("follower")}, strict=True) as server:
        agent = OpenAIAgent(GEMINI, base_url=server.base_url, api_key="sk-test", max_retries=0)
        agent.params["seed"] = 1  # what a provider unaware of Gemini's rules would send
        with pytest.raises(InfrastructureError, match='Unknown name "seed": Cannot find field'):
            ask(agent)


def test_azure_deployments_through_the_azure_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAITestServer({"prod-o3": make_builtin("follower")}, strict=True,
                          api_key="azure-key") as server:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.azure_endpoint)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
        agent = OpenAIAgent("prod-o3", api_version="2024-10-21", max_retries=0)
        assert isinstance(agent._client, openai.AsyncAzureOpenAI)
        reply = ask(agent)
        models, refused = dict(server.stats.models), dict(server.stats.refused)
    assert reply.content and models == {"prod-o3": 2} and not refused


def test_azure_needs_its_endpoint_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="needs the resource's endpoint"):
        OpenAIAgent("gpt-4o", api_version="2024-10-21")
    with pytest.raises(ValueError, match="AZURE_OPENAI_API_KEY is not set"):
        OpenAIAgent("gpt-4o", api_version="2024-10-21", base_url="https://r.openai.azure.com")


def test_an_azure_request_without_api_version_is_not_found() -> None:
    with OpenAITestServer({"dep": make_builtin("follower")}, strict=True) as server:
        client = openai.OpenAI(base_url=f"{server.azure_endpoint}/openai/deployments/dep",
                               api_key="k", max_retries=0)
        with pytest.raises(openai.NotFoundError, match="Resource not found"):
            client.chat.completions.create(model="dep", messages=[{"role": "user",
                                                                   "content": "hi"}])
