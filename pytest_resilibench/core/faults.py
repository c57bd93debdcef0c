"""Fault profiles: `paper` (the paper's simulator, the default) and `realistic` (docs/FAULTS.md).

Under `paper` every failure is a random, explicit error code and any retry is the right answer.
`realistic` adds failures whose right answer differs, so that the optimal workflow matters:

- outage: a step's tool is down for the whole episode (SERVICE_UNAVAILABLE); only the
  alternative the task lists for the step gets it done;
- expired credentials: remote tools (network, integration) answer AUTH_EXPIRED until an
  `integration_authenticator` call succeeds;
- rate limit: RATE_LIMITED with `retry_after` 1 turn; calling the same tool on the very next
  turn is refused again (and the wait starts over): another call must come in between;
- silent failure: a data source reports success with `records: 0`; while a source's latest run
  is empty, every later step's output is empty too and the deliverable is wrong, until the
  source is re-run;
- a turn budget that scales with the task (`realistic_turns`).

Every draw is a pure function of (seed, task, repeat, tool, call index), like the paper's:
episode-wide events (an outage, expired credentials) use call index 0, per-call events (rate
limits, silent failures) the call's index, in a stream apart from the paper's draws, so a call's
outcome draw is the same under both profiles (common random numbers).

`TaskFaults` is what a task exposes to the profile: each step's listed alternative (the registry's
stand-ins, `stand_ins`) with its arguments, the tools each event can hit, and the budget. It is a
pure function of the task and the registry, so it needs no fixture of its own.
"""

from __future__ import annotations

import gzip
import json
import math
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytest_resilibench.base.names import FAULT_PROFILES
from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.registry import Role, ToolRegistry
from pytest_resilibench.core.task_set_schemas import REALISTIC_SCHEMA

__all__ = [
    "ALT_FACTOR",
    "AUTHENTICATOR",
    "AUTH_EXPIRY_RATE",
    "EVENT_KINDS",
    "EVENT_RULES",
    "FAULT_PROFILES",
    "OUTAGE_RATE",
    "RATE_LIMIT_RATE",
    "REALISTIC_PLANS",
    "REALISTIC_PLANS_SCHEMA",
    "RETRY_AFTER_TURNS",
    "SILENT_RATE",
    "EpisodeFaults",
    "TaskFaults",
    "episode_faults",
    "event_draws",
    "events_met",
    "observed_event",
    "realistic_turns",
    "stand_ins",
    "stored_plans",
    "task_faults",
]

# The kinds of event a call can carry (`CallResult.event`): the four failures, and `tainted`
# for a success built on empty data (a wrong deliverable when it is the output step's).
EVENT_KINDS = ("outage", "auth_expired", "rate_limited", "silent", "tainted")

# Rates, chosen so that each event is met often enough to measure (docs/FAULTS.md).
OUTAGE_RATE = 0.1  # per step that has an alternative, per episode
AUTH_EXPIRY_RATE = 0.25  # per episode whose tools include a remote one
RATE_LIMIT_RATE = 0.1  # per call of a remote task step
SILENT_RATE = 0.1  # per success of a data source step
ALT_FACTOR = 0.8  # a stand-in succeeds less often than the tool the task was built for
RETRY_AFTER_TURNS = 1

AUTHENTICATOR = "integration_authenticator"
REMOTE_CATEGORIES = frozenset({"network", "integration"})
# Outside tools a policy may call to let a rate limit pass, with harmless arguments.
_WAIT_TOOLS = (("utility_logger", {"message": "waiting before the retry"}),
               ("utility_tracker", {"event": "waiting"}),
               ("utility_helper", {"action": "format"}),
               ("utility_cache", {"key": "waiting"}))
# Values for the required parameters of a stand-in that the task does not bind.
_FILLERS: Mapping[str, Any] = {
    "target_format": "json", "operation": "normalize", "condition": "records are complete",
    "method": "statistical", "objective": "maximize", "expression": "sum of amount",
    "horizon": 7,
}


def realistic_turns(closure_size: int) -> int:
    """The turn budget of a task under `realistic`: one turn per tool of its closure (and per
    step the text asks again), half as many again for recoveries, plus two. Waste costs: a
    retrier that hammers a dead tool runs out long before a paper budget of 10 would."""
    return closure_size + math.ceil(closure_size / 2) + 2


def stand_ins(registry: ToolRegistry, tool: str) -> tuple[str, ...]:
    """Tools that can stand in for `tool`, by role and data flow: the same role and the same
    category or operation (a scanner for a reader, a network validator for a data validator),
    in registry order. The same rule credits recoveries in `scoring.errors_met_and_recovered`."""
    spec = registry.get(tool)
    if spec is None:
        return ()
    return tuple(t.name for t in registry if t.name != tool and t.role is spec.role
                 and (t.category == spec.category or t.operation == spec.operation))


