"""The realistic profile's optimal plans, solved once per task structure per machine
(docs/FAULTS.md: The default task set under `realistic`).

A task set written by `resilibench generate` stores its plans beside its tasks
(`faults.REALISTIC_PLANS`: both shipped sets, and a set of your own once the run names its folder,
`use_stored`), so nothing is solved at run time. Any other task's plan is the happy path of its
structure's exact DP (`core/optimum/realistic.py`): seconds to a minute of
CPU per structure, minutes for a default run. So the path's tools are kept on disk, one entry
per structure under the user's cache folder (`base/checked.py`: `$XDG_CACHE_HOME/resilibench/
checked/realistic-plans/`), keyed by everything that decides the path: the structure (the
fields of `TaskFaults` the MDP reads, as `realistic_mdp` memoises on), the base success, the
profile's rates, the registry's tools and the solver's own source. An entry is written
atomically (xdist workers may write at once) and validated when read: one that is damaged,
foreign or names a tool the structure cannot call is solved again and rewritten. The plan built
from a cached path is the plan built from the solved one (`realistic.workflow_of`), byte for
byte (tests/unit/test_realistic_plans.py).

The run's controller solves what its cases need before the episodes start (`solve_missing`,
with a progress line), so workers and forked helpers only read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_resilibench.base import checked
from pytest_resilibench.core import faults as profile
from pytest_resilibench.core.faults import AUTHENTICATOR, TaskFaults, task_faults
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS, RECENT_WINDOW
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.workflow import Workflow

__all__ = ["KIND", "parent_plan", "progress_line", "solve_missing", "solved_count", "solved_plan",
           "use_stored"]

KIND = "realistic-plans"
_SCHEMA = "resilibench.realistic_plan/1"

# Happy paths known to this process, by the in-process structure key (registry by identity).
_TOOLS: dict[tuple[Any, ...], tuple[str, ...]] = {}
_SOLVED = [0]  # structures this process solved (the tests count them: a warm cache solves 0)
# Folders of the run's own sets whose stored plans apply, beside the shipped sets'.
_OWN_SETS: list[Path] = []


def use_stored(directory: Path) -> None:
    """Read stored plans from this task set's folder too (the session's `--resili-tasks`, in
    every process that builds its cases), as from the shipped sets'."""
    directory = Path(directory)
    if directory not in _OWN_SETS:
        _OWN_SETS.append(directory)


def solved_count() -> int:
    """How many structures this process has solved (not read from the cache) so far."""
    return _SOLVED[0]


def _stored(task: Task, registry: ToolRegistry) -> Workflow | None:
    """The task's stored plan (the shipped sets'; ids repeat across sets, so the plan must be
    this task's: its steps in order, with this task's arguments), or None."""
    if registry is not default_registry():
        return None
    from pytest_resilibench.core.faults import stored_plans
    from pytest_resilibench.core.tasks import TASK_SETS

    faults = task_faults(task, registry)
    steps = list(task.required_tools)

    def fits(plan: Workflow) -> bool:
        return [t for t in plan.tools if t in steps] == steps and all(
            dict(s.arguments) == dict(faults.arguments.get(s.tool, {})) for s in plan.steps)

    stored = (stored_plans(d).get(task.id) for d in (*_OWN_SETS, *TASK_SETS.values()))
    return next((p for p in (Workflow.from_json(s) for s in stored if s is not None)
                 if fits(p)), None)


def parent_plan(task: Task, registry: ToolRegistry) -> Workflow:
    """The task's realistic optimal plan: stored, else its structure's cached or solved path."""
    plan = _stored(task, registry)
    return plan if plan is not None else solved_plan(task, registry)


def solved_plan(task: Task, registry: ToolRegistry) -> Workflow:
    """The task's realistic optimal plan from its structure's cached or solved path, never a
    stored one (what `resilibench generate` stores)."""
    from pytest_resilibench.core.optimum.realistic import workflow_of

    return workflow_of(_tools(task, registry), task, registry)


