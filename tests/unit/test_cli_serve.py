"""`resilibench serve-*` on an address others can reach: refused without --api-key, in one
line and before anything is bound, unless --insecure says so; loopback needs nothing; a key
given is enforced. The MCP servers on stdio end quietly at the end of their input."""

from __future__ import annotations

import re
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import httpx
import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.servers import loopback
from pytest_resilibench.servers.live import server as live_server

# Each server command with what makes it serve HTTP.
COMMANDS = {"serve-openai": [], "serve-live": [], "serve-mcp": ["--transport", "http"]}
FAILURE_BOUND_S = 60.0  # a server that never starts fails the test after this


class Bound(Exception):
    """Raised in place of binding a socket: the command got past its checks."""


@pytest.fixture
def bind_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands raise `Bound(host)` where they would bind, so none serves (or hangs a test)."""
    def bind(port: int = 0, *, host: str = loopback.LOOPBACK, backlog: int = 0) -> None:
        raise Bound(host)

    monkeypatch.setattr(loopback, "loopback_socket", bind)
    monkeypatch.setattr(live_server, "loopback_socket", bind)


@pytest.mark.usefixtures("bind_nothing")
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_server_others_can_reach_needs_a_key(capsys: pytest.CaptureFixture[str],
                                               command: str, host: str) -> None:
    code = main([command, *COMMANDS[command], "--host", host, "--port", "0"])
    err = capsys.readouterr().err.strip()
    assert (code, err) == (2, f"resilibench {command}: error: refusing to serve on {host} "
                              "without --api-key, since anyone who can reach it could use it "
                              "(pass --api-key KEY, or --insecure to serve it anyway)")


@pytest.mark.usefixtures("bind_nothing")
@pytest.mark.parametrize("flags", [
    ["--host", "127.0.0.1"], ["--host", "127.9.9.9"], ["--host", "::1"],
    ["--host", "localhost"], ["--host", "0.0.0.0", "--insecure"],
    ["--host", "0.0.0.0", "--api-key", "k"],
])
@pytest.mark.parametrize("command", COMMANDS)
def test_loopback_a_key_or_insecure_lets_a_server_start(command: str, flags: list[str]) -> None:
    with pytest.raises(Bound) as bound:
        main([command, *COMMANDS[command], *flags, "--port", "0"])
    assert bound.value.args == (flags[1],)


def test_the_mcp_servers_address_and_key_are_its_http_transports(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-mcp", "--api-key", "k"]) == 2  # stdio: nothing to listen on
    assert capsys.readouterr().err.strip() == ("resilibench serve-mcp: error: --host, --api-key "
                                               "and --insecure are for --transport http")


def first_line(stream: IO[str]) -> str:
    ready, _, _ = select.select([stream], [], [], FAILURE_BOUND_S)
    assert ready, "the server printed nothing"
    return stream.readline()


@pytest.fixture
def launch() -> Iterator[list[subprocess.Popen[str]]]:
    """The servers a test starts, each stopped at its end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=FAILURE_BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("command, flags, path", [
    ("serve-live", ["--api-key", "k-1"], "/"),
    ("serve-mcp", ["--transport", "http", "--api-key", "k-1"], "/mcp"),
    ("serve-openai", ["--insecure"], "/v1/models"),
])
def test_a_server_on_every_address_serves_whom_its_flags_allow(
        launch: list[subprocess.Popen[str]], command: str, flags: list[str], path: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_resilibench.cli", command, *flags, "--host", "0.0.0.0",
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    launch.append(proc)
    # serve-openai names its URL on stdout (scripts read it), the others on stderr.
    stream = proc.stdout if command == "serve-openai" else proc.stderr
    assert stream is not None
    line = first_line(stream)
    found = re.search(r"http://0\.0\.0\.0:(\d+)", line)
    assert found, line
    url = f"http://127.0.0.1:{found[1]}{path}"
    if "--insecure" in flags:
        assert httpx.get(url, timeout=FAILURE_BOUND_S).status_code == 200
        return
    refused = httpx.get(url, timeout=FAILURE_BOUND_S)
    assert refused.status_code == 401 and "API key" in refused.json()["error"]
    admitted = httpx.get(url, headers={"Authorization": "Bearer k-1"}, timeout=FAILURE_BOUND_S)
    assert admitted.status_code != 401


def test_serve_openai_max_in_flight_is_a_providers_limit(
        launch: list[subprocess.Popen[str]]) -> None:
    """`--max-in-flight N`: the N+1th request at once gets 429 with the Retry-After given."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_resilibench.cli", "serve-openai", "--port", "0",
         "--latency-ms", "1500", "--max-in-flight", "1", "--limit-retry-after-s", "2.5",
         "--model", "m=builtin:adaptive"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    launch.append(proc)
    assert proc.stdout is not None
    line = first_line(proc.stdout)
    assert "at most 1 in flight" in line, line
    found = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
    assert found, line
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=found[1], timeout=FAILURE_BOUND_S) as client:
        def post(_: int) -> httpx.Response:
            return client.post("/chat/completions", json=body)

        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(post, range(3)))
    limited = [a for a in answers if a.status_code == 429]
    # The first request holds the one slot for 1.5 s; at least one other arrives meanwhile.
    assert limited and all(a.headers["retry-after"] == "2.5" for a in limited)
    assert any(a.status_code == 200 for a in answers)


def test_serve_openai_refuses_a_limit_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve-openai", "--max-in-flight", "0"])
    assert "--max-in-flight" in capsys.readouterr().err


def mcp_command(command: str, tmp_path: Path) -> list[str]:
    """`resilibench serve-mcp` / `proxy-mcp` (in front of mcp-server-git) as a real process."""
    pytest.importorskip("mcp", reason="the [mcp] extra is not installed")
    argv = [sys.executable, "-m", "pytest_resilibench.cli", command]
    if command == "proxy-mcp":
        git = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent))
        if git is None:
            pytest.skip("mcp-server-git is not installed (the dev extra installs it)")
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
        argv += ["--upstream", f"{git} --repository {tmp_path}"]
    return argv


@pytest.mark.parametrize("command", ["serve-mcp", "proxy-mcp"])
def test_an_mcp_server_whose_stdin_is_dev_null_ends_quietly(command: str,
                                                            tmp_path: Path) -> None:
    # /dev/null is a character device: asyncio took it for a pipe and epoll refused it, an
    # asyncio traceback on stderr (mcp_server._pipes). Its end of input is the end of serving.
    done = subprocess.run(mcp_command(command, tmp_path), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=FAILURE_BOUND_S)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize("command", ["serve-mcp", "proxy-mcp"])
def test_an_mcp_server_without_stdin_says_so_in_one_line(command: str, tmp_path: Path) -> None:
    argv = ["sh", "-c", 'exec "$@" <&-', "sh", *mcp_command(command, tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=FAILURE_BOUND_S)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"resilibench {command}: error: stdin or stdout is closed: the stdio "
                           "transport serves on both (or pass --transport http)\n")
