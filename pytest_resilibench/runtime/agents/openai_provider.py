"""The OpenAI-compatible provider: any chat-completions endpoint through the real `openai` client.

`base_url` reaches OpenAI itself, vLLM, Ollama, llama.cpp servers, most vendors and our own
`testserver`. `api="responses"` speaks OpenAI's Responses API instead (`responses.py`), with
the model's reasoning carried across turns. Which generation fields a model takes is its
family's (`profiles.py`). The retry policy is ours, not the client's (its `max_retries` is
0), so every retry is counted: 408/409/5xx, timeouts, connection errors and bodies that are
not completions are retried with exponential backoff and jitter; when the retries are exhausted,
or the endpoint refuses the request outright (401, 404, 400 ...),
`InfrastructureError` ends the episode as `error`, counted apart from the agent's failures.
A limit of the model itself is no infrastructure error (`ModelLimitError`, `model_limit`): a
400 saying the context window overflowed, a refusal (`finish_reason: "content_filter"` or a
`refusal` message; OpenAI's chat API reference), a reply cut at the length limit
(`finish_reason: "length"`; Responses API: `status: "incomplete"` with its reason) end the
episode as the model's failure, scored.
A 429 is no fault but the provider's limit: it spends none of `max_retries`; the request
waits out Retry-After and goes again, and the adaptive limiter (`limiter.py`: AIMD, shared by
the processes of a run) sends fewer at once. Only `max_wait_s` of waiting on limits for one
request (default 10 minutes) makes it an `InfrastructureError`, naming the last 429.
After `max_consecutive_errors` requests given up in a row the model is taken as unusable: the
requests that follow are not sent but fail at once with that reason; `max_cost_usd` stops
starting new episodes once this agent's spend (`pricing.py`) passes it.

The jitter is a keyed draw (`rng`) of the request and the attempt, so it desynchronises
concurrent requests without making anything depend on global random state; timing only ever
changes wall time, never a reply. The API key lives inside the client alone: it is no part of
the cache key, the stats, the repr or any error message.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, NamedTuple, TypeVar
from urllib.parse import urlsplit

import httpx
import openai

from pytest_resilibench.base import rng
from pytest_resilibench.base.names import APIS, REPEAT_HEADER, TASK_HEADER, ModelLimit
from pytest_resilibench.base.redact import redact, register_secret, register_url_credentials
from pytest_resilibench.runtime.agents.cache import CallKey, ModelCallCache, public_url
from pytest_resilibench.runtime.agents.limiter import (
    DEFAULT_MAX_WAIT_S,
    AdaptiveLimiter,
    FileStore,
    Limits,
    RateLimitWait,
    read_limits,
    shared_path,
)
from pytest_resilibench.runtime.agents.pricing import Price, cost_usd
from pytest_resilibench.runtime.agents.profiles import (
    AUTO,
    REQUEST_OPTIONS,
    check_api,
    family_of,
    request_params,
)
from pytest_resilibench.runtime.agents.responses import (
    ReasoningMemo,
    parse_response,
    responses_body,
    usage_counts,
)
from pytest_resilibench.runtime.protocol import (
    InfrastructureError,
    MalformedReply,
    ModelLimitError,
    ModelReply,
    ModelRequest,
    ToolCall,
)

__all__ = ["APIS", "Failure", "MalformedReply", "OpenAIAgent", "ProviderStats", "Sent",
           "decode_body", "error_message", "parse_completion", "status_failure"]

_T = TypeVar("_T")


PLACEHOLDER_KEY = "resilibench-no-key"  # for local servers that want no key at all
_RETRY_AFTER_CAP_S = 300.0
PROBE_MESSAGES = ({"role": "user", "content": "Reply with the single word OK."},)
PROBE_TOKENS = 16  # the Responses API's smallest max_output_tokens


@dataclass
class ProviderStats:
    """What the provider did, apart from the agent's results: the summary's `providers`, the
    report's "Model requests" table (analysis.py). `faults` counts failed attempts by kind;
    `infra_errors` the requests given up; `not_sent` those failed at once after too many
    errors in a row or past the cost cap; `replayed_tokens` what cache hits would have cost
    (not spent); `reasoning_items_sent` the reasoning items sent back to the Responses API.
    The limiter's (`limiter.py`): `window` the concurrency limit (all processes) at the end,
    `limit_wait_s` the wall time while requests waited on limits (429s' Retry-After, a
    window the limits shrank, --resili-rpm/-tpm; summed over processes), `first_at`/`last_at`
    (wall clock) the first request sent and the last reply, `busy_s` requests in flight
    integrated over time (mean concurrency: busy / span)."""

    requests: int = 0
    api_calls: int = 0
    retries: int = 0
    infra_errors: int = 0
    not_sent: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    replayed_tokens: int = 0
    reasoning_items_sent: int = 0
    cost_usd: float | None = None
    faults: Counter[str] = field(default_factory=Counter)
    window: int = 0
    limit_wait_s: float = 0.0
    first_at: float | None = None
    last_at: float | None = None
    busy_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "api_calls": self.api_calls, "retries": self.retries,
                "infra_errors": self.infra_errors, "not_sent": self.not_sent,
                "cache_hits": self.cache_hits,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "reasoning_tokens": self.reasoning_tokens,
                "cached_tokens": self.cached_tokens, "replayed_tokens": self.replayed_tokens,
                "reasoning_items_sent": self.reasoning_items_sent,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
                "faults": dict(sorted(self.faults.items())),
                "window": self.window, "limit_wait_s": round(self.limit_wait_s, 3),
                "first_at": self.first_at, "last_at": self.last_at,
                "busy_s": round(self.busy_s, 3)}


@dataclass(frozen=True)
class Failure:
    """One attempt that failed: what `OpenAIAgent.send` retries, waits out or gives up on."""

    kind: str  # rate_limit, server_error, timeout, connection, malformed, refused
    message: str
    retryable: bool
    retry_after_s: float | None = None
    status: int | None = None
    limits: Limits = field(default_factory=Limits)


class Sent(NamedTuple, Generic[_T]):
    """One attempt that succeeded: its value, what its headers say of the limits, and the
    tokens it counts against a tokens-per-minute budget."""

    value: _T
    limits: Limits
    tokens: int


class OpenAIAgent:
    """An `Agent` answered by a chat-completions (or Responses) endpoint.

    `model` is the API's model name (an ``openai:`` prefix is dropped); `name` defaults to it.
    The key is `api_key`, else ``OPENAI_API_KEY``, else, for a non-OpenAI `base_url` (a local
    server), a placeholder. At most `max_concurrency` requests are in flight at once: the
    ceiling of the adaptive limit (`limiter.py`), shared with the other processes of this
    host when `shared_limit` (the plugin's runs); `rpm`/`tpm` are known budgets per minute,
    `max_wait_s` what one request may wait on limits before it is an infra error.
    `temperature` is `profiles.AUTO` (the model family's default), None (the server's) or a
    number; `model_args` are extra request fields, passed through, save the client's request
    options `extra_headers`, `extra_query` and `extra_body`, sent as the `openai` client's
    `create(...)` sends them (HTTP headers, URL query, fields merged into the body). Raises
    ValueError, naming the option, for a value the model's family refuses.

    The default timeout is the `openai` client's own (10 minutes): a long reasoning turn is
    legitimate. It bounds each attempt as a whole (connect, send, wait, read: `_attempt`). A
    timed-out request is retried like any other transient failure, so one request may wait
    up to (`max_retries` + 1) x `timeout_s` plus the backoff.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | str | None = AUTO,
        seed: int | None = None,
        model_args: Mapping[str, Any] | None = None,
        api: str = "chat",
        timeout_s: float = 600.0,
        max_retries: int = 6,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        cache: ModelCallCache | None = None,
        max_concurrency: int = 32,
        max_consecutive_errors: int | None = 10,
        price: Price | None = None,
        max_cost_usd: float | None = None,
        name: str | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        shared_limit: bool = False,
        api_version: str | None = None,
    ) -> None:
        model = model.removeprefix("openai:")
        if not model:
            raise ValueError("the model name is empty")
        if max_retries < 0 or max_concurrency < 1 or timeout_s <= 0:
            raise ValueError("need max_retries >= 0, max_concurrency >= 1 and timeout_s > 0")
        if max_wait_s <= 0:
            raise ValueError("max_wait_s must be > 0")
        if backoff_base_s < 0 or backoff_max_s < 0:
            raise ValueError("backoff times must be >= 0")
        if api not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}, got {api!r}")
        check_api(model, api)
        if max_cost_usd is not None and price is None:
            raise ValueError(f"--resili-max-cost: no price known for {model!r} (give one with "
                             f"--resili-prices)")
        self.model = model
        self.name = name or model
        self.base_url = base_url
        self.api = api
        self.params = request_params(model, temperature=temperature, seed=seed,
                                     model_args=model_args)
        self.price = price
        self.max_cost_usd = max_cost_usd
        self.max_consecutive_errors = max_consecutive_errors
        self._consecutive_errors = 0
        self._stopped: str | None = None  # why requests are no longer sent
        self._memo = ReasoningMemo(max(4096, 64 * max_concurrency)) if api == "responses" \
            else None
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.cache = cache
        self.stats = ProviderStats()
        self.max_wait_s = max_wait_s
        store = FileStore(shared_path(model, base_url)) if shared_limit else None
        self.limiter = AdaptiveLimiter(max_concurrency, store=store, rpm=rpm, tpm=tpm)
        self._slot_wait_s = 0.0  # the limiter's waits already in `stats`
        self.timeout_s = timeout_s
        self.api_version = api_version
        if api_version is not None:  # Azure OpenAI: `model` names a deployment
            self._client: openai.AsyncOpenAI = _azure_client(
                api_key, base_url, api_version, timeout_s)
            self.base_url = str(self._client.base_url)
            return
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key:
            _refuse_user_info_beside(key, base_url)
        key = key or _placeholder_for(base_url)
        register_secret(key)  # a server that echoes it in an error cannot get it written
        register_url_credentials(base_url)  # httpx sends user info as a Basic header
        self._client = openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout_s,
                                          max_retries=0)

    def __repr__(self) -> str:
        shown = redact(self.base_url) if self.base_url else None  # no user info
        return f"OpenAIAgent({self.model!r}, base_url={shown!r})"

    def call_key(self, request: ModelRequest) -> CallKey:
        # The API joins the key only when it is not chat, so older caches keep their keys.
        params = self.params if self.api == "chat" else {**self.params, "api": self.api}
        return CallKey(model=self.model, base_url=self.base_url or "", messages=request.messages,
                       tools=request.tools, params=params, repeat=request.repeat,
                       task_id=request.task_id)

    def explain_miss(self, request: ModelRequest) -> str:
        if self.cache is None:
            return "no cache"
        return self.cache.explain_miss(self.call_key(request))

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.stats.requests += 1
        key = self.call_key(request) if self.cache is not None else None
        if self.cache is not None and key is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self.stats.cache_hits += 1
                reply = self._replayed(request, cached)
                limit = model_limit(reply)
                if limit is not None:
                    raise ModelLimitError(f"model {self.model!r}: {limit[1]}",
                                          stop_reason=limit[0])
                return reply
        self._check_not_stopped(request)
        reply = await self._ask_with_retries(request, self.params)
        self.account(reply)
        if self._memo is not None:
            self._memo.remember(request.messages, reply)
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)
        limit = model_limit(reply)
        if limit is not None:
            raise ModelLimitError(f"model {self.model!r}: {limit[1]}", stop_reason=limit[0])
        return reply

    async def probe(self) -> None:
        """One minimal request (no tools, a few tokens) through the same path and options, so
        a refused key, model or option stops the run before its first episode. Raises
        `InfrastructureError`; transient failures are retried as usual."""
        limit = family_of(self.model).token_limit
        params = {k: v for k, v in self.params.items()
                  if k not in ("max_tokens", "max_completion_tokens")}
        params[limit] = PROBE_TOKENS
        request = ModelRequest(messages=[dict(m) for m in PROBE_MESSAGES],
                               task_id="resilibench-probe")
        # Through the cache too: a run replayed from the cache needs no network at all.
        key = None
        if self.cache is not None:
            key = replace(self.call_key(request), params={**params, "probe": True})
            if self.cache.get(key) is not None:
                return
        reply = await self._ask_with_retries(request, params)
        self.account(reply)
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)

    def _replayed(self, request: ModelRequest, reply: ModelReply) -> ModelReply:
        """A cache hit: its tokens were paid for by an earlier run, so they count as
        `replayed_tokens`, not as spend."""
        if self._memo is not None:
            self._memo.remember(request.messages, reply)
        usage = reply.usage
        replayed = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        self.stats.replayed_tokens += replayed
        return ModelReply(content=reply.content, tool_calls=reply.tool_calls,
                          usage={"prompt_tokens": 0, "completion_tokens": 0,
                                 "replayed_tokens": replayed}, raw=reply.raw)

    def account(self, reply: ModelReply) -> None:
        """Count a reply's tokens and cost in `stats` (what the cost cap reads)."""
        usage, stats = reply.usage, self.stats
        stats.prompt_tokens += usage.get("prompt_tokens", 0)
        stats.completion_tokens += usage.get("completion_tokens", 0)
        stats.reasoning_tokens += usage.get("reasoning_tokens", 0)
        stats.cached_tokens += usage.get("cached_tokens", 0)
        cost = cost_usd(self.price, {"prompt": usage.get("prompt_tokens", 0),
                                     "completion": usage.get("completion_tokens", 0),
                                     "cached": usage.get("cached_tokens", 0)})
        if cost is not None:
            stats.cost_usd = (stats.cost_usd or 0.0) + cost

    def _check_not_stopped(self, request: ModelRequest) -> None:
        """Fail without sending when the model is stopped, or when a new episode would start
        past the cost cap (episodes already started finish)."""
        reason = self._stopped
        starts = not any(m.get("role") == "assistant" for m in request.messages)
        if reason is None and starts and self.max_cost_usd is not None \
                and (self.stats.cost_usd or 0.0) >= self.max_cost_usd:
            reason = (f"not sent: the spend on {self.model} (${self.stats.cost_usd:.4f}) "
                      f"passed --resili-max-cost (${self.max_cost_usd:g} for this process)")
        if reason is not None:
            self.stats.not_sent += 1
            raise InfrastructureError(reason, retryable=False)

    async def _ask_with_retries(self, request: ModelRequest,
                                params: Mapping[str, Any]) -> ModelReply:
        return await self.send(request, lambda: self._attempt(request, params))

    async def send(self, request: ModelRequest,
                   try_once: Callable[[], Awaitable[Sent[_T] | Failure]], *,
                   jitter_key: int | None = None) -> _T:
        """One request through this agent's limiter, retries and stops: `try_once` makes one
        HTTP try (its slot taken). The one retry loop: the provider's own requests and those
        of a framework's client (`transport.py`) go through it. Raises `InfrastructureError`
        when it gives up, `ModelLimitError` for a 400 saying the context overflowed.
        `request` says whose request it is: its turns rank it in line, and with no
        `jitter_key` its task, repeat and length key the jitter."""
        if jitter_key is None:
            jitter_key = rng.key_int(self.model, request.task_id, request.repeat,
                                     len(request.messages))
        limiter = self.limiter
        deadline = time.time() + self.max_wait_s
        # The episode's turns so far: the fewest go first (the limiter's line, limiter.py).
        rank = sum(1 for message in request.messages if message.get("role") == "assistant")
        attempt = refusals = 0
        last_429 = ""

        def why() -> str:
            self.stats.infra_errors += 1
            cause = f"; the last: {last_429}" if last_429 else ""
            return (f"model {self.model!r} at {self._where()}: rate limited: waited "
                    f"{self.max_wait_s:g} s for the provider's limits (--resili-max-wait)"
                    f"{cause}")

        while True:
            try:
                ticket = await limiter.acquire(deadline, why, rank)
            except RateLimitWait as exc:
                self._sync_limiter()
                raise InfrastructureError(str(exc), status=429, retryable=True) from None
            try:  # the model may have been stopped while this request waited in line
                self._check_not_stopped(request)
            except InfrastructureError:
                limiter.release(ticket, "other")
                raise
            self.stats.api_calls += 1
            try:
                result = await try_once()
            except BaseException:  # cancelled in flight (an interrupted run): free the slot
                limiter.release(ticket, "other")
                raise
            if not isinstance(result, Failure):
                limiter.release(ticket, "ok", result.limits, result.tokens)
                self._sync_limiter()
                self._consecutive_errors = 0
                return result.value
            failure = result
            limited = failure.kind == "rate_limit"
            limiter.release(ticket, "limited" if limited else "other", failure.limits)
            self._sync_limiter()
            self.stats.faults[failure.kind] += 1
            if limited:
                # The provider's limit, not a fault: no retry spent; wait it out (what it
                # asks, or backoff when it says nothing), then go again.
                last_429 = failure.message
                self.stats.retries += 1
                wait = self._backoff_s(refusals, jitter_key, failure.retry_after_s)
                refusals += 1
                if time.time() + wait > deadline:
                    raise InfrastructureError(why(), status=429, retryable=True)
                async with limiter.held():
                    await asyncio.sleep(wait)
                continue
            if failure.kind == "context_overflow":
                raise ModelLimitError(f"model {self.model!r}: {failure.message}",
                                      stop_reason="context_overflow")
            if not failure.retryable or attempt >= self.max_retries:
                self.stats.infra_errors += 1
                tries = f"after {attempt + 1} attempt{'s' * bool(attempt)}"
                message = f"model {self.model!r} at {self._where()}: {failure.message}"
                self._count_error(failure.message)
                raise InfrastructureError(f"{message} ({tries})", status=failure.status,
                                          retryable=failure.retryable)
            self.stats.retries += 1
            await asyncio.sleep(self._backoff_s(attempt, jitter_key, failure.retry_after_s))
            attempt += 1

    def _sync_limiter(self) -> None:
        """The limiter's figures into `stats` (its waits for a slot added once)."""
        limiter, stats = self.limiter, self.stats
        stats.window = int(limiter.window)
        stats.first_at, stats.last_at = limiter.first_at, limiter.last_at
        stats.busy_s = limiter.busy_s
        stats.limit_wait_s += limiter.wait_s - self._slot_wait_s
        self._slot_wait_s = limiter.wait_s

    def _count_error(self, message: str) -> None:
        """Requests given up in a row (refused, or out of retries): past the limit the model
        is stopped. A given-up request already cost a full retry budget, so a run that keeps
        failing this way is an outage or a misconfiguration, not bad luck."""
        self._consecutive_errors += 1
        limit = self.max_consecutive_errors
        if limit is not None and self._consecutive_errors >= limit and self._stopped is None:
            self._stopped = (f"not sent: {limit} requests to {self.model} failed in a row "
                             f"(--resili-max-consecutive-errors); the last: {message}")

    def _backoff_s(self, attempt: int, jitter_key: int, retry_after_s: float | None) -> float:
        """Exponential backoff with equal jitter, at least what Retry-After asks."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** min(attempt, 32))
        delay = ceiling * (0.5 + 0.5 * rng.uniform("backoff", jitter_key, attempt))
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, _RETRY_AFTER_CAP_S))
        return delay

    def _body(self, request: ModelRequest, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The path and body of a request in this agent's API."""
        if self.api == "responses":
            body = responses_body(self.model, request.messages, request.tools, params,
                                  self._memo)
            self.stats.reasoning_items_sent += sum(
                1 for item in body["input"] if item.get("type") == "reasoning")
            return "/responses", body
        chat: dict[str, Any] = {"model": self.model, "messages": request.messages, **params}
        if request.tools:
            chat["tools"] = request.tools
        return "/chat/completions", chat

    async def _attempt(self, request: ModelRequest,
                       params: Mapping[str, Any]) -> Sent[ModelReply] | Failure:
        """One HTTP request (its slot already taken): the reply and what its headers say of
        the limits, or the failure."""
        fields = {k: v for k, v in params.items() if k not in REQUEST_OPTIONS}
        path, body = self._body(request, fields)
        headers = {**params.get("extra_headers", {}),
                   TASK_HEADER: request.task_id, REPEAT_HEADER: str(request.repeat)}
        try:
            # The client's generic `post` (its documented route for raw requests): the
            # client's URL, auth, timeouts and error types, without the typed-request
            # transform of `chat.completions.create` (half the client's CPU per request),
            # and the body comes back as text for our tolerant parser; `httpx.Response`
            # (a documented `cast_to`) keeps the rate-limit headers of a success too.
            # The client's timeout is httpx's, whose read timeout bounds each wait for
            # data, not the whole body (httpx docs/advanced/timeouts.md: connect, read,
            # write and pool timeouts): a server trickling a byte at a time would hold
            # the request for ever. asyncio.timeout bounds the attempt as a whole.
            async with asyncio.timeout(self.timeout_s):
                # `model_args`' request options go as `create(extra_headers=, extra_query=,
                # extra_body=)` sends them: the client's `headers`, `params` and `extra_json`.
                response = await self._client.post(
                    path, cast_to=httpx.Response, body=body,
                    options={"headers": headers, "params": params.get("extra_query", {}),
                             "extra_json": params.get("extra_body", {})})
                text = response.text
        except openai.APIStatusError as exc:
            return _status_failure(exc)
        except (openai.APITimeoutError, TimeoutError):
            return Failure("timeout", "the request timed out", retryable=True)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            return Failure("connection", f"connection error ({type(cause).__name__})",
                            retryable=True)
        try:
            data = decode_body(text)
            reply = parse_response(data) if self.api == "responses" else parse_completion(data)
            return Sent(reply, read_limits(response.headers), _tokens(reply))
        except (ValueError, MalformedReply) as exc:
            return Failure("malformed", f"malformed reply body: {exc}", retryable=True)

    def _where(self) -> str:
        return public_url(self.base_url) or "api.openai.com"

    async def aclose(self) -> None:
        self.limiter.leave()  # a worker done with its share hands it to the others
        await self._client.close()