@dataclass(frozen=True)
class TaskFaults:
    """What the realistic profile knows about one task (static: no draw here)."""

    steps: tuple[str, ...]  # the required tools, in order (a repeated step twice)
    closure: tuple[str, ...]  # registry.closure(steps)
    alternatives: Mapping[str, str]  # step tool -> its listed stand-in
    arguments: Mapping[str, Mapping[str, Any]]  # correct arguments of every tool here
    remote: frozenset[str]  # tools AUTH_EXPIRED can hit (closure and stand-ins)
    rate_limited: frozenset[str]  # tools a rate limit can hit (remote steps and stand-ins)
    silent: frozenset[str]  # data-source steps that can fail silently
    wait_tool: str  # an outside tool to call while a rate limit passes
    max_turns: int

    @property
    def step_of(self) -> dict[str, str]:
        """Stand-in tool -> the step it stands in for."""
        return {alt: step for step, alt in self.alternatives.items()}

    def to_json(self) -> dict[str, Any]:
        return {"alternatives": dict(self.alternatives), "max_turns": self.max_turns,
                "silent": sorted(self.silent), "rate_limited": sorted(self.rate_limited),
                "remote": sorted(self.remote), "wait_tool": self.wait_tool}


def _alternative(registry: ToolRegistry, step: str, closure: tuple[str, ...],
                 taken: set[str]) -> str | None:
    """The stand-in a task lists for a step: the first that is not already one of its tools,
    needs no prerequisite outside them and no `format` (which depends on the data at run time)."""
    for name in stand_ins(registry, step):
        spec = registry[name]
        if name in closure or name in taken or name == AUTHENTICATOR:
            continue
        if any(p not in closure for p in spec.prerequisites):
            continue
        if "format" in spec.required_parameters:
            continue
        return name
    return None


def _arguments_for(registry: ToolRegistry, tool: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A correct call of a tool the task does not list: its task-bound values, else fillers."""
    args: dict[str, Any] = {}
    for param in registry[tool].required_parameters:
        if param in inputs:
            args[param] = inputs[param]
        elif param == "directory":
            args[param] = posixpath.dirname(str(inputs.get("path", "/data/input"))) or "/"
        elif param == "service":
            url = str(inputs.get("url") or inputs.get("target_url") or "")
            args[param] = urlparse(url).hostname or "identity"
        elif param == "url" and "target_url" in inputs:
            args[param] = inputs["target_url"]
        else:
            args[param] = _FILLERS.get(param, "default")
    return args


def task_faults(task: Any, registry: ToolRegistry) -> TaskFaults:
    """The realistic profile's view of a task (cached on the task's id and tools)."""
    key = (task.id, tuple(task.required_tools), registry)
    found = _TASK_FAULTS.get(key)
    if found is not None:
        return found
    steps = tuple(task.required_tools)  # a step the text asks again is listed twice
    closure = registry.closure(steps)
    alternatives: dict[str, str] = {}
    for step in dict.fromkeys(steps[:-1]):  # the deliverable has no stand-in
        if step == steps[-1]:
            continue
        alt = _alternative(registry, step, closure, set(alternatives.values()))
        if alt is not None:
            alternatives[step] = alt
    inputs = dict(task.inputs)
    arguments = {t: dict(task.step_arguments.get(t, {})) for t in closure}
    for alt in alternatives.values():
        arguments[alt] = _arguments_for(registry, alt, inputs)
    tools = (*closure, *alternatives.values())
    remote = frozenset(t for t in tools if registry[t].category in REMOTE_CATEGORIES
                       and t != AUTHENTICATOR)
    if remote and AUTHENTICATOR not in arguments:
        arguments[AUTHENTICATOR] = _arguments_for(registry, AUTHENTICATOR, inputs)
    step_tools = {*steps, *alternatives.values()}
    rate_limited = frozenset(t for t in remote if t in step_tools)
    silent = frozenset(s for s in steps[:-1]
                       if registry[s].role is Role.SOURCE and s != AUTHENTICATOR)
    # (a task whose plan holds every utility has no turn to wait with: it waits by retrying)
    wait_tool, wait_args = next(((t, a) for t, a in _WAIT_TOOLS if t not in closure),
                                _WAIT_TOOLS[0])
    arguments.setdefault(wait_tool, dict(wait_args))
    faults = TaskFaults(steps=steps, closure=closure, alternatives=alternatives,
                        arguments=arguments, remote=remote, rate_limited=rate_limited,
                        silent=silent, wait_tool=wait_tool,
                        max_turns=realistic_turns(len(closure) + len(steps)
                                                  - len(set(steps))))
    if len(_TASK_FAULTS) >= 8192:
        _TASK_FAULTS.clear()
    _TASK_FAULTS[key] = faults
    return faults


_TASK_FAULTS: dict[tuple[object, ...], TaskFaults] = {}


@dataclass(frozen=True)
class EpisodeFaults:
    """The episode-wide events of one episode: which steps are down, whether the credentials
    had expired before it began."""

    down: frozenset[str]
    credentials_expired: bool


def event_draws(seed: int, task_id: str, repeat: int, tool: str, n: int) -> DrawStream:
    """The realistic profile's draws for the n-th call of `tool` (n = 0: the episode-wide
    draws of that tool), a stream apart from the paper's `simulator.call_draws`."""
    return DrawStream("realistic", seed, task_id, repeat, tool, n)


