"""`LiveEnvironment`: an episode's tool calls as real HTTP requests (httpx), with every
transport or HTTP outcome mapped onto the simulator's error taxonomy.

| what happened                                   | error code        |
|-------------------------------------------------|-------------------|
| no answer within `timeout_s`                    | TIMEOUT           |
| connection refused / reset / dropped before any | NETWORK_ERROR     |
| response                                        |                   |
| 429 (the message carries Retry-After)           | RATE_LIMITED      |
| 5xx                                             | OPERATION_FAILED  |
| other 4xx (the API refused the arguments)       | INVALID_INPUT     |
| 2xx with a truncated, non-JSON or empty body    | INVALID_RESPONSE  |

Reaching real public APIs: `LiveEnvironment(base_urls={"random_joke": "https://..."})` (or
`pytest --resili-env=live --resili-live-base-url random_joke=https://...`) sends the same
requests there: GET services get their arguments as query parameters, POST services as a JSON
body, and a JSON object answer becomes the call's output (any other JSON value is wrapped as
`{"data": value}`). Services without a base URL are not offered to the agent.

`api_key` goes as `Authorization: Bearer KEY`, what `resilibench serve-live --api-key KEY` asks
of its callers (`--resili-live-api-key`, or `RESILIBENCH_LIVE_API_KEY`), with the requests to
one origin only, `key_origin` (the serve-live's; by default the one origin the base URLs share,
key_scope.py): a public API named beside it never sees the key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import httpx

from pytest_resilibench.base.names import FLOW_PARAMS
from pytest_resilibench.base.redact import register_secret
from pytest_resilibench.core.registry import ToolRegistry
from pytest_resilibench.core.simulator import CallResult, EpisodeKey
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.servers.live.key_scope import key_origin as scoped_origin
from pytest_resilibench.servers.live.key_scope import origin
from pytest_resilibench.servers.live.registry import DEFAULT_TIMEOUT_S, live_registry
from pytest_resilibench.servers.live.server import REQUEST_KEY_HEADER
from pytest_resilibench.servers.live.services import SERVICES

__all__ = ["LiveEnvironment", "check_serve_live", "request_key"]

_METHODS = {s.name: s.method for s in SERVICES}
# Values the simulator also leaves to data flow rather than to the task.


class LiveEnvironment:
    """The live services (ours on loopback, or real ones) as an `Environment`.

    `inputs` are the task's bound values: a call that contradicts one is refused as
    INVALID_INPUT without a request, as the simulator does. `episode` keys the server-side
    luck (`X-Resili-Request`), so every agent meets the same faults on the same calls."""

    def __init__(
        self,
        base_urls: Mapping[str, str],
        *,
        registry: ToolRegistry | None = None,
        inputs: Mapping[str, Any] | None = None,
        episode: EpisodeKey | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.AsyncClient | None = None,
        api_key: str | None = None,
        key_origin: str | None = None,
    ) -> None:
        if api_key is not None:
            register_secret(api_key)  # a service that echoes it gets it masked in the record
        self._auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.registry = registry if registry is not None else live_registry()
        self.base_urls = {k: v.rstrip("/") for k, v in base_urls.items()}
        # The services whose requests carry the key: those on its origin (ValueError: base
        # URLs on several origins and none named).
        keyed = scoped_origin(key_origin, self.base_urls.values()) if api_key else None
        self._keyed = frozenset(name for name, url in self.base_urls.items()
                                if keyed is not None and origin(url) == keyed)
        self.inputs = dict(inputs or {})
        self.episode = episode
        self.timeout_s = timeout_s
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout_s))
        self._own_client = client is None
        self._calls: dict[str, int] = {}
        self.clock_s = 0.0
        self.history: list[CallResult] = []

    @classmethod
    def for_episode(cls, task: Task, base_urls: Mapping[str, str], *, seed: int,
                    repeat: int = 0, **options: Any) -> LiveEnvironment:
        """The environment of one episode of a live task, keyed like the simulator's."""
        return cls(base_urls, inputs=task.inputs, episode=EpisodeKey(seed, task.id, repeat),
                   **options)

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(n for n in self.registry.names if n in self.base_urls)

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    async def call(self, name: str, arguments: Any) -> CallResult:
        if not isinstance(name, str) or name not in self.registry or name not in self.base_urls:
            # Nothing was sent, so the episode's call counts are untouched (as in the simulator).
            return CallResult(
                tool=str(name), arguments=arguments, call_index=0, ok=False, output=None,
                error_code="UNKNOWN_TOOL", message=f"unknown tool {name!r}", latency_s=0.0,
                clock_s=self.clock_s, success_probability=None, deterministic=True)
        n = self._calls[name] = self._calls.get(name, 0) + 1
        if arguments is None:
            arguments = {}
        problem = self._local_problem(arguments)
        if problem is not None:
            result = self._result(name, arguments, n, None, "INVALID_INPUT", problem, 0.0, True)
        else:
            result = await self._request(name, arguments, n)
        self.history.append(result)
        return result

    def _local_problem(self, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        for param, value in arguments.items():
            if param not in FLOW_PARAMS and param in self.inputs and value != self.inputs[param]:
                return f"{param} {value!r} is not available to this task"
        return None

    async def _request(self, name: str, arguments: dict[str, Any], n: int) -> CallResult:
        url = self.base_urls[name]
        headers = dict(self._auth) if name in self._keyed else {}
        if self.episode is not None:
            headers[REQUEST_KEY_HEADER] = request_key(self.episode, name, n)
        start = time.perf_counter()
        try:
            if _METHODS.get(name, "GET") == "POST":
                request = self._client.build_request("POST", url, json=arguments,
                                                     headers=headers)
            else:
                request = self._client.build_request("GET", url, params=_query(arguments),
                                                     headers=headers)
        except (httpx.HTTPError, ValueError, TypeError) as exc:
            return self._result(name, arguments, n, None, "INVALID_INPUT",
                                f"could not build a request: {exc}", 0.0, True)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException:
            return self._fail(name, arguments, n, "TIMEOUT",
                              f"{name} did not answer within {self.timeout_s:g}s", start)
        except (httpx.HTTPError, OSError) as exc:  # refused, reset, dropped, bad URL
            return self._fail(name, arguments, n, "NETWORK_ERROR",
                              f"could not reach {url}: {_describe(exc)}", start)
        try:
            try:
                body = await response.aread()
            except httpx.TimeoutException:
                return self._fail(name, arguments, n, "TIMEOUT",
                                  f"{name} stopped sending within {self.timeout_s:g}s", start)
            except (httpx.HTTPError, OSError) as exc:
                return self._fail(name, arguments, n, "INVALID_RESPONSE",
                                  f"{name} sent a truncated response: {_describe(exc)}", start)
        finally:
            await response.aclose()
        return self._answer(name, arguments, n, response, body, start)

    def _answer(self, name: str, arguments: dict[str, Any], n: int, response: httpx.Response,
                body: bytes, start: float) -> CallResult:
        status = response.status_code
        if status == 429:
            retry = response.headers.get("Retry-After")
            hint = f", retry after {retry}s" if retry else ", retry later"
            return self._fail(name, arguments, n, "RATE_LIMITED",
                              f"{name} rejected the request: too many requests{hint}", start)
        if status >= 500:
            return self._fail(name, arguments, n, "OPERATION_FAILED",
                              f"{name} failed with HTTP {status}", start)
        if status >= 400:
            detail = _error_detail(body) or f"HTTP {status}"
            return self._fail(name, arguments, n, "INVALID_INPUT",
                              f"{name} refused the request: {detail}", start,
                              deterministic=status in (400, 404, 422))
        if not 200 <= status < 300:
            return self._fail(name, arguments, n, "INVALID_RESPONSE",
                              f"{name} answered HTTP {status}", start)
        try:
            value = json.loads(body)
        except ValueError:
            return self._fail(name, arguments, n, "INVALID_RESPONSE",
                              f"{name} returned a response that could not be decoded", start)
        output = value if isinstance(value, dict) else {"data": value}
        latency = self._advance(start)
        return self._result(name, arguments, n, output, None, "ok", latency, False)

    def _advance(self, start: float) -> float:
        latency = round(time.perf_counter() - start, 4)
        self.clock_s = round(self.clock_s + latency, 4)
        return latency

    def _fail(self, name: str, arguments: Any, n: int, code: str, message: str, start: float,
              *, deterministic: bool = False) -> CallResult:
        latency = self._advance(start)
        return self._result(name, arguments, n, None, code, message, latency, deterministic)

    def _result(self, name: str, arguments: Any, n: int, output: dict[str, Any] | None,
                code: str | None, message: str, latency: float,
                deterministic: bool) -> CallResult:
        return CallResult(
            tool=name, arguments=arguments, call_index=n, ok=code is None, output=output,
            error_code=code, message=message if code is None else f"{code}: {message}",
            latency_s=latency, clock_s=self.clock_s, success_probability=None,
            deterministic=deterministic)


def request_key(episode: EpisodeKey, tool: str, n: int) -> str:
    """The key of the n-th call of `tool` in an episode: what keys the server's draws."""
    return f"{episode.seed}/{episode.task_id}/{episode.repeat}/{tool}/{n}"


def _query(arguments: Mapping[str, Any]) -> list[tuple[str, str | int | float | bool | None]]:
    """Arguments as query parameters: lists repeat the key, scalars are sent as text."""
    out: list[tuple[str, str | int | float | bool | None]] = []
    for key, value in arguments.items():
        values = value if isinstance(value, list) else [value]
        for v in values:
            out.append((key, v if isinstance(v, str) else json.dumps(v)))
    return out


def check_serve_live(url: str, *, api_key: str | None,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """One `GET /` to a `resilibench serve-live` a run names, with the key it will send there
    (None: none): ValueError when the server refuses it (401/403) or cannot be reached, so a
    run stops at start-up instead of failing every call. Any other answer passes (the
    index, `GET /`, has no seeded faults; what the services do is the episodes' business)."""
    root = origin(url) + "/"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    option = "--resili-live-api-key (or $RESILIBENCH_LIVE_API_KEY)"
    try:
        response = httpx.get(root, headers=headers, timeout=timeout_s)
    except (httpx.HTTPError, OSError) as exc:
        raise ValueError(f"could not reach the live services at {root}: {_describe(exc)}; "
                         "check --resili-live-server / --resili-live-base-url") from None
    if response.status_code in (401, 403):
        detail = _error_detail(response.content) or f"HTTP {response.status_code}"
        said = "refused the key it was sent" if api_key else "asks for a key and none was set"
        raise ValueError(f"the live services at {root} {said} ({detail}); check {option}")


def _error_detail(body: bytes) -> str | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    return error if isinstance(error, str) else None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