def _tokens(reply: ModelReply) -> int:
    """What a reply counts against a tokens-per-minute budget."""
    usage = reply.usage
    return int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))


def _azure_client(api_key: str | None, endpoint: str | None, api_version: str,
                  timeout_s: float) -> openai.AsyncAzureOpenAI:
    """openai's Azure client: the key in an `api-key` header, each request to
    `ENDPOINT/openai/deployments/DEPLOYMENT/...?api-version=VERSION`
    (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference). The endpoint and
    key come from the options or from AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY."""
    endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
    if not endpoint:
        raise ValueError("--resili-api-version (Azure OpenAI) needs the resource's endpoint: "
                         "--resili-base-url=https://RESOURCE.openai.azure.com or "
                         "AZURE_OPENAI_ENDPOINT")
    key = api_key or os.environ.get("AZURE_OPENAI_API_KEY")
    if not key:
        raise ValueError("AZURE_OPENAI_API_KEY is not set (needed for Azure OpenAI)")
    register_secret(key)
    register_url_credentials(endpoint)
    return openai.AsyncAzureOpenAI(api_key=key, azure_endpoint=endpoint,
                                   api_version=api_version, timeout=timeout_s, max_retries=0)


def _refuse_user_info_beside(key: str, base_url: str | None) -> None:
    """httpx sends a URL's user info as `Authorization: Basic base64(user:password)` (its
    `Client._build_request_auth`: BasicAuth from the URL when no auth is given), which replaces
    the openai client's `Authorization: Bearer KEY`: a base URL with user info and an API key
    would never send the key. (Azure's key goes in an `api-key` header, which it leaves.)"""
    if base_url is None:
        return
    parts = urlsplit(base_url)
    if parts.username is None and parts.password is None:
        return
    register_secret(key)
    register_url_credentials(base_url)
    raise ValueError(
        f"--resili-base-url {redact(base_url)} carries user info (user:password@), which the "
        f"openai client sends as 'Authorization: Basic ...' in place of the API key, so the "
        f"key (OPENAI_API_KEY) would never be sent: drop the user info from the URL and give "
        f"the key in OPENAI_API_KEY, or unset OPENAI_API_KEY to authenticate with the URL's "
        f"user info alone")


