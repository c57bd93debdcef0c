"""The prompt-cache contract: every request of a run shares the system prompt and tools, and
everything task- or variant-specific comes after them."""

from __future__ import annotations

import json

import pytest

from pytest_resilibench.core.prompts import TOOL_MODES, all_variants, render_prompt
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.prompt_cache import estimate_tokens, shared_prefix


def system(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("tool_mode", TOOL_MODES)
def test_every_variant_and_task_shares_the_system_prompt_and_tools(tool_mode: str) -> None:
    tasks = list(load_tasks())[::168]  # 30 tasks, every type x difficulty cell twice
    prompts = [render_prompt(task, variant, tool_mode=tool_mode)
               for task in tasks for variant in all_variants()]
    assert len({p.messages[0]["content"] for p in prompts}) == 1
    assert all([m["role"] for m in p.messages] == ["system", "user"] for p in prompts)
    assert all(p.tools == prompts[0].tools for p in prompts)
    prefix = shared_prefix((p.messages, p.tools) for p in prompts)
    assert prefix["messages"] == 1 and prefix["tools"] == (tool_mode == "native")
    static = len(prompts[0].messages[0]["content"])
    if tool_mode == "native":
        static += len(json.dumps(prompts[0].tools, separators=(",", ":")))
    # the shared part is the system prompt and tools, plus the user message's opening words
    assert static + len("Task: ") <= prefix["chars"] <= static + 40
    assert prefix["tokens_estimate"] >= 1024  # OpenAI caches prefixes from 1024 tokens on


def test_the_task_comes_after_the_plan_free_part() -> None:
    """A plan variant's user message starts like the baseline's: the task header first."""
    task = load_tasks().by_id["t0421"]
    by_kind = {v.kind: render_prompt(task, v).messages[1]["content"] for v in all_variants()}
    header = by_kind["baseline"]
    assert by_kind["optimal"].startswith(header) and by_kind["cot"].startswith(header)


def test_shared_prefix_measures_messages_then_characters() -> None:
    a = ([system("rules"), user("Task: read")], None)
    b = ([system("rules"), user("Task: write")], None)
    prefix = shared_prefix([a, b])
    assert prefix == {"prompts": 2, "messages": 1, "chars": len("rules") + len("Task: "),
                      "tokens_estimate": estimate_tokens(11), "tools": False}
    differ = shared_prefix([a, ([system("rulez"), user("Task: read")], None)])
    assert differ["messages"] == 0 and differ["chars"] == len("rule")
    tools = [{"type": "function", "function": {"name": "f"}}]
    with_tools = shared_prefix([([system("x")], tools), ([system("x")], tools)])
    assert with_tools["tools"] and with_tools["messages"] == 1 and with_tools["chars"] > 1
    assert shared_prefix([])["prompts"] == 0
