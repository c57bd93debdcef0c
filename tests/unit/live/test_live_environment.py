"""Real HTTP to the live services: every failure kind maps to its code, luck is keyed by the
episode, and nothing ever raises into the caller."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from pytest_resilibench.core.simulator import EpisodeKey
from pytest_resilibench.runtime.environment import Environment
from pytest_resilibench.servers.live.environment import LiveEnvironment, request_key
from pytest_resilibench.servers.live.registry import live_registry
from pytest_resilibench.servers.live.server import (
    LOOPBACK,
    LiveServer,
    live_services,
    planned_fault,
)
from pytest_resilibench.servers.live.services import SERVICES
from tests.unit.live.recorder import header_recorder

SEED = 0  # the live_server fixture's seed (conftest)
HANG_S = 1.0  # as the fixture's
CLIENT_TIMEOUT_S = 0.3  # far below the fixture's hang

# A valid call of every service (the services without required parameters take {}).
ARGS: dict[str, dict[str, Any]] = {
    "word_definition": {"word": "river"},
    "current_time": {"timezone": "Europe/Lisbon"},
    "currency_rates": {"base": "EUR", "symbols": ["USD", "JPY"]},
    "weather_forecast": {"city": "Oslo"},
    "number_fact": {"number": 42},
    "country_info": {"code": "KE"},
    "public_holidays": {"country": "JP", "year": 2027},
    "rhyme_finder": {"word": "light"},
    "lorem_text": {"words": 5},
    "text_composer": {"title": "Today", "parts": ["A fact.", "A joke."], "max_words": 50},
    "social_draft_poster": {"platform": "bluesky", "text": "hello"},
}
FAULT_CODES = {
    "timeout": "TIMEOUT",
    "rate_limit": "RATE_LIMITED",
    "server_error": "OPERATION_FAILED",
    "malformed": "INVALID_RESPONSE",
    "truncated": "INVALID_RESPONSE",
    None: None,
}


def find_episode(service: str, fault: str | None) -> EpisodeKey:
    """An episode whose first call to `service` meets `fault` (the draws are pure)."""
    for i in range(5000):
        episode = EpisodeKey(SEED, f"probe{i}", 0)
        if planned_fault(SEED, service, request_key(episode, service, 1)) == fault:
            return episode
    raise AssertionError(f"no episode draws {fault} for {service}")


def call(server: LiveServer, name: str, args: Any, **options: Any) -> Any:
    async def run() -> Any:
        env = LiveEnvironment(server.base_urls, timeout_s=CLIENT_TIMEOUT_S, **options)
        try:
            return await env.call(name, args)
        finally:
            await env.aclose()

    return asyncio.run(run())


def test_the_server_listens_on_loopback_only(live_server: LiveServer) -> None:
    assert live_server.host == LOOPBACK
    assert all(url.startswith(f"http://{LOOPBACK}:") for url in live_server.base_urls.values())
    index = httpx.get(f"{live_server.url}/").json()
    assert [s["name"] for s in index["services"]] == [s.name for s in SERVICES]


@pytest.mark.parametrize("service", [s.name for s in SERVICES])
def test_every_service_answers_per_its_schema(live_server: LiveServer, service: str) -> None:
    result = call(live_server, service, ARGS.get(service, {}),
                  episode=find_episode(service, None))
    assert result.ok, result.message
    schema = live_registry()[service].returns
    assert not list(Draft202012Validator(schema).iter_errors(result.output))
    assert result.latency_s > 0 and result.success_probability is None


@pytest.mark.parametrize("fault", ["timeout", "rate_limit", "server_error", "malformed",
                                   "truncated"])
def test_each_failure_kind_maps_to_its_code(live_server: LiveServer, fault: str) -> None:
    service = next(s.name for s in SERVICES if getattr(s.misbehaviour, fault) > 0)
    result = call(live_server, service, ARGS.get(service, {}),
                  episode=find_episode(service, fault))
    assert not result.ok and result.error_code == FAULT_CODES[fault], result.message
    assert result.message.startswith(f"{FAULT_CODES[fault]}: ")
    if fault == "rate_limit":
        assert "retry after" in result.message
    if fault == "timeout":
        assert result.latency_s >= CLIENT_TIMEOUT_S


def test_bad_arguments_are_a_400_and_invalid_input(live_server: LiveServer) -> None:
    episode = find_episode("weather_forecast", None)
    result = call(live_server, "weather_forecast", {"city": "Atlantis"}, episode=episode)
    assert result.error_code == "INVALID_INPUT" and result.deterministic
    assert "Atlantis" in result.message and "refused" in result.message


def test_task_bound_values_are_checked_before_any_request(live_server: LiveServer) -> None:
    result = call(live_server, "weather_forecast", {"city": "Oslo"}, inputs={"city": "Lima"})
    assert result.error_code == "INVALID_INPUT" and result.latency_s == 0.0
    unknown = call(live_server, "teleporter", {})
    assert unknown.error_code == "UNKNOWN_TOOL" and unknown.call_index == 0
    not_object = call(live_server, "random_fact", ["x"])
    assert not_object.error_code == "INVALID_INPUT"


def test_a_keyed_server_answers_the_key_and_refuses_a_call_without_it() -> None:
    """`resilibench serve-live --api-key KEY` takes only `Authorization: Bearer KEY`
    (loopback.BearerKey): `LiveEnvironment(api_key=...)` sends it with every call."""
    key = "live-key-DO-NOT-LEAK-0123"
    episode = find_episode("weather_forecast", None)
    with live_services(SEED, hang_s=HANG_S, api_key=key) as server:
        refused = call(server, "weather_forecast", ARGS["weather_forecast"], episode=episode)
        wrong = call(server, "weather_forecast", ARGS["weather_forecast"], episode=episode,
                     api_key="not-the-key")
        answered = call(server, "weather_forecast", ARGS["weather_forecast"], episode=episode,
                        api_key=key)
        posted = call(server, "social_draft_poster", ARGS["social_draft_poster"],
                      episode=find_episode("social_draft_poster", None), api_key=key)
    assert refused.error_code == wrong.error_code == "INVALID_INPUT"
    assert "Authorization: Bearer" in refused.message and key not in wrong.message
    assert answered.ok, answered.message
    assert posted.ok, posted.message  # POST services too


def test_the_key_goes_to_its_origin_and_never_to_a_public_api_beside_it() -> None:
    """A run that mixes a keyed serve-live with a public API sends the key to the former
    only (key_scope.py); with URLs on two origins and none named, it refuses to start."""
    key = "live-key-DO-NOT-LEAK-0456"
    episode = find_episode("weather_forecast", None)
    with live_services(SEED, hang_s=HANG_S, api_key=key) as server, \
            header_recorder() as (public, seen):
        urls = {"weather_forecast": f"{public}/weather_forecast",
                "number_fact": server.base_urls["number_fact"]}

        async def run() -> tuple[Any, Any]:
            env = LiveEnvironment(urls, episode=episode, api_key=key, key_origin=server.url)
            try:
                return (await env.call("weather_forecast", ARGS["weather_forecast"]),
                        await env.call("number_fact", ARGS["number_fact"]))
            finally:
                await env.aclose()

        public_call, keyed_call = asyncio.run(run())
        with pytest.raises(ValueError, match="2 origins"):
            LiveEnvironment(urls, api_key=key)
    assert public_call.ok and len(seen) == 1
    assert "authorization" not in seen[0] and key not in str(seen[0])
    assert keyed_call.error_code != "INVALID_INPUT", keyed_call.message  # the key was taken


def test_connection_refused_is_a_network_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind((LOOPBACK, 0))
        port = sock.getsockname()[1]

    async def run() -> Any:
        env = LiveEnvironment({"random_fact": f"http://{LOOPBACK}:{port}/random_fact"})
        assert isinstance(env, Environment) and env.tool_names == ("random_fact",)
        try:
            return await env.call("random_fact", {})
        finally:
            await env.aclose()

    result = asyncio.run(run())
    assert result.error_code == "NETWORK_ERROR" and "could not reach" in result.message


@pytest.fixture
def dropping_server() -> Iterator[str]:
    """A server that accepts a connection and closes it without a word (a reset)."""
    sock = socket.socket()
    sock.bind((LOOPBACK, 0))
    sock.listen()
    sock.settimeout(5)
    stop = False

    def serve() -> None:
        while not stop:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    import threading

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://{LOOPBACK}:{sock.getsockname()[1]}/random_fact"
    stop = True
    sock.close()


def test_a_dropped_connection_is_a_network_error(dropping_server: str) -> None:
    async def run() -> Any:
        env = LiveEnvironment({"random_fact": dropping_server})
        try:
            return await env.call("random_fact", {})
        finally:
            await env.aclose()

    assert asyncio.run(run()).error_code == "NETWORK_ERROR"


def test_the_same_episode_meets_the_same_luck_whatever_the_interleaving(
        live_server: LiveServer) -> None:
    plan = [(name, ARGS.get(name, {})) for name in ("random_joke", "stoic_quote", "ip_lookup",
                                                      "random_advice")] * 4

    async def episode(concurrently: bool) -> list[tuple[Any, ...]]:
        env = LiveEnvironment(live_server.base_urls, timeout_s=CLIENT_TIMEOUT_S,
                              episode=EpisodeKey(3, "live01", 1))
        try:
            if concurrently:
                results = await asyncio.gather(*(env.call(n, a) for n, a in plan))
            else:
                results = [await env.call(n, a) for n, a in plan]
        finally:
            await env.aclose()
        return [(r.tool, r.call_index, r.ok, r.error_code, r.output) for r in results]

    sequential = asyncio.run(episode(False))
    assert asyncio.run(episode(True)) == sequential
    codes = {code for _, _, ok, code, _ in sequential if not ok}
    assert codes and any(ok for _, _, ok, _, _ in sequential)
