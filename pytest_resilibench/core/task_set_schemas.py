"""JSON Schemas (draft 2020-12) of the files of a task set: a line of `tasks.jsonl.gz`, a line
of `workflows.jsonl.gz`, a line of `realistic_workflows.jsonl.gz`, `manifest.json` and
`solver_report.json` (what `resilibench generate` and `solve` write). `resilibench schema
tasks|workflows|realistic-workflows|manifest|solver-report` prints them, and
`task_set_check.py` checks every file of a set against them as a run loads it
(docs/ARCHITECTURE.md, "Fixtures").

The tool names are the registry's (`enum`), so a schema says which tools a plan may name. Task
and workflow rows are closed (`additionalProperties: false`): the loader would ignore a key it
does not know, so a misspelt one is a mistake to name, not to skip. The manifest and the solver
report stay open: several writers add their own keys to them (`fixture_files.py`).

What a schema cannot say (JSON Schema's `number` admits NaN; ids unique across lines; a plan's
arguments against its tool's own schema; totals that match) is `task_set_check.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_resilibench.base.names import DIFFICULTIES, TASK_TYPES

__all__ = [
    "MANIFEST_SCHEMA",
    "REALISTIC_SCHEMA",
    "SOLVER_REPORT_SCHEMA",
    "TASK_SCHEMA",
    "TASK_SET_SCHEMAS",
    "WORKFLOWS_SCHEMA",
    "manifest_schema",
    "realistic_workflow_schema",
    "solver_report_schema",
    "task_schema",
    "workflow_schema",
]

# The `schema` field each file carries (solver/generate.py and solver/solve.py write the same
# words; tests/unit/test_task_set_schemas.py ties them).
TASK_SCHEMA = "resilibench.task/1"
WORKFLOWS_SCHEMA = "resilibench.workflows/1"
REALISTIC_SCHEMA = "resilibench.realistic_workflows/1"
MANIFEST_SCHEMA = "resilibench.manifest/1"
SOLVER_REPORT_SCHEMA = "resilibench.solver_report/1"

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# A task id names test items and episode ids: short, and no character a node id or a path
# gives a meaning to. It ends with `(?![\s\S])`, not `$`: Python's `$` also matches before a
# final newline, and ECMA's and Python's regexes read the lookahead alike.
_END = "(?![\\s\\S])"
ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}" + _END
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}" + _END}
_COUNT = {"type": "integer", "minimum": 0}
_SHARE = {"type": "number", "minimum": 0, "maximum": 1}
_TEXT = {"type": "string", "minLength": 1}
_SCALAR = {"type": ["string", "number", "boolean"]}
_PARAM_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*" + _END}


def _tool_names() -> list[str]:
    from pytest_resilibench.core.registry import default_registry

    return list(default_registry().names)


def _workflow(tools: Sequence[str]) -> dict[str, Any]:
    step = {
        "type": "object",
        "required": ["tool", "arguments"],
        "additionalProperties": False,
        "properties": {
            "tool": {"enum": list(tools)},
            "purpose": {"type": "string"},
            # Checked against the tool's own parameter schema (the registry), names and all.
            "arguments": {"type": "object"},
            "on_failure": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "required": ["steps"],
        "additionalProperties": False,
        "properties": {"steps": {"type": "array", "minItems": 1, "items": step},
                       "advice": {"type": "string"}},
    }


def task_schema(tools: Sequence[str] | None = None) -> dict[str, Any]:
    """One line of `tasks.jsonl.gz`: `Task.to_json()` (core/tasks.py)."""
    tools = _tool_names() if tools is None else list(tools)
    return {
        "$schema": _DIALECT,
        "$id": "urn:resilibench:task:1",
        "title": "ResiliBench task (one line of tasks.jsonl.gz)",
        "type": "object",
        "required": ["schema", "id", "type", "difficulty", "description", "inputs",
                     "required_tools", "step_arguments"],
        "additionalProperties": False,
        "properties": {
            "schema": {"const": TASK_SCHEMA},
            "id": {"type": "string", "pattern": ID_PATTERN},
            "type": {"enum": list(TASK_TYPES)},
            "difficulty": {"enum": list(DIFFICULTIES)},
            "description": _TEXT,
            "inputs": {"type": "object", "propertyNames": _PARAM_NAME,
                       "additionalProperties": _SCALAR},
            "expected_outputs": {"type": "object", "additionalProperties": _SCALAR},
            "required_tools": {"type": "array", "minItems": 1, "items": {"enum": tools}},
            "constraints": {"type": "array", "items": _TEXT},
            # Each tool's arguments are checked against its parameter schema (the registry).
            "step_arguments": {"type": "object", "propertyNames": {"enum": tools},
                               "additionalProperties": {"type": "object"}},
            "worded": {"type": "array", "uniqueItems": True, "items": _PARAM_NAME},
        },
    }


def workflow_schema(tools: Sequence[str] | None = None) -> dict[str, Any]:
    """One line of `workflows.jsonl.gz`: a task's reference plan and bounds (solver/solve.py)."""
    tools = _tool_names() if tools is None else list(tools)
    workflow = _workflow(tools)
    return {
        "$schema": _DIALECT,
        "$id": "urn:resilibench:workflows:1",
        "title": "ResiliBench reference workflow (one line of workflows.jsonl.gz)",
        "type": "object",
        "required": ["schema", "task_id", "optimal", "bounds", "differs_from_naive"],
        "additionalProperties": False,
        "properties": {
            "schema": {"const": WORKFLOWS_SCHEMA},
            "task_id": {"type": "string", "pattern": ID_PATTERN},
            "optimal": workflow,
            # Success probabilities: dp (the exact optimum), naive, ppo where trained.
            "bounds": {"type": "object", "required": ["dp", "naive"],
                       "propertyNames": _PARAM_NAME, "additionalProperties": _SHARE},
            "differs_from_naive": {"type": "boolean"},
            "ppo": {"type": "object", "required": ["workflow", "ratio", "held_out"],
                    "additionalProperties": False,
                    "properties": {"workflow": workflow,
                                   "ratio": {"type": "number", "minimum": 0},
                                   "held_out": {"type": "boolean"}}},
        },
    }