def _placeholder_for(base_url: str | None) -> str:
    host = urlsplit(base_url).hostname if base_url else "api.openai.com"
    if host is None or host.endswith("openai.com"):
        raise ValueError("OPENAI_API_KEY is not set (needed for the OpenAI API; a local "
                         "--resili-base-url needs none)")
    return PLACEHOLDER_KEY


def _status_failure(exc: openai.APIStatusError) -> Failure:
    return status_failure(exc.status_code, exc.response.headers,
                          error_message(exc.body, str(exc.message)))


def status_failure(status: int, headers: Mapping[str, str], said: str) -> Failure:
    """What an HTTP error status means for a model request (`said`: the server's message):
    429 the provider's limit, waited out; 5xx, 408, 409 transient; a 400 saying the context
    overflowed the model's limit; any other a refusal."""
    message = f"HTTP {status}: {said}"
    if status == 429:
        limits = read_limits(headers)
        # Wait what it asks, or until the budget it says is spent resets.
        waits = [w for w in (limits.retry_after_s, limits.exhausted_for_s()) if w is not None]
        return Failure("rate_limit", message, retryable=True,
                        retry_after_s=max(waits) if waits else None, status=status,
                        limits=limits)
    if status >= 500:
        return Failure("server_error", message, retryable=True, status=status)
    if status in (408, 409):  # request timeout, lock conflict: worth another try
        return Failure("server_error", message, retryable=True, status=status)
    if status == 400 and _CONTEXT_OVERFLOW.search(message):
        return Failure("context_overflow", message, retryable=False, status=status)
    return Failure("refused", message, retryable=False, status=status)


