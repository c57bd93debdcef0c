"""The benchmark's vocabularies that many modules share, with no dependency of their own.

Every module takes these words from here, so a value the options accept is one the prompts,
flaws, episodes, gates and reports know. Importing this costs nothing, so the plugin's option
parsing can name them without loading the modules that use them (the plugin is inert until a
run asks for the benchmark).
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "APIS",
    "COMPLETION_SIGNAL",
    "DATA_FLOWS",
    "DEFAULT_CONCURRENCY",
    "DIFFICULTIES",
    "ENVIRONMENTS",
    "FAULT_PROFILES",
    "FLAWS",
    "FLOW_PARAMS",
    "GATES",
    "MODEL_LIMITS",
    "OUTCOMES",
    "REPEAT_HEADER",
    "SCORED",
    "SEVERITIES",
    "TASK_HEADER",
    "TASK_TYPES",
    "TOOL_MODES",
    "VARIANT_KINDS",
    "DataFlow",
    "Env",
    "FaultProfile",
    "ModelLimit",
    "Outcome",
    "StopReason",
    "ToolMode",
    "is_scored",
]

TASK_TYPES = ("simple_task", "basic_task", "data_pipeline", "api_integration",
              "multi_stage_pipeline")
DIFFICULTIES = ("easy", "medium", "hard")

# The seven plan flaws (flaws.py injects them) and their severities: the number of edits.
FLAWS = (
    "sequence_disorder",
    "tool_misuse",
    "parameter_error",
    "missing_step",
    "redundant_operations",
    "logical_inconsistency",
    "semantic_drift",
)
SEVERITIES = ("light", "medium", "severe")

# Prompt variants (prompts.Variant.kind) and how tools reach the model.
VARIANT_KINDS = ("baseline", "cot", "optimal", "flawed")
ToolMode = Literal["text", "native"]
TOOL_MODES: tuple[ToolMode, ...] = ("text", "native")

# The reply that ends an episode (prompts tell it, parsing reads it, scoring's `completion`).
COMPLETION_SIGNAL = "TASK_COMPLETED"

# An episode's outcome (record.py, scoring.py). `error` is an infrastructure failure: the
# model could not be reached (or the harness broke), so the episode is kept out of every rate
# and every gate. An agent error (stop reason `agent_error`) is `failed`: the agent's failure.
Outcome = Literal["full", "partial", "failed", "error"]
OUTCOMES: tuple[Outcome, ...] = ("full", "partial", "failed", "error")
SCORED: tuple[Outcome, ...] = ("full", "partial", "failed")


def is_scored(outcome: object) -> bool:
    """Whether an outcome counts in rates and gates: the scored ones only (never `error`,
    nor anything a foreign report may hold)."""
    return outcome in SCORED


# Why an episode ended (record.py; runtime/episode.py says when each applies). The model's own
# limits (protocol.ModelLimitError) end a scored episode, and so does `agent_error` (a user's
# agent's own code raised: outcome `failed`); `infra_error` and `harness_error` end one whose
# outcome is `error`.
ModelLimit = Literal["context_overflow", "refusal", "length"]
MODEL_LIMITS: tuple[ModelLimit, ...] = ("context_overflow", "refusal", "length")
StopReason = Literal["completed", "max_turns", "repeated_call", "consecutive_errors",
                     "run_returned", "agent_error", "infra_error", "harness_error", ModelLimit]


# Run options' choices (options.py); each module that acts on one checks it against these.
Env = Literal["sim", "live", "mcp"]  # where the tools run: simulator, live services, MCP
ENVIRONMENTS: tuple[Env, ...] = ("sim", "live", "mcp")
FaultProfile = Literal["paper", "realistic"]  # docs/FAULTS.md
FAULT_PROFILES: tuple[FaultProfile, ...] = ("paper", "realistic")
GATES = ("fixed", "sequential")
APIS = ("chat", "responses")  # the OpenAI endpoints the provider speaks
# Episodes in flight per process, wherever many run (`--resili-concurrency`, `run_episodes`):
# enough to hide a remote model's latency, few enough to stay under common per-key rate limits.
DEFAULT_CONCURRENCY = 16

# Request headers the provider sends and the test server reads: which episode a request
# belongs to, so the server counts attempts and draws its faults per episode.
TASK_HEADER = "x-resilibench-task"
REPEAT_HEADER = "x-resilibench-repeat"

# Tool parameters that carry data flow (an earlier output and its format) rather than a
# task-bound value: no check of a task's inputs applies to them.
FLOW_PARAMS = frozenset({"source", "format"})
# What a call's data-flow arguments mean (docs/BENCHMARK.md: Simulator; issue 50). `inferred`
# (the paper's environment): a call that names no `source` reads the output the task's flow
# needs, and one that names no `format` reads its data as they are. `explicit` (the default
# task set's): the call's arguments are its data flow, as with a real tool: no `source` reads
# the latest output of any tool, no `format` reads the data as json.
DataFlow = Literal["inferred", "explicit"]
DATA_FLOWS: tuple[DataFlow, ...] = ("inferred", "explicit")
