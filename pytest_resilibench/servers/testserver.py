"""An OpenAI-compatible HTTP server on loopback, driven by scripted policies, with faults.

Tests and benchmarks point the real `openai` client at it, so the provider's whole path (HTTP,
status codes, retries, parsing) runs for real without a model or a network. A policy is any
`Agent` (the built-in scripted agents) or a plain callable `ModelRequest -> ModelReply`, chosen
by the request's `model` field.

Fault decisions are pure functions of (server seed, request identity, attempt number of that same
request), drawn through `rng`: a retried request may succeed, and a whole run is reproducible
whatever the timing. The request identity is the canonical body plus the optional
`x-resilibench-task` / `x-resilibench-repeat` headers the provider sends, so identical first
turns of different episodes count their attempts apart.

`strict=True` applies OpenAI's documented rules (`testserver_rules.py`): unknown fields and
what a model family refuses are 400s with the API's own messages; `api_key` makes any other
key a 401. `/v1/responses` serves the Responses API: reasoning models return an encrypted
reasoning item per turn, and the server counts those sent back (`ServerStats`). Usage carries
`prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens`.

`echo_request=True` makes every error body quote the request, as real servers often do (a 401
naming the `Authorization` header it got, a proxy's 502 naming the URL): the message ends with
the request's method, URL and `Authorization` header verbatim (a URL's user info reaches the
server as that header, `Basic base64(user:pass)`), so tests can check that no secret an error
echoes gets written anywhere.

`record_requests=True` keeps what every request to a model route carried (`recorded`:
`SeenRequest`s of its path, query, headers and JSON body), for tests of what a client sends
where.

`rpm=N` plays a provider's requests-per-minute limit as OpenAI enforces it, over shorter
periods ("60,000 requests/minute may be enforced as 1,000 requests/second", the rate-limits
guide): a token bucket of one second's share (N/60, at least one) refilled at N/60 a second. A
request that finds it empty is answered at once with a 429 whose `retry-after-ms` says when
one request's worth is back; every reply carries `x-ratelimit-limit-requests` (N),
`x-ratelimit-remaining-requests` (the bucket's fill on the minute's scale) and
`x-ratelimit-reset-requests` (until it is full).

`max_in_flight=N` plays a provider's concurrency limit: a request beyond N in flight is
answered at once with a 429 carrying `Retry-After` (and `retry-after-ms`) and the rate-limit
headers as OpenAI sends them (https://platform.openai.com/docs/guides/rate-limits, "Rate
limits in headers": `x-ratelimit-limit-requests`, `x-ratelimit-remaining-requests`,
`x-ratelimit-reset-requests` such as `1s`), here of the in-flight budget; every reply carries
them too, `remaining` counting the slot its own reply frees.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import inspect
import json
import logging
import math
import socket
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pytest_resilibench.base import rng
from pytest_resilibench.base.names import REPEAT_HEADER, TASK_HEADER
from pytest_resilibench.runtime.agents.profiles import family_of
from pytest_resilibench.runtime.protocol import Agent, ModelReply, ModelRequest
from pytest_resilibench.servers import testserver_rules as rules
from pytest_resilibench.servers.loopback import (
    BODY_TIMEOUT_S,
    LoopbackServer,
    TruncatedResponse,
)

__all__ = [
    "FAULT_KINDS",
    "FaultConfig",
    "OpenAITestServer",
    "Policy",
    "SeenRequest",
    "ServerStats",
    "completion_json",
]

log = logging.getLogger(__name__)

Policy = Agent | Callable[[ModelRequest], ModelReply | Awaitable[ModelReply]]

# 429 with Retry-After; 500 and 503; a request held past the client's timeout; a TCP reset with
# no reply; a 200 whose body is not a chat completion; a body cut short of its Content-Length.
FAULT_KINDS = ("429", "500", "503", "timeout", "reset", "malformed", "truncated")

REASONING_TOKENS = 16  # what a reasoning model "thinks" per reply on this server


@dataclass(frozen=True, kw_only=True)
class FaultConfig:
    """Which faults the server injects and how often. `hold_s` must exceed the client's timeout
    for a `timeout` fault to be one (otherwise it is merely a slow reply)."""

    rate: float = 0.0
    kinds: tuple[str, ...] = FAULT_KINDS
    retry_after_s: float = 0.05
    hold_s: float = 65.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must lie in [0, 1], got {self.rate}")
        unknown = sorted(set(self.kinds) - set(FAULT_KINDS))
        if unknown or not self.kinds:
            raise ValueError(f"fault kinds must be a non-empty subset of {FAULT_KINDS}, "
                             f"got {list(self.kinds)}")
        if self.retry_after_s < 0 or self.hold_s < 0:
            raise ValueError("retry_after_s and hold_s must be >= 0")


@dataclass
class ServerStats:
    """What the server saw; mutated only on the server's event loop."""

    requests: int = 0
    replies: int = 0
    limited: int = 0  # 429s of the in-flight limit (`max_in_flight`)
    rpm_limited: int = 0  # 429s of the rpm limit (`rpm`)
    in_flight: int = 0
    peak_in_flight: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # by error code (strict, 401)
    # Responses API: reasoning items issued, sent back in later inputs, and earlier outputs
    # of a reasoning model that came back without their reasoning item.
    reasoning_issued: int = 0
    reasoning_returned: int = 0
    reasoning_missing: int = 0
    # The latencies drawn for the requests that got that far (Little's law's numerator).
    latency_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "replies": self.replies, "limited": self.limited,
                "latency_s": round(self.latency_s, 3),
                "rpm_limited": self.rpm_limited, "peak_in_flight": self.peak_in_flight,
                "faults": dict(sorted(self.faults.items())), "models": dict(self.models),
                "refused": dict(sorted(self.refused.items())),
                "reasoning": {"issued": self.reasoning_issued,
                              "returned": self.reasoning_returned,
                              "missing": self.reasoning_missing}}


