"""A framework's OpenAI client through the provider's retries and limiter (`openai_provider.py`).

An agent framework (the OpenAI Agents SDK, LangChain) calls the model through its own
`openai.AsyncOpenAI` client, whose retries are its own (2 by default) and whose requests no
limiter holds. `retrying_client(client, provider)` is a copy of that client (`copy`: the
same key, base URL, headers and timeouts) that never retries itself (`max_retries=0`): its
HTTP requests go through `RetryingTransport`, which sends each model request through
`OpenAIAgent.send`, the one retry loop of the direct path: the same slots of the adaptive
limiter, the same retries of 408/409/5xx, timeouts, connection errors and bodies that are not
a reply, the same waits on 429s, the same stops after errors in a row or past the cost cap.
When it gives up the transport raises what the direct path raises (`InfrastructureError`,
`ModelLimitError` for a context overflow), which passes through the client and the framework
to the adapter (`model_failure` finds it in the exception's chain).

`model_failure` also reads the errors of a client that did not go through it (the openai
client's own exceptions) as the direct path reads them (`status_failure`): a 400 saying the
context overflowed is the model's limit, any other refusal and any transport failure an infra
error. The httpx docs on custom transports: https://www.python-httpx.org/advanced/transports/
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from typing import Any, cast

import httpx
import openai

from pytest_resilibench.base import rng
from pytest_resilibench.runtime.agents.limiter import read_limits
from pytest_resilibench.runtime.agents.openai_provider import (
    PLACEHOLDER_KEY,
    Failure,
    MalformedReply,
    OpenAIAgent,
    Sent,
    decode_body,
    error_message,
    parse_completion,
    status_failure,
)
from pytest_resilibench.runtime.agents.responses import parse_response
from pytest_resilibench.runtime.agents.run_options import request_options
from pytest_resilibench.runtime.protocol import (
    InfrastructureError,
    ModelLimitError,
    ModelReply,
    ModelRequest,
)

__all__ = ["RetryingTransport", "model_failure", "provider_for", "retrying_client"]

_MODEL_ROUTES = ("/chat/completions", "/responses")
# Headers that describe the body as it came over the wire: the rebuilt response carries it
# decoded, so they would make the client decode it again.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class RetryingTransport(httpx.AsyncBaseTransport):
    """httpx transport that sends each model request (POST .../chat/completions or
    .../responses) through `provider.send`; any other request goes straight through."""

    def __init__(self, provider: OpenAIAgent,
                 inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.provider = provider
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith(_MODEL_ROUTES):
            return await self.inner.handle_async_request(request)
        body = await request.aread()  # buffered, so every retry sends it again
        try:
            sent = json.loads(body)
        except ValueError:
            sent = None
        if not isinstance(sent, dict):  # not ours to judge: the server will say
            return await self.inner.handle_async_request(request)
        self.provider.stats.requests += 1
        model_request = ModelRequest(messages=_messages(sent))
        jitter = rng.key_int("transport", hashlib.blake2b(body, digest_size=8).hexdigest())
        return await self.provider.send(model_request, lambda: self._attempt(request),
                                        jitter_key=jitter)

    async def _attempt(self, request: httpx.Request) -> Sent[httpx.Response] | Failure:
        """One try, bounded as a whole as the direct path bounds it (`_attempt` there)."""
        try:
            async with asyncio.timeout(self.provider.timeout_s):
                response = await self.inner.handle_async_request(request)
                try:
                    content = await response.aread()
                finally:
                    await response.aclose()
        except (httpx.TimeoutException, TimeoutError):
            return Failure("timeout", "the request timed out", retryable=True)
        except httpx.TransportError as exc:
            return Failure("connection", f"connection error ({type(exc).__name__})",
                           retryable=True)
        if response.status_code >= 400:
            return status_failure(response.status_code, response.headers,
                                  error_message(_json_or_none(content),
                                                content.decode("utf-8", "replace")))
        tokens = 0
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            try:  # a stream is passed on as it is; any other body must be a reply
                reply = _parsed(request.url.path, content)
            except (ValueError, MalformedReply) as exc:
                return Failure("malformed", f"malformed reply body: {exc}", retryable=True)
            self.provider.account(reply)
            tokens = reply.usage.get("prompt_tokens", 0) + reply.usage.get("completion_tokens", 0)
        rebuilt = httpx.Response(
            response.status_code, content=content, request=request,
            headers=[(k, v) for k, v in response.headers.multi_items()
                     if k.lower() not in _WIRE_HEADERS])
        return Sent(rebuilt, read_limits(response.headers), tokens)

    async def aclose(self) -> None:
        await self.inner.aclose()


def retrying_client(client: openai.AsyncOpenAI, provider: OpenAIAgent) -> openai.AsyncOpenAI:
    """A copy of `client` whose model requests go through `provider`'s retries and limiter,
    and which never retries by itself."""
    # No timeout of its own: the openai client sets its timeouts on every request it sends.
    http = httpx.AsyncClient(transport=RetryingTransport(provider))
    # openai >= 3 types `http_client` as an httpx2 client and takes an httpx one as well (its
    # `_httpx2.is_legacy_httpx_async_client`); openai 1.x and 2.x take httpx's.
    return client.copy(http_client=cast(Any, http), max_retries=0)


def model_failure(exc: BaseException, *, model: str,
                  where: str | None = None) -> InfrastructureError | ModelLimitError | None:
    """What a model call's exception out of a framework is, read as the direct path reads it:
    ours as raised (`RetryingTransport`), an openai client's error classified as its status
    says (a context overflow: the model's limit; else an infra error); None for any other
    (the agent's own failure)."""
    for link in _chain(exc):
        if isinstance(link, (InfrastructureError, ModelLimitError)):
            return link
    at = f" at {where}" if where else ""
    for link in _chain(exc):
        if isinstance(link, openai.APIStatusError):
            failure = status_failure(link.status_code, link.response.headers,
                                     error_message(link.body, str(link.message)))
            said = f"model {model!r}{at}: {failure.message}"
            if failure.kind == "context_overflow":
                return ModelLimitError(said, stop_reason="context_overflow")
            return InfrastructureError(f"{said} (the framework's client)", status=failure.status,
                                       retryable=failure.retryable)
        if isinstance(link, (openai.APITimeoutError, openai.APIConnectionError)):
            what = "timed out" if isinstance(link, openai.APITimeoutError) else \
                "connection error"
            return InfrastructureError(f"model {model!r}{at}: {what} (the framework's client)",
                                       retryable=True)
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it was raised from or while handling, each once."""
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and not any(link is s for s in seen):
        seen.append(link)
        link = link.__cause__ or link.__context__
    return seen


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation a request carries (chat `messages`, Responses `input`), for the
    limiter's line (the fewest turns first) and the cost cap (a first turn)."""
    items = body.get("messages", body.get("input"))
    if not isinstance(items, list):
        return []
    return [item if item.get("role") else {**item, "role": _role(item)}
            for item in items if isinstance(item, dict)]


def _role(item: Mapping[str, Any]) -> str:
    """A Responses input item that is no message: the model's own call counts as its turn."""
    return "assistant" if item.get("type") == "function_call" else "other"


def _json_or_none(content: bytes) -> object:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _parsed(path: str, content: bytes) -> ModelReply:
    """The reply a body holds, read as the direct path reads it. Raises ValueError or
    MalformedReply for a body that is no reply (retried, as the direct path retries it)."""
    data = decode_body(content.decode("utf-8"))
    return parse_response(data) if path.endswith("/responses") else parse_completion(data)


def provider_for(client: openai.AsyncOpenAI, model: str,
                 options: Mapping[str, Any] | None = None) -> OpenAIAgent:
    """The provider whose retries and limiter `client`'s requests for `model` go through:
    the run's options (`run_options.py`), `options` over them. Raises ValueError for an
    option it refuses, naming it."""
    key = client.api_key if isinstance(client.api_key, str) and client.api_key else None
    settings = {**request_options(), **(options or {})}
    # The provider's own client sends nothing; its key is only registered for redaction.
    return OpenAIAgent(model, base_url=str(client.base_url), api_key=key or PLACEHOLDER_KEY,
                       **settings)
