"""Arguments that matter (issue 50): under the explicit data flow (the default set) a plan
copier that drops a class of the genuine plan's arguments reads the wrong data, or is refused,
so its full rate falls; under the inferred one (the paper set, frozen with its tables) the
data-flow arguments are what the environment does anyway and dropping them changes nothing.

The copier is `builtin:follower` run on the optimal variant, the same task, seed and repeat
with and without the drop: a paired comparison on common tool luck (Newcombe's interval)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from pytest_resilibench.base.names import FLOW_PARAMS
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks
from pytest_resilibench.reporting.stats import newcombe_paired_ci
from pytest_resilibench.runtime.agents.builtin import FollowerAgent, _inputs, _View
from pytest_resilibench.runtime.episode import EpisodeSpec, run_episodes
from pytest_resilibench.runtime.protocol import ModelRequest

REGISTRY = default_registry()
SAMPLE = 160  # tasks per set, spread over the id order (types and difficulties interleave)
# The fall the explicit data flow must show at least, as the lower end of the interval.
CLEAR_MARGIN = 0.10

Drop = Callable[[str, Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]


def _no_source(tool: str, args: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k != "source"}


def _no_format(tool: str, args: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Every `format` the tool does not require (issue 50's meaning-free repair)."""
    required = REGISTRY[tool].required_parameters if tool in REGISTRY else ()
    return {k: v for k, v in args.items() if k != "format" or k in required}


def _no_stated(tool: str, args: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Every option the task states (its Inputs and the options its text words)."""
    return {k: v for k, v in args.items() if k in FLOW_PARAMS or k not in inputs}


DROPS: dict[str, Drop] = {"source": _no_source, "format": _no_format, "stated": _no_stated}


class DroppingFollower(FollowerAgent):
    """The plan copier with one class of each step's arguments left out."""

    kind = "follower"

    def __init__(self, drop: Drop) -> None:
        super().__init__()
        self.drop = drop

    def decide(self, request: ModelRequest, view: _View
               ) -> tuple[str, Mapping[str, Any]] | None:
        decision = super().decide(request, view)
        if decision is None:
            return None
        tool, args = decision
        return tool, self.drop(tool, args, _inputs(view.text))


def _sample(name: str) -> list[Task]:
    tasks = list(load_tasks(TASK_SETS[name]))
    return tasks[::len(tasks) // SAMPLE][:SAMPLE]


def _full(tasks: list[Task], agent: FollowerAgent) -> dict[str, bool]:
    async def run() -> dict[str, bool]:
        specs = [EpisodeSpec(t, Variant("optimal"), 2026, 0) for t in tasks]
        return {r.task_id: r.outcome == "full"
                async for r in run_episodes(specs, agent, concurrency=32)}
    return asyncio.run(run())


Runs = tuple[str, dict[str, bool], dict[str, dict[str, bool]]]


@pytest.fixture(scope="module", params=["default", "paper"])
def runs(request: pytest.FixtureRequest) -> Runs:
    """Per set: its name, the copier's full episodes by task, and the same with each class
    of arguments dropped."""
    tasks = _sample(request.param)
    whole = _full(tasks, DroppingFollower(lambda tool, args, inputs: dict(args)))
    dropped = {name: _full(tasks, DroppingFollower(drop)) for name, drop in DROPS.items()}
    return request.param, whole, dropped


def _fall(whole: dict[str, bool], dropped: dict[str, bool]) -> tuple[float, float, float]:
    """The paired fall of the full rate (whole - dropped) and its 95% interval."""
    pairs = [(whole[t], dropped[t]) for t in whole]
    count = {(a, b): sum(1 for p in pairs if p == (a, b))
             for a in (True, False) for b in (True, False)}
    low, high = newcombe_paired_ci(count[True, True], count[True, False], count[False, True],
                                   count[False, False])
    return (count[True, False] - count[False, True]) / len(pairs), low, high


@pytest.mark.parametrize("drop", list(DROPS))
def test_dropping_an_argument_class_costs_the_copier(runs: Runs, drop: str) -> None:
    name, whole, dropped = runs
    fall, low, high = _fall(whole, dropped[drop])
    said = (f"{name}, {drop} dropped: full {sum(whole.values())} -> "
            f"{sum(dropped[drop].values())} of {len(whole)}, fall {fall:+.3f} "
            f"[{low:+.3f}, {high:+.3f}]")
    if name == "default" or drop == "stated":
        # Explicit data flow: no argument of the genuine plan is decoration. A stated option
        # is a required parameter under both: the schema refuses a call without it.
        assert low >= CLEAR_MARGIN, said
    else:
        # Inferred data flow (the paper set): the plan's source and format are what the
        # environment does anyway, so the copier's episodes are the same, pair by pair.
        assert dropped[drop] == whole, said
