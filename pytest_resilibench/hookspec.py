"""The hook pytest-resilibench adds (registered by `pytest_addhooks` in plugin.py, as
pytest-xdist registers its newhooks.py).

Implement it in a `conftest.py` or a plugin; mark the implementation
`@pytest.hookimpl(optionalhook=True)` so that the file also loads where this plugin is off
(`-p no:resilibench`), as pytest's docs advise for another plugin's hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_resilibench.runtime.protocol import AnyAgent


@pytest.hookspec(firstresult=True)
def pytest_resilibench_make_agent(config: pytest.Config, spec: str) -> AnyAgent | None:
    """The agent for the `--resili-model` spec `spec`, or None to leave it to the plugin.

    Any spec may be answered (`team:planner`, or `builtin:follower` to wrap the built-in).
    The agent is a turn-level `Agent` (`async complete(request)`) or a `LoopAgent`
    (`async run(episode)`), both with `name` and, optionally, `async aclose()` (docs/API.md;
    `from pytest_resilibench import ModelReply, Episode, ...`). Called
    once per spec at start-up on the controller (to check the spec; that agent is closed
    again) and once per spec in each process that runs episodes: every xdist worker builds
    its own agents. An exception here is a usage error naming the spec.
    """
