"""The stochastic tool simulator: one `Simulator` per episode (docs/BENCHMARK.md: Simulator).

Success model (the precursor's rule, `success_probability`): the base rate, x0.5 for each
dependency that has not yet succeeded, x0.7 for each dependency whose latest run failed, x0.9^k
once three or more calls were made (k = failures among the episode's last three calls), clamped to
[0.1, 0.95]. The solver imports this function, so the MDP and the simulator cannot drift apart.

Calls that are wrong whatever the luck get INVALID_INPUT deterministically: arguments that break
the tool's JSON schema, a location the task does not have (`LOCATION_PARAMS`: a path, URL,
directory, database or service other than the task's), a URL where a file path goes, a
`source` ref nothing produced, a `format` the consumed data does not have. Any other task-bound
value (a destination, a function, a condition) says what to make, not where to find it: another
value is accepted, as a real tool would, and the result records it in `deviations` (never shown
to the agent). The output condition (scoring.py) wants a deliverable without deviations.

What a call names no `source` or `format` for is the data flow's (`data_flow`, issue 50):
`inferred` (the paper's set) reads the output the task's flow needs
(`ToolRegistry.default_source`) as it is; `explicit` (the default set) does what a real
pipeline tool does: no `source` reads the latest output of any tool, whichever made it (in a
flow that branches or interleaves, the wrong data: scoring's lineage check fails the
deliverable), and no `format` reads the data as json (data in another format are refused
truthfully, INVALID_INPUT). Every option a task states is a required parameter of its step's
tool, so a call that leaves one out is refused by the schema under both.

The n-th call of tool t in episode (seed, task, repeat) succeeds iff
`outcome_draw(key, t, n) < p`; its error code, latency and output are keyed the same way.

With `faults` (a `faults.TaskFaults`), the `realistic` profile's events come first: outages,
expired credentials and rate limits answer before the success draw, silent failures and their
empty data shape a success (see `faults.py` and docs/FAULTS.md). Without it (the `paper`
profile) nothing here differs from the paper's simulator.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Any

from pytest_resilibench.base.names import DATA_FLOWS, FLOW_PARAMS, DataFlow
from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core import faults as _faults
from pytest_resilibench.core.registry import DATA_FORMATS, Role, ToolRegistry, ToolSpec

__all__ = [
    "DEFAULT_BASE_SUCCESS",
    "LOCATION_PARAMS",
    "PATH_PARAMS",
    "CallResult",
    "EpisodeKey",
    "Simulator",
    "call_draws",
    "event_error",
    "outcome_draw",
    "random_error",
    "success_probability",
]

DEFAULT_BASE_SUCCESS = 0.8
P_MIN, P_MAX = 0.1, 0.95
UNMET_FACTOR, FAILED_LATEST_FACTOR, RECENT_FAILURE_FACTOR = 0.5, 0.7, 0.9
RECENT_WINDOW = 3
_STANDARD_NORMAL = NormalDist()
# Parameters checked for data flow rather than bound to a task input.
# Task-bound parameters that locate something that must exist: another value is refused.
LOCATION_PARAMS = frozenset({"path", "url", "directory", "endpoint", "service"})
# Parameters that take a file path (a URL is refused there).
PATH_PARAMS = frozenset({"path", "destination", "directory"})
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
# Return fields that name what the call produced under another argument's name.
_ECHOES = {"file_operations_writer": {"path": "destination"}}


def success_probability(
    base: float, *, unmet: int, failed_latest: int, calls_made: int, recent_failures: int
) -> float:
    """The success probability of a call (pure; shared with the solver's MDP)."""
    p = base * UNMET_FACTOR**unmet * FAILED_LATEST_FACTOR**failed_latest
    if calls_made >= RECENT_WINDOW:
        p *= RECENT_FAILURE_FACTOR**recent_failures
    return min(P_MAX, max(P_MIN, p))


@dataclass(frozen=True)
class EpisodeKey:
    """What identifies an episode's luck: the run seed, the task and the repeat index."""

    seed: int
    task_id: str
    repeat: int = 0


def call_draws(key: EpisodeKey, tool: str, n: int) -> DrawStream:
    """The draws of the n-th (1-based) call of `tool` in the episode, in a fixed order:
    outcome (success iff < p), error code, latency, then the output's contents."""
    return DrawStream(key.seed, key.task_id, key.repeat, tool, n)


def outcome_draw(key: EpisodeKey, tool: str, n: int) -> float:
    """The uniform draw deciding the n-th (1-based) call of `tool`: success iff draw < p."""
    return call_draws(key, tool, n).random()


@dataclass(slots=True)  # not frozen: frozen __init__ costs 3 us on the hot path
class CallResult:
    """What one call did. `message` is what the agent sees on failure; the probability and
    whether the failure was deterministic are for analysis and never shown to the agent."""

    tool: str
    arguments: Any
    call_index: int
    ok: bool
    output: dict[str, Any] | None
    error_code: str | None
    message: str
    latency_s: float
    clock_s: float
    success_probability: float | None
    deterministic: bool
    # The realistic profile's event behind this result (`faults.EVENT_KINDS`), else None.
    event: str | None = None
    # Task-bound parameters the call was accepted with another value than the task's.
    deviations: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = self._json()
        if self.event is not None:
            data["event"] = self.event
        if self.deviations:
            data["deviations"] = list(self.deviations)
        return data

    def _json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "arguments": self.arguments,
            "call_index": self.call_index,
            "ok": self.ok,
            "output": self.output,
            "error_code": self.error_code,
            "message": self.message,
            "latency_s": self.latency_s,
            "clock_s": self.clock_s,
            "success_probability": self.success_probability,
            "deterministic": self.deterministic,
        }

    def observation(self) -> dict[str, Any]:
        """The part of the result an agent may see."""
        if self.ok:
            return {"status": "success", "output": self.output}
        if self.event == "rate_limited":
            return {"status": "error", "error_code": self.error_code, "message": self.message,
                    "retry_after": _faults.RETRY_AFTER_TURNS}
        return {"status": "error", "error_code": self.error_code, "message": self.message}