def realistic_workflow_schema(tools: Sequence[str] | None = None) -> dict[str, Any]:
    """One line of `realistic_workflows.jsonl.gz`: a task's optimal plan under the realistic
    fault profile (core/faults.py), which its prompts show instead of solving at run time."""
    tools = _tool_names() if tools is None else list(tools)
    return {
        "$schema": _DIALECT,
        "$id": "urn:resilibench:realistic_workflows:1",
        "title": "ResiliBench realistic plan (one line of realistic_workflows.jsonl.gz)",
        "type": "object",
        "required": ["schema", "task_id", "optimal"],
        "additionalProperties": False,
        "properties": {
            "schema": {"const": REALISTIC_SCHEMA},
            "task_id": {"type": "string", "pattern": ID_PATTERN},
            "optimal": _workflow(tools),
        },
    }


def manifest_schema() -> dict[str, Any]:
    """`manifest.json`: what wrote the set and the sha256 of every file (fixture_files.py).
    A listed name must be a path inside the set's folder: relative, without `..`, and no
    symlink out of it (checked on disk: a schema cannot see the folder)."""
    cells = {"type": "object", "propertyNames": {"enum": list(DIFFICULTIES)},
             "additionalProperties": _COUNT}
    return {
        "$schema": _DIALECT,
        "$id": "urn:resilibench:manifest:1",
        "title": "ResiliBench task set manifest (manifest.json)",
        "type": "object",
        "required": ["schema", "files", "total"],
        "properties": {
            "schema": {"const": MANIFEST_SCHEMA},
            "files": {"type": "object", "required": ["tasks.jsonl.gz"],
                      "additionalProperties": {
                          "type": "object", "required": ["sha256", "bytes"],
                          "properties": {"sha256": _SHA256, "bytes": _COUNT}}},
            "total": {"type": "integer", "minimum": 1},
            "counts": {"type": "object", "propertyNames": {"enum": list(TASK_TYPES)},
                       "additionalProperties": cells},
            "generator": {"type": "object"},
            "generator_hash": _SHA256,
        },
    }


def solver_report_schema() -> dict[str, Any]:
    """`solver_report.json`: the solver's figures over the set (solver/solve.py)."""
    numbers = {"type": "object", "additionalProperties": {"type": "number"}}
    return {
        "$schema": _DIALECT,
        "$id": "urn:resilibench:solver_report:1",
        "title": "ResiliBench solver report (solver_report.json)",
        "type": "object",
        "required": ["schema", "config", "dp_mean", "naive_mean"],
        "properties": {
            "schema": {"const": SOLVER_REPORT_SCHEMA},
            "config": {"type": "object", "required": ["base_success", "max_turns", "tasks"],
                       "properties": {
                           "base_success": {"type": "number", "exclusiveMinimum": 0,
                                            "maximum": 1},
                           "max_turns": {"type": "integer", "minimum": 1},
                           "tasks": {"type": "integer", "minimum": 1},
                           "structures": {"type": "integer", "minimum": 1}}},
            "dp_mean": _SHARE,
            "naive_mean": _SHARE,
            "share_optimal_differs_from_naive": _SHARE,
            "share_optimal_beats_naive": _SHARE,
            "mean_gain_over_naive": {"type": "number"},
            "mean_gain_where_differs": {"type": "number"},
            "outside_closure_gain": {"type": "number"},
            "base_success_sweep": {"type": "object", "additionalProperties": numbers},
            "clairvoyant_sample": numbers,
            "timings": {"type": "object",
                        "additionalProperties": {"type": "number", "minimum": 0}},
            "peak_memory_mb": {"type": "number", "minimum": 0},
            "ppo": {"type": ["object", "null"]},
            "ppo_to_dp_ratio": {"type": ["number", "null"], "minimum": 0},
            "realistic": {"type": "object"},
        },
    }


# `resilibench schema NAME` (cli.py), beside the report's (reporting/schemas.py).
TASK_SET_SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "tasks": task_schema,
    "workflows": workflow_schema,
    "realistic-workflows": realistic_workflow_schema,
    "manifest": manifest_schema,
    "solver-report": solver_report_schema,
}