def episode_faults(faults: TaskFaults, seed: int, task_id: str, repeat: int) -> EpisodeFaults:
    """Draw the episode-wide events (pure: the same key gives the same events)."""
    down = frozenset(step for step in faults.alternatives
                     if event_draws(seed, task_id, repeat, step, 0).random() < OUTAGE_RATE)
    # Expired credentials need the authenticator: while it is down they stay valid, so every
    # episode keeps a path (the draw is made all the same: other episodes' events keep theirs).
    expired = bool(faults.remote) and (
        event_draws(seed, task_id, repeat, AUTHENTICATOR, 0).random() < AUTH_EXPIRY_RATE
    ) and AUTHENTICATOR not in down
    return EpisodeFaults(down=down, credentials_expired=expired)


def events_met(calls: Sequence[Mapping[str, Any]],
               alternatives: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Per event kind an episode met: how many calls carried it and how many of those were
    recovered from, i.e. later followed by a clean success (no event) of the same step (the
    tool or its listed stand-in). A silent or tainted success is recovered by a clean re-run."""
    step_of = {alt: step for step, alt in alternatives.items()}
    steps = [step_of.get(str(c.get("tool")), str(c.get("tool"))) for c in calls]
    out: dict[str, dict[str, int]] = {}
    for i, call in enumerate(calls):
        kind = call.get("event")
        if kind is None:
            continue
        entry = out.setdefault(str(kind), {"met": 0, "recovered": 0})
        entry["met"] += 1
        if any(later.get("ok") and later.get("event") is None and steps[j] == steps[i]
               for j, later in enumerate(calls[i + 1:], start=i + 1)):
            entry["recovered"] += 1
    return out


_EVENT_CODES = {"SERVICE_UNAVAILABLE": "outage", "AUTH_EXPIRED": "auth_expired",
                "RATE_LIMITED": "rate_limited"}


def observed_event(faults: TaskFaults, registry: ToolRegistry, tool: str, ok: bool,
                   error_code: str | None, output: Mapping[str, Any] | None) -> str | None:
    """The event behind an observation, read as a careful model would: the error codes say
    it plainly; a success with `records: 0` is a silent failure of a source, or data built on
    one (the profile never draws RATE_LIMITED or AUTH_FAILED as random failures, and a sound
    output always has records)."""
    if not ok:
        return _EVENT_CODES.get(error_code or "")
    if output is None or output.get("records") != 0:
        return None
    step = faults.step_of.get(tool, tool)
    if step in faults.silent:
        return "silent"
    spec = registry.get(tool)
    if spec is not None and spec.role in (Role.PROCESSOR, Role.AGGREGATOR, Role.OUTPUT):
        return "tainted"
    return None


# What every prompt of a realistic run says about the profile's events (in the task text, so
# that baseline and CoT are told what the plan variants are told; their plans add steps only).
EVENT_RULES = (
    "Under this task's fault profile some failures are not random: a tool that is down stays "
    "down for the episode (use its step's stand-in), expired credentials need a new "
    f"authentication ({AUTHENTICATOR}), a rate limit needs another call before the retry, and "
    "a source that returns records: 0 must be re-run before anything uses its data."
)
REALISTIC_PLANS = "realistic_workflows.jsonl.gz"
REALISTIC_PLANS_SCHEMA = REALISTIC_SCHEMA  # core/task_set_schemas.py: one line's schema


@lru_cache(maxsize=8)  # the shipped sets and a run's own: each read once
def stored_plans(directory: Path) -> dict[str, Mapping[str, Any]]:
    """The realistic optimal plans stored in `directory` (written by `resilibench generate`,
    or `python -m solver.realistic_report plans SET` for a shipped set), by task id; empty
    when there are none."""
    from pytest_resilibench.core.fixture_files import read_manifest, verified_bytes

    directory = Path(directory)
    if not (directory / REALISTIC_PLANS).exists():
        return {}
    data = verified_bytes(directory, read_manifest(directory), REALISTIC_PLANS)
    lines = gzip.decompress(data).decode("utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return {row["task_id"]: row["optimal"] for row in rows}