def solve_missing(tasks: Iterable[Task], registry: ToolRegistry,
                  progress: Callable[[int, int], None] | None = None, *,
                  stored: bool = True) -> int:
    """Solve (and keep) the paths of the tasks' structures that are neither stored, known to
    this process nor on disk; `progress(done, total)` before each and at the end, only when
    there is something to solve. `stored=False` solves stored tasks' too (the generator
    writes what the solver finds, not what a folder held). Returns how many were solved."""
    pending: dict[tuple[Any, ...], Task] = {}
    for task in tasks:
        key = _structure(task, registry)
        if key in _TOOLS or key in pending or (stored and _stored(task, registry) is not None):
            continue
        cached = _read(task, registry)
        if cached is not None:
            _TOOLS[key] = cached
        else:
            pending[key] = task
    for done, task in enumerate(pending.values()):
        if progress is not None:
            progress(done, len(pending))
        _tools(task, registry)
    if pending and progress is not None:
        progress(len(pending), len(pending))
    return len(pending)


def progress_line(done: int, total: int) -> str:
    return (f"resilibench: solving realistic plans: {done}/{total} structures "
            "(first run for this task set; cached for the next)")


# --- the path of a structure -------------------------------------------------------------------
def _structure(task: Task, registry: ToolRegistry) -> tuple[Any, ...]:
    faults = task_faults(task, registry)
    return (tuple(task.required_tools), tuple(sorted(faults.alternatives.items())), registry)


def _tools(task: Task, registry: ToolRegistry) -> tuple[str, ...]:
    key = _structure(task, registry)
    found = _TOOLS.get(key)
    if found is None:
        found = _read(task, registry)
    if found is None:
        from pytest_resilibench.core.optimum.realistic import happy_path_tools, realistic_mdp

        found = happy_path_tools(realistic_mdp(task, registry=registry))
        _SOLVED[0] += 1
        disk_key = _disk_key(task_faults(task, registry), registry)
        checked.store(KIND, disk_key, _entry(disk_key, found))
    _TOOLS[key] = found
    return found


def _entry(key: str, tools: tuple[str, ...]) -> bytes:
    return json.dumps({"schema": _SCHEMA, "key": key, "tools": list(tools)},
                      sort_keys=True).encode()


def _read(task: Task, registry: ToolRegistry) -> tuple[str, ...] | None:
    """The cached path of the task's structure if its entry is sound: this key, a list of the
    structure's callable tools, its steps in order, within its turn budget."""
    faults = task_faults(task, registry)
    key = _disk_key(faults, registry)
    data = checked.read(KIND, key, limit=1 << 16)
    if data is None:
        return None
    try:
        entry = json.loads(data)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("schema") != _SCHEMA or entry.get("key") != key:
        return None
    tools = entry.get("tools")
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        return None
    callable_ = {*faults.closure, *faults.alternatives.values(), faults.wait_tool,
                 *([AUTHENTICATOR] if faults.remote else [])}
    steps = list(faults.steps)
    if (len(tools) > faults.max_turns or not set(tools) <= callable_
            or [t for t in tools if t in steps] != steps):
        return None
    return tuple(tools)


def _disk_key(faults: TaskFaults, registry: ToolRegistry) -> str:
    """sha256 of everything the happy path depends on (module docstring)."""
    rates = [profile.OUTAGE_RATE, profile.AUTH_EXPIRY_RATE, profile.RATE_LIMIT_RATE,
             profile.SILENT_RATE, profile.ALT_FACTOR, profile.RETRY_AFTER_TURNS, RECENT_WINDOW]
    text = json.dumps([
        _SCHEMA, _solver_digest(), _registry_digest(registry), list(faults.steps),
        list(faults.closure), sorted(faults.alternatives.items()), sorted(faults.remote),
        sorted(faults.rate_limited), sorted(faults.silent), faults.wait_tool, faults.max_turns,
        DEFAULT_BASE_SUCCESS, rates])
    return hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=4)
def _registry_digest(registry: ToolRegistry) -> str:
    tools = [tool.to_json() for tool in registry]
    return hashlib.sha256(json.dumps(tools, sort_keys=True, default=str).encode()).hexdigest()


@lru_cache(maxsize=1)
def _solver_digest() -> str:
    """The code that decides a path: the MDP, the profile, the success model and this module
    (any edit there makes every entry stale, never wrong)."""
    from pytest_resilibench.core import simulator
    from pytest_resilibench.core.optimum import realistic

    digest = hashlib.sha256()
    for source in (realistic.__file__, profile.__file__, simulator.__file__, __file__):
        try:
            digest.update(Path(source or "").read_bytes())
        except OSError:  # run from bytecode alone: the package's version stands for them
            from pytest_resilibench import __version__

            digest.update(__version__.encode())
    return digest.hexdigest()
