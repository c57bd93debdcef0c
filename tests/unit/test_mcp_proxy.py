"""The fault-injecting MCP proxy in front of a real third-party server: `mcp-server-git`
(PyPI, the dev extra) over a temporary git repository, driven by the SDK's own client, in
process and as the `resilibench proxy-mcp` subprocess over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from pytest_resilibench.core import faults as realistic
from pytest_resilibench.core.tool_faults import FaultConfig
from pytest_resilibench.reporting.stats import wilson
from pytest_resilibench.servers.mcp_proxy import (
    SESSION_META_KEY,
    FaultProxy,
    build_proxy,
    upstream_target,
)

GIT_SERVER = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent)) \
    or shutil.which("mcp-server-git")
if GIT_SERVER is None:
    pytest.skip("mcp-server-git is not installed (pip install -e '.[dev]' installs it from PyPI)",
                allow_module_level=True)
# Read-only tools of the git server: the repository never changes under the calls.
# The remote ones first and the auth tool (git_status) last: expired credentials are met, then
# renewed.
READS = ("git_log", "git_branch", "git_diff_unstaged", "git_status")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repo")
    git = ["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "a.txt").write_text("hello\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return path


def upstream(repo: Path) -> StdioServerParameters:
    return StdioServerParameters(command=str(GIT_SERVER), args=["--repository", str(repo)])


def calls(repo: Path, sessions: int, per_session: int) -> list[tuple[str, str, dict[str, Any]]]:
    """A fixed script: each session calls the read tools in turn."""
    out = []
    for s in range(sessions):
        for i in range(per_session):
            tool = READS[i % len(READS)]
            args = {"repo_path": str(repo)}
            if tool == "git_branch":
                args["branch_type"] = "local"
            out.append((f"s{s}", tool, args))
    return out


async def play(repo: Path, config: FaultConfig, script: list[tuple[str, str, dict[str, Any]]],
               trace_dir: Path) -> list[Any]:
    proxy = FaultProxy(upstream(repo), config, trace_dir=trace_dir)
    try:
        async with Client(build_proxy(proxy), cache=None) as client:
            return [await client.call_tool(tool, args,
                                           meta={SESSION_META_KEY: session})  # type: ignore[arg-type]
                    for session, tool, args in script]
    finally:
        await proxy.aclose()


def trace_lines(trace_dir: Path) -> list[dict[str, Any]]:
    """Every session's lines, sessions in the script's order (s0, s1, ..., s10)."""
    paths = sorted(trace_dir.glob("*.jsonl"), key=lambda p: (len(p.stem), p.stem))
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def test_the_listing_is_the_upstreams(repo: Path) -> None:
    async def listings() -> tuple[list[Any], list[Any]]:
        async with Client(upstream(repo), cache=None) as direct:
            theirs = (await direct.list_tools()).tools
        proxy = FaultProxy(upstream(repo), FaultConfig(profile="realistic"))
        try:
            async with Client(build_proxy(proxy), cache=None) as client:
                ours = (await client.list_tools()).tools
        finally:
            await proxy.aclose()
        return theirs, ours

    theirs, ours = asyncio.run(listings())
    assert len(theirs) >= 10
    assert [t.model_dump() for t in ours] == [t.model_dump() for t in theirs]


def test_the_cli_proxy_over_stdio_lists_and_forwards(repo: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "pytest_resilibench.cli", "proxy-mcp", "--faults", "paper",
            "--rate", "0.5", "--seed", "3", "--trace-dir", str(tmp_path / "t"),
            "--upstream", f"{GIT_SERVER} --repository {repo}"]

    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        async with Client(upstream(repo), cache=None) as direct:
            theirs = (await direct.list_tools()).tools
        # The SDK passes a bare environment: this checkout's PYTHONPATH goes along.
        server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        async with Client(server, cache=None) as client:
            ours = (await client.list_tools()).tools
            results = [await client.call_tool("git_status", {"repo_path": str(repo)})
                       for _ in range(12)]
        return theirs, ours, results

    theirs, ours, results = asyncio.run(run())
    assert [t.model_dump() for t in ours] == [t.model_dump() for t in theirs]
    lines = trace_lines(tmp_path / "t")
    assert [line["seq"] for line in lines] == list(range(1, 13))
    for line, result in zip(lines, results, strict=True):
        fault = line["fault"]
        assert bool(result.is_error) == (fault is not None)
        if fault is None:
            assert "On branch" in result.content[0].text
            assert line["upstream"]["is_error"] is False
        else:  # the simulator's wording: "<CODE>: message"
            assert result.content[0].text == fault["message"]
            assert fault["message"].startswith(fault["code"] + ": ")
            assert (line["upstream"] is not None) == fault["upstream"]


def test_the_same_seed_writes_the_same_trace_bytes(repo: Path, tmp_path: Path) -> None:
    script = calls(repo, sessions=6, per_session=12)
    config = FaultConfig(profile="realistic", seed=11, auth_tool="git_status")
    asyncio.run(play(repo, config, script, tmp_path / "a"))
    asyncio.run(play(repo, config, script, tmp_path / "b"))
    files = sorted(p.name for p in (tmp_path / "a").glob("*.jsonl"))
    assert len(files) == 6
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # Another session order, the same sessions: each session's faults are its own.
    asyncio.run(play(repo, config, script[36:] + script[:36], tmp_path / "c"))
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "c" / name).read_bytes()
    # Another seed: other faults.
    asyncio.run(play(repo, FaultConfig(profile="realistic", seed=12, auth_tool="git_status"),
                     script, tmp_path / "d"))
    assert any((tmp_path / "a" / n).read_bytes() != (tmp_path / "d" / n).read_bytes()
               for n in files)


def within(k: int, n: int, p: float) -> bool:
    """p lies in the 99.9% Wilson interval of k successes out of n."""
    low, high = wilson(k, n, confidence=0.999)
    return low <= p <= high


def test_fault_rates_match_the_profile_over_1000_calls(repo: Path, tmp_path: Path) -> None:
    """Each fault's rate, over the calls (or sessions, tools) it could hit, lies in the
    binomial interval of the configured rate."""
    script = calls(repo, sessions=150, per_session=8)  # 1200 calls
    config = FaultConfig(profile="realistic", seed=5, rate=0.2, auth_tool="git_status",
                         remote=frozenset({"git_log", "git_branch", "git_diff_unstaged"}))
    results = asyncio.run(play(repo, config, script, tmp_path / "t"))
    lines = trace_lines(tmp_path / "t")
    assert len(lines) == len(results) >= 1000
    kinds = Counter(line["fault"]["kind"] if line["fault"] else None for line in lines)
    figures = {}
    # Outages: once per (session, tool), seen on its first call.
    firsts = [line for line in lines if line["call_index"] == 1]
    figures["outage"] = (sum(1 for line in firsts if (line["fault"] or {}).get("kind")
                             == "outage"), len(firsts), realistic.OUTAGE_RATE)
    # Expired credentials: per session, seen on a session's first remote call not down.
    expired = {line["session"] for line in lines
               if (line["fault"] or {}).get("kind") == "auth_expired"}
    figures["auth_expired"] = (len(expired), 150, realistic.AUTH_EXPIRY_RATE)
    # Rate limits: per remote call past the events before them, not a repeat of a blocked one.
    open_remote = [line for i, line in enumerate(lines)
                   if line["tool"] in config.remote  # type: ignore[operator]
                   and (line["fault"] or {}).get("kind") not in ("outage", "auth_expired")
                   and not (i and lines[i - 1]["session"] == line["session"]
                            and lines[i - 1]["tool"] == line["tool"]
                            and (lines[i - 1]["fault"] or {}).get("kind") == "rate_limited")]
    figures["rate_limited"] = (sum(1 for line in open_remote if (line["fault"] or {}).get(
        "kind") == "rate_limited"), len(open_remote), realistic.RATE_LIMIT_RATE)
    # Random errors (timeouts among them): per call no event took.
    eventless = [line for line in lines if (line["fault"] or {}).get("kind") not in
                 ("outage", "auth_expired", "rate_limited")]
    figures["error"] = (sum(1 for line in eventless if (line["fault"] or {}).get("kind") in
                            ("error", "timeout")), len(eventless), config.rate)
    # Silent faults: per call neither an event nor an error took.
    clean = [line for line in eventless if (line["fault"] or {}).get("kind") in (None,
                                                                                 "silent")]
    figures["silent"] = (kinds["silent"], len(clean), realistic.SILENT_RATE)
    print(json.dumps(figures))
    # Renewed by a success of the auth tool: no expiry after it in that session.
    renewed: set[str] = set()
    for line in lines:
        if line["tool"] == "git_status" and line["upstream"] and not line["upstream"][
                "is_error"] and (line["fault"] is None or line["fault"]["kind"] == "silent"):
            renewed.add(line["session"])
        elif line["session"] in renewed:
            assert (line["fault"] or {}).get("kind") != "auth_expired"
    for name, (k, n, p) in figures.items():
        assert n >= 100, (name, n)
        assert within(k, n, p), (name, k, n, p)
    # Each injected failure is an error to the client, each silent fault a spoilt success.
    for line, result in zip(lines, results, strict=True):
        kind = (line["fault"] or {}).get("kind")
        assert bool(result.is_error) == (kind not in (None, "silent")
                                         or bool(line["upstream"]["is_error"]))
        if kind == "rate_limited":
            assert result.meta["resilibench/call"]["retry_after"] == 1
        if kind == "silent" and not line["upstream"]["is_error"]:
            text = result.content[0].text if result.content else ""
            assert len(text) < len(line["upstream"]["text"])


def test_a_timeout_calls_the_upstream_as_its_draw_says(repo: Path, tmp_path: Path) -> None:
    script = calls(repo, sessions=20, per_session=12)
    asyncio.run(play(repo, FaultConfig(rate=1.0, seed=1,
                                       categories={t: "network" for t in READS}),
                     script, tmp_path / "t"))
    timeouts = [line for line in trace_lines(tmp_path / "t")
                if line["fault"]["kind"] == "timeout"]
    called = sum(1 for line in timeouts if line["fault"]["upstream"])
    assert 0 < called < len(timeouts)
    assert all((line["upstream"] is not None) == line["fault"]["upstream"] for line in timeouts)


def test_bad_upstreams_and_options_are_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_resilibench.cli import main

    with pytest.raises(ValueError, match="exactly one"):
        upstream_target(None, None)
    with pytest.raises(ValueError, match="http"):
        upstream_target(None, "ftp://x")
    assert main(["proxy-mcp", "--upstream", "x", "--tool-rate", "git_log=2"]) == 2
    assert "must be in [0, 1]" in capsys.readouterr().err
    assert main(["proxy-mcp", "--upstream", "x", "--category", "git_log=nope"]) == 2
    assert "unknown category" in capsys.readouterr().err
    assert main(["proxy-mcp", "--upstream", "no-such-command-here"]) == 2
    assert "could not open MCP server" in capsys.readouterr().err


def test_streamable_http_both_ways(repo: Path) -> None:
    """The proxy served over streamable HTTP on loopback, and a second proxy whose upstream
    is that URL (`--upstream-url`): the listing goes through both unchanged."""
    from pytest_resilibench.servers.loopback import LOOPBACK, LoopbackServer

    front = FaultProxy(upstream(repo), FaultConfig(rate=0.0))
    app = build_proxy(front).streamable_http_app(host=LOOPBACK)
    with LoopbackServer(app) as http:
        url = f"{http.url}/mcp"

        async def run() -> tuple[list[Any], list[Any], Any]:
            async with Client(upstream(repo), cache=None) as direct:
                theirs = (await direct.list_tools()).tools
            outer = FaultProxy(upstream_target(url=url), FaultConfig(rate=0.0))
            try:
                async with Client(build_proxy(outer), cache=None) as client:
                    ours = (await client.list_tools()).tools
                    answer = await client.call_tool("git_status", {"repo_path": str(repo)})
            finally:
                await outer.aclose()
            return theirs, ours, answer

        theirs, ours, answer = asyncio.run(run())
    assert [t.model_dump() for t in ours] == [t.model_dump() for t in theirs]
    assert not answer.is_error and "On branch" in answer.content[0].text


PROXY_SESSIONS = '''
import asyncio
import os

import pytest
from mcp import Client, StdioServerParameters

from pytest_resilibench.core.tool_faults import FaultConfig
from pytest_resilibench.servers.mcp_proxy import SESSION_META_KEY, FaultProxy, build_proxy

REPO = os.environ["PROXY_REPO"]
TOOLS = ("git_log", "git_status", "git_diff_unstaged", "git_status")


@pytest.mark.parametrize("session", [f"s{i}" for i in range(6)])
def test_session(session):
    upstream = StdioServerParameters(command=os.environ["GIT_SERVER"],
                                     args=["--repository", REPO])
    proxy = FaultProxy(upstream, FaultConfig(profile="realistic", seed=9, auth_tool="git_status"),
                       trace_dir=os.environ["TRACE_DIR"])

    async def run():
        try:
            async with Client(build_proxy(proxy), cache=None) as client:
                for i in range(16):
                    await client.call_tool(TOOLS[i % 4], {"repo_path": REPO},
                                           meta={SESSION_META_KEY: session})
        finally:
            await proxy.aclose()

    asyncio.run(run())
'''


def test_the_proxy_s_traces_do_not_depend_on_xdist(repo: Path, pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_sessions=PROXY_SESSIONS)
    monkeypatch.setenv("PROXY_REPO", str(repo))
    monkeypatch.setenv("GIT_SERVER", str(GIT_SERVER))
    found = []
    for workers in ("0", "2"):
        trace_dir = pytester.path / f"traces{workers}"
        monkeypatch.setenv("TRACE_DIR", str(trace_dir))
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", workers)
        result.assert_outcomes(passed=6)
        found.append({p.name: p.read_bytes() for p in sorted(trace_dir.glob("*.jsonl"))})
    assert len(found[0]) == 6 and found[0] == found[1]
    assert any(b'"kind"' in data for data in found[0].values())
