"""The one way the servers serve HTTP (servers/loopback.py): which hosts are loopback, the API
key any server can require, and the header timeout that cuts off a client sending its request
head slowly (slowloris) or not at all."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from pytest_resilibench.servers.loopback import LoopbackServer, is_loopback

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
