"""The one way the servers serve HTTP (servers/loopback.py): which hosts are loopback, the API
key any server can require, and the deadlines that cut off a client sending its request head or
its body slowly (slowloris) or not at all, on every server the package starts."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from pytest_resilibench.servers.live.server import LiveServer
from pytest_resilibench.servers.live.services import SERVICES
from pytest_resilibench.servers.loopback import LoopbackServer, is_loopback
from pytest_resilibench.servers.testserver import OpenAITestServer

HEADER_TIMEOUT_S = 0.5
# A read that takes this long fails the test: the bound on a server that never cuts a client
# off, not a measure of how soon it does.
FAILURE_BOUND_S = 30.0


async def hello(_: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


APP = Starlette(routes=[Route("/", hello)])


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(APP, header_timeout_s=HEADER_TIMEOUT_S) as http:
        yield http


def connect(server: LoopbackServer) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=FAILURE_BOUND_S)


def next_read(sock: socket.socket) -> bytes:
    """The next bytes the server sends: b"" once it has closed the connection (a reset counts
    as closed). A server that neither sends nor closes fails the test at the socket timeout."""
    try:
        return sock.recv(4096)
    except ConnectionResetError:
        return b""


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("localhost", True),
    ("LOCALHOST", True), ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.1", False),
    ("192.168.1.20", False), ("2001:db8::1", False), ("example.com", False),
])
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_connection_that_sends_half_a_header_line_is_closed(server: LoopbackServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: loc")
        assert next_read(sock) == b""


def test_a_connection_that_sends_nothing_is_closed(server: LoopbackServer) -> None:
    with connect(server) as sock:
        assert next_read(sock) == b""


def test_a_head_dribbled_steadily_is_cut_off_all_the_same(server: LoopbackServer) -> None:
    """Each byte comes well inside the timeout: the timeout is the whole head's, not a gap's."""
    pace_s = HEADER_TIMEOUT_S / 5
    head = b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * int(FAILURE_BOUND_S / pace_s)
    with connect(server) as sock:
        sock.settimeout(pace_s)
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
                assert sock.recv(4096) == b""  # nothing is answered to half a head
                break  # closed
            except TimeoutError:
                continue  # still open: the next byte
            except (BrokenPipeError, ConnectionResetError):
                break  # closed
        else:
            pytest.fail(f"the server took {len(head)} bytes of a head, one every {pace_s} s")


def test_the_next_head_on_a_kept_alive_connection_is_timed_too(server: LoopbackServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: loc\r\n\r\n")
        reply = b""
        while not reply.endswith(b"hello"):
            chunk = next_read(sock)
            assert chunk, f"closed mid-reply: {reply!r}"
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET / HTTP/1.1\r\nHost: loc")  # its first bytes end the keep-alive wait
        assert next_read(sock) == b""


def test_requests_sent_at_once_are_served_on_one_connection(server: LoopbackServer) -> None:
    with httpx.Client(base_url=server.url, timeout=FAILURE_BOUND_S) as client:
        for _ in range(3):
            reply = client.get("/")
            assert (reply.status_code, reply.text) == (200, "hello")


def test_only_requests_bearing_the_key_are_served() -> None:
    with LoopbackServer(APP, api_key="k-123") as http, \
            httpx.Client(base_url=http.url, timeout=FAILURE_BOUND_S) as client:
        for headers in ({}, {"Authorization": "Bearer k-12"}, {"Authorization": "Basic k-123"},
                        {"Authorization": "k-123"}):
            reply = client.get("/", headers=headers)
            assert reply.status_code == 401, headers
            assert "API key" in reply.json()["error"]
            assert reply.headers["www-authenticate"] == "Bearer"
        reply = client.get("/", headers={"Authorization": "Bearer k-123"})
        assert (reply.status_code, reply.text) == (200, "hello")


def test_an_ipv6_loopback_address_is_served() -> None:
    try:
        http = LoopbackServer(APP, host="::1")
    except OSError as exc:  # a machine without IPv6
        pytest.skip(f"cannot bind ::1: {exc}")
    with http:
        assert http.url == f"http://[::1]:{http.port}"
        assert httpx.get(http.url, timeout=FAILURE_BOUND_S).text == "hello"


# --- the body: a total deadline after the head, on every server the package starts ---------

BODY_TIMEOUT_S = 1.0
PACE_S = BODY_TIMEOUT_S / 2  # one body byte this often: each well inside the deadline
# Bytes a dribbling client may send before the server must have cut it off: at PACE_S, ten
# times the deadline (slack for a busy machine), far short of the 100000 the head promises.
MAX_DRIBBLED = 20


async def echo_length(request: Request) -> PlainTextResponse:
    return PlainTextResponse(str(len(await request.body())))


ECHO = Starlette(routes=[Route("/", echo_length, methods=["POST"])])
KEY = "k-body-123456"


@contextlib.contextmanager
def body_server(kind: str, api_key: str | None) -> Iterator[tuple[str, int, str]]:
    """(host, port, path of an endpoint that reads a POST body) of one of the servers the
    package starts, with the small body deadline."""
    if kind == "loopback":
        with LoopbackServer(ECHO, api_key=api_key, body_timeout_s=BODY_TIMEOUT_S) as http:
            yield http.host, http.port, "/"
    elif kind == "serve-openai":
        with OpenAITestServer(api_key=api_key, body_timeout_s=BODY_TIMEOUT_S) as openai:
            yield "127.0.0.1", openai.port, "/v1/chat/completions"
    else:
        post = next(s for s in SERVICES if s.method == "POST")
        with LiveServer(api_key=api_key, body_timeout_s=BODY_TIMEOUT_S,
                        log_level="critical") as live:
            yield live.host, live.port, f"/{post.name}"


def post_head(host: str, port: int, path: str, key: str | None) -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"{auth}Content-Length: 100000\r\n\r\n").encode()


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (fails at the socket timeout if it never
    does)."""
    reply = b""
    while chunk := next_read(sock):
        reply += chunk
    return reply


