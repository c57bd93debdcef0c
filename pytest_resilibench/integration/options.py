"""Command-line and ini options of the plugin, parsed once into a frozen `RunConfig`.

Every option but the live services' key has an ini equivalent (`resili_model = o3` in
pytest.ini / pyproject); the key is `--resili-live-api-key` or `RESILIBENCH_LIVE_API_KEY`, kept
out of checked-in files. Values are checked at start-up: a bad value stops the run with a usage
error naming the option, before any episode runs. Parsers are plain functions so the ini path
and the command line share them.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_resilibench.base.names import (
    APIS,
    DEFAULT_CONCURRENCY,
    DIFFICULTIES,
    ENVIRONMENTS,
    FAULT_PROFILES,
    FLAWS,
    GATES,
    SEVERITIES,
    TASK_TYPES,
    TOOL_MODES,
    VARIANT_KINDS,
    Env,
    FaultProfile,
    ToolMode,
)
from pytest_resilibench.integration.gate_policy import (
    INCONCLUSIVE_RULES,
    GatePolicy,
    InfraTolerance,
    parse_infra_tolerance,
)

if TYPE_CHECKING:  # loaded with the option's value only: a project without it pays nothing
    from pytest_resilibench.integration.shards import Shard

__all__ = [
    "RunConfig",
    "add_options",
    "read_config",
]

DEFAULT_MODEL = "builtin:adaptive"
# The shipped task sets (core/tasks.py's TASK_SETS, named here so options import no fixtures).
TASK_SET_NAMES = ("default", "paper")
LIVE_KEY_ENV = "RESILIBENCH_LIVE_API_KEY"  # the live services' key, when not on the command line
_T = TypeVar("_T")
# "Not on the command line" (None is a real value: `--resili-sample=all` parses to None).
_NOT_GIVEN: Any = object()


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides which episodes run and how (no I/O, no clocks)."""

    models: tuple[str, ...] = (DEFAULT_MODEL,)
    base_url: str | None = None
    variants: tuple[str, ...] = VARIANT_KINDS
    flaws: tuple[str, ...] = FLAWS
    severities: tuple[str, ...] = ("medium",)
    task_types: tuple[str, ...] = TASK_TYPES
    difficulties: tuple[str, ...] = DIFFICULTIES
    sample: int | None = 10  # tasks per type x difficulty cell; None = all
    repeats: int = 1
    seed: int = 0
    base_success: tuple[float, ...] = (0.8,)
    max_turns: int = 10
    tool_mode: ToolMode = "text"
    concurrency: int = DEFAULT_CONCURRENCY
    retries: int = 6
    request_timeout: float = 600.0
    # A user's agent's wall-clock limits (runtime/agent_boundary.py): a turn (None: auto,
    # `turn_limit`) and a whole episode.
    turn_timeout: float | None = None
    episode_timeout: float = 14400.0
    rpm: float | None = None  # the provider's budgets per minute, when known
    tpm: float | None = None
    max_wait: float = 600.0  # seconds one request may wait on rate limits
    temperature: float | str | None = "auto"  # auto: the model family's (agents/profiles.py)
    model_args: dict[str, Any] = field(default_factory=dict)
    api: str = "chat"
    api_version: str | None = None
    max_consecutive_errors: int = 10
    max_cost: float | None = None
    prices: Path | None = None
    cache: Path | None = None
    report: Path | None = None
    resume: str | Path = "auto"  # auto (the report's own episode log), off, or a report
    baseline: Path | None = None
    max_drop: float = 5.0
    confidence: float = 0.95
    gate: str = "fixed"
    fail_under: float | None = None
    inconclusive: str = "pass"
    max_infra_errors: InfraTolerance = field(default_factory=InfraTolerance)
    env: Env = "sim"
    faults: FaultProfile = "paper"
    # Every service the user's URLs reach (`--resili-live-server` filled in per service, then
    # `--resili-live-base-url`); the others run on the run's own loopback services.
    live_base_urls: dict[str, str] = field(default_factory=dict)
    # Sent to the live services as `Authorization: Bearer KEY` (`serve-live --api-key`); a
    # secret, so in no report, config dump or repr. Only requests to `live_key_origin` (the
    # serve-live's origin, servers/live/key_scope.py) carry it.
    live_api_key: str | None = field(default=None, repr=False)
    live_key_origin: str | None = None
    live_server: str | None = None  # `--resili-live-server` (its services are in the URLs)
    trajectories: bool = False
    skip_bad_agents: bool = False
    summary: str = "headline"  # the terminal's: the headline, or the full tables too
    task_set: str = "default"  # a shipped set (TASK_SET_NAMES), unless `tasks` names a folder
    tasks: Path | None = None
    shard: Shard | None = None  # this job's part of the run (integration/shards.py)
    # OpenTelemetry export (integration/otel.py): on, and with the messages' contents
    otel: bool = False
    otel_content: bool = False

    @property
    def task_set_name(self) -> str:
        """The set's name as reports and the terminal give it: a shipped set's name, or the
        folder given to --resili-tasks."""
        return str(self.tasks) if self.tasks is not None else self.task_set

    @property
    def turn_limit(self) -> float:
        """A turn's limit in seconds: `turn_timeout`, or by default (auto) the longest one
        model request may take by the request options, every retry and rate-limit wait
        included: (retries + 1) x request_timeout + max_wait, 4800 s with the defaults. A
        user's agent calling a real model (the adapters' requests follow these options) is
        then never cut short where the options would let its request go on."""
        if self.turn_timeout is not None:
            return self.turn_timeout
        return (self.retries + 1) * self.request_timeout + self.max_wait

    @property
    def gate_policy(self) -> GatePolicy:
        return GatePolicy(max_drop_pp=self.max_drop, confidence=self.confidence,
                          fail_under=self.fail_under, inconclusive=self.inconclusive,
                          max_infra_errors=self.max_infra_errors)

    def to_json(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "base_url": self.base_url,
            "variants": list(self.variants),
            "flaws": list(self.flaws),
            "severities": list(self.severities),
            "task_types": list(self.task_types),
            "difficulties": list(self.difficulties),
            "sample": "all" if self.sample is None else self.sample,
            "repeats": self.repeats,
            "seed": self.seed,
            "base_success": list(self.base_success),
            "max_turns": self.max_turns,
            "tool_mode": self.tool_mode,
            "temperature": self.temperature,
            "model_args": self.model_args,
            "api": self.api,
            "api_version": self.api_version,
            "env": self.env,
            "faults": self.faults,
            "gate": self.gate,
            "confidence": self.confidence,
            # what `resilibench report --compare` judges by unless told otherwise
            "gate_policy": self.gate_policy.to_json(),
            "task_set": self.task_set_name,
            # Only a shard's report says so: a merged report's config is the whole run's.
            **({"shard": str(self.shard)} if self.shard is not None else {}),
        }


