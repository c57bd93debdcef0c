"""The live services for the tests of this directory: one loopback server per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_resilibench.servers.live.server import LiveServer, live_services

# A hanging service holds its request this long; the tests' client gives up far earlier.
HANG_S = 1.0
CLIENT_TIMEOUT_S = 0.3
SEED = 0


@pytest.fixture(scope="module")
def live_server() -> Iterator[LiveServer]:
    with live_services(SEED, hang_s=HANG_S) as server:
        yield server
