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
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from pytest_resilibench import rng
from pytest_resilibench.agents.base import Agent, ModelReply, ModelRequest

__all__ = [
    "FAULT_KINDS",
    "FaultConfig",
    "OpenAITestServer",
    "Policy",
    "ServerStats",
    "completion_json",
]

log = logging.getLogger(__name__)

Policy = Agent | Callable[[ModelRequest], ModelReply | Awaitable[ModelReply]]

# 429 with Retry-After; 500 and 503; a request held past the client's timeout; a TCP reset with
# no reply; a 200 whose body is not a chat completion; a body cut short of its Content-Length.
FAULT_KINDS = ("429", "500", "503", "timeout", "reset", "malformed", "truncated")

TASK_HEADER = "x-resilibench-task"
REPEAT_HEADER = "x-resilibench-repeat"


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
    in_flight: int = 0
    peak_in_flight: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "replies": self.replies,
                "peak_in_flight": self.peak_in_flight,
                "faults": dict(sorted(self.faults.items())), "models": dict(self.models)}


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _rough_tokens(obj: object) -> int:
    """About four characters a token: enough for a test server's `usage`."""
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return max(1, math.ceil(len(text) / 4))


def completion_json(reply: ModelReply, *, model: str, request_id: str,
                    messages: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A `chat.completion` object for a reply, as the OpenAI API returns it. Usage the policy did
    not report is estimated from the text."""
    message = reply.to_message()
    prompt = int(reply.usage.get("prompt_tokens", 0)) or _rough_tokens(list(messages))
    completion = int(reply.usage.get("completion_tokens", 0)) or _rough_tokens(
        (reply.content or "") + "".join(c.name + c.arguments for c in reply.tool_calls))
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": 0,  # fixed, so the same request always gets byte-identical replies
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }


def _error(status: int, message: str, kind: str, *, code: str | None = None,
           headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


class _TruncatedResponse(Response):
    """Promises the whole body in Content-Length, sends half, then stops: uvicorn closes the
    connection, and the client sees a body cut short."""

    def __init__(self, body: bytes) -> None:
        super().__init__(body, media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2],
                    "more_body": True})


class OpenAITestServer:
    """A loopback OpenAI-compatible server in a background thread.

    ``with OpenAITestServer(policy, latency_ms=5, faults=FaultConfig(rate=0.2)) as server:``
    then point a client at ``server.base_url``. `policies` is one policy serving every model
    name, or a mapping from model names to policies; models not in it are resolved by
    `resolve_model` (by default the built-in agents, ``builtin:NAME``).
    """

    def __init__(
        self,
        policies: Policy | Mapping[str, Policy] | None = None,
        *,
        seed: int = 0,
        latency_ms: float = 0.0,
        faults: FaultConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        resolve_model: Callable[[str], Policy] | None = None,
    ) -> None:
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
        self.seed = seed
        self.latency_s = latency_ms / 1000.0
        self.faults = faults or FaultConfig()
        self.host = host
        self.stats = ServerStats()
        self._catch_all: Policy | None = None
        self._policies: dict[str, Policy] = {}
        if isinstance(policies, Mapping):
            self._policies.update(policies)
        elif policies is not None:
            self._catch_all = policies
        self._resolve = resolve_model or _builtin_policy
        self._attempts: Counter[str] = Counter()
        # proto IPPROTO_TCP, not 0: asyncio only sets TCP_NODELAY on accepted sockets of an
        # explicit TCP protocol, and without it Nagle + delayed ACK add 40 ms to each reply.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._socket.listen(2048)  # early connections wait in the backlog until start()
        self.port: int = self._socket.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, *, timeout_s: float = 10.0) -> OpenAITestServer:
        if self._thread is not None:
            return self
        app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ])
        config = uvicorn.Config(app, log_level="critical", access_log=False, lifespan="off",
                                http="h11", loop="asyncio", timeout_graceful_shutdown=1,
                                log_config=None)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._socket]},
                                        name=f"resilibench-testserver-{self.port}", daemon=True)
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout_s / 0.01)):
            if self._server.started or not self._thread.is_alive():
                break
            deadline.wait(0.01)
        if not self._server.started:
            self.stop()
            raise RuntimeError(f"test server on {self.base_url} did not start")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread = None
        self._server = None
        self._socket.close()

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve until interrupted (the CLI)."""
        self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(timeout=0.5)
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
        stats = self.stats
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            return await self._answer(request)
        finally:
            stats.in_flight -= 1

    async def _answer(self, request: Request) -> Response:
        self.stats.requests += 1
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "request needs a 'messages' list", "invalid_request_error")
        model = str(body.get("model", ""))
        policy = self._policy(model)
        if policy is None:
            return _error(404, f"The model '{model}' does not exist on this test server",
                          "invalid_request_error", code="model_not_found")
        self.stats.models[model] += 1

        task_id = request.headers.get(TASK_HEADER, "")
        repeat = _int_or_zero(request.headers.get(REPEAT_HEADER))
        identity = hashlib.sha256(_canonical([body, task_id, repeat])).hexdigest()[:32]
        attempt = self._attempts[identity]
        self._attempts[identity] += 1

        fault = self._fault(identity, attempt)
        if fault == "timeout":
            self.stats.faults[fault] += 1
            if await _client_gone_within(request, self.faults.hold_s):
                return Response(status_code=499)  # nobody is listening any more
        elif self.latency_s:
            await asyncio.sleep(self.latency_s)
        if fault in ("429", "500", "503", "reset"):
            self.stats.faults[fault] += 1
            return await self._fault_response(fault, request)

        tools = body.get("tools")
        # The rest of the body (model, temperature, seed ...) is there for policies that care.
        params = {k: v for k, v in body.items() if k not in ("messages", "tools")}
        model_request = ModelRequest(messages=body["messages"],
                                     tools=tools if isinstance(tools, list) else None,
                                     repeat=repeat, task_id=task_id, context={"request": params})
        try:
            reply = await _ask(policy, model_request)
        except Exception as exc:
            # Scripted policies are deterministic: asking again cannot help, so a 400 (not
            # retried) rather than a 500; the message says why (e.g. the oracle over HTTP has
            # no task in its context).
            log.debug("policy for %r raised", model, exc_info=True)
            return _error(400, f"policy for {model!r} raised {type(exc).__name__}: {exc}",
                          "invalid_request_error", code="policy_error")
        payload = completion_json(reply, model=model, request_id=identity,
                                  messages=body["messages"])
        if fault == "malformed":
            self.stats.faults[fault] += 1
            # Half the time broken JSON, half the time JSON that is not a chat completion.
            if rng.uniform(self.seed, "malformed-form", identity, attempt) < 0.5:
                return Response(_canonical(payload)[:-7], media_type="application/json")
            return JSONResponse({"id": payload["id"], "object": "chat.completion"})
        if fault == "truncated":
            self.stats.faults[fault] += 1
            return _TruncatedResponse(_canonical(payload))
        self.stats.replies += 1
        return Response(_canonical(payload), media_type="application/json")

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
        state = getattr(self._server, "server_state", None)
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


def _int_or_zero(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _builtin_policy(model: str) -> Policy:
    """`builtin:NAME` through the built-in agent factory, imported only when asked for."""
    if not model.startswith("builtin:"):
        raise KeyError(f"only builtin:NAME models are served, not {model!r}")
    make_agent = getattr(importlib.import_module("pytest_resilibench.agents"), "make_agent", None)
    if make_agent is None:
        raise KeyError("the built-in agents are not available")
    agent: Agent = make_agent(model)
    return agent
