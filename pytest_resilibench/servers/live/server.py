"""The live services over real HTTP: one Starlette app, one uvicorn process, on 127.0.0.1.

`start_live_server(seed)` runs it in a background thread (tests, the plugin's `--resili-env=live`)
and `resilibench serve-live` in the foreground (on another address with --host). Each service
lives under `/<name>`; GET services take their arguments as query parameters, POST services as
a JSON body. Arguments are checked against the same JSON schema the registry shows agents (a
400 on violation), then the service's temperament decides the answer.

Determinism: the draws of a request are keyed by (seed, service, request key). Clients that
send `X-Resili-Request` (the `LiveEnvironment` sends its episode key and call number) get the
same luck whatever the scheduling; other clients are keyed by the service's request count.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from statistics import NormalDist
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.servers.live.registry import live_registry
from pytest_resilibench.servers.live.services import (
    SERVICE_DATA_FORMAT,
    SERVICES,
    Misbehaviour,
    ServiceSpec,
    service,
)
from pytest_resilibench.servers.loopback import (
    BODY_TIMEOUT_S,
    LOOPBACK,
    LoopbackServer,
    TruncatedResponse,
    http_url,
    loopback_socket,
    serve,
)

__all__ = [
    "LOOPBACK",
    "REQUEST_KEY_HEADER",
    "LiveServer",
    "LoopbackServer",
    "build_app",
    "live_services",
    "planned_fault",
    "serve_live",
    "start_live_server",
]

REQUEST_KEY_HEADER = "X-Resili-Request"
DEFAULT_HANG_S = 3.0
_NORMAL = NormalDist()
_MALFORMED_BODIES = (
    "<html><body><h1>502 Bad Gateway</h1></body></html>",
    "",
    "{'status': 'ok', 'data': None}",
)


def _fault(u: float, m: Misbehaviour) -> str | None:
    """The fault at quantile u of the service's fault distribution (None: it behaves)."""
    for name in ("timeout", "rate_limit", "server_error", "malformed", "truncated"):
        p = getattr(m, name)
        if u < p:
            return name
        u -= p
    return None


def planned_fault(seed: int, service_name: str, key: str) -> str | None:
    """The fault the server will commit on request `key` to a service (None: a success).
    Pure, like all the service draws: tests and clairvoyant analyses read it."""
    m = service(service_name).misbehaviour
    return _fault(DrawStream("live", seed, service_name, key).random(), m)


def _latency_s(u: float, m: Misbehaviour) -> float:
    """Log-normal jitter around the median latency, clipped to [0.2x, 5x] the median."""
    z = _NORMAL.inv_cdf(min(max(u, 1e-9), 1 - 1e-9))
    return m.latency_ms / 1000.0 * min(5.0, max(0.2, math.exp(m.jitter * z)))


def _query_arguments(spec: ServiceSpec, request: Request) -> dict[str, Any]:
    """Query parameters typed by the service's schema (what a real API's framework does);
    values that do not convert stay strings, for the schema check to reject clearly."""
    props = spec.parameters.get("properties", {})
    out: dict[str, Any] = {}
    for key in request.query_params:
        kind = props.get(key, {}).get("type")
        if kind == "array":
            out[key] = [v for raw in request.query_params.getlist(key) for v in raw.split(",")
                        if v]
            continue
        value = request.query_params[key]
        try:
            out[key] = int(value) if kind == "integer" else float(value) if kind == "number" \
                else value
        except ValueError:
            out[key] = value
    return out


class _Service:
    """The endpoint of one service."""

    def __init__(self, spec: ServiceSpec, *, seed: int, hang_s: float) -> None:
        self.spec = spec
        self.seed = seed
        self.hang_s = hang_s
        self._count = itertools.count(1)

    async def handle(self, request: Request) -> Response:
        spec = self.spec
        key = request.headers.get(REQUEST_KEY_HEADER) or f"#{next(self._count)}"
        draws = DrawStream("live", self.seed, spec.name, key)
        u_fault, u_latency, u_detail = draws.random(), draws.random(), draws.random()
        await asyncio.sleep(_latency_s(u_latency, spec.misbehaviour))

        if request.method == "POST":
            try:
                arguments = json.loads(await request.body() or b"{}")
            except ValueError:
                return JSONResponse({"error": "request body is not valid JSON"}, status_code=400)
        else:
            arguments = _query_arguments(spec, request)
        errors = live_registry().argument_errors(spec.name, arguments)
        if errors:
            return JSONResponse({"error": "invalid arguments: " + "; ".join(errors[:3])},
                                status_code=400)

        if arguments.get("format", SERVICE_DATA_FORMAT) != SERVICE_DATA_FORMAT:
            return JSONResponse({"error": f"format {arguments['format']!r} does not match the "
                                          f"input data, which is {SERVICE_DATA_FORMAT}"},
                                status_code=400)
        fault = _fault(u_fault, spec.misbehaviour)
        if fault == "timeout":
            await asyncio.sleep(self.hang_s)
            return JSONResponse({"error": "upstream timed out"}, status_code=504)
        if fault == "rate_limit":
            retry_after = 1 + int(u_detail * 3)
            return JSONResponse({"error": "too many requests"}, status_code=429,
                                headers={"Retry-After": str(retry_after)})
        if fault == "server_error":
            status = (500, 502, 503)[int(u_detail * 3)]
            return JSONResponse({"error": "internal error"}, status_code=status)
        if fault == "malformed":
            body = _MALFORMED_BODIES[int(u_detail * len(_MALFORMED_BODIES))]
            return Response(body, media_type="application/json")
        payload = spec.respond(arguments, draws)
        if fault == "truncated":
            return TruncatedResponse(json.dumps(payload), media_type="application/json")
        return JSONResponse(payload)


