"""A turn-level agent: the benchmark owns the loop and asks it for one reply per turn, as it
asks a model. This one follows the execution plan in the prompt, retrying a failed step a few
times before moving on; it keeps no state, so one object serves every episode at once.

Run it from the repository root (the module must be importable in every pytest process):

    PYTHONPATH=docs/examples pytest suites --resili-model=py:turn_agent:make_agent \\
        --resili-variants=optimal --resili-sample=3

To benchmark your own model this way, turn `request.messages` (OpenAI chat messages) and
`request.tools` (OpenAI function schemas, or None in text mode) into a call to it, and its
answer into a `ModelReply`: native `tool_calls`, or text (a `<tool_call>` tag, or
TASK_COMPLETED when it is done). An unreachable backend is `InfrastructureError`: the episode
is then kept out of the success rates. Any other exception is an agent error: a failed episode,
shown with the line of your code it came through, and the item fails.
"""

from __future__ import annotations

import json

from pytest_resilibench import (
    ModelReply,
    ModelRequest,
    ToolCall,
    parse_plan,
    read_observation,
    task_text,
)

MAX_TRIES = 6
DONE = ModelReply(content="TASK_COMPLETED")


class PlanFollower:
    name = "plan-follower"

    async def complete(self, request: ModelRequest) -> ModelReply:
        plan = parse_plan(task_text(request))
        steps = list(plan.steps) if plan is not None else []
        observations = [seen for m in request.messages if (seen := read_observation(m))]
        if observations and observations[-1]["progress"]["turns_left"] == 0:
            return DONE
        index = tries = 0  # replay the conversation: which step is next, tried how often
        for seen in observations:
            if index < len(steps) and seen.get("tool") == steps[index].tool:
                tries += 1
                if seen["status"] == "success" or tries == MAX_TRIES:
                    index, tries = index + 1, 0
        if index == len(steps):
            return DONE
        step = steps[index]
        arguments = json.dumps(dict(step.arguments))
        if request.tools is not None:  # native mode: a function call
            turn = len(observations) + 1
            return ModelReply(content=None,
                              tool_calls=(ToolCall(f"call_{turn}", step.tool, arguments),))
        return ModelReply(content=f'<tool_call>{{"name": "{step.tool}", '
                                  f'"arguments": {arguments}}}</tool_call>')

    async def aclose(self) -> None:
        return None


def make_agent() -> PlanFollower:
    """The factory `py:turn_agent:make_agent` names: called once per pytest process."""
    return PlanFollower()
