"""The words of a plan: one renderer for every step, genuine or injected.

A plan shown to a model is rendered from its tools, arguments and contingencies alone, by
`shown_plan`, whatever made it (the exact DP, or a flaw injected into the DP's plan). So an
injected step reads exactly like a genuine one: the same purpose source and style (the
tool's first sentence, lower case), the same "prerequisite of X" mark (X: the steps of the
plan *as shown* that depend on it), contingencies that name only tools of the plan as shown,
and an Advice computed from the plan as shown. A flaw therefore changes the text only through
the tools and arguments its record lists (docs/ARCHITECTURE.md, "Flaws and prompts").

Contingencies follow one small grammar (`Contingency`), written by the DP (`core/optimum/dp.py`)
and re-worded here when a flaw renames or drops a tool they name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pytest_resilibench.core.registry import ToolRegistry, ToolSpec
from pytest_resilibench.core.workflow import PlanStep, Workflow

__all__ = [
    "PREREQUISITE_ADVICE",
    "Contingency",
    "plan_advice",
    "shown_plan",
    "step_purpose",
    "tool_purpose",
]

PREREQUISITE_MARK = "prerequisite of "
PREREQUISITE_ADVICE = (
    "Steps marked as prerequisites are not task steps, but the steps that need them fail far "
    "more often without them: re-run them if they fail."
)


def tool_purpose(spec: ToolSpec) -> str:
    """A step's purpose: the first sentence of the tool's description, in lower case."""
    return _first_sentence(spec.description)


@lru_cache(maxsize=256)
def _first_sentence(text: str) -> str:
    sentence = text.split(". ")[0].rstrip(".")
    return sentence[:1].lower() + sentence[1:]


def step_purpose(
    tool: str, plan_tools: Sequence[str], task_tools: Collection[str], registry: ToolRegistry
) -> str:
    """The purpose of a step of `tool` in a plan of `plan_tools`: a tool the task does not
    name is marked as a prerequisite of the plan's steps that depend on it (if any)."""
    spec = registry.get(tool)
    if spec is None:
        return "step"
    purpose = tool_purpose(spec)
    if tool in task_tools:
        return purpose
    required = tuple(task_tools)
    users = [t for t in dict.fromkeys(plan_tools)
             if t != tool and t in registry and tool in registry.dependencies(t, required)]
    return f"{PREREQUISITE_MARK}{', '.join(users)}: {purpose}" if users else purpose


def plan_advice(steps: Sequence[PlanStep]) -> str:
    """The Advice of a plan, from its steps as shown: the scoring rules are the system
    prompt's (the same for every variant), so the Advice only explains the plan's marks."""
    if any(s.purpose.startswith(PREREQUISITE_MARK) for s in steps):
        return PREREQUISITE_ADVICE
    return ""


# --- contingencies ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Contingency:
    """What to do when a step fails: re-run `first` tools, retry `retries` times (re-running
    `between` tools between retries), then go on with `then` (None: stop)."""

    retries: int
    first: tuple[str, ...] = ()
    between: tuple[str, ...] = ()
    then: str | None = None

    def render(self) -> str:
        if self.retries == 0:
            if self.then is not None:
                return f"go on with {self.then} without it"
            return "stop: no turns are left for a retry"
        text = "retry once" if self.retries == 1 else f"retry up to {self.retries} times"
        if self.first:
            text = f"re-run {', '.join(self.first)}, then {text}"
        if self.between:
            text += f", re-running {', '.join(self.between)} between retries"
        if self.then is not None:
            text += f"; if it still fails, go on with {self.then} without it"
        return text

    @classmethod
    def parse(cls, text: str) -> Contingency | None:
        """The contingency `render` wrote (None for any other text)."""
        if text == "stop: no turns are left for a retry":
            return cls(0)
        if match := _GO_ON.fullmatch(text):
            return cls(0, then=match["then"])
        match = _RETRY.fullmatch(text)
        if match is None:
            return None
        return cls(int(match["n"] or 1), _names(match["first"]), _names(match["between"]),
                   match["then"])

    def reworded(self, own: str, kept: Mapping[str, str], after: Sequence[str]) -> Contingency:
        """This contingency naming only tools of the plan as shown: `kept` maps a named tool
        to the one shown in its place (absent: dropped); `after` are the tools of the steps
        that follow, the first of which replaces a dropped `then`."""
        if not self.first and not self.between and self.then is None:  # names no tool (most)
            return self

        def keep(names: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(kept[n] for n in names if n in kept and kept[n] != own))

        then = self.then
        if then is not None:
            then = kept.get(then) or next((t for t in after if t != own), None)
            if then == own:
                then = next((t for t in after if t != own), None)
        return Contingency(self.retries, keep(self.first), keep(self.between), then)


_NAME = r"[A-Za-z_][\w.\-]*"
_GO_ON = re.compile(rf"go on with (?P<then>{_NAME}) without it")
_RETRY = re.compile(
    rf"(?:re-run (?P<first>{_NAME}(?:, {_NAME})*), then )?retry (?:once|up to (?P<n>\d+) times)"
    rf"(?:, re-running (?P<between>{_NAME}(?:, {_NAME})*) between retries)?"
    rf"(?:; if it still fails, go on with (?P<then>{_NAME}) without it)?")


def _names(group: str | None) -> tuple[str, ...]:
    return tuple(group.split(", ")) if group else ()


@lru_cache(maxsize=1024)
def _parse(text: str) -> Contingency | None:
    """`Contingency.parse`, memoised: a run words the same few contingencies over and over."""
    return Contingency.parse(text)


def _reword(text: str, own: str, kept: Mapping[str, str], after: Sequence[str]) -> str:
    parsed = _parse(text)
    if parsed is not None:
        return parsed.reworded(own, kept, after).render()
    # Another profile's wording (docs/FAULTS.md): rename what the flaw renamed.
    for old, new in kept.items():
        if old != new:
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


# --- the plan as shown ----------------------------------------------------------------------
def shown_plan(
    workflow: Workflow, task_tools: Collection[str], registry: ToolRegistry, *,
    renamed: Mapping[str, str] | None = None, advice: str | None = None,
) -> Workflow:
    """The workflow as the prompt shows it: every purpose, contingency and the Advice
    computed from its steps as they now stand. `renamed` maps a tool a flaw replaced to its
    replacement (contingencies that named it now name the replacement); tools no longer in
    the plan are dropped from contingencies. `advice` (another fault profile's) is kept
    as given; by default it is `plan_advice`."""
    tools = [s.tool for s in workflow.steps]
    present = set(tools)
    kept = {t: t for t in present}
    for old, new in (renamed or {}).items():
        if new in present and old not in present:
            kept[old] = new
    steps = []
    for i, step in enumerate(workflow.steps):
        purpose = (step_purpose(step.tool, tools, task_tools, registry)
                   if step.tool in registry else step.purpose)
        steps.append(PlanStep(step.tool, purpose, dict(step.arguments),
                              _reword(step.on_failure, step.tool, kept, tools[i + 1:])))
    return Workflow(tuple(steps), plan_advice(steps) if advice is None else advice)
