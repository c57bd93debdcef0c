"""xdist's own distribution across machines (docs/DISTRIBUTED.md): `--tx 2*popen` and `--tx
socket=HOST:PORT`, with execnet's socket server on loopback standing in for a second machine,
give the report of `-n 2` (issue 49). No `--rsyncdir`: the package is installed there, and the
suite lies in the worker's folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugin.conftest import comparable, load

ROOT = Path(__file__).resolve().parents[2]
RUN = ("-p", "no:cacheprovider", "-p", "no:randomly", "--resili-sample=1",
       "--resili-variants=baseline,flawed", "--resili-flaws=missing_step",
       "--resili-model=builtin:adaptive", "--resili-repeats=2", "--resili-resume=off")


def _run(suite: pytest.Pytester, name: str, *extra: str) -> dict[str, Any]:
    report = suite.path / f"{name}.json"
    result = suite.runpytest_subprocess(*RUN, f"--resili-report={report}", *extra)
    assert result.ret == 0, result.stdout.str()[-3000:]
    return load(report)


@pytest.fixture
def socket_servers(suite: pytest.Pytester) -> Iterator[list[str]]:
    """Two execnet socket servers on loopback (`python -m execnet.script.socketserver`), each
    on a free port, run in the suite's folder as a remote machine's checkout would be."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    servers, addresses = [], []
    try:
        for _ in range(2):
            server = subprocess.Popen(
                [sys.executable, "-u", "-m", "execnet.script.socketserver", "127.0.0.1:0"],
                cwd=suite.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True)
            servers.append(server)
            assert server.stdout is not None
            line = server.stdout.readline()  # "... Entering Accept loop ('127.0.0.1', PORT)"
            found = re.search(r"\('127\.0\.0\.1', (\d+)\)", line)
            assert found, line
            addresses.append(f"127.0.0.1:{found.group(1)}")
        yield addresses
    finally:
        for server in servers:
            server.kill()
            server.wait(timeout=30)
            if server.stdout is not None:
                server.stdout.close()


def test_tx_popen_and_socket_give_the_report_of_n2(suite: pytest.Pytester,
                                                   socket_servers: list[str]) -> None:
    reference = _run(suite, "n2", "-n", "2")
    assert len(reference["episodes"]) == 60
    popen = _run(suite, "popen", "--tx", "2*popen", "--dist", "load")
    sockets = [arg for address in socket_servers for arg in ("--tx", f"socket={address}")]
    remote = _run(suite, "socket", *sockets, "--dist", "load")
    assert comparable(popen) == comparable(reference)
    assert comparable(remote) == comparable(reference)
