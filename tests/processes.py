"""Child processes the tests start (servers on loopback)."""

from __future__ import annotations

import subprocess


def stop(process: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 30) -> None:
    """Ask a child to stop, then kill it if it has not within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
