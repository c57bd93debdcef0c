"""An adversary that reads plans without meaning (issue 34): surface rules that try to tell a
flawed plan from the genuine one, and a surface-repair agent that copies a plan after
"repairing" it by those rules alone.

A rule sees what a prompt shows: the task's Inputs, the plan's steps (tool and arguments) and
the tools' schemas. It knows nothing of what the task means: which step makes which data, what
the task's options imply. `bench/bench_flaw_leaks.py` runs every rule over tasks x flaws x
severities; tests/unit/test_flaw_leaks.py holds the limits on a sample.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_resilibench.base.names import FLAWS, SEVERITIES
from pytest_resilibench.core.prompts import Variant, parse_task_inputs, plan_for
from pytest_resilibench.core.registry import Role, ToolRegistry, default_registry
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.runtime.agents.builtin import (
    FollowerAgent,
    _next_step,
    _plan_steps,
    _Step,
    _View,
)
from pytest_resilibench.runtime.protocol import ModelRequest

Step = Mapping[str, Any]  # {"tool", "arguments"}
Rule = Callable[[Task, Sequence[Step], ToolRegistry], bool]


def _args(step: Step) -> Mapping[str, Any]:
    args = step.get("arguments") or {}
    return args if isinstance(args, Mapping) else {}


def _values(steps: Sequence[Step]) -> list[tuple[str, Any]]:
    return [(k, v) for s in steps for k, v in _args(s).items()]


def _core(text: str) -> str:
    """A value without its extension, URL scheme or mail domain: what a suffix is added to."""
    text = text.split("@")[0]
    text = re.sub(r"^[a-z]+://", "", text)
    return re.sub(r"\.[A-Za-z0-9]{1,4}$", "", text)


_SUFFIX = re.compile(r"_(old|backup|bak|tmp|copy|new|final|v\d+)(?=$|[.@/])")


def key_outside_inputs(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return any(k not in task.shown_inputs for k, _ in _values(steps))


def value_not_in_inputs(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    known = {str(v) for v in task.shown_inputs.values()}
    return any(str(v) not in known for _, v in _values(steps))


def inputs_value_with_suffix(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A value that is an Inputs value with something added (`x_v10`, `x_old.csv`)."""
    cores = {_core(v) for v in task.shown_inputs.values() if isinstance(v, str) and len(v) >= 4}
    for _, value in _values(steps):
        if not isinstance(value, str) or value in task.shown_inputs.values():
            continue
        core = _core(value)
        if any(core != c and core.startswith(c) for c in cores):
            return True
    return False