@dataclass(slots=True)
class _ToolState:
    calls: int = 0
    succeeded: bool = False
    latest_failed: bool = False


@dataclass(slots=True)
class _Data:
    ref: str
    tool: str
    format: str
    records: int
    order: int  # production order within the episode


@dataclass
class Simulator:
    """The tools of one episode. Not thread-safe: one episode, one simulator."""

    registry: ToolRegistry
    key: EpisodeKey
    task_tools: tuple[str, ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=dict)
    base_success: float = DEFAULT_BASE_SUCCESS
    # The realistic profile's view of the task; None: the paper's profile.
    faults: _faults.TaskFaults | None = None
    # What a call that names no `source` or `format` reads (module docstring).
    data_flow: DataFlow = "inferred"

    def __post_init__(self) -> None:
        if not 0.0 < self.base_success <= 1.0:
            raise ValueError(f"base_success must be in (0, 1], got {self.base_success}")
        if self.data_flow not in DATA_FLOWS:
            raise ValueError(f"data_flow must be one of {DATA_FLOWS}, got {self.data_flow!r}")
        self._explicit = self.data_flow == "explicit"
        self.task_tools = tuple(self.task_tools)
        self.data_format: str = str(self.inputs.get("format", "json"))
        if self.data_format not in DATA_FORMATS:
            raise ValueError(f"unknown data format {self.data_format!r}")
        self.clock_s = 0.0
        self.history: list[CallResult] = []
        self._states: dict[str, _ToolState] = {}
        self._data: dict[str, _Data] = {}
        self._latest_by_tool: dict[str, _Data] = {}
        self._deps: dict[str, tuple[str, ...]] = {}
        # Realistic profile: a stand-in's results count for the step it stands in for.
        self._step_of: dict[str, str] = {}
        if self.faults is not None:
            self._step_of = self.faults.step_of
            self.events = _faults.episode_faults(self.faults, self.key.seed, self.key.task_id,
                                                 self.key.repeat)
            self._renewed = False  # an authenticator call succeeded
            self._blocked: str | None = None  # the tool the previous call was rate limited on
            self._empty: set[str] = set()  # silent-failure steps whose latest run is empty

    # --- the success model ------------------------------------------------------------------
    def dependencies(self, tool: str) -> tuple[str, ...]:
        deps = self._deps.get(tool)
        if deps is None:
            deps = self._deps[tool] = self.registry.dependencies(tool, self.task_tools)
        return deps

    def _state(self, tool: str) -> _ToolState:
        state = self._states.get(tool)
        if state is None:
            state = self._states[tool] = _ToolState()
        return state

    def succeeded(self, tool: str) -> bool:
        state = self._states.get(tool)
        return bool(state and state.succeeded)

    def probability(self, tool: str) -> float:
        """The success probability a call of `tool` would have now (a stand-in: that of the
        step it stands in for, times `faults.ALT_FACTOR`)."""
        step = self._step_of.get(tool)
        if step is not None:
            return _faults.ALT_FACTOR * self.probability(step)
        deps = self.dependencies(tool)
        unmet = failed_latest = 0
        for dep in deps:
            state = self._states.get(dep)
            if state is None or not state.succeeded:
                unmet += 1
            if state is not None and state.latest_failed:
                failed_latest += 1
        recent_failures = 0
        for result in self.history[-RECENT_WINDOW:]:
            if not result.ok:
                recent_failures += 1
        return success_probability(
            self.base_success,
            unmet=unmet,
            failed_latest=failed_latest,
            calls_made=len(self.history),
            recent_failures=recent_failures,
        )

    # --- calls ------------------------------------------------------------------------------
    def call(self, name: str, arguments: Any = None) -> CallResult:
        """Run one call. Never raises on what an agent sends: bad calls become error results."""
        spec = self.registry.get(name) if isinstance(name, str) else None
        if spec is None:
            # No tool ran, so the episode's history and luck are untouched.
            return CallResult(
                tool=str(name), arguments=arguments, call_index=0, ok=False, output=None,
                error_code="UNKNOWN_TOOL", message=f"unknown tool {name!r}",
                latency_s=0.0, clock_s=self.clock_s, success_probability=None,
                deterministic=True,
            )
        if arguments is None:
            arguments = {}
        state = self._state(name)
        state.calls += 1
        n = state.calls
        problem, consumed, deviations = self._check_arguments(spec, arguments)
        draws = call_draws(self.key, name, n)
        outcome, error, latency = draws.random(), draws.random(), draws.random()
        if problem is not None:
            result = self._failure(spec, arguments, latency, n, "INVALID_INPUT", problem, None)
        elif self.faults is not None:
            result = self._realistic(spec, arguments, n, outcome, error, latency, draws, consumed)
        else:
            p = self.probability(name)
            if outcome < p:
                result = self._success(spec, arguments, latency, draws, n, p, consumed)
            else:
                code = _error_code(spec, error)
                result = self._failure(spec, arguments, latency, n, code, None, p)
        if self.faults is not None:
            state = self._state(self._step_of.get(name, name))
            self._blocked = name if result.event == "rate_limited" else None
            if result.ok and name == _faults.AUTHENTICATOR:
                self._renewed = True
        if deviations and problem is None:
            result.deviations = deviations
        state.succeeded |= result.ok
        state.latest_failed = not result.ok
        self.history.append(result)
        return result

    def _realistic(
        self, spec: ToolSpec, arguments: dict[str, Any], n: int, outcome: float, error: float,
        latency: float, draws: DrawStream, consumed: _Data | None,
    ) -> CallResult:
        """A proper call under the realistic profile: its events first, then the paper's
        success draw; a success may be silent (a data source) or built on empty data."""
        assert self.faults is not None
        name = spec.name
        events = _faults.event_draws(self.key.seed, self.key.task_id, self.key.repeat, name, n)
        u_rate, u_silent = events.random(), events.random()
        code = kind = None
        if name in self.events.down:
            code, kind = "SERVICE_UNAVAILABLE", "outage"
        elif (name in self.faults.remote and self.events.credentials_expired
              and not self._renewed):
            code, kind = "AUTH_EXPIRED", "auth_expired"
        elif name in self.faults.rate_limited and (
                self._blocked == name or u_rate < _faults.RATE_LIMIT_RATE):
            code, kind = "RATE_LIMITED", "rate_limited"
        if code is not None:
            result = self._failure(spec, arguments, latency, n, code, None, None)
            result.event = kind
            result.message = f"{code}: " + _event_message(spec, code, arguments)
            return result
        p = self.probability(name)
        if outcome >= p:
            code = _error_code(spec, error, exclude=_REALISTIC_ONLY)
            return self._failure(spec, arguments, latency, n, code, None, p)
        step = self._step_of.get(name, name)
        if consumed is not None and consumed.records == 0 and not self._empty:
            # Data made while a source was empty, read after the source was re-run: the
            # lineage is sound again, so the step sees the source's records.
            consumed = _Data(consumed.ref, consumed.tool, consumed.format,
                             draws.randint(40, 5000), consumed.order)
        if step in self.faults.silent:
            silent = u_silent < _faults.SILENT_RATE
            (self._empty.add if silent else self._empty.discard)(step)
            kind = "silent" if silent else None
        elif self._empty and spec.role in (Role.PROCESSOR, Role.AGGREGATOR, Role.OUTPUT):
            kind = "tainted"
        result = self._success(spec, arguments, latency, draws, n, p, consumed,
                               empty=kind is not None)
        result.event = kind
        return result

    def _check_arguments(
        self, spec: ToolSpec, arguments: Any
    ) -> tuple[str | None, _Data | None, tuple[str, ...]]:
        """The problem that refuses the call (None: none), the data it consumes and the
        task-bound parameters it was given another value for."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}", None, ()
        errors = self.registry.argument_errors(spec.name, arguments)
        if errors:
            return "invalid arguments: " + "; ".join(errors[:3]), None, ()
        deviations: list[str] = []
        for param, value in arguments.items():
            if param in PATH_PARAMS and isinstance(value, str) and _URL.match(value):
                return f"{param} {value!r} is a URL; {param} takes a file path", None, ()
            if param in FLOW_PARAMS or param not in self.inputs:
                continue
            if value != self.inputs[param]:
                if param in LOCATION_PARAMS:
                    return f"{param} {value!r} is not available to this task", None, ()
                deviations.append(param)
        consumed: _Data | None = None
        if "source" in arguments:
            # A ref names one output; a bare tool name its latest output.
            source = arguments["source"]
            consumed = self._data.get(source) or self._latest_by_tool.get(source)
            if consumed is None:
                known = ", ".join(self._data) or "none yet"
                return (f"source {arguments['source']!r} was not produced (available: {known})",
                        None, ())
        elif spec.reads_input:
            consumed = self._default_input(spec.name)
        fmt = arguments.get("format")
        actual = consumed.format if consumed is not None else self.data_format
        if fmt is not None:
            if fmt != actual:
                return (f"format {fmt!r} does not match the input data, which is {actual}",
                        None, ())
        elif self._explicit and actual != "json" and "format" in spec.parameters["properties"]:
            # A real parser given no format assumes its default and fails on other data; it
            # cannot say what the data are.
            return ("could not parse the input as json (the format assumed when none is "
                    "named); name its format", None, ())
        return None, consumed, tuple(deviations)

    def _default_input(self, tool: str) -> _Data | None:
        """What a call that names no `source` reads. Explicit data flow: the latest output of
        any tool. Inferred: the latest output of a data dependency, else of a prerequisite,
        else the latest output of any tool (`ToolRegistry.default_source`)."""
        if self._explicit:
            return next(reversed(self._data.values()), None)
        latest = {t: d.order for t, d in self._latest_by_tool.items()}
        producer = self.registry.default_source(tool, self.task_tools, latest)
        return None if producer is None else self._latest_by_tool[producer]

    def _advance(self, spec: ToolSpec, u: float, code: str | None) -> float:
        if code == "TIMEOUT":
            latency = spec.timeout_s
        else:  # log-normal jitter around the tool's typical latency (its median)
            z = _STANDARD_NORMAL.inv_cdf(min(max(u, 1e-9), 1 - 1e-9))
            latency = round(min(spec.timeout_s, spec.latency_s * math.exp(0.5 * z)), 4)
        self.clock_s = round(self.clock_s + latency, 4)
        return latency

    def _failure(
        self, spec: ToolSpec, arguments: Any, u_latency: float, n: int, code: str,
        problem: str | None, p: float | None,
    ) -> CallResult:
        deterministic = problem is not None  # a bad call is refused at once, no time passes
        latency = 0.0 if deterministic else self._advance(spec, u_latency, code)
        message = problem if problem is not None else _error_message(spec, code, arguments)
        return CallResult(
            tool=spec.name, arguments=arguments, call_index=n, ok=False, output=None,
            error_code=code, message=f"{code}: {message}", latency_s=latency,
            clock_s=self.clock_s, success_probability=p, deterministic=deterministic,
        )

    def _success(
        self, spec: ToolSpec, arguments: dict[str, Any], u_latency: float, draws: DrawStream,
        n: int, p: float, consumed: _Data | None, *, empty: bool = False,
    ) -> CallResult:
        latency = self._advance(spec, u_latency, None)
        output = self._output(spec, arguments, n, draws, consumed)
        if empty:  # realistic: a silent failure, or data built on one (the tell: no records)
            output["records"] = 0
        data = _Data(output["ref"], spec.name, output["format"], output["records"], len(self._data))
        self._data[data.ref] = data
        self._latest_by_tool[spec.name] = data
        step = self._step_of.get(spec.name)
        if step is not None:  # a stand-in's output is its step's: what the step's readers read
            self._latest_by_tool[step] = data
        return CallResult(
            tool=spec.name, arguments=arguments, call_index=n, ok=True, output=output,
            error_code=None, message="ok", latency_s=latency, clock_s=self.clock_s,
            success_probability=p, deterministic=False,
        )

    def _output(
        self, spec: ToolSpec, arguments: dict[str, Any], n: int, rng: DrawStream,
        consumed: _Data | None,
    ) -> dict[str, Any]:
        fmt = spec.produced_format(
            arguments, consumed.format if consumed is not None else self.data_format)
        upstream = consumed.records if consumed is not None else rng.randint(40, 5000)
        records = _records_after(spec.operation, upstream, rng)
        output: dict[str, Any] = {
            "status": "success",
            "tool": spec.name,
            "ref": f"{spec.name}#{n}",
            "format": fmt,
            "records": records,
            "inputs": [consumed.ref] if consumed is not None else [],
        }
        echoes = _ECHOES.get(spec.name, {})
        for prop, schema in spec.returns["properties"].items():
            if prop in echoes and echoes[prop] in arguments:
                output[prop] = arguments[echoes[prop]]  # the writer names what it wrote
            elif prop not in output:
                output[prop] = _field_value(prop, schema, arguments, rng, self, consumed, records)
        return output


# Codes the realistic profile raises as events of their own, never as random failures (a
# random RATE_LIMITED without a retry_after would contradict the rate-limit rule).
_REALISTIC_ONLY = frozenset({"RATE_LIMITED", "AUTH_FAILED"})


def _error_code(spec: ToolSpec, u: float, exclude: frozenset[str] = frozenset()) -> str:
    """The error code at quantile u of the tool's failure-mode distribution (less `exclude`)."""
    modes = [m for m in spec.failure_modes if m[0] not in exclude] if exclude \
        else spec.failure_modes
    for code, upper in _quantiles(tuple(modes)):
        if u < upper:
            return code
    return modes[-1][0]