# --- value parsers (raise ValueError with a message fit for the user) -------------------------
# The most a number option may hold: what a 64-bit integer holds (the report's JSON readers,
# sqlite and numpy keep no more), so that `99999999999999999999` is one line, not an overflow
# somewhere later.
MAX_INT = 2**63 - 1
# A turn budget beyond this is a typo: the optimum's tables grow with it (core/optimum/) and
# no task of a shipped set needs more than a few dozen turns.
MAX_TURNS = 1000


def _split(text: str) -> list[str]:
    """A list option's items: separated by commas or blanks. An empty item (`0.9,,0.8`, a
    trailing comma) and a repeated one (`o3,o3`) are refused: each is most likely a typo that
    silently ran something else than meant."""
    items: list[str] = []
    for part in text.split(","):
        words = part.split()
        if not words and text.strip():
            raise ValueError(f"{text.strip()!r} has an empty item (two commas in a row, or a "
                             f"comma at an end)")
        items += words
    repeated = sorted({item for item in items if items.count(item) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} given twice in {text.strip()!r}")
    return items


def _choices(allowed: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        values = _split(text)
        if "all" in values:
            return tuple(allowed)
        bad = [v for v in values if v not in allowed]
        if bad or not values:  # joined as given (blanks): a `Bearer TOKEN` stays one to redact
            raise ValueError(f"{' '.join(bad) or 'nothing'} not in {', '.join(allowed)}")
        return tuple(values)

    return parse


def _one_of(allowed: Sequence[str]) -> Callable[[str], str]:
    """A single choice: `text,native` is refused, not read as its first value."""
    def parse(text: str) -> str:
        value = text.strip()
        if value not in allowed:
            several = " (one value only)" if len(value.replace(",", " ").split()) > 1 else ""
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}{several}")
        return value

    return parse


def _models(text: str) -> tuple[str, ...]:
    models = tuple(_split(text))
    if not models:
        raise ValueError("give at least one model")
    return models


def _sample(text: str) -> int | None:
    """Tasks per cell, or all; above the task set's biggest cell is refused once the set is
    loaded (`ResiliSession.task_set`)."""
    if text.strip().lower() == "all":
        return None
    return _int_in(1)(text)


def _int_in(lo: int, hi: int = MAX_INT, *, why: str = "") -> Callable[[str], int]:
    """An integer in [lo, hi]; `why` says where `hi` comes from."""
    def parse(text: str) -> int:
        digits = text.strip()
        try:  # no more digits than a 64-bit integer has: Python's own limit is 4300
            value = int(digits) if len(digits) <= 40 else None
        except ValueError:
            value = None
        if value is None:
            raise ValueError(f"{digits[:40]!r} is not an integer" if not digits.isdigit()
                             else f"{digits[:20]}... does not fit in a 64-bit integer")
        if value < lo:
            raise ValueError(f"{value} is below {lo}")
        if value > hi:
            limit = f"{hi}{f' ({why})' if why else ''}" if hi != MAX_INT else \
                f"{hi} (a 64-bit integer)"
            raise ValueError(f"{value} is above the most this option takes, {limit}")
        return value

    return parse


def _int_at_least(lo: int) -> Callable[[str], int]:
    return _int_in(lo)


def _number(text: str, what: str, lo: float, hi: float = math.inf, *,
            lo_open: bool = False) -> float:
    """A float in [lo, hi] (or (lo, hi] with `lo_open`); the message names what it is."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not {what}") from None
    if not math.isfinite(value):
        raise ValueError(f"{text.strip()!r} is not {what} (a finite number)")
    if value > hi or value < lo or (lo_open and value == lo):
        low = f"({lo:g}" if lo_open else f"[{lo:g}"
        raise ValueError(f"{value:g} is not {what} in {low}, {hi:g}]")
    return value


def _rates(text: str) -> tuple[float, ...]:
    values = [_number(part, "a probability", 0.0, 1.0, lo_open=True) for part in _split(text)]
    if not values:
        raise ValueError("give at least one rate")
    if len(set(values)) < len(values):  # `0.8,0.80`: one rate written twice
        raise ValueError(f"{text.strip()!r} gives a rate twice")
    return tuple(values)


def _rate(text: str) -> float:
    """A rate as 0.55 or 55%."""
    text = text.strip()
    if text.endswith("%"):
        return _number(text[:-1], "a percentage", 0.0, 100.0) / 100
    return _number(text, "a rate (0.55 or 55%)", 0.0, 1.0)


def _points(text: str) -> float:
    return _number(text.strip().removesuffix("pp"), "a number of percentage points", 0.0, 100.0)


def _confidence(text: str) -> float:
    value = _number(text.strip().removesuffix("%"), "a confidence level", 0.0, 100.0,
                    lo_open=True)
    value = value / 100 if text.strip().endswith("%") or value > 1 else value
    if not 0.5 <= value < 1.0:
        raise ValueError(f"{text.strip()} is not a confidence level in [0.5, 1) (or 50-99.9%)")
    return value


def _seconds(text: str) -> float:
    return _number(text, "a number of seconds", 0.0, lo_open=True)


def _seconds_or_auto(text: str) -> float | None:
    return None if text.strip().lower() == "auto" else _seconds(text)


def _per_minute(text: str) -> float:
    return _number(text, "a budget per minute", 0.0, lo_open=True)


def _temperature(text: str) -> float | str | None:
    if text.strip().lower() in ("default", "auto"):
        return None if text.strip().lower() == "default" else "auto"
    return _number(text, "a temperature (a number, or 'default')", 0.0, 2.0)


def _existing_file(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_file():
        raise ValueError(f"no such file: {path}" if len(text) < 500 and "\n" not in text
                         else "no such file (the value given is no path)")
    return path


def _task_dir(text: str) -> Path:
    """A task-set folder of one's own (`resilibench generate --out DIR`); its files are
    verified against its manifest when the run loads it."""
    path = Path(text).expanduser()
    if path.is_file() and path.name == "tasks.jsonl.gz":
        path = path.parent
    if not (path / "tasks.jsonl.gz").is_file():
        raise ValueError(f"{path} holds no tasks.jsonl.gz (`resilibench generate --out "
                         f"{path}` writes a task set there)")
    return path


def _url(text: str) -> str:
    """An http(s) URL with a host (and a port that is one): `http://[::1` and
    `http://h:99999` are refused here, not by the first request of the run."""
    from urllib.parse import urlsplit

    from pytest_resilibench.base.redact import redact

    url = text.strip()
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port out of range or not a number
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"{redact(url)!r} is not an http(s) URL ({redact(str(exc))})") from None
    if parts.scheme not in ("http", "https") or not host or port == 0 or \
            any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError(f"{redact(url)!r} is not an http(s) URL with a host")
    return url.rstrip("/")


def _live_urls(values: Sequence[str]) -> dict[str, str]:
    urls = {}
    for item in values:
        name, sep, url = item.partition("=")
        if not sep or not name.strip():
            from pytest_resilibench.base.redact import redact

            raise ValueError(f"{redact(item)!r} is not SERVICE=URL")
        urls[name.strip()] = _url(url)
    return urls


def _json_object(text: str) -> dict[str, Any]:
    from pytest_resilibench.base.jsonfile import loads_bounded

    try:  # what any JSON from outside gets: finite numbers, bounded integers and depth
        value = loads_bounded(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):  # the value itself is not quoted: it may hold a key
        raise ValueError(f"a JSON {type(value).__name__.replace('str', 'string')} where a JSON "
                         f"object was expected")
    return value


def _dollars(text: str) -> float:
    return _number(text.strip().lstrip("$"), "an amount in USD", 0.0, lo_open=True)


def _resume(text: str) -> str | Path:
    word = text.strip().lower()
    if word in ("auto", "off"):
        return word
    if not text.strip():
        raise ValueError("give auto, off or a report file")
    return _path(text.strip())


def _path(text: str) -> Path:
    return Path(text).expanduser()


def _output_file(text: str) -> Path:
    """A file the run will write at its end: checked now, so a run never loses its results
    to a path that could not take them."""
    path = _path(text)
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a file")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {path}: {parent} is not a writable directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"cannot write {path}: the file is read-only")
    return path


def _shard(text: str) -> Shard:
    from pytest_resilibench.integration.shards import parse_shard

    return parse_shard(text)


def _api_version(text: str) -> str:
    """An Azure OpenAI api-version: a date, with an optional `-preview` (or `v1`)."""
    version = text.strip()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}(-preview)?|v1|latest|preview", version):
        raise ValueError(f"an api-version is a date such as 2024-10-21 (or "
                         f"2025-04-01-preview), got {text!r}")
    return version


# The gate's thresholds: one vocabulary for the run (`--resili-NAME`, ini `resili_NAME`) and
# `resilibench report` (`--NAME`), with the same parsers, defaults and help (integration/gate.py).
GATE_OPTIONS: dict[str, tuple[Callable[[str], Any], str | None, str]] = {
    "max-drop": (_points, "5", "allowed drop in full-success points, each model against its "
                 "baseline partner"),
    "confidence": (_confidence, "0.95",
                   "confidence level of the paired verdicts (0.95, or 95 for percent)"),
    "fail-under": (_rate, None, "fail if any model's full-success rate is below this"),
    "inconclusive": (_one_of(INCONCLUSIVE_RULES), "pass",
                     "what an inconclusive verdict does: pass (default: the run was too small "
                     "to tell) or fail (a release gate that must show no regression)"),
    "max-infra-errors": (parse_infra_tolerance, "0",
                         "infra errors a passing run may have: a count (default 0) or a share "
                         "of its episodes (2%)"),
}


# --- registration -----------------------------------------------------------------------------
# (name, parser, default, help). The dest is `resili_<name>` on the command line and in the ini.
_OPTIONS: list[tuple[str, Callable[[str], Any] | None, str | None, str]] = [
    ("model", _models, DEFAULT_MODEL,
     "model(s) to evaluate, comma-separated: builtin:NAME (oracle, follower, adaptive, random), "
     "py:MODULE:FACTORY (your own agent), openai:NAME or a bare model name for an "
     "OpenAI-compatible API"),
    ("base-url", _url, None, "base URL of an OpenAI-compatible API (vLLM, Ollama, llama.cpp)"),
    ("variants", _choices(VARIANT_KINDS), ",".join(VARIANT_KINDS),
     "prompt variants: baseline, cot, optimal, flawed (or all)"),
    ("flaws", _choices(FLAWS), "all", "flaws for the flawed variant (or all)"),
    ("severity", _choices(SEVERITIES), "medium",
     "flaw severities: light, medium, severe (several for a sweep, or all)"),
    ("task-types", _choices(TASK_TYPES), "all", "task types (or all)"),
    ("difficulties", _choices(DIFFICULTIES), "all", "difficulties (or all)"),
    ("sample", _sample, "10", "tasks per type x difficulty cell (stratified, seeded) or all"),
    ("repeats", _int_at_least(1), "1", "episodes per task (k for pass^k)"),
    ("seed", _int_at_least(0), "0", "run seed: tool luck and the task sample"),
    ("base-success", _rates, "0.8", "tool base success rate(s), comma-separated for a sweep"),
    ("max-turns", _int_in(1, MAX_TURNS, why="a longer episode is most likely a typo"), "10",
     f"turn budget per episode (at most {MAX_TURNS})"),
    ("tool-mode", _one_of(TOOL_MODES), "text",
     "text (<tool_call> tags) or native (function calling)"),
    ("concurrency", _int_at_least(1), str(DEFAULT_CONCURRENCY),
     "model requests in flight per process, the ceiling of the adaptive limit (which follows "
     "the provider's 429s); a real model runs 4 episodes per request slot, any other agent "
     "this many episodes"),
    ("retries", _int_at_least(0), "6",
     "retries of a failed model request (5xx, timeouts, connection errors) before it counts "
     "as an infrastructure error"),
    ("request-timeout", _seconds, "600",
     "seconds one model request may take as a whole: connect, send, wait and read (the "
     "openai client's own default: a long reasoning turn is legitimate); a timed-out "
     "request is retried, so one request may take up to (retries + 1) x this"),
    ("turn-timeout", _seconds_or_auto, "auto",
     "seconds one turn of your agent (py:, the hook's, a framework adapter's) may take: a "
     "complete(), or a loop-level agent's time from the start of run() or of its last call to "
     "its next call; past it the turn is cancelled and the episode is an agent error. auto: "
     "(--resili-retries + 1) x --resili-request-timeout + --resili-max-wait (4800 s by "
     "default), the longest a real model's request may take with its retries and waits; the "
     "built-in agents and openai: models are bounded by those options themselves"),
    ("episode-timeout", _seconds, "14400",
     "seconds one episode of your agent may take in all, every turn together (4 hours by "
     "default); past it the episode is an agent error"),
    ("rpm", _per_minute, None,
     "the provider's requests per minute, when known: requests are paced to it (shared by "
     "the run's processes on this host)"),
    ("tpm", _per_minute, None,
     "the provider's tokens per minute, when known (counted from each reply's usage): "
     "requests wait while the last minute's tokens are spent"),
    ("max-wait", _seconds, "600",
     "seconds one model request may wait on the provider's rate limits (429s, "
     "x-ratelimit-* headers, --resili-rpm/--resili-tpm) before it counts as an "
     "infrastructure error; a 429 spends none of --resili-retries"),
    ("temperature", _temperature, "auto",
     "sampling temperature sent to real models: auto (0 for chat models, none for reasoning "
     "models), a number, or 'default' for the server's own"),
    ("model-args", _json_object, None,
     "extra request fields for real models, a JSON object passed through unchanged, e.g. "
     "'{\"reasoning_effort\": \"low\", \"max_completion_tokens\": 4000}'"),
    ("api", _one_of(APIS), "chat",
     "chat (chat completions) or responses (OpenAI's Responses API; reasoning carried "
     "across tool turns)"),
    ("api-version", _api_version, None,
     "Azure OpenAI: the api-version of every request (e.g. 2024-10-21); the models are "
     "deployment names, the endpoint --resili-base-url or AZURE_OPENAI_ENDPOINT, the key "
     "AZURE_OPENAI_API_KEY"),
    ("max-consecutive-errors", _int_at_least(1), "10",
     "stop sending a model's requests after this many failed in a row (the rest of its "
     "episodes become infra errors, not sent)"),
    ("max-cost", _dollars, None,
     "stop starting new episodes once the run's model spend passes this many USD"),
    ("prices", _existing_file, None,
     "JSON file of model prices in USD per 1M tokens, over the built-in table: "
     "{\"MODEL\": {\"input\": 2.0, \"cached_input\": 0.5, \"output\": 8.0}}"),
    ("cache", _path, None, "model-call cache file (sqlite); re-runs replay from it"),
    ("report", _output_file, None, "write the JSON report (resilibench.report/1) here"),
    ("resume", _resume, "auto",
     "resume an interrupted run: auto (from the episode log an unfinished run left beside "
     "--resili-report), off (start afresh), or RUN.json (reuse that report's episodes): "
     "only the missing episodes run; the options that decide an episode must match"),
    ("baseline", _existing_file, None,
     "compare with this earlier JSON report: each model against its own partner (paired)"),
    *((name, parse, default, text) for name, (parse, default, text) in GATE_OPTIONS.items()),
    ("gate", _one_of(GATES), "fixed",
     "with --resili-baseline: fixed (judge after every episode ran) or sequential (episodes in "
     "a seeded random order; the run stops as soon as the paired evidence decides)"),
    ("faults", _one_of(FAULT_PROFILES), "paper",
     "fault profile: paper (the paper's random failures) or realistic (outages, expired "
     "credentials, rate limits, silent failures, a task-scaled turn budget; docs/FAULTS.md)"),
    ("env", _one_of(ENVIRONMENTS), "sim",
     "sim (the simulator in process), mcp (the same simulator behind our MCP server, one "
     "stdio server per process for all its episodes) or live (the HTTP services)"),
    ("live-server", _url, None,
     "with --resili-env=live: a `resilibench serve-live` at this URL serves every service (at "
     "URL/SERVICE; --resili-live-base-url overrides one); --resili-live-api-key goes to this "
     "origin only"),
    ("task-set", _one_of(TASK_SET_NAMES), "default",
     "the shipped task set: default (a grammar of data flows, thousands of structures) or "
     "paper (the paper's 5040 tasks, frozen, for reproducing its tables)"),
    ("tasks", _task_dir, None,
     "run a task set of your own: a folder `resilibench generate --seed S --out DIR` wrote "
     "(e.g. a held-out set kept out of the public wheel); overrides --resili-task-set"),
    ("trajectories", None, None, "keep every episode's messages and calls in the report"),
    ("skip-bad-agents", None, None,
     "with several models, run the ones whose agent can be built and warn about each other "
     "one (by default one bad spec stops the run, naming each)"),
    ("shard", _shard, None,
     "run only part K of N of the planned episodes (e.g. 2/4; whole tasks together, balanced "
     "by expected length): one CI job per shard, then `resilibench report merge` joins "
     "their reports into the whole run's"),
    ("otel", None, None,
     "export every episode as an OpenTelemetry trace (GenAI semantic conventions) to "
     "OTEL_EXPORTER_OTLP_ENDPOINT (the [otel] extra; docs/OTEL.md)"),
    ("otel-content", None, None,
     "with --resili-otel: put the messages' contents on the spans too (redacted; off by "
     "default, as OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)"),
    ("summary", _one_of(("headline", "full")), "headline",
     "what the terminal prints at the end: the headline per model, or full (every table "
     "too, as -v does)"),
]


def argparse_help(text: str) -> str:
    """Help text as argparse wants it: it %-formats help, so a literal % is doubled (an
    unescaped "(2%)" made `pytest --help` crash)."""
    return text.replace("%", "%%")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("resilibench", "ResiliBench agent benchmark")
    for name, parse, default, help_text in _OPTIONS:
        dest = "resili_" + name.replace("-", "_")
        if parse is None:  # a flag
            group.addoption(f"--resili-{name}", action="store_true", dest=dest, default=None,
                            help=argparse_help(help_text))
            parser.addini(dest, help_text, type="bool", default=False)
            continue
        group.addoption(f"--resili-{name}", dest=dest, default=_NOT_GIVEN, metavar="VALUE",
                        type=_argparse_type(parse, name),
                        help=argparse_help(f"{help_text} (default: {default})" if default
                                           else help_text))
        # No ini default: an empty value means "not set" (`benchmark_requested`), and
        # `read_config` applies the default itself.
        parser.addini(dest, f"{help_text} (default: {default})" if default else help_text,
                      default="")
    live_help = "with --resili-env=live: reach SERVICE at URL instead of loopback"
    group.addoption("--resili-live-base-url", dest="resili_live_base_url", action="append",
                    default=[], metavar="SERVICE=URL", help=f"{live_help} (repeatable)")
    parser.addini("resili_live_base_url", f"{live_help} (one SERVICE=URL a line)",
                  type="linelist", default=[])
    # No ini key: a secret does not belong in a checked-in file.
    group.addoption("--resili-live-api-key", dest="resili_live_api_key", default=None,
                    metavar="KEY",
                    help=f"with --resili-env=live: send Authorization: Bearer KEY to the live "
                         f"services (what `resilibench serve-live --api-key KEY` asks); "
                         f"default: ${LIVE_KEY_ENV}")


def _argparse_type(parse: Callable[[str], _T], name: str) -> Callable[[str], _T]:
    def convert(text: str) -> _T:
        try:
            return parse(text)
        except Exception as exc:  # one line for any value, never a traceback
            said = str(exc) if isinstance(exc, ValueError) else f"not a value it takes " \
                f"({type(exc).__name__})"
            raise argparse.ArgumentTypeError(_redacted(said)) from None

    convert.__name__ = f"--resili-{name}"
    return convert


def _redacted(message: str) -> str:
    """A usage error as it may be printed: redacted as the report is (base/redact.py), with
    the live services' key masked too. The command line is parsed before `read_config`
    registers that key, so it is read here from where it will come: the environment, or
    the command line itself (`sys.argv`; a `pytest.main([...])` caller's own list is not
    seen: its key is masked by the generic patterns only)."""
    import sys

    from pytest_resilibench.base.redact import redact, register_secret

    register_secret(os.environ.get(LIVE_KEY_ENV))
    args = sys.argv[1:]
    for i, arg in enumerate(args):
        if arg.startswith("--resili-live-api-key="):
            register_secret(arg.partition("=")[2])
        elif arg == "--resili-live-api-key" and i + 1 < len(args):
            register_secret(args[i + 1])
    return redact(message)


def read_config(config: pytest.Config) -> RunConfig:
    """Merge the command line over the ini file; raise UsageError on a bad ini value."""
    values: dict[str, Any] = {}
    for name, parse, default, _help in _OPTIONS:
        dest = "resili_" + name.replace("-", "_")
        value = config.getoption(dest)
        if value is _NOT_GIVEN or (parse is None and value is None):
            raw = config.getini(dest)
            if raw in (None, "") and parse is not None:
                raw = default
            if parse is None:
                value = bool(raw)
            elif raw in (None, ""):
                value = None
            else:
                try:
                    value = parse(str(raw))
                except Exception as exc:  # one line for any value (`_argparse_type`)
                    said = str(exc) if isinstance(exc, ValueError) else \
                        f"not a value it takes ({type(exc).__name__})"
                    raise pytest.UsageError(_redacted(f"ini option {dest}: {said}")) from None
        values[name] = value
    given = config.getoption("resili_live_base_url")
    try:
        live = _live_urls(given or config.getini("resili_live_base_url"))
    except ValueError as exc:
        where = "--resili-live-base-url" if given else "ini option resili_live_base_url"
        raise pytest.UsageError(_redacted(f"{where}: {exc}")) from None
    from pytest_resilibench.base.redact import (
        register_secret,
        register_secrets_in,
        register_url_credentials,
    )

    if values["model-args"]:
        register_secrets_in(values["model-args"])  # a key sent in a header reaches no report
    live_key = config.getoption("resili_live_api_key") or os.environ.get(LIVE_KEY_ENV) or None
    register_secret(live_key)
    server = values["live-server"]
    for url in (values["base-url"], server, *live.values()):
        register_url_credentials(url)  # user info, and the Basic header httpx makes of it
    key_origin = None
    if live_key is not None:
        from pytest_resilibench.servers.live.key_scope import key_origin as scoped_origin

        try:
            key_origin = scoped_origin(server, live.values())
        except ValueError as exc:
            raise pytest.UsageError(_redacted(f"--resili-live-api-key: {exc}")) from None
    if server is not None:
        from pytest_resilibench.servers.live.services import SERVICES

        live = {**{s.name: f"{server}/{s.name}" for s in SERVICES}, **live}
    if values["faults"] != "paper" and values["env"] == "live":
        raise pytest.UsageError("--resili-faults=realistic needs --resili-env=sim or mcp (the "
                                "realistic events live in the simulator)")
    return RunConfig(
        models=values["model"],
        base_url=values["base-url"],
        variants=values["variants"],
        flaws=values["flaws"],
        severities=values["severity"],
        task_types=values["task-types"],
        difficulties=values["difficulties"],
        sample=values["sample"],
        repeats=values["repeats"],
        seed=values["seed"],
        base_success=values["base-success"],
        max_turns=values["max-turns"],
        tool_mode=values["tool-mode"],
        concurrency=values["concurrency"],
        retries=values["retries"],
        request_timeout=values["request-timeout"],
        turn_timeout=values["turn-timeout"],
        episode_timeout=values["episode-timeout"],
        rpm=values["rpm"],
        tpm=values["tpm"],
        max_wait=values["max-wait"],
        temperature=values["temperature"],
        model_args=values["model-args"] or {},
        api=values["api"],
        api_version=values["api-version"],
        max_consecutive_errors=values["max-consecutive-errors"],
        max_cost=values["max-cost"],
        prices=values["prices"],
        cache=values["cache"],
        report=values["report"],
        resume=values["resume"],
        baseline=values["baseline"],
        max_drop=values["max-drop"],
        confidence=values["confidence"],
        gate=values["gate"],
        fail_under=values["fail-under"],
        inconclusive=values["inconclusive"],
        max_infra_errors=values["max-infra-errors"],
        env=values["env"],
        faults=values["faults"],
        live_base_urls=live,
        live_api_key=live_key,
        live_key_origin=key_origin,
        live_server=server,
        trajectories=bool(values["trajectories"]),
        skip_bad_agents=bool(values["skip-bad-agents"]),
        summary=values["summary"],
        task_set=values["task-set"],
        tasks=values["tasks"],
        shard=values["shard"],
        otel=bool(values["otel"]),
        otel_content=bool(values["otel-content"]) or _content_env(),
    )


def _content_env() -> bool:
    """The GenAI instrumentations' content-capture switch, read as they read it."""
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() == "true"


# The options that shape a run's report, headline and gate, whatever it holds: benchmark
# episodes, `resili_faults` tests (integration/chaos.py), or both. Alone they do not ask for
# the benchmark, so a project's own resili_faults tests get the report and the gate without
# the benchmark's items; with an option that selects episodes, or `pytest suites`, they serve
# both.
REPORT_OPTIONS = frozenset({"report", "baseline", "max-drop", "confidence", "inconclusive",
                            "summary"})


def benchmark_requested(config: pytest.Config) -> bool:
    """Whether this run asks for the benchmark: a `--resili-*` option on the command line or a
    `resili_*` key in the ini file, other than the report's own (`REPORT_OPTIONS`). Read
    without parsing any value, so that a project that merely has the plugin installed pays
    nothing for it."""
    for name, parse, _default, _help in _OPTIONS:
        if name in REPORT_OPTIONS:
            continue
        dest = "resili_" + name.replace("-", "_")
        value = config.getoption(dest)
        if not (value is _NOT_GIVEN or (parse is None and value is None)):
            return True
        if config.getini(dest) not in ("", None, False):
            return True
    return bool(config.getoption("resili_live_base_url") or config.getini("resili_live_base_url")
                or config.getoption("resili_live_api_key"))


def report_requested(config: pytest.Config) -> bool:
    """Whether a report or a baseline is asked for (`--resili-report`, `--resili-baseline`,
    or their ini keys), read as `benchmark_requested` reads."""
    for name in ("report", "baseline"):
        dest = "resili_" + name
        if config.getoption(dest) is not _NOT_GIVEN or config.getini(dest) not in ("", None):
            return True
    return False


# --- the resili_faults tests (integration/chaos.py, docs/CHAOS.md): their marker and the user
# property their results travel in; their report and gate are the run's (`REPORT_OPTIONS`).
CHAOS_MARKER = "resili_faults"
CHAOS_PROPERTY = "resili_faults"  # the user property a chaos item's teardown report carries
CHAOS_MARKER_HELP = (
    "resili_faults(profile='realistic', seeds=20, rate=0.2, rates={}, remote=None, "
    "auth_tool=None, spare=()): run the test once clean and once per fault seed, its tools "
    "wrapped by the resili_faults fixture (docs/CHAOS.md)")