# How servers say a request exceeds the model's context window: OpenAI's error code
# `context_length_exceeded` ("maximum context length is N tokens"), vLLM's and llama.cpp's
# wordings ("exceeds the available context size", "context window").
_CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context (?:size|window|length)"
    r"|too many tokens|exceeds? the (?:available )?context", re.IGNORECASE)


def model_limit(reply: ModelReply) -> tuple[ModelLimit, str] | None:
    """(stop reason, what happened) when a reply says the model hit a limit of its own: a
    refusal or a reply cut at the length limit; None for an ordinary reply."""
    raw = reply.raw
    if not isinstance(raw, Mapping):
        return None
    choices = raw.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        choice = choices[0]
        message = choice.get("message")
        refusal = message.get("refusal") if isinstance(message, Mapping) else None
        if isinstance(refusal, str) and refusal.strip():
            return "refusal", f"the model refused: {refusal.strip()[:200]}"
        reason = choice.get("finish_reason")
        if reason == "content_filter":
            return "refusal", "the reply was withheld by the content filter"
        if reason == "length":
            return "length", "the reply was cut at the model's length limit"
        return None
    if raw.get("status") == "incomplete":  # the Responses API
        details = raw.get("incomplete_details")
        why = details.get("reason") if isinstance(details, Mapping) else None
        if why == "content_filter":
            return "refusal", "the reply was withheld by the content filter"
        return "length", f"the reply is incomplete ({why or 'no reason given'})"
    return None