@dataclass(frozen=True)
class SeenRequest:
    """A request as it arrived (`record_requests`): header names lower-cased."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _rough_tokens(obj: object) -> int:
    """About four characters a token: enough for a test server's `usage`."""
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return max(1, math.ceil(len(text) / 4))


def usage_of(reply: ModelReply, *, model: str,
             messages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Token counts of a reply: the policy's, else estimated from the text. A reasoning model
    adds `REASONING_TOKENS`, billed within the completion tokens
    (https://platform.openai.com/docs/guides/reasoning). Prompt caching starts at 1024 tokens
    in 128-token steps (https://platform.openai.com/docs/guides/prompt-caching): a later turn
    finds the conversation up to its last assistant message cached (a pure function of the
    request, so a retried request gets the same usage)."""
    prompt = int(reply.usage.get("prompt_tokens", 0)) or _rough_tokens(list(messages))
    reasoning = REASONING_TOKENS if family_of(model).reasoning else 0
    completion = reasoning + (int(reply.usage.get("completion_tokens", 0)) or _rough_tokens(
        (reply.content or "") + "".join(c.name + c.arguments for c in reply.tool_calls)))
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    seen = _rough_tokens(list(messages[: last + 1])) if last >= 0 else 0
    cached = min(prompt, seen // 128 * 128) if seen >= 1024 else 0
    return {"prompt": prompt, "completion": completion, "cached": cached,
            "reasoning": reasoning}


def completion_json(reply: ModelReply, *, model: str, request_id: str,
                    messages: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A `chat.completion` object for a reply, as the OpenAI API returns it. Usage the policy did
    not report is estimated from the text."""
    message = reply.to_message()
    usage = usage_of(reply, model=model, messages=messages)
    prompt, completion = usage["prompt"], usage["completion"]
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": 0,  # fixed, so the same request always gets byte-identical replies
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": usage["cached"]},
                  "completion_tokens_details": {"reasoning_tokens": usage["reasoning"]}},
    }


def _error(status: int, message: str, kind: str, *, code: str | None = None,
           headers: Mapping[str, str] | None = None, param: str | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def _echoing(response: JSONResponse, request: Request) -> JSONResponse:
    """`response` (an error) with the request quoted at the end of its message."""
    body = json.loads(bytes(response.body))
    auth = request.headers.get("authorization", "")
    body["error"]["message"] += f" (got {request.method} {request.url} with Authorization: {auth})"
    headers = {k: v for k, v in response.headers.items()
               if k.lower() not in ("content-length", "content-type")}
    return JSONResponse(body, status_code=response.status_code, headers=headers)


class RequestBucket:
    """The rpm limit's token bucket (module docstring): one second's share, refilled evenly."""

    def __init__(self, rpm: float) -> None:
        self.rpm = rpm
        self.rate = rpm / 60.0  # requests a second
        self.capacity = max(1.0, self.rate)
        self._tokens = self.capacity
        self._at: float | None = None

    def _fill(self, now: float) -> None:
        if self._at is not None:
            self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def take(self, now: float) -> bool:
        self._fill(now)
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def wait_s(self, now: float) -> float:
        self._fill(now)
        return max(0.0, (1.0 - self._tokens) / self.rate)

    def headers(self, now: float) -> dict[str, str]:
        self._fill(now)
        remaining = math.floor(self.rpm * self._tokens / self.capacity)
        return {"x-ratelimit-limit-requests": f"{self.rpm:g}",
                "x-ratelimit-remaining-requests": str(remaining),
                "x-ratelimit-reset-requests": _duration(
                    (self.capacity - self._tokens) / self.rate)}


class OpenAITestServer:
    """A loopback OpenAI-compatible server in a background thread.

    ``with OpenAITestServer(policy, latency_ms=5, faults=FaultConfig(rate=0.2)) as server:``
    then point a client at ``server.base_url``. `policies` is one policy serving every model
    name, or a mapping from model names to policies; models not in it are resolved by
    `resolve_model` (by default the built-in agents, ``builtin:NAME``). `strict` refuses what
    OpenAI refuses; `api_key`, when given, is the only key accepted; `echo_request` quotes the
    request's method, URL and `Authorization` header in every error body; `record_requests`
    keeps every request in `recorded`; `latency_sd_ms` makes each latency lognormal (`_latency`);
    a request whose body is not all in `body_timeout_s` after its head is answered 408 and its
    connection closed (servers/loopback.py).
    """

    def __init__(
        self,
        policies: Policy | Mapping[str, Policy] | None = None,
        *,
        seed: int = 0,
        latency_ms: float = 0.0,
        latency_sd_ms: float = 0.0,
        faults: FaultConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        resolve_model: Callable[[str], Policy] | None = None,
        strict: bool = False,
        api_key: str | None = None,
        echo_request: bool = False,
        max_in_flight: int | None = None,
        limit_retry_after_s: float = 1.0,
        rpm: float | None = None,
        record_requests: bool = False,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ) -> None:
        if latency_ms < 0 or latency_sd_ms < 0:
            raise ValueError(f"latency_ms and latency_sd_ms must be >= 0, got {latency_ms}, "
                             f"{latency_sd_ms}")
        if (max_in_flight is not None and max_in_flight < 1) or limit_retry_after_s < 0:
            raise ValueError("max_in_flight must be >= 1 and limit_retry_after_s >= 0")
        if rpm is not None and not (math.isfinite(rpm) and rpm > 0):
            raise ValueError(f"rpm must be a finite number > 0, got {rpm}")
        self.max_in_flight = max_in_flight
        self.limit_retry_after_s = limit_retry_after_s
        self.rpm = rpm
        self._bucket = RequestBucket(rpm) if rpm is not None else None
        self.seed = seed
        self.latency_s = latency_ms / 1000.0
        self.latency_sd_s = latency_sd_ms / 1000.0
        self.faults = faults or FaultConfig()
        self.host = host
        self.strict = strict
        self.api_key = api_key
        self.echo_request = echo_request
        self.stats = ServerStats()
        self.record_requests = record_requests
        self.recorded: list[SeenRequest] = []
        self._issued: dict[str, str] = {}  # reasoning item id -> its encrypted content
        self._reasoning_of: dict[str, str] = {}  # output item id -> its reasoning item id
        self._catch_all: Policy | None = None
        self._policies: dict[str, Policy] = {}
        if isinstance(policies, Mapping):
            self._policies.update(policies)
        elif policies is not None:
            self._catch_all = policies
        self._resolve = resolve_model or _builtin_policy
        self._attempts: Counter[str] = Counter()
        app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            # Azure OpenAI: the deployment in the path, `api-version` in the query, the key
            # in an `api-key` header (testserver_rules.py).
            Route("/openai/deployments/{deployment}/chat/completions", self._azure_chat,
                  methods=["POST"]),
        ])
        # Bound now (early connections wait in the backlog until start()), served by start().
        self._http = LoopbackServer(
            app, port=port, host=host, name="resilibench-testserver", log_level="critical",
            access_log=False, lifespan="off", http="h11", loop="asyncio", log_config=None,
            body_timeout_s=body_timeout_s)
        self.port: int = self._http.port

    @property
    def base_url(self) -> str:
        return f"{self._http.url}/v1"  # an IPv6 host in brackets (loopback.http_url)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, *, timeout_s: float = 10.0) -> OpenAITestServer:
        if not self._http.running:
            self._http.start(timeout_s=timeout_s)
        return self

    def stop(self) -> None:
        self._http.stop()

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve until interrupted (the CLI)."""
        self.start()
        try:
            self._http.wait()
        finally:
            self.stop()

    # --- routes ----------------------------------------------------------------------------

    def _policy(self, model: str) -> Policy | None:
        policy = self._policies.get(model) or self._catch_all
        if policy is None:
            try:
                policy = self._resolve(model)
            except (KeyError, ValueError, LookupError) as exc:
                log.debug("cannot serve model %r: %s", model, exc)
                return None
            self._policies[model] = policy
        return policy

    async def _models(self, request: Request) -> Response:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "resilibench"}
                for name in sorted(self._policies)]
        return JSONResponse({"object": "list", "data": data})

    async def _chat_completions(self, request: Request) -> Response:
        return await self._serve(request, "chat")

    async def _responses(self, request: Request) -> Response:
        return await self._serve(request, "responses")

    async def _azure_chat(self, request: Request) -> Response:
        if not request.query_params.get("api-version"):
            return self._refuse(rules.no_api_version())
        return await self._serve(request, "chat", deployment=request.path_params["deployment"])

    @property
    def azure_endpoint(self) -> str:
        """The endpoint an Azure OpenAI client takes (`azure_endpoint`)."""
        return self._http.url

    async def _serve(self, request: Request, api: str, deployment: str | None = None
                     ) -> Response:
        stats = self.stats
        bucket = self._bucket
        if bucket is not None and not bucket.take(time.monotonic()):
            stats.rpm_limited += 1
            refusal = self._rpm_limited(bucket)
            return _echoing(refusal, request) if self.echo_request else refusal
        limit = self.max_in_flight
        if limit is not None and stats.in_flight >= limit:
            stats.limited += 1
            refusal = self._limited()
            return _echoing(refusal, request) if self.echo_request else refusal
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            response = await self._answer(request, api, deployment)
            if limit is not None:  # this reply frees its own slot
                response.headers.update(self._limit_headers(limit - stats.in_flight + 1))
            elif bucket is not None:
                response.headers.update(bucket.headers(time.monotonic()))
        finally:
            stats.in_flight -= 1
        if self.echo_request and isinstance(response, JSONResponse) \
                and response.status_code >= 400:
            response = _echoing(response, request)
        return response

    def _limit_headers(self, remaining: int) -> dict[str, str]:
        wait = self.limit_retry_after_s
        return {"x-ratelimit-limit-requests": str(self.max_in_flight),
                "x-ratelimit-remaining-requests": str(max(0, remaining)),
                "x-ratelimit-reset-requests": _duration(wait)}

    def _limited(self) -> JSONResponse:
        """The in-flight limit's 429, at once (as providers refuse: before any work)."""
        wait = self.limit_retry_after_s
        return _error(429, f"Rate limit reached: {self.max_in_flight} requests in flight "
                           f"(test server). Please try again in {wait:g}s.", "requests",
                      code="rate_limit_exceeded",
                      headers={"retry-after": f"{wait:g}", "retry-after-ms": f"{wait * 1000:g}",
                               **self._limit_headers(0)})

    def _rpm_limited(self, bucket: RequestBucket) -> JSONResponse:
        """The rpm limit's 429, at once, saying when one request's worth is back."""
        now = time.monotonic()
        wait = bucket.wait_s(now)
        return _error(429, f"Rate limit reached for requests: limit {bucket.rpm:g} per min "
                           f"(test server). Please try again in {wait * 1000:.0f}ms.",
                      "requests", code="rate_limit_exceeded",
                      headers={"retry-after": f"{math.ceil(wait):d}",
                               "retry-after-ms": f"{wait * 1000:.0f}", **bucket.headers(now)})

    def _refuse(self, refusal: rules.Refusal) -> Response:
        self.stats.refused[refusal.code] += 1
        return _error(refusal.status, refusal.message, "invalid_request_error",
                      code=refusal.code, param=refusal.param)

    def _check(self, request: Request, body: object, api: str) -> Response | None:
        """The key, the body's shape and, when strict, OpenAI's rules."""
        if self.api_key is not None:
            given = (request.headers.get("api-key") or  # Azure's key header
                     request.headers.get("authorization", "").removeprefix("Bearer ").strip())
            if given != self.api_key:
                return self._refuse(rules.wrong_key(given))
        if api == "chat":
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return _error(400, "request needs a 'messages' list", "invalid_request_error")
            refusal = rules.check_chat(body) if self.strict else None
        else:
            if not isinstance(body, dict) or not isinstance(body.get("input"), (list, str)):
                return _error(400, "Missing required parameter: 'input'.",
                              "invalid_request_error", param="input")
            refusal = rules.check_responses(body) if self.strict else None
        return self._refuse(refusal) if refusal is not None else None

    def _check_reasoning_sent_back(self, body: Mapping[str, Any], model: str) -> Response | None:
        """Reasoning items in the input must be ones this server issued, with their encrypted
        content (nothing is stored); count the earlier outputs that came back without them."""
        items = [i for i in body["input"] if isinstance(i, Mapping)] \
            if isinstance(body["input"], list) else []
        sent = set()
        for item in items:
            if item.get("type") != "reasoning":
                continue
            rid = str(item.get("id", ""))
            content = item.get("encrypted_content")
            if content is None:
                return _error(404, f"Item with id '{rid}' not found. Items are not persisted "
                                   f"when `store` is set to false. Try again with `store` set "
                                   f"to true, or remove this item from your input.",
                              "invalid_request_error", param="input")
            if self._issued.get(rid) != content:
                return _error(400, f"The encrypted content for item {rid} could not be "
                                   f"verified.", "invalid_request_error",
                              code="invalid_encrypted_content", param="input")
            sent.add(rid)
        self.stats.reasoning_returned += len(sent)
        if family_of(model).reasoning:
            outputs = [item for item in items
                       if item.get("type") == "function_call" or item.get("role") == "assistant"]
            self.stats.reasoning_missing += sum(
                1 for item in outputs if self._reasoning_of.get(str(item.get("id"))) not in sent)
        return None

    def _latency(self, identity: str, attempt: int) -> float:
        """This request's latency: `latency_s`, or with `latency_sd_s` a lognormal draw of that
        mean and standard deviation, a pure function of (seed, request, attempt) so that a
        rerun sees the same latencies whatever the arrival order (Box-Muller on two seeded
        uniforms; mu, sigma from the mean and sd: sigma^2 = ln(1 + sd^2/mean^2))."""
        if self.latency_sd_s <= 0 or self.latency_s <= 0:
            return self.latency_s
        sigma2 = math.log1p((self.latency_sd_s / self.latency_s) ** 2)
        mu = math.log(self.latency_s) - sigma2 / 2
        u1 = 1.0 - rng.uniform(self.seed, "latency-1", identity, attempt)  # in (0, 1]
        u2 = rng.uniform(self.seed, "latency-2", identity, attempt)
        normal = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        return math.exp(mu + math.sqrt(sigma2) * normal)

    def _reasoning_item(self, model: str, body: Mapping[str, Any],
                        identity: str) -> dict[str, Any] | None:
        if not family_of(model).reasoning:
            return None
        rid = f"rs_{identity}"
        content = "enc_" + hashlib.sha256(f"{self.seed}/{rid}".encode()).hexdigest()
        self._issued[rid] = content
        encrypted = rules.ENCRYPTED in (body.get("include") or [])
        return {"type": "reasoning", "id": rid, "summary": [],
                "encrypted_content": content if encrypted else None}

    async def _answer(self, request: Request, api: str, deployment: str | None) -> Response:
        self.stats.requests += 1
        # `latency_ms` is the whole answer's time, the policy's own work included (a provider
        # that answers in 0.5 s answers in 0.5 s, whatever its load): Little's law holds.
        arrived = asyncio.get_running_loop().time()
        deadline = arrived + self.latency_s  # until the request's own draw is known
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body is not valid JSON", "invalid_request_error")
        if self.record_requests:
            self.recorded.append(SeenRequest(
                path=request.url.path, query=dict(request.query_params),
                headers={k.lower(): v for k, v in request.headers.items()}, body=body))
        if deployment is not None and isinstance(body, dict):
            body["model"] = deployment  # Azure serves the path's deployment
        refused = self._check(request, body, api)
        if refused is not None:
            return refused
        model = str(body.get("model", ""))
        policy = self._policy(model)
        if policy is None:
            return _error(404, f"The model '{model}' does not exist on this test server",
                          "invalid_request_error", code="model_not_found")
        self.stats.models[model] += 1
        if api == "responses":
            refused = self._check_reasoning_sent_back(body, model)
            if refused is not None:
                return refused
            messages = rules.input_to_messages(body["input"])
            tools = rules.tools_to_chat(body.get("tools"))
        else:
            messages = body["messages"]
            tools = body.get("tools") if isinstance(body.get("tools"), list) else None

        task_id = request.headers.get(TASK_HEADER, "")
        repeat = _int_or_zero(request.headers.get(REPEAT_HEADER))
        identity = hashlib.sha256(_canonical([body, task_id, repeat])).hexdigest()[:32]
        attempt = self._attempts[identity]
        self._attempts[identity] += 1
        latency = self._latency(identity, attempt)
        deadline = arrived + latency
        self.stats.latency_s += latency

        fault = self._fault(identity, attempt)
        if fault == "timeout":
            self.stats.faults[fault] += 1
            if await _client_gone_within(request, self.faults.hold_s):
                return Response(status_code=499)  # nobody is listening any more
        if fault in ("429", "500", "503", "reset"):
            await _sleep_until(deadline)
            self.stats.faults[fault] += 1
            return await self._fault_response(fault, request)

        # The rest of the body (model, temperature, seed ...) is there for policies that care.
        params = {k: v for k, v in body.items() if k not in ("messages", "tools", "input")}
        model_request = ModelRequest(messages=messages, tools=tools, repeat=repeat,
                                     task_id=task_id, context={"request": params})
        try:
            reply = await _ask(policy, model_request)
        except Exception as exc:
            # Scripted policies are deterministic: asking again cannot help, so a 400 (not
            # retried) rather than a 500; the message says why (e.g. the oracle over HTTP has
            # no task in its context).
            log.debug("policy for %r raised", model, exc_info=True)
            return _error(400, f"policy for {model!r} raised {type(exc).__name__}: {exc}",
                          "invalid_request_error", code="policy_error")
        if api == "responses":
            payload = rules.response_json(
                reply, model=model, request_id=identity,
                reasoning=self._reasoning_item(model, body, identity),
                usage=usage_of(reply, model=model, messages=messages),
                store=bool(body.get("store", True)))
            self._note_outputs(payload["output"])
        else:
            payload = completion_json(reply, model=model, request_id=identity,
                                      messages=messages)
        if fault != "timeout":  # a held request has taken its time already
            await _sleep_until(deadline)
        if fault == "malformed":
            self.stats.faults[fault] += 1
            # Half the time broken JSON, half the time JSON that is not a completion.
            if rng.uniform(self.seed, "malformed-form", identity, attempt) < 0.5:
                return Response(_canonical(payload)[:-7], media_type="application/json")
            return JSONResponse({"id": payload["id"], "object": payload["object"]})
        if fault == "truncated":
            self.stats.faults[fault] += 1
            return TruncatedResponse(_canonical(payload), media_type="application/json")
        self.stats.replies += 1
        return Response(_canonical(payload), media_type="application/json")

    def _note_outputs(self, output: Sequence[Mapping[str, Any]]) -> None:
        """Remember which reasoning item each output item came with."""
        reasoning = [item["id"] for item in output if item.get("type") == "reasoning"]
        if not reasoning:
            return
        self.stats.reasoning_issued += 1
        for item in output:
            if item.get("type") != "reasoning":
                self._reasoning_of[str(item["id"])] = reasoning[0]

    def _fault(self, identity: str, attempt: int) -> str | None:
        if self.faults.rate <= 0.0:
            return None
        draws = rng.DrawStream(self.seed, "testserver-fault", identity, attempt)
        if draws.random() >= self.faults.rate:
            return None
        return draws.choice(self.faults.kinds)

    async def _fault_response(self, fault: str, request: Request) -> Response:
        if fault == "429":
            wait = self.faults.retry_after_s
            return _error(429, "Rate limit reached (injected)", "requests",
                          code="rate_limit_exceeded",
                          headers={"retry-after": f"{wait:g}",
                                   "retry-after-ms": f"{wait * 1000:g}"})
        if fault == "reset" and await self._reset_connection(request):
            return Response(status_code=499)  # never sent: the connection is gone
        if fault == "503":
            return _error(503, "The server is overloaded (injected)", "server_error")
        return _error(500, "The server had an error (injected)", "server_error")

    async def _reset_connection(self, request: Request) -> bool:
        """Abort this request's TCP connection with an RST. ASGI has no verb for it, so find the
        connection among uvicorn's; without it the fault degrades to a 500."""
        client = request.client
        state = getattr(self._http.uvicorn_server, "server_state", None)
        for connection in list(getattr(state, "connections", ())):
            transport = getattr(connection, "transport", None)
            if client is None or transport is None:
                continue
            if tuple(getattr(connection, "client", None) or ()) != (client.host, client.port):
                continue
            sock = transport.get_extra_info("socket")
            if sock is not None:  # linger 0: close() sends RST instead of FIN
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            await asyncio.sleep(0)  # let uvicorn see the connection lost
            return True
        return False


