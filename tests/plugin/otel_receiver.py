"""A real OTLP receiver for the OpenTelemetry tests: Arize Phoenix (`phoenix serve`) on
loopback, in a working folder of its own, its spans read back through its REST API
(`GET /v1/projects/{project}/spans`, paged). Phoenix lives in a venv of its own (the Makefile's
`.venv-phoenix`), found through RESILIBENCH_PHOENIX (its `phoenix` executable) or PATH; the
tests that need it skip, saying why, without it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.processes import stop

PHOENIX_ENV = "RESILIBENCH_PHOENIX"
START_S = 120  # a cold start migrates its database: seconds on a loaded machine


def phoenix_executable() -> str | None:
    given = os.environ.get(PHOENIX_ENV)
    if given:
        return given if Path(given).is_file() else None
    return shutil.which("phoenix")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Phoenix:
    def __init__(self, workdir: Path, port: int, process: subprocess.Popen[bytes]) -> None:
        self.workdir = workdir
        self.base_url = f"http://127.0.0.1:{port}"
        self.process = process

    @property
    def otlp_env(self) -> dict[str, str]:
        """The standard variables that point an exporter here (OTLP/HTTP)."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.base_url}

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base_url + path, timeout=30) as reply:
            return json.loads(reply.read())

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        """Every span the project holds (Phoenix's span objects: name, context, parent_id,
        attributes, events)."""
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            page = self._get(f"/v1/projects/{project}/spans?limit=1000"
                             + (f"&cursor={cursor}" if cursor else ""))
            found += page["data"]
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return found

    def wait_for_spans(self, count: int, project: str = "default",
                       timeout_s: float = 120) -> list[dict[str, Any]]:
        """The project's spans once at least `count` arrived and no more came for a second
        (Phoenix stores what it receives asynchronously)."""
        deadline = time.monotonic() + timeout_s
        seen = -1
        while True:
            try:
                spans = self.spans(project)
            except OSError:
                spans = []
            if (len(spans) >= count and len(spans) == seen) or time.monotonic() > deadline:
                return spans
            seen = len(spans) if len(spans) >= count else -1
            time.sleep(1.0)

    def stored_bytes(self) -> bytes:
        """Everything Phoenix wrote to disk (its sqlite database and the rest)."""
        return b"".join(path.read_bytes() for path in sorted(self.workdir.rglob("*"))
                        if path.is_file())


@contextmanager
def running_phoenix(workdir: Path) -> Iterator[Phoenix]:
    executable = phoenix_executable()
    if executable is None:
        pytest.skip(f"Arize Phoenix is not installed (make test installs it in .venv-phoenix; "
                    f"or set {PHOENIX_ENV} to its phoenix executable)")
    workdir.mkdir(parents=True, exist_ok=True)
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    env.pop("PYTHONPATH", None)  # its own venv, not this tree
    log = (workdir / "phoenix.log").open("wb")
    process = subprocess.Popen([executable, "serve"], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    phoenix = Phoenix(workdir, port, process)
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                with urllib.request.urlopen(phoenix.base_url + "/healthz", timeout=5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    said = (workdir / "phoenix.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"phoenix did not start: {said}") from None
                time.sleep(0.5)
        yield phoenix
    finally:
        stop(process)
        log.close()
