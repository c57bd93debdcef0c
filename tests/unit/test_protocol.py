"""The agent protocols (runtime/protocol.py): `aclose` is optional, privilege is this
package's to give."""

from __future__ import annotations

import asyncio

import pytest

from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.protocol import (
    ModelReply,
    ModelRequest,
    agent_shape,
    close_agent,
    is_privileged,
)


class Turn:
    name = "turn"

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(content="TASK_COMPLETED")


class Closing(Turn):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


class SyncClose(Turn):
    def aclose(self) -> None:
        return None


class ClaimsPrivilege(Turn):
    privileged = True


def test_aclose_is_optional_but_async_when_present() -> None:
    assert agent_shape(Turn()) == "turn"
    assert agent_shape(Closing()) == "turn"
    with pytest.raises(ValueError, match="`aclose` must be an `async def` method"):
        agent_shape(SyncClose())


def test_close_agent_awaits_aclose_where_there_is_one() -> None:
    closing = Closing()
    asyncio.run(close_agent(closing))
    asyncio.run(close_agent(Turn()))  # nothing to close: no error
    assert closing.closed == 1


def test_only_the_oracle_is_privileged() -> None:
    assert is_privileged(make_agent("builtin:oracle"))
    for spec in ("builtin:adaptive", "builtin:privileged", "builtin:follower", "builtin:random"):
        assert not is_privileged(make_agent(spec)), spec
    assert not is_privileged(ClaimsPrivilege())  # an attribute of a user's agent is no privilege