def _duration(seconds: float) -> str:
    """OpenAI's form of a reset time: `20ms`, `1s`, `6m0s`."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60.0)
    return f"{int(minutes)}m{rest:g}s" if minutes else f"{rest:g}s"


async def _client_gone_within(request: Request, seconds: float) -> bool:
    """Hold the request up to `seconds`; True as soon as the client hangs up."""
    try:
        message = await asyncio.wait_for(request.receive(), timeout=seconds)
    except asyncio.TimeoutError:
        return False
    return message.get("type") == "http.disconnect"


async def _ask(policy: Policy, request: ModelRequest) -> ModelReply:
    if isinstance(policy, Agent):
        return await policy.complete(request)
    reply = policy(request)
    if inspect.isawaitable(reply):
        reply = await reply
    if not isinstance(reply, ModelReply):
        raise TypeError(f"policy returned {type(reply).__name__}, not ModelReply")
    return reply


async def _sleep_until(deadline: float) -> None:
    """Sleep until the event loop's clock reads `deadline` (at once if it has)."""
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


def _int_or_zero(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _builtin_policy(model: str) -> Policy:
    """`builtin:NAME` through the built-in agent factory, imported only when asked for."""
    if not model.startswith("builtin:"):
        raise KeyError(f"only builtin:NAME models are served, not {model!r}")
    agents = importlib.import_module("pytest_resilibench.runtime.agents")
    make_agent = getattr(agents, "make_agent", None)
    if make_agent is None:
        raise KeyError("the built-in agents are not available")
    agent: Agent = make_agent(model)
    return agent
