"""The OpenAI-compatible provider: any chat-completions endpoint through the real `openai` client.

`base_url` reaches OpenAI itself, vLLM, Ollama, llama.cpp servers, most vendors and our own
`testserver`. The retry policy is ours, not the client's (its `max_retries` is 0), so every
retry is counted: 429 (honouring Retry-After), 408/409/5xx, timeouts, connection errors and
bodies that are not chat completions are retried with exponential backoff and jitter; when the
retries are exhausted, or the endpoint refuses the request outright (401, 404, 400 ...),
`InfrastructureError` ends the episode as `error`, counted apart from the agent's failures.

The jitter is a keyed draw (`rng`) of the request and the attempt, so it desynchronises
concurrent requests without making anything depend on global random state; timing only ever
changes wall time, never a reply. The API key lives inside the client alone: it is no part of
the cache key, the stats, the repr or any error message.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import openai

from pytest_resilibench import rng
from pytest_resilibench.agents.base import (
    InfrastructureError,
    ModelReply,
    ModelRequest,
    ToolCall,
)
from pytest_resilibench.agents.cache import CallKey, ModelCallCache

__all__ = ["OpenAIAgent", "ProviderStats", "parse_completion"]

PLACEHOLDER_KEY = "resilibench-no-key"  # for local servers that want no key at all
TASK_HEADER = "x-resilibench-task"  # lets the test server count attempts per episode
REPEAT_HEADER = "x-resilibench-repeat"
_RETRY_AFTER_CAP_S = 300.0


class MalformedReply(ValueError):
    """The endpoint answered 200 with something that is not a chat completion."""


@dataclass
class ProviderStats:
    """What the provider did, for the report's infrastructure section (apart from the agent's
    results). `faults` counts failed attempts by kind; `infra_errors` the requests given up."""

    requests: int = 0
    api_calls: int = 0
    retries: int = 0
    infra_errors: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    faults: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "api_calls": self.api_calls, "retries": self.retries,
                "infra_errors": self.infra_errors, "cache_hits": self.cache_hits,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "faults": dict(sorted(self.faults.items()))}


@dataclass(frozen=True)
class _Failure:
    kind: str  # rate_limit, server_error, timeout, connection, malformed, refused
    message: str
    retryable: bool
    retry_after_s: float | None = None


class OpenAIAgent:
    """An `Agent` answered by a chat-completions endpoint.

    `model` is the API's model name (an ``openai:`` prefix is dropped); `name` defaults to it.
    The key is `api_key`, else ``OPENAI_API_KEY``, else, for a non-OpenAI `base_url` (a local
    server), a placeholder. At most `max_concurrency` requests are in flight at once.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = 0.0,
        seed: int | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 6,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        cache: ModelCallCache | None = None,
        max_concurrency: int = 32,
        name: str | None = None,
    ) -> None:
        model = model.removeprefix("openai:")
        if not model:
            raise ValueError("the model name is empty")
        if max_retries < 0 or max_concurrency < 1 or timeout_s <= 0:
            raise ValueError("need max_retries >= 0, max_concurrency >= 1 and timeout_s > 0")
        if backoff_base_s < 0 or backoff_max_s < 0:
            raise ValueError("backoff times must be >= 0")
        self.model = model
        self.name = name or model
        self.base_url = base_url
        self.params: dict[str, Any] = {
            k: v for k, v in (("temperature", temperature), ("seed", seed)) if v is not None}
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.cache = cache
        self.stats = ProviderStats()
        self._semaphore = asyncio.Semaphore(max_concurrency)
        key = api_key or os.environ.get("OPENAI_API_KEY") or _placeholder_for(base_url)
        self._client = openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout_s,
                                          max_retries=0)

    def __repr__(self) -> str:
        return f"OpenAIAgent({self.model!r}, base_url={self.base_url!r})"

    def call_key(self, request: ModelRequest) -> CallKey:
        return CallKey(model=self.model, base_url=self.base_url or "", messages=request.messages,
                       tools=request.tools, params=self.params, repeat=request.repeat,
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
                return cached
        reply = await self._ask_with_retries(request)
        self.stats.prompt_tokens += reply.usage.get("prompt_tokens", 0)
        self.stats.completion_tokens += reply.usage.get("completion_tokens", 0)
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)
        return reply

    async def _ask_with_retries(self, request: ModelRequest) -> ModelReply:
        jitter_key = rng.key_int(self.model, request.task_id, request.repeat,
                                 len(request.messages))
        for attempt in range(self.max_retries + 1):
            failure = await self._attempt(request)
            if isinstance(failure, ModelReply):
                return failure
            self.stats.faults[failure.kind] += 1
            if not failure.retryable or attempt == self.max_retries:
                self.stats.infra_errors += 1
                tries = f"after {attempt + 1} attempt{'s' * bool(attempt)}"
                raise InfrastructureError(
                    f"model {self.model!r} at {self._where()}: {failure.message} ({tries})")
            self.stats.retries += 1
            await asyncio.sleep(self._backoff_s(attempt, jitter_key, failure.retry_after_s))
        raise AssertionError("unreachable")

    def _backoff_s(self, attempt: int, jitter_key: int, retry_after_s: float | None) -> float:
        """Exponential backoff with equal jitter, at least what Retry-After asks."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0**attempt)
        delay = ceiling * (0.5 + 0.5 * rng.uniform("backoff", jitter_key, attempt))
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, _RETRY_AFTER_CAP_S))
        return delay

    async def _attempt(self, request: ModelRequest) -> ModelReply | _Failure:
        body: dict[str, Any] = {"model": self.model, "messages": request.messages, **self.params}
        if request.tools:
            body["tools"] = request.tools
        headers = {TASK_HEADER: request.task_id, REPEAT_HEADER: str(request.repeat)}
        async with self._semaphore:
            self.stats.api_calls += 1
            try:
                # The client's generic `post` (its documented route for raw requests): the
                # client's URL, auth, timeouts and error types, without the typed-request
                # transform of `chat.completions.create` (half the client's CPU per request),
                # and the body comes back as text for our tolerant parser.
                text = await self._client.post("/chat/completions", cast_to=str, body=body,
                                               options={"headers": headers})
            except openai.APIStatusError as exc:
                return _status_failure(exc)
            except openai.APITimeoutError:
                return _Failure("timeout", "the request timed out", retryable=True)
            except openai.APIConnectionError as exc:
                cause = exc.__cause__ or exc
                return _Failure("connection", f"connection error ({type(cause).__name__})",
                                retryable=True)
        try:
            return parse_completion(json.loads(text))
        except (json.JSONDecodeError, MalformedReply) as exc:
            return _Failure("malformed", f"malformed reply body: {exc}", retryable=True)

    def _where(self) -> str:
        return (self.base_url or "api.openai.com").split("?")[0]

    async def aclose(self) -> None:
        await self._client.close()


def _placeholder_for(base_url: str | None) -> str:
    host = urlsplit(base_url).hostname if base_url else "api.openai.com"
    if host is None or host.endswith("openai.com"):
        raise ValueError("OPENAI_API_KEY is not set (needed for the OpenAI API; a local "
                         "--resili-base-url needs none)")
    return PLACEHOLDER_KEY


def _status_failure(exc: openai.APIStatusError) -> _Failure:
    status = exc.status_code
    message = f"HTTP {status}: {_error_message(exc)}"
    if status == 429:
        return _Failure("rate_limit", message, retryable=True,
                        retry_after_s=_retry_after_s(exc.response.headers))
    if status >= 500:
        return _Failure("server_error", message, retryable=True)
    if status in (408, 409):  # request timeout, lock conflict: worth another try
        return _Failure("server_error", message, retryable=True)
    return _Failure("refused", message, retryable=False)


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])[:300]
    return str(exc.message)[:300]


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Retry-After-Ms (OpenAI's), else Retry-After in seconds or as an HTTP date."""
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (ValueError, TypeError, OverflowError):
        return None


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
    return ModelReply(
        content=_text(message.get("content")),
        tool_calls=tuple(tool_calls),
        usage={"prompt_tokens": _count(usage.get("prompt_tokens")),
               "completion_tokens": _count(usage.get("completion_tokens"))},
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


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
