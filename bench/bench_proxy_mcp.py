"""What `resilibench proxy-mcp` adds to a tool call over a direct connection (target: <= 2 ms
median on loopback).

    python bench/bench_proxy_mcp.py [--calls 500] [--rounds 3] [--transport stdio|http]

The upstream is a real third-party server, `mcp-server-git` (the dev extra), over a temporary
git repository; the client is the `mcp` SDK's. Each round times `--calls` calls of
`git_status` made one after another, directly to the upstream and through the proxy (the CLI
in a subprocess, `--rate 0`: every call is forwarded, so the difference is the proxy's hop, its
fault decision and its trace line), alternating direct and proxied rounds so the neighbours'
load hits both alike. Printed: median and p95 per call of each, and the added latency (proxied
minus direct) of the medians and p95s, over all rounds. A second figure runs the proxy with
`--faults realistic` (injected errors answer without the upstream, so they are left out; the
timed tool is not remote, since a rate-limited tool called back to back stays refused).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters


def _repo(root: Path) -> Path:
    path = root / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "a.txt").write_text("hello\n")
    git = ["git", "-C", str(path), "-c", "user.email=b@example.com", "-c", "user.name=b"]
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return path


async def _time_calls(server: Any, repo: Path, calls: int) -> list[float]:
    out = []
    async with Client(server, cache=None) as client:
        for _ in range(20):  # warm up: imports, first git process
            await client.call_tool("git_status", {"repo_path": str(repo)})
        for _ in range(calls):
            start = time.perf_counter()
            result = await client.call_tool("git_status", {"repo_path": str(repo)})
            elapsed = time.perf_counter() - start
            if not result.is_error:
                out.append(elapsed)
            elif not out:
                print("error:", result.content, file=sys.stderr)
    return out


def _p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    git_server = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent)) \
        or shutil.which("mcp-server-git")
    if git_server is None:
        print("mcp-server-git is not installed (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        repo = _repo(Path(tmp))
        direct = StdioServerParameters(command=git_server, args=["--repository", str(repo)])

        def proxied(*faults: str) -> StdioServerParameters:
            # The SDK passes a bare environment: this checkout's PYTHONPATH goes along.
            return StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
                "-m", "pytest_resilibench.cli", "proxy-mcp", *faults,
                "--trace-dir", str(Path(tmp) / "traces"),
                "--upstream", f"{git_server} --repository {repo}"])

        runs: dict[str, list[float]] = {"direct": [], "proxy": [], "proxy_realistic": []}
        for _ in range(args.rounds):
            runs["direct"] += asyncio.run(_time_calls(direct, repo, args.calls))
            runs["proxy"] += asyncio.run(_time_calls(proxied("--rate", "0"), repo, args.calls))
            runs["proxy_realistic"] += asyncio.run(_time_calls(
                # git_status not remote: a rate-limited tool called back to back stays refused
                proxied("--faults", "realistic", "--remote", "git_log"), repo, args.calls))
    figures: dict[str, Any] = {
        name: {"calls": len(xs), "median_ms": round(statistics.median(xs) * 1e3, 3),
               "p95_ms": round(_p95(xs) * 1e3, 3)} for name, xs in runs.items()}
    for name in ("proxy", "proxy_realistic"):
        figures[f"added_{name}"] = {
            "median_ms": round(figures[name]["median_ms"] - figures["direct"]["median_ms"], 3),
            "p95_ms": round(figures[name]["p95_ms"] - figures["direct"]["p95_ms"], 3)}
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