def dribble(sock: socket.socket) -> tuple[bytes, int, bool]:
    """One body byte every PACE_S, up to MAX_DRIBBLED: (what the server sent, bytes sent,
    whether it closed the connection)."""
    reply, sent = b"", 0
    sock.settimeout(PACE_S)
    while sent < MAX_DRIBBLED:
        try:
            sock.sendall(b" ")
            sent += 1
            chunk = sock.recv(4096)
        except TimeoutError:
            continue  # nothing yet: the next byte
        except (BrokenPipeError, ConnectionResetError):
            return reply, sent, True
        if not chunk:
            return reply, sent, True
        reply += chunk
    return reply, sent, False


# (which key the server wants, which the client sends): none; the right one; none sent
KEYS = [(None, None), (KEY, KEY), (KEY, None)]


def expected_status(kind: str, wanted: str | None, sent: str | None) -> bytes:
    """401 where the key middleware refuses at once (before any body); else 408, as the
    OpenAI test server checks its key only once the body is in."""
    refused_at_once = wanted is not None and sent != wanted and kind != "serve-openai"
    return b"HTTP/1.1 401 " if refused_at_once else b"HTTP/1.1 408 "


@pytest.mark.parametrize("wanted, sent", KEYS, ids=["no-key", "key", "missing-key"])
@pytest.mark.parametrize("kind", ["loopback", "serve-openai", "serve-live"])
def test_a_body_dribbled_steadily_is_cut_off_at_its_total_deadline(
        kind: str, wanted: str | None, sent: str | None) -> None:
    with body_server(kind, wanted) as (host, port, path), \
            socket.create_connection((host, port), timeout=FAILURE_BOUND_S) as sock:
        sock.sendall(post_head(host, port, path, sent))
        reply, count, closed = dribble(sock)
        assert closed, f"{kind} took {count} body bytes, one every {PACE_S} s, and stayed open"
        assert reply.startswith(expected_status(kind, wanted, sent)), reply[:200]
        # A 408 says the connection ends; after a 401 it ends all the same (closed, above).
        assert reply.startswith(b"HTTP/1.1 401 ") or b"connection: close" in reply.lower()


@pytest.mark.parametrize("wanted, sent", KEYS, ids=["no-key", "key", "missing-key"])
@pytest.mark.parametrize("kind", ["loopback", "serve-openai", "serve-live"])
def test_a_body_never_sent_is_answered_408_and_closed(
        kind: str, wanted: str | None, sent: str | None) -> None:
    with body_server(kind, wanted) as (host, port, path), \
            socket.create_connection((host, port), timeout=FAILURE_BOUND_S) as sock:
        sock.sendall(post_head(host, port, path, sent))
        reply = read_to_close(sock)
        assert reply.startswith(expected_status(kind, wanted, sent)), reply[:200]
        if reply.startswith(b"HTTP/1.1 408 "):
            assert reply.endswith(b'{"error": "request body not received within 1 s"}')


def test_a_body_sent_in_time_is_served_and_the_connection_kept() -> None:
    """The deadline is the body's, not the connection's: two requests, bodies sent in two
    parts each, on one connection."""
    with body_server("loopback", None) as (host, port, _), \
            socket.create_connection((host, port), timeout=FAILURE_BOUND_S) as sock:
        for _ in range(2):
            sock.sendall(b"POST / HTTP/1.1\r\nHost: loc\r\nContent-Length: 6\r\n\r\nabc")
            sock.sendall(b"def")
            reply = b""
            while not reply.endswith(b"\r\n\r\n6"):
                chunk = next_read(sock)
                assert chunk, f"closed mid-reply: {reply!r}"
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200")


def test_a_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="header_timeout_s"):
        LoopbackServer(APP, header_timeout_s=0.0)
    with pytest.raises(ValueError, match="body_timeout_s"):
        LoopbackServer(APP, body_timeout_s=-1.0)
