"""JSON Schemas (draft 2020-12) of what the plugin writes: the report (`resilibench.report/1`),
its episodes (`resilibench.episode/1`) and its resili_faults tests' section
(`resilibench.chaos_section/1`, each run `resilibench.chaos/1`). `resilibench schema
report|episode` prints them; CI tools and the tests validate reports against them. Objects
stay open (`additionalProperties`) so a newer writer may add fields without breaking an older
reader; what is required and typed here is the contract readers rely on
(docs/ARCHITECTURE.md, "Reports").
"""

from __future__ import annotations

from typing import Any

from pytest_resilibench.core.record import EPISODE_SCHEMA
from pytest_resilibench.reporting.chaos_summary import OUTCOMES as CHAOS_OUTCOMES
from pytest_resilibench.reporting.chaos_summary import RUN_SCHEMA as CHAOS_RUN_SCHEMA
from pytest_resilibench.reporting.chaos_summary import SECTION_SCHEMA as CHAOS_SECTION_SCHEMA
from pytest_resilibench.reporting.report import REPORT_SCHEMA

__all__ = ["SCHEMAS", "chaos_section_schema", "episode_schema", "report_schema"]

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_COUNT = {"type": "integer", "minimum": 0}
_SHARE = {"type": "number", "minimum": 0, "maximum": 1}
_TEXT_OR_NULL = {"type": ["string", "null"]}


def episode_schema() -> dict[str, Any]:
    """One episode record, as `EpisodeRecord.to_json()` / `summary_json()` write it."""
    return {
        "$schema": _DIALECT,
        "$id": "urn:resilibench:episode:1",
        "title": "ResiliBench episode record",
        "type": "object",
        "required": ["schema", "id", "model", "variant", "flaw", "severity", "task_id",
                     "task_type", "difficulty", "repeat", "seed", "base_success", "tool_mode",
                     "max_turns", "outcome", "conditions", "coverage", "order_adherence",
                     "turns", "tool_calls", "errors_met", "errors_recovered", "tokens",
                     "stop_reason"],
        "properties": {
            "schema": {"const": EPISODE_SCHEMA},
            "id": {"type": "string", "minLength": 1},
            "model": {"type": "string", "minLength": 1},
            "variant": {"type": "string"},
            "flaw": _TEXT_OR_NULL,
            "severity": _TEXT_OR_NULL,
            "task_id": {"type": "string"},
            "task_type": {"type": "string"},
            "difficulty": {"type": "string"},
            "repeat": _COUNT,
            "seed": _COUNT,
            "base_success": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "tool_mode": {"enum": ["text", "native"]},
            "max_turns": {"type": "integer", "minimum": 1},
            "outcome": {"enum": ["full", "partial", "failed", "error"]},
            "conditions": {"type": "object",
                           "required": ["coverage", "order", "output", "completion"],
                           "additionalProperties": {"type": "boolean"}},
            "coverage": _SHARE,
            "order_adherence": _SHARE,
            "turns": _COUNT,
            "tool_calls": _COUNT,
            "errors_met": _COUNT,
            "errors_recovered": _COUNT,
            "protocol_errors": _COUNT,
            "deviation": {"type": ["object", "null"]},
            "tokens": {"type": "object", "additionalProperties": _COUNT},
            "cost_usd": {"type": ["number", "null"], "minimum": 0},
            "sim_time_s": {"type": "number", "minimum": 0},
            "wall_time_s": {"type": "number", "minimum": 0},
            "stop_reason": {"type": "string"},
            "infra_error": _TEXT_OR_NULL,
            "agent_error": {"type": "string"},
            "messages": {"type": "array", "items": {"type": "object",
                                                    "required": ["role"]}},
            "calls": {"type": "array", "items": {"type": "object"}},
            "faults": {"type": "string"},
            "events": {"type": "object"},
            "tokens_by_model": {"type": "object", "additionalProperties": {
                "type": "object", "additionalProperties": _COUNT}},
            "penalties": {"type": "object", "additionalProperties": _COUNT},
            "recovery": {"type": "object", "additionalProperties": _COUNT},
        },
    }


def report_schema() -> dict[str, Any]:
    """The JSON report `--resili-report` writes (episodes inline, `$defs/episode`)."""
    episode = episode_schema()
    del episode["$schema"], episode["$id"]
    return {
        "$schema": _DIALECT,
        "$id": "urn:resilibench:report:1",
        "title": "ResiliBench run report",
        "type": "object",
        "required": ["schema", "config", "environment", "summary", "episodes", "complete",
                     "expected", "received"],
        "properties": {
            "schema": {"const": REPORT_SCHEMA},
            "config": {"type": "object",
                       "required": ["models", "variants", "seed", "base_success", "max_turns",
                                    "tool_mode", "fixture_hash", "package_version"],
                       "properties": {"models": {"type": "array",
                                                 "items": {"type": "string"}},
                                      "fixture_hash": _TEXT_OR_NULL}},
            "environment": {"type": "object",
                            "required": ["python", "platform", "created"],
                            "properties": {"gate": {"type": "array",
                                                    "items": {"type": "string"}},
                                           "lost": {"type": "array",
                                                    "items": {"type": "string"}}}},
            "summary": {"type": "object", "required": ["counts"]},
            "complete": {"type": "boolean"},
            "expected": _COUNT,
            "received": _COUNT,
            "resumed": _COUNT,  # of `received`: replayed from an unfinished run's log
            "prompt_cache": {"type": "object"},
            "sequential": {"type": "object"},
            "episodes": {"type": "array", "items": {"$ref": "#/$defs/episode"}},
            "chaos": chaos_section_schema(),
        },
        # A run of resili_faults tests alone has no model; a benchmark run has at least one.
        "if": {"not": {"required": ["chaos"]}},
        "then": {"properties": {"config": {"properties": {"models": {"minItems": 1}}}}},
        "$defs": {"episode": episode},
    }


def chaos_section_schema() -> dict[str, Any]:
    """The report's `chaos` section: the resili_faults tests' runs, one per item
    (integration/chaos.py `row_of`), their summary and the comparison with the baseline
    (reporting/chaos_summary.py)."""
    count_or_null = {"type": ["integer", "null"], "minimum": 0}
    run = {"type": "object",
           "required": ["schema", "test", "run", "profile", "seed", "outcome", "trace",
                        "calls", "faults", "measures"],
           "properties": {"schema": {"const": CHAOS_RUN_SCHEMA},
                          "test": {"type": "string", "minLength": 1},
                          "run": {"type": "string"}, "profile": {"type": "string"},
                          "seed": count_or_null,
                          "outcome": {"enum": list(CHAOS_OUTCOMES)},
                          "trace": _TEXT_OR_NULL, "calls": _COUNT, "faults": _COUNT,
                          "measures": {"type": "object",
                                       "additionalProperties": count_or_null}}}
    return {"type": "object", "required": ["schema", "runs", "summary", "comparison"],
            "properties": {"schema": {"const": CHAOS_SECTION_SCHEMA},
                           "runs": {"type": "array", "items": run},
                           "summary": {"type": "object", "required": ["tests"]},
                           "comparison": {"type": ["object", "null"]}}}


SCHEMAS = {"report": report_schema, "episode": episode_schema}
