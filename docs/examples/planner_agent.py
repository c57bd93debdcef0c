"""A loop-level agent: it owns its loop, as a LangGraph graph or an OpenAI Agents SDK runner
does. It reads the execution plan from the prompt and follows it step by step, retrying a
failed step a few times before moving on, then says the task is done.

Run it from the repository root (the module must be importable in every pytest process):

    PYTHONPATH=docs/examples pytest suites --resili-model=py:planner_agent:make_agent \\
        --resili-variants=optimal --resili-sample=3

Your own loop plugs in the same way: give `episode.messages` and `episode.tools` to your
model, send each tool call it makes to `await episode.call(name, arguments)` (one call is one
turn) and hand back the observation; call `episode.finish()` when it says it is done.
"""

from __future__ import annotations

from pytest_resilibench import Episode, parse_plan, task_text

# Tries per step before moving on to the next: a tool that failed this often in a row is
# unlikely to come back within the turn budget.
MAX_TRIES = 6


class Planner:
    name = "planner"

    async def run(self, episode: Episode) -> None:
        # The "Execution plan:" block of the task, None for a prompt without one.
        plan = parse_plan(task_text(episode))
        for step in plan.steps if plan is not None else ():
            for _ in range(MAX_TRIES):
                seen = await episode.call(step.tool, dict(step.arguments))
                if episode.over:  # an early stop, or a call past the budget
                    return
                if seen["progress"]["turns_left"] == 0:  # no turn for another call
                    episode.finish()
                    return
                if seen["status"] == "success":
                    break
        episode.finish()

    # An `async def aclose(self)` (optional) is awaited once at the end: close a client there.


def make_agent() -> Planner:
    """The factory `py:planner_agent:make_agent` names: called once per pytest process."""
    return Planner()
