"""The episode record (schema `resilibench.episode/1`): everything one episode did, as
JSON-able builtins, so it can cross xdist, the cache and the reports unchanged.

`messages` is the whole conversation as sent to the model (OpenAI chat messages) and `calls`
every executed tool call (`CallResult.to_json()` plus the `turn` it was made in). Outcome
`error` means the infrastructure failed (the model could not be reached, or the harness
itself broke): such episodes are kept out of the success rates and reported apart. An
exception of a user's agent's own code is the agent's failure: outcome `failed`, stop reason
`agent_error`, and `agent_error` says what and where (runtime/agent_boundary.py).
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pytest_resilibench.base.names import OUTCOMES, Outcome, StopReason, ToolMode

__all__ = ["EPISODE_SCHEMA", "SUMMARY_EXCLUDES", "EpisodeRecord", "episode_id", "episode_problem"]

EPISODE_SCHEMA = "resilibench.episode/1"
SUMMARY_EXCLUDES = ("messages", "calls")


def episode_id(
    *, model: str, variant: str, task_type: str, difficulty: str, task_id: str, repeat: int,
    severity: str | None = None, base_success: float | None = None,
) -> str:
    """The one id format of an episode, which pytest shows as its item's id and `-k` matches
    (integration/cases.py builds every case's with it): fields in a fixed order,
    `o3-flawed-semantic_drift-simple_task-medium-t0421-r0`, the model name made safe
    (`builtin:adaptive` -> `builtin_adaptive`). `severity` and `base_success` appear only when
    given: a plugin run gives them when it sweeps them, `run_episode` the severity always."""
    label = variant if severity is None else f"{variant}-{severity}"
    parts = [_safe_id(model), label, task_type, difficulty, task_id]
    if base_success is not None:
        parts.append(f"b{base_success:g}")
    parts.append(f"r{repeat}")
    return "-".join(parts)


@lru_cache(maxsize=256)  # a run's 50,400 ids name the same few models
def _safe_id(text: str) -> str:
    """`text` with every run of characters an id should not hold (for pytest's `-k` and file
    names) made one underscore."""
    return _UNSAFE.sub("_", text).strip("_")


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class EpisodeRecord:
    id: str
    model: str
    variant: str
    flaw: str | None
    severity: str | None
    task_id: str
    task_type: str
    difficulty: str
    repeat: int
    seed: int
    base_success: float
    tool_mode: ToolMode
    max_turns: int
    outcome: Outcome = "failed"
    conditions: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(
        ("coverage", "order", "output", "completion"), False))
    coverage: float = 0.0
    order_adherence: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    errors_met: int = 0
    errors_recovered: int = 0
    # Turns answered with a format error (no usable call and no completion signal); also
    # counted in errors_met.
    protocol_errors: int = 0
    deviation: dict[str, Any] | None = None
    # reasoning and cached are parts of completion and prompt; replayed: cache replays,
    # outside prompt and completion (not spent by this run).
    tokens: dict[str, int] = field(default_factory=lambda: {
        "prompt": 0, "completion": 0, "total": 0, "reasoning": 0, "cached": 0, "replayed": 0})
    cost_usd: float | None = None  # at the run's prices (agents/pricing.py); None: unknown
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    stop_reason: StopReason | Literal[""] = ""  # "" while the episode runs
    infra_error: str | None = None
    # Stop reason `agent_error` only: `ValueError: ... at agent.py:12 in complete` (redacted).
    # Left out of the JSON when None, as `faults` and `events`.
    agent_error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    # Realistic fault profile only (docs/FAULTS.md): the profile's name and, per event kind
    # met, {"met", "recovered"} (`faults.events_met`). Left out of the JSON when None, so
    # paper records are unchanged.
    faults: str | None = None
    events: dict[str, dict[str, int]] | None = None
    # Loop-level agents that name the model behind their usage (`Episode.add_usage(model=)`,
    # the framework adapters): its tokens by model name ("prompt", "completion", "cached"),
    # what prices them (agents/pricing.py `episode_cost`). Left out of the JSON when None.
    tokens_by_model: dict[str, dict[str, int]] | None = None
    # What cost the outcome a level beyond its conditions, with its count (scoring.py
    # `Score.penalties`: {"excess_runs": 2}, steps run more often than the task allows). Left
    # out of the JSON when None, so records without a penalty are unchanged.
    penalties: dict[str, int] | None = None
    # What the agent did after failures (core/recovery.py `MEASURES`: retried, retry storms,
    # given up with retries left, retry_after honoured, fabricated success ...), counted when
    # the episode is scored. Left out of the JSON when None: no call failed or was spoilt.
    recovery: dict[str, int] | None = None

    @property
    def is_error(self) -> bool:
        return self.outcome == "error"

    # The report's JSON text of the episode as it ran: written by the process that ran it,
    # right after the episode (integration/runner.py), so that the encoding runs warm there
    # and travels with the record (a helper's pickle carries it), and a test that changes the
    # record cannot change what the report says. Not a field: no part of `to_json`,
    # equality or `dataclasses.replace`.
    def keep_report_text(self, text: str) -> None:
        self.__dict__["_report_text"] = text

    def report_text(self) -> str | None:
        text: str | None = self.__dict__.get("_report_text")
        return text

    # A record another process computed (integration/ahead.py) crosses a pipe packed: its
    # trajectory (`SUMMARY_EXCLUDES`: most of its objects) as one pickle, unpacked when first
    # read. An item seldom reads it (its report's text was made where the episode ran), and
    # unpickling it was most of what receiving a record cost the process running pytest's items.
    def pack(self) -> tuple[dict[str, Any], bytes]:
        """(the record's other attributes, its trajectory pickled): `from_pack` rebuilds it."""
        state = dict(self.__dict__)
        trajectory = {name: state.pop(name) for name in SUMMARY_EXCLUDES}
        return state, pickle.dumps(trajectory, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_pack(cls, state: Mapping[str, Any], trajectory: bytes) -> EpisodeRecord:
        record = cls.__new__(cls)
        record.__dict__.update(state)
        record.__dict__[_PACKED] = trajectory
        return record

    if not TYPE_CHECKING:  # mypy would take any attribute name for one that exists

        def __getattr__(self, name: str) -> Any:
            """Only for attributes not set: the trajectory of a record from `from_pack`."""
            attributes = self.__dict__
            if name in SUMMARY_EXCLUDES and _PACKED in attributes:
                attributes.update(pickle.loads(attributes.pop(_PACKED)))
                return attributes[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-able data. Shallow: nested values are the record's own (a deep
        copy of the trajectory cost more than the episode itself), so serialise, don't edit."""
        data = {"schema": EPISODE_SCHEMA, **{name: getattr(self, name) for name in _NAMES}}
        return _drop_unset(data)

    def summary_json(self) -> dict[str, Any]:
        """The record without the trajectory (what reports keep by default); shallow too."""
        return _drop_unset({"schema": EPISODE_SCHEMA, **{
            name: getattr(self, name) for name in _SUMMARY_FIELDS}})

    def fields_json(self, names: Sequence[str]) -> dict[str, Any]:
        """Only the named fields (unset optional ones left out, as `summary_json` leaves
        them out); shallow too."""
        return _drop_unset({name: getattr(self, name) for name in names})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        schema = data.get("schema")
        if schema != EPISODE_SCHEMA:
            raise ValueError(f"not an episode record of schema {EPISODE_SCHEMA}: {schema!r}")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


_NAMES = tuple(f.name for f in fields(EpisodeRecord))  # once, not for every record
_PACKED = "_packed_trajectory"  # `EpisodeRecord.from_pack`: the trajectory, not unpacked yet
_SUMMARY_FIELDS = tuple(name for name in _NAMES if name not in SUMMARY_EXCLUDES)
_OPTIONAL = ("agent_error", "faults", "events", "tokens_by_model", "penalties",
             "recovery")


def _drop_unset(data: dict[str, Any]) -> dict[str, Any]:
    for name in _OPTIONAL:
        if name in data and data[name] is None:
            del data[name]
    return data


# What a stored episode's fields may hold, for the fields the summary, the gate and the reports
# read (a file from elsewhere is checked against it before anything computes on it): the types
# of `schemas.episode_schema()` (a test keeps them in step), checked by hand because jsonschema
# takes ~1 ms an episode, a minute for a 50,400-episode baseline read at start-up. Only the
# fields every reader needs are required: older and hand-made files carry fewer.
_STR, _INT, _NUM = (str,), (int,), (int, float)
_FIELD_TYPES: dict[str, tuple[tuple[type, ...], bool]] = {  # name -> (types, None allowed)
    "id": (_STR, False), "model": (_STR, False), "variant": (_STR, False),
    "task_id": (_STR, False), "outcome": (_STR, False), "flaw": (_STR, True),
    "severity": (_STR, True), "task_type": (_STR, True), "difficulty": (_STR, True),
    "repeat": (_INT, True), "seed": (_INT, True), "base_success": (_NUM, True),
    "tool_mode": (_STR, True), "max_turns": (_INT, True), "coverage": (_NUM, True),
    "order_adherence": (_NUM, True), "turns": (_INT, True), "tool_calls": (_INT, True),
    "errors_met": (_INT, True), "errors_recovered": (_INT, True),
    "protocol_errors": (_INT, True), "cost_usd": (_NUM, True), "sim_time_s": (_NUM, True),
    "wall_time_s": (_NUM, True), "stop_reason": (_STR, True), "infra_error": (_STR, True),
    "agent_error": (_STR, True),
    "faults": (_STR, True), "conditions": ((dict,), True), "deviation": ((dict,), True),
    "tokens": ((dict,), True), "events": ((dict,), True), "messages": ((list,), True),
    "tokens_by_model": ((dict,), True), "penalties": ((dict,), True),
    "recovery": ((dict,), True), "calls": ((list,), True),
}
REQUIRED_FIELDS = ("model", "variant", "task_id", "outcome")  # what every reader needs


def episode_problem(data: object) -> str | None:
    """What makes `data` unfit to be read as a stored episode, or None: the required fields,
    every known field's type (bools are not numbers), counts in `tokens` and `events`, and
    lists of objects in `messages` and `calls`."""
    if not isinstance(data, dict):
        return f"an episode is a JSON object, not {type(data).__name__}"
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    if missing:
        return f"episode lacks required fields {missing}"
    for name, (types, nullable) in _FIELD_TYPES.items():
        value = data.get(name)
        if value is None and (nullable or name not in data):
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            return f"episode field {name!r} is {type(value).__name__}, not {types[0].__name__}"
    if data["outcome"] not in OUTCOMES:
        return f"episode outcome {data['outcome']!r} is not one of {', '.join(OUTCOMES)}"
    counts = [data.get("tokens") or {}, *(data.get("events") or {}).values(),
              *(data.get("tokens_by_model") or {}).values(), data.get("penalties") or {},
              data.get("recovery") or {}]
    for group in counts:
        if not isinstance(group, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in group.values()):
            return "episode token, event and penalty counts (and recovery counts) must be integers"
    for name in ("messages", "calls"):
        if not all(isinstance(item, dict) for item in data.get(name) or ()):
            return f"episode field {name!r} must be a list of objects"
    return None