@lru_cache(maxsize=256)  # a few distributions, drawn from on every random failure
def _quantiles(modes: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    """Each failure mode with the upper end of its share of [0, 1), in order."""
    total = sum(w for _, w in modes)
    acc, out = 0.0, []
    for code, weight in modes:
        acc += weight / total
        out.append((code, acc))
    return tuple(out)


def _records_after(operation: str, upstream: int, rng: DrawStream) -> int:
    if operation == "filter":
        return int(upstream * rng.uniform(0.2, 0.9))
    if operation in ("aggregator", "analyzer", "calculator", "optimizer"):
        return max(1, min(upstream, rng.randint(1, 40)))
    return upstream


_WORDS = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "lambda")


def _field_value(
    prop: str, schema: Mapping[str, Any], arguments: Mapping[str, Any], rng: DrawStream,
    sim: Simulator, consumed: _Data | None, records: int,
) -> Any:
    """A plausible value for one return field: echoes the arguments or the task's inputs
    where the field names one, otherwise a seeded value of the schema's type."""
    if prop in arguments:
        return arguments[prop]
    if prop in sim.inputs and prop not in FLOW_PARAMS:
        return sim.inputs[prop]
    kind = schema.get("type")
    if prop == "preview":
        return _preview(consumed.format if consumed else sim.data_format, rng)
    if prop == "from_format":
        return consumed.format if consumed else sim.data_format
    if kind == "string":
        prefix = {"token": "tok", "session": "sess", "job_id": "job", "response_id": "resp",
                  "entry_id": "log", "next_run": "2026-12-01T0"}.get(prop, prop)
        return f"{prefix}_{rng.bits64() & 0xFFFFFFFF:08x}"
    if kind == "integer":
        if prop in ("size_bytes", "bytes_written"):
            return records * rng.randint(40, 200)
        if prop == "status_code":
            return rng.choice((200, 200, 200, 201))
        if prop in ("kept", "enqueued", "routed", "mapped_fields"):
            return records
        if prop == "dropped":
            return max(0, (consumed.records if consumed else records) - records)
        if prop == "errors_found":
            return rng.randint(0, max(1, records // 50))
        return rng.randint(1, 1000)
    if kind == "number":
        return round(rng.uniform(0.0, 1000.0) if prop != "uptime" else rng.uniform(0.9, 1.0), 4)
    if kind == "boolean":
        return rng.random() < 0.9
    if kind == "array":
        if schema.get("items", {}).get("type") == "number":
            horizon = int(arguments.get("horizon", 5))
            return [round(rng.uniform(10.0, 100.0), 2) for _ in range(horizon)]
        return [f"{rng.choice(_WORDS)}_{i}" for i in range(rng.randint(1, 4))]
    return None


def _preview(fmt: str, rng: DrawStream) -> str:
    row = [rng.randint(1, 999) for _ in range(3)]
    return {
        "csv": f"id,amount,date\n{row[0]},{row[1]}.00,2026-0{1 + row[2] % 9}-01",
        "json": f'[{{"id": {row[0]}, "amount": {row[1]}}}]',
        "xml": f'<records><record id="{row[0]}" amount="{row[1]}"/></records>',
        "yaml": f"- id: {row[0]}\n  amount: {row[1]}",
        "text": f"record {row[0]}: amount {row[1]}",
        "binary": f"<{row[0] * 16} bytes>",
    }[fmt]


_MESSAGES = {
    "INVALID_INPUT": "the request was rejected as malformed by {what}",
    "OPERATION_FAILED": "{what} failed while processing the request",
    "TIMEOUT": "{what} did not answer within {timeout:.0f}s",
    "FILE_NOT_FOUND": "{what} could not find {target}",
    "PERMISSION_DENIED": "{what} was denied access to {target}",
    "PARSE_ERROR": "{what} could not parse the input at record {n}",
    "SCHEMA_MISMATCH": "{what} found records that do not match the expected schema",
    "NETWORK_ERROR": "connection to {target} was reset",
    "INVALID_RESPONSE": "{target} returned a response that could not be decoded",
    "RATE_LIMITED": "{target} rejected the request: too many requests, retry later",
    "CALCULATION_ERROR": "{what} hit an undefined value (division by zero or NaN)",
    "OVERFLOW": "{what} produced a value outside the representable range",
    "AUTH_FAILED": "{target} rejected the credentials",
    "CONNECTION_REFUSED": "{target} refused the connection",
    "RESOURCE_EXHAUSTED": "{what} ran out of memory or quota",
}
# The realistic profile's events, said plainly (its own table: the paper's random
# RATE_LIMITED keeps its message).
_EVENT_MESSAGES = {
    "SERVICE_UNAVAILABLE": "{what} is down (outage) and stays down for the rest of this "
                           "episode; retrying will not help, use the task's stand-in for it",
    "AUTH_EXPIRED": "the credentials for {target} have expired; renew them with "
                    "integration_authenticator, then call again",
    "RATE_LIMITED": "{target} is rate limiting {what}: retry after 1 turn (a call of {what} "
                    "on the very next turn is refused again)",
}


def _error_message(spec: ToolSpec, code: str, arguments: Any) -> str:
    """A plausible message: the code and its context, never the hidden random draw."""
    args = arguments if isinstance(arguments, dict) else {}
    target = next(
        (str(args[k]) for k in ("path", "url", "target_url", "endpoint", "service", "directory",
                                "destination", "route_to", "recipient", "queue_name")
         if k in args),
        "the service",
    )
    n = (len(str(args)) * 7) % 97 + 1
    template = _MESSAGES.get(code, "{what} failed")
    return template.format(what=spec.name, target=target, timeout=spec.timeout_s, n=n)


def _event_message(spec: ToolSpec, code: str, arguments: Any) -> str:
    args = arguments if isinstance(arguments, dict) else {}
    target = next((str(args[k]) for k in ("url", "target_url", "endpoint", "service", "route_to",
                                          "queue_name") if k in args), "the service")
    return _EVENT_MESSAGES[code].format(what=spec.name, target=target)


def random_error(spec: ToolSpec, u: float, arguments: Any, *,
                 realistic: bool = False) -> tuple[str, str]:
    """(code, "<CODE>: message") of a random failure at quantile u, as `Simulator.call` words
    it; tools outside the registry (core/tool_faults.py) reuse it through a ToolSpec of theirs."""
    code = _error_code(spec, u, exclude=_REALISTIC_ONLY if realistic else frozenset())
    return code, f"{code}: {_error_message(spec, code, arguments)}"


def event_error(spec: ToolSpec, code: str, arguments: Any) -> str:
    """"<CODE>: message" of a realistic event (SERVICE_UNAVAILABLE, AUTH_EXPIRED,
    RATE_LIMITED), as `Simulator.call` words it."""
    return f"{code}: " + _event_message(spec, code, arguments)