def suffix_marker(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return any(isinstance(v, str) and _SUFFIX.search(v) for _, v in _values(steps))


def value_outside_enum(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A value the parameter's enum does not have (a pluralised member, a synonym)."""
    for step in steps:
        spec = registry.get(str(step.get("tool")))
        props = spec.parameters.get("properties", {}) if spec else {}
        for k, v in _args(step).items():
            if "enum" in props.get(k, {}) and v not in props[k]["enum"]:
                return True
    return False


def schema_invalid(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return any(str(s.get("tool")) in registry
               and registry.argument_errors(str(s.get("tool")), dict(_args(s)))
               for s in steps)


def source_key(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return any("source" in _args(s) for s in steps)


def format_key(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A `format` on a step whose tool does not require one."""
    return any("format" in _args(s) and (str(s.get("tool")) not in registry or "format" not in
                                         registry[str(s.get("tool"))].required_parameters)
               for s in steps)


def format_not_input_format(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return any(k == "format" and v != task.shown_inputs.get("format") for k, v in _values(steps))


def ref_with_number(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return any(isinstance(v, str) and "#" in v for _, v in _values(steps))


def inputs_key_other_value(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """An Inputs key (not `format`) with another value than the Inputs'."""
    return any(k in task.shown_inputs and k != "format" and v != task.shown_inputs[k]
               for k, v in _values(steps))


def repeats(tools: Sequence[object]) -> int:
    """How many steps repeat an earlier step's tool: the count a copy raises by one."""
    return len(tools) - len(set(tools))


def tool_repeated(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return repeats([s.get("tool") for s in steps]) > 0


def against_dependency_order(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A step before a tool the registry says it depends on (for the task's tools)."""
    tools = [str(s.get("tool")) for s in steps]
    for i, tool in enumerate(tools):
        if tool in registry and set(registry.dependencies(tool, task.required_tools)) & set(
                tools[i + 1:]):
            return True
    return False


def against_role_order(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """Roles out of source < processor < aggregator < output order (utilities aside)."""
    levels = [registry[str(s.get("tool"))].level for s in steps
              if str(s.get("tool")) in registry
              and registry[str(s.get("tool"))].role is not Role.UTILITY]
    return levels != sorted(levels)


def input_unused(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """An Inputs key (not `format`) no step carries."""
    used = {k for k, _ in _values(steps)}
    return any(k not in used for k in task.shown_inputs if k != "format")


def source_or_output_input_unused(task: Task, steps: Sequence[Step],
                                  registry: ToolRegistry) -> bool:
    """An Inputs key no step carries that a source or an output tool takes (what a dropped
    first or last step leaves behind)."""
    used = {k for k, _ in _values(steps)}
    ends = {p for spec in registry if spec.role in (Role.SOURCE, Role.OUTPUT)
            for p in spec.required_parameters}
    return any(k not in used and k in ends for k in task.shown_inputs if k != "format")


def last_step_delivers_nothing(task: Task, steps: Sequence[Step],
                               registry: ToolRegistry) -> bool:
    last = registry.get(str(steps[-1].get("tool"))) if steps else None
    return last is None or not last.produces_output


def no_source_step(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    return not any(str(s.get("tool")) in registry
                   and registry[str(s.get("tool"))].role is Role.SOURCE for s in steps)


def no_option_beyond_inputs(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """No step takes a key the Inputs block lacks but `source` and `format` (an option the
    text words, in most genuine plans)."""
    return not any(k not in task.shown_inputs and k not in ("source", "format")
                   for k, _ in _values(steps))


def tool_needs_other_keys(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A step whose tool requires a parameter that is not an Inputs key."""
    return any(str(s.get("tool")) in registry and any(
        p not in task.shown_inputs and p not in ("format", "source")
        for p in registry[str(s.get("tool"))].required_parameters) for s in steps)


def source_not_earlier(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A `source` naming no tool of an earlier step."""
    for i, step in enumerate(steps):
        source = _args(step).get("source")
        if isinstance(source, str) and source.split("#")[0] not in {
                str(s.get("tool")) for s in steps[:i]}:
            return True
    return False


def extension_changed(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A path-like value whose stem is an Inputs value's but whose extension is not."""
    paths = {v.rsplit(".", 1)[0]: v for v in task.shown_inputs.values()
             if isinstance(v, str) and "/" in v and "." in v.rsplit("/", 1)[-1]}
    return any(isinstance(v, str) and "." in v and v.rsplit(".", 1)[0] in paths
               and paths[v.rsplit(".", 1)[0]] != v for _, v in _values(steps))


def value_not_in_text(task: Task, steps: Sequence[Step], registry: ToolRegistry) -> bool:
    """A value (not a data-flow one) the task's text does not contain verbatim."""
    text = task.description.lower()
    return any(k not in ("source", "format") and str(v).lower() not in text
               for k, v in _values(steps))


def reading_step_without_source(task: Task, steps: Sequence[Step],
                                registry: ToolRegistry) -> bool:
    """A step that reads earlier data (after the first) but names no `source`."""
    return any(i > 0 and str(s.get("tool")) in registry
               and registry[str(s.get("tool"))].reads_input and "source" not in _args(s)
               for i, s in enumerate(steps))


RULES: dict[str, Rule] = {
    "key outside Inputs": key_outside_inputs,
    "value not an Inputs value": value_not_in_inputs,
    "Inputs value + suffix": inputs_value_with_suffix,
    "suffix marker (_old, _v10)": suffix_marker,
    "value outside the enum": value_outside_enum,
    "schema invalid": schema_invalid,
    "`source` key": source_key,
    "`format` key (not required)": format_key,
    "format != Inputs format": format_not_input_format,
    "value with `#`": ref_with_number,
    "Inputs key, other value": inputs_key_other_value,
    "tool repeated": tool_repeated,
    "against dependency order": against_dependency_order,
    "against role order": against_role_order,
    "an Inputs key unused": input_unused,
    "a source's or output's key unused": source_or_output_input_unused,
    "tool needs non-Inputs key": tool_needs_other_keys,
    "last step delivers nothing": last_step_delivers_nothing,
    "no source step": no_source_step,
    "no option beyond the Inputs": no_option_beyond_inputs,
    "source not an earlier step": source_not_earlier,
    "extension changed": extension_changed,
    "reading step without source": reading_step_without_source,
    "value not in the text": value_not_in_text,
}


# --- rates at a false-positive limit -----------------------------------------------------------
FP_LIMIT = 0.05  # issue 34: detection at <= 5% false positives


def _steps(plan: Any) -> list[dict[str, Any]]:
    return [{"tool": s.tool, "arguments": dict(s.arguments)} for s in plan.steps]


Bits = dict[str, dict[str, np.ndarray]]  # rule -> column -> one bool a task


def rule_bits(tasks: list[Task]) -> Bits:
    """Whether each rule fires, per rule, column ("FP": the genuine plans; "<flaw>/<severity>")
    and task."""
    registry = default_registry()
    bits: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for task in tasks:
        genuine, _ = plan_for(task, Variant("optimal"), registry)
        plans = {"FP": _steps(genuine)}
        for flaw in FLAWS:
            for severity in SEVERITIES:
                flawed, _ = plan_for(task, Variant("flawed", flaw, severity), registry)
                plans[f"{flaw}/{severity}"] = _steps(flawed)
        for column, steps in plans.items():
            for name, rule in RULES.items():
                bits[name][column].append(bool(rule(task, steps, registry)))
    return {name: {c: np.array(v) for c, v in cols.items()} for name, cols in bits.items()}


def advantage_at_limit(detection: float, fp: float) -> float:
    """Detection minus false positives at the best operating point with FP <= FP_LIMIT: a
    rule that fires more often on genuine plans is used on a random share of its firings
    (FP_LIMIT / FP), which scales both rates alike."""
    share = 1.0 if fp <= FP_LIMIT else FP_LIMIT / fp
    return share * (detection - fp)


def count_shift_advantage(genuine: Sequence[float], shift: int) -> float:
    """The best advantage at FP <= FP_LIMIT of any rule that reads one count off a plan, for
    a flaw that raises that count by `shift` in every plan (redundant_operations: each copy
    adds a repeated step and leaves the set of distinct tools as it was). `genuine[j]` is the
    share of genuine plans with count j. The rule is the Neyman-Pearson one: it flags the
    counts where flawed plans are likeliest against genuine ones, a count that no genuine
    plan has first, the last one on a random share of its plans (as `advantage_at_limit`)."""
    p = np.zeros(len(genuine) + shift)
    p[:len(genuine)] = genuine
    q = np.roll(p, shift)  # the flawed plans' counts (the rolled-in tail is zero)
    with np.errstate(over="ignore"):  # a vanishing share: an infinite ratio, flagged first
        ratio = np.divide(q, p, out=np.full_like(p, np.inf), where=p > 0)
    fp = detection = best = 0.0
    for count in np.argsort(-ratio, kind="stable"):
        if q[count] <= 0:
            continue
        share = 1.0 if fp + p[count] <= FP_LIMIT else (FP_LIMIT - fp) / p[count]
        if share <= 0:
            break
        fp += share * p[count]
        detection += share * q[count]
        best = max(best, detection - fp)
    return best


def rule_table(bits: Bits) -> dict[str, dict[str, float]]:
    """Rule -> {"FP": rate on genuine plans, "<flaw>/<severity>": detection rate}, with the
    OR of the rules that never fire on a genuine plan."""
    table = {name: {c: float(v.mean()) for c, v in cols.items()} for name, cols in bits.items()}
    zero = [name for name in bits if table[name]["FP"] == 0]
    columns = next(iter(bits.values())).keys()
    table["OR of zero-FP rules"] = {
        c: float(np.any([bits[n][c] for n in zero], axis=0).mean()) if zero else 0.0
        for c in columns}
    return table


def best_combinations(bits: Bits) -> dict[str, tuple[float, str]]:
    """Per column, the best advantage at FP <= FP_LIMIT over every rule, its negation, and
    the AND of any two of those: (advantage, the combination)."""
    literals: dict[str, dict[str, np.ndarray]] = {}
    for name, cols in bits.items():
        literals[name] = cols
        literals[f"not {name}"] = {c: ~v for c, v in cols.items()}
    names = list(literals)
    best: dict[str, tuple[float, str]] = {}
    for a in range(len(names)):
        for b in range(a, len(names)):
            label = names[a] if a == b else f"{names[a]} AND {names[b]}"
            both = {c: literals[names[a]][c] & literals[names[b]][c]
                    for c in literals[names[a]]}
            fp = float(both["FP"].mean())
            for column, fired in both.items():
                if column == "FP":
                    continue
                adv = advantage_at_limit(float(fired.mean()), fp)
                if adv > best.get(column, (-1.0, ""))[0]:
                    best[column] = (adv, label)
    return best


# --- the surface-repair agent ------------------------------------------------------------------
def surface_repair(steps: Sequence[_Step], inputs: Mapping[str, Any]) -> tuple[_Step, ...]:
    """The plan "repaired" by surface rules: drop repeated tools, set every Inputs key to
    the Inputs value (the six-line rule of issue 34, which also dropped every other key:
    with options no longer in the Inputs block that would drop them, so it keeps them)."""
    repaired: list[_Step] = []
    seen: set[str] = set()
    for step in steps:
        if step.tool in seen:
            continue
        seen.add(step.tool)
        repaired.append(_Step(step.tool, {k: inputs.get(k, v)
                                          for k, v in step.arguments.items()}))
    return tuple(repaired)


class _RepairingAgent(FollowerAgent):
    """A plan copier that first repairs the plan it is shown (`repair`), then follows it."""

    def repair(self, shown: Sequence[_Step], view: _View) -> tuple[_Step, ...]:
        raise NotImplementedError

    def decide(
        self, request: ModelRequest, view: _View
    ) -> tuple[str, Mapping[str, Any]] | None:
        shown = _plan_steps(view.text)
        if shown is None:
            return None
        steps = self.repair(shown, view)
        index, _ = _next_step(steps, view.history)
        if index >= len(steps):
            return None
        return steps[index].tool, steps[index].arguments


class SurfaceRepairAgent(_RepairingAgent):
    """A plan copier that first applies `surface_repair` to the plan it is shown."""

    kind = "surface_repair"

    def repair(self, shown: Sequence[_Step], view: _View) -> tuple[_Step, ...]:
        return surface_repair(shown, parse_task_inputs(view.text))


def meaning_free_repair(steps: Sequence[_Step], inputs: Mapping[str, Any], description: str,
                        registry: ToolRegistry) -> tuple[_Step, ...]:
    """Issue 50's meaning-free repair: `surface_repair` (drop repeated tools, Inputs values),
    then drop every `source` and every `format` the tool's schema does not require (the
    arguments that were decoration while the environment inferred the data flow), then put
    the steps whose values the task text shows in the order the text shows them (each among
    the places those steps hold; the others stay)."""
    repaired = []
    for step in surface_repair(steps, inputs):
        required = registry[step.tool].required_parameters if step.tool in registry else ()
        repaired.append(_Step(step.tool, {k: v for k, v in step.arguments.items()
                                          if k != "source" and (k != "format" or k in required)}))
    at: dict[int, int] = {}
    for i, step in enumerate(repaired):
        spots = [description.find(str(v)) for k, v in step.arguments.items()
                 if k in inputs and str(v) in description]
        if spots:
            at[i] = min(spots)
    before = list(repaired)
    for slot, i in zip(sorted(at), sorted(at, key=at.__getitem__), strict=True):
        repaired[slot] = before[i]
    return tuple(repaired)


class MeaningFreeRepairAgent(_RepairingAgent):
    """A plan copier that first applies `meaning_free_repair` to the plan it is shown."""

    kind = "meaning_free_repair"

    def repair(self, shown: Sequence[_Step], view: _View) -> tuple[_Step, ...]:
        description = view.text.split("\n", 1)[0].removeprefix("Task: ")
        return meaning_free_repair(shown, parse_task_inputs(view.text), description,
                                   self.registry)