def error_message(body: object, fallback: str) -> str:
    """The server's message in an error body (parsed JSON), with its error code (or type)
    when it gave one; else `fallback`."""
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            kind = error.get("code") or error.get("type")
            return str(error["message"])[:300] + (f" [{kind}]" if isinstance(kind, str) else "")
    return fallback[:300]


_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_INT_DIGITS = 18  # below 2**63: a token count or an id, never a 4000-digit number


def _int_or_none(text: str) -> int | None:
    return int(text) if len(text.lstrip("-")) <= _MAX_INT_DIGITS else None


def _clean(value: Any) -> Any:
    """Lone surrogates (a `\\ud800` escape decodes to one) replaced by U+FFFD: no later
    encoding of the text (the next request, the cache, a report) can fail on them."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


def decode_body(text: str) -> Any:
    """A reply body as JSON, sanitised at the boundary so that whatever a server sends is at
    worst the agent's failure, never the harness's: absurd integers (a 4000-digit usage
    count) and NaN/Infinity become None, lone surrogates U+FFFD. ValueError when the body
    is not JSON at all."""
    return _clean(json.loads(text, parse_int=_int_or_none, parse_constant=lambda _: None))


def parse_completion(data: object) -> ModelReply:
    """A `ModelReply` from a chat-completion body, tolerant of what real servers send: null
    content, missing usage, arguments as objects or not JSON at all (passed through raw for the
    episode's parser), missing call ids, the legacy `function_call`. Raises `MalformedReply`
    when there is no message at all."""
    if not isinstance(data, Mapping):
        raise MalformedReply(f"expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise MalformedReply("no choices in the reply")
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        raise MalformedReply("the first choice has no message")
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        legacy = message.get("function_call")
        calls = [{"function": legacy}] if isinstance(legacy, Mapping) else []
    tool_calls = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = "" if arguments is None else json.dumps(arguments)
        call_id = call.get("id") if isinstance(call, Mapping) else None
        tool_calls.append(ToolCall(id=str(call_id or f"call_{index}"),
                                   name=str(function.get("name") or ""), arguments=arguments))
    usage = data.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    details = {name: group.get(key) if isinstance(group := usage.get(name), Mapping) else None
               for name, key in (("prompt_tokens_details", "cached_tokens"),
                                 ("completion_tokens_details", "reasoning_tokens"))}
    return ModelReply(
        content=_text(message.get("content")),
        tool_calls=tuple(tool_calls),
        usage=usage_counts(usage.get("prompt_tokens"), usage.get("completion_tokens"),
                           details["prompt_tokens_details"],
                           details["completion_tokens_details"]),
        raw=dict(data),
    )


def _text(content: object) -> str | None:
    """Content as text; a list of parts (some servers) is joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, Mapping) else str(part)
                       for part in content)
    return str(content)