def build_app(*, seed: int = 0, hang_s: float = DEFAULT_HANG_S,
              services: tuple[ServiceSpec, ...] = SERVICES) -> Starlette:
    """The ASGI app serving `services` (each under `/<name>`), plus `GET /` listing them."""
    routes = [Route(f"/{s.name}", _Service(s, seed=seed, hang_s=hang_s).handle,
                    methods=[s.method])
              for s in services]

    async def index(_: Request) -> Response:
        return JSONResponse({"seed": seed, "services": [
            {"name": s.name, "method": s.method, "path": f"/{s.name}"} for s in services]})

    routes.append(Route("/", index))
    return Starlette(routes=routes)


class _QuietIncomplete(logging.Filter):
    """Truncated bodies are deliberate, and so are hanging requests that a shutdown cancels:
    keep uvicorn from logging each one as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
            return False
        return "without completing response" not in record.getMessage()


_QUIET = _QuietIncomplete()


class LiveServer(LoopbackServer):
    """The live services on loopback; `base_urls` maps each service to its URL. With
    `api_key`, only requests bearing it (`Authorization: Bearer KEY`), as `serve-live`."""

    def __init__(self, *, seed: int = 0, port: int = 0, hang_s: float = DEFAULT_HANG_S,
                 log_level: str = "warning", api_key: str | None = None,
                 body_timeout_s: float = BODY_TIMEOUT_S) -> None:
        logging.getLogger("uvicorn.error").addFilter(_QUIET)
        super().__init__(build_app(seed=seed, hang_s=hang_s), port=port, name="live-services",
                         log_level=log_level, lifespan="auto", api_key=api_key,
                         body_timeout_s=body_timeout_s)
        self.seed = seed

    @property
    def base_urls(self) -> dict[str, str]:
        return {s.name: f"{self.url}/{s.name}" for s in SERVICES}

    def __enter__(self) -> LiveServer:
        self.start()
        return self


def start_live_server(seed: int = 0, *, port: int = 0, hang_s: float = DEFAULT_HANG_S,
                      api_key: str | None = None) -> LiveServer:
    """Start the live services in the background; stop them with `.stop()` or `with`.
    Quiet: the designed hangs still open at shutdown are cut, which uvicorn logs as errors."""
    server = LiveServer(seed=seed, port=port, hang_s=hang_s, log_level="critical",
                        api_key=api_key)
    server.start()
    return server


@contextmanager
def live_services(seed: int = 0, *, hang_s: float = DEFAULT_HANG_S,
                  api_key: str | None = None) -> Iterator[LiveServer]:
    """The live services for the duration of a `with` block (tests, fixtures)."""
    server = start_live_server(seed, hang_s=hang_s, api_key=api_key)
    try:
        yield server
    finally:
        server.stop()


def serve_live(*, seed: int = 0, port: int = 8765, hang_s: float = DEFAULT_HANG_S,
               host: str = LOOPBACK, api_key: str | None = None) -> None:
    """Serve in the foreground until interrupted (`resilibench serve-live`); with `api_key`,
    only requests bearing it."""
    import sys

    sock = loopback_socket(port, host=host)
    url = http_url(host, sock.getsockname()[1])
    logging.getLogger("uvicorn.error").addFilter(_QUIET)
    print(f"resilibench live services on {url} (seed {seed}); "
          f"{len(SERVICES)} services under /<name>, index at /", file=sys.stderr, flush=True)
    serve(build_app(seed=seed, hang_s=hang_s), sock, api_key=api_key, timeout_graceful_shutdown=1)
