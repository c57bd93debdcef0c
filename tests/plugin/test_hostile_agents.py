"""Hostile agents end to end (issue 46): `py:` agents of both shapes that raise what no agent
should (SystemExit, CancelledError, GeneratorExit, KeyboardInterrupt) or never answer, at
random turns of random episodes, with and without xdist. Each such episode is one agent error;
the run goes on, ends with exit status 1, writes a report that validates, and prints no
traceback. The subprocess timeout is a guard against a hang, not a measure of speed."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugin.conftest import load

HOSTILE = '''
import asyncio
import json
import os

from pytest_resilibench import ModelReply

KINDS = {"SystemExit": lambda: SystemExit(3), "CancelledError": asyncio.CancelledError,
         "GeneratorExit": GeneratorExit, "KeyboardInterrupt": KeyboardInterrupt}
PLAN = {int(k): v for k, v in json.loads(os.environ["HOSTILE_PLAN"]).items()}


def planned(task_id):
    """(kind, turn) for this task, or None: the plan is by task number modulo 5."""
    return PLAN.get(int(task_id.lstrip("t")) % 5)


async def misbehave(kind):
    if kind == "hang":
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass  # stubborn: it has to be left behind
    raise KINDS[kind]()


class Turn:
    name = "hostile-turn"

    def __init__(self):
        self.turns = {}

    async def complete(self, request):
        plan = planned(request.task_id)
        if plan is None:
            return ModelReply(content="TASK_COMPLETED")
        turn = self.turns[request.task_id] = self.turns.get(request.task_id, 0) + 1
        if turn > plan[1]:
            await misbehave(plan[0])
        return ModelReply(content="thinking")  # no call: a format error, costs the turn

    async def aclose(self):
        if self.turns:
            raise SystemExit(4)


class Loop:
    name = "hostile-loop"

    async def run(self, episode):
        plan = planned(episode.task_id)
        if plan is None:
            episode.finish()
            return
        for _ in range(plan[1]):
            await episode.call("no_such_tool", {})
        await misbehave(plan[0])


def turn():
    return Turn()


def loop():
    return Loop()
'''

MODELS = ("py:hostile:turn", "py:hostile:loop")
KIND = st.sampled_from(["SystemExit", "CancelledError", "GeneratorExit", "KeyboardInterrupt",
                        "hang"])
# Task number modulo 5 -> (what the agent does, after how many turns).
PLANS = st.dictionaries(st.integers(0, 4), st.tuples(KIND, st.integers(0, 2)), max_size=3)


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=PLANS)
def test_hostile_agents_end_as_agent_errors_and_the_run_goes_on(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        plan: dict[int, tuple[str, int]]) -> None:
    outside = suite.path / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "hostile.py").write_text(HOSTILE)
    # This tree first, then the agent's module, in the run and in every xdist worker.
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(outside)) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("HOSTILE_PLAN", json.dumps(plan))
    for workers in ("0", "2"):
        report = suite.path / f"n{workers}.json"
        result = suite.runpytest_subprocess(
            "--resili-sample=1", "--resili-variants=optimal", "-p", "no:cacheprovider",
            f"--resili-model={','.join(MODELS)}", "--resili-turn-timeout=0.5", "-n", workers,
            f"--resili-report={report}", timeout=240)
        out = result.stdout.str() + result.stderr.str()
        data = load(report)
        episodes = data["episodes"]
        assert len(episodes) == 30 and data["complete"], out[-3000:]
        hostile = [ep for ep in episodes if int(ep["task_id"].lstrip("t")) % 5 in plan]
        assert data["summary"]["counts"]["outcomes"]["agent_error"] == len(hostile)
        assert {ep["stop_reason"] for ep in hostile} <= {"agent_error"}
        for ep in hostile:
            kind = plan[int(ep["task_id"].lstrip("t")) % 5][0]
            assert ep["agent_error"].startswith("TimeoutError" if kind == "hang" else kind)
            assert "hostile.py:" in ep["agent_error"]
        assert result.ret == (pytest.ExitCode.TESTS_FAILED if hostile else pytest.ExitCode.OK)
        assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
