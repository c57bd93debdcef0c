"""The eight live tasks: well-formed, flawable like any task, and played end to end by the
built-in agents over real HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_resilibench.core.flaws import FLAWS, SEVERITIES
from pytest_resilibench.core.prompts import Variant, render_prompt
from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.servers.live.environment import LiveEnvironment
from pytest_resilibench.servers.live.registry import live_registry
from pytest_resilibench.servers.live.server import LiveServer
from pytest_resilibench.servers.live.tasks import LIVE_TASK_TYPE, live_task, live_tasks

REGISTRY = live_registry()


def test_eight_sequential_tasks_over_the_live_tools() -> None:
    tasks = live_tasks()
    assert [t.id for t in tasks] == [f"live{i:02d}" for i in range(1, 9)]
    for task in tasks:
        assert task.type == LIVE_TASK_TYPE and 3 <= len(task.required_tools) <= 6
        assert REGISTRY[task.output_tool].produces_output
        levels = [REGISTRY[t].level for t in task.required_tools]
        assert levels == sorted(levels), task.id
        for tool in task.required_tools:
            assert REGISTRY.argument_errors(tool, task.step_arguments[tool]) == [], (task.id, tool)
    assert live_task("live03").required_tools[-1] == "text_composer"
    with pytest.raises(KeyError, match="no live task"):
        live_task("t0001")


@pytest.mark.parametrize("task", live_tasks(), ids=lambda t: t.id)
def test_every_flaw_changes_the_plan_shown(task: Any) -> None:
    optimal = render_prompt(task, Variant("optimal"), registry=REGISTRY).messages
    for flaw in FLAWS:
        for severity in SEVERITIES:
            flawed = render_prompt(task, Variant("flawed", flaw, severity), registry=REGISTRY)
            assert flawed.messages != optimal, (flaw, severity)


def play(server: LiveServer, agent_name: str, variant: Variant, seed: int = 0) -> list[Any]:
    agent = make_builtin(agent_name, registry=REGISTRY)

    async def run() -> list[Any]:
        records = []
        for task in live_tasks():
            env = LiveEnvironment.for_episode(task, server.base_urls, seed=seed, timeout_s=0.3)
            try:
                records.append(await run_episode(task, variant, agent, seed=seed,
                                                 registry=REGISTRY, environment=env))
            finally:
                await env.aclose()
        return records

    return asyncio.run(run())


@pytest.mark.parametrize("agent", ["follower", "adaptive"])
def test_builtin_agents_finish_the_live_tasks_end_to_end(live_server: LiveServer, agent: str
                                                         ) -> None:
    records = play(live_server, agent, Variant("optimal"))
    assert all(r.outcome != "error" for r in records), [r.infra_error for r in records]
    assert sum(r.outcome == "full" for r in records) >= 6
    # The services' failures were met on the way (and recovered from).
    assert sum(r.errors_met for r in records) >= 1
    assert all(r.tool_calls >= len(t.required_tools) for r, t in zip(records, live_tasks(),
                                                                        strict=True))


def test_a_logically_inconsistent_plan_is_refused_by_the_composer(live_server: LiveServer
                                                                  ) -> None:
    variant = Variant("flawed", "logical_inconsistency", "severe")
    records = play(live_server, "follower", variant)
    refused = [c for r in records for c in r.calls
               if c["tool"] == "text_composer" and c["error_code"] == "INVALID_INPUT"]
    assert refused and "does not match the input data" in refused[0]["message"]
    optimal = play(live_server, "follower", Variant("optimal"))
    assert (sum(r.outcome == "full" for r in records)
            < sum(r.outcome == "full" for r in optimal))
