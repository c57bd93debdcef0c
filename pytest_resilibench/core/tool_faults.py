"""The benchmark's fault model around a team's own tools (docs/CHAOS.md).

The MCP proxy (`servers/mcp_proxy.py`) and the `resili_faults` fixture (`integration/chaos.py`)
put this in front of tools the registry does not know. A `FaultSession` decides, call by call,
whether a call fails and how, with the codes and messages of our simulator
(`simulator.random_error`, `simulator.event_error`) and the realistic profile's rates
(`faults.py`):

- `paper`: a random error with probability `rate` (per tool: `rates`); its code is drawn from
  the tool's category's failure modes, TIMEOUT among them.
- `realistic`: first the events, then a random error (less RATE_LIMITED and AUTH_FAILED, which
  only ever mean the events): an outage of a tool for the whole session (`OUTAGE_RATE`, drawn
  once per tool and session), expired credentials for the session's remote tools until a call
  of `auth_tool` succeeds (`AUTH_EXPIRY_RATE` per session; only with an `auth_tool`), a rate
  limit on a remote tool's call (`RATE_LIMIT_RATE`, `retry_after` 1 call: the same tool called
  again as the session's very next call is refused again), and a silent fault of a success
  (`SILENT_RATE`: its content emptied or cut to half).

Timeouts and side effects: a TIMEOUT is drawn as either "the request never reached the tool"
or "the tool ran and the answer was lost" (even odds, `TIMEOUT_AFTER_CALL`); `Fault.upstream`
says which, so a tool with side effects sees them exactly when a real lost answer would have
caused them. Every other injected error is refused before the tool runs; a silent fault lets it
run and spoils its answer.

Every draw is a pure function of (seed, session, tool, call index) (`base/rng.py`), in a stream
apart from the simulator's: two agent versions that make the same calls meet the same faults,
whatever the process or the worker. What depends on the history is said by the rules above
(credentials renewed, a repeat of a rate-limited call) and is itself a function of the calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_resilibench.base.names import FAULT_PROFILES
from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core import faults as _faults
from pytest_resilibench.core.catalog import CATEGORY_ERRORS
from pytest_resilibench.core.registry import Role, ToolSpec
from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS, event_error, random_error

__all__ = [
    "DEFAULT_RATE",
    "FAULT_KINDS",
    "TIMEOUT_AFTER_CALL",
    "Fault",
    "FaultConfig",
    "FaultSession",
    "silent_value",
]

DEFAULT_RATE = round(1.0 - DEFAULT_BASE_SUCCESS, 10)  # the paper's failure rate, 0.2
TIMEOUT_AFTER_CALL = 0.5  # the share of TIMEOUTs whose request reached the tool
FAULT_KINDS = ("error", "timeout", "outage", "auth_expired", "rate_limited", "silent")
_REMOTE_CATEGORY, _LOCAL_CATEGORY = "network", "utility"


@dataclass(frozen=True)
class FaultConfig:
    """How a team's tools fail. `remote` None: every tool is remote (credential expiry and
    rate limits can hit it); `spare`: tools no fault touches; `categories`: the catalog
    category whose failure modes a tool's random errors are drawn from (default: network for
    a remote tool, utility for another)."""

    profile: str = "paper"
    rate: float = DEFAULT_RATE
    seed: int = 0
    rates: Mapping[str, float] = field(default_factory=dict)
    remote: frozenset[str] | None = None
    auth_tool: str | None = None
    spare: frozenset[str] = frozenset()
    categories: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.profile not in FAULT_PROFILES:
            raise ValueError(f"unknown fault profile {self.profile!r} "
                             f"(choose from {', '.join(FAULT_PROFILES)})")
        for name, rate in {"rate": self.rate, **self.rates}.items():
            if not isinstance(rate, (int, float)) or isinstance(rate, bool) \
                    or not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault rate of {name!r} must be in [0, 1], got {rate!r}")
        for tool, category in self.categories.items():
            if category not in CATEGORY_ERRORS:
                raise ValueError(f"unknown category {category!r} for {tool!r} "
                                 f"(choose from {', '.join(CATEGORY_ERRORS)})")

    def is_remote(self, tool: str) -> bool:
        return self.remote is None or tool in self.remote

    def spec(self, tool: str) -> ToolSpec:
        """A stand-in ToolSpec: what the simulator's error wording reads (name, category,
        failure modes, timeout)."""
        category = self.categories.get(tool) or (
            _REMOTE_CATEGORY if self.is_remote(tool) else _LOCAL_CATEGORY)
        return ToolSpec(name=tool, category=category, operation="tool", role=Role.UTILITY,
                        description="", keywords=(), parameters={}, returns={},
                        failure_modes=CATEGORY_ERRORS[category], timeout_s=30.0)

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "rate": self.rate, "seed": self.seed,
                "rates": dict(sorted(self.rates.items())),
                "remote": None if self.remote is None else sorted(self.remote),
                "auth_tool": self.auth_tool, "spare": sorted(self.spare),
                "categories": dict(sorted(self.categories.items()))}


@dataclass(frozen=True)
class Fault:
    """One injected fault. `upstream`: whether the real tool is called (a silent fault and
    half the timeouts); `mode` of a silent fault: "empty" or "truncate"."""

    kind: str
    code: str | None = None
    message: str = ""
    retry_after: int | None = None
    upstream: bool = False
    mode: str | None = None

    @property
    def is_error(self) -> bool:
        return self.kind != "silent"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "upstream": self.upstream}
        if self.code is not None:
            data.update(code=self.code, message=self.message)
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        if self.mode is not None:
            data["mode"] = self.mode
        return data


class FaultSession:
    """The faults of one session (a proxy's client, a test's seed): call counts per tool and
    what the rules remember. Not thread-safe: one session's calls are decided in turn."""

    def __init__(self, config: FaultConfig, session: str = "0") -> None:
        self.config = config
        self.session = str(session)
        self.calls: dict[str, int] = {}
        self.renewed = False  # a call of the auth tool succeeded
        self._blocked: str | None = None  # the tool the previous call was rate limited on
        self._down: dict[str, bool] = {}
        self._expired = (config.profile == "realistic" and config.auth_tool is not None
                         and self._draws(config.auth_tool, 0).random()
                         < _faults.AUTH_EXPIRY_RATE)

    def _draws(self, tool: str, n: int) -> DrawStream:
        return DrawStream("tool_faults", self.config.seed, self.session, tool, n)

    def down(self, tool: str) -> bool:
        """Whether `tool` is out for the whole session (drawn once, call index 0)."""
        found = self._down.get(tool)
        if found is None:
            found = self._down[tool] = self._draws(tool, 0).random() < _faults.OUTAGE_RATE
        return found

    @property
    def credentials_expired(self) -> bool:
        return self._expired and not self.renewed

    def decide(self, tool: str, arguments: Any = None) -> tuple[int, Fault | None]:
        """The call index (1-based per tool) of this call and its fault (None: none)."""
        n = self.calls[tool] = self.calls.get(tool, 0) + 1
        config = self.config
        if tool in config.spare:
            self._blocked = None
            return n, None
        draws = self._draws(tool, n)
        u_error, u_code, u_rate, u_silent, u_mode, u_timeout = (
            draws.random(), draws.random(), draws.random(), draws.random(), draws.random(),
            draws.random())
        spec = config.spec(tool)
        realistic = config.profile == "realistic"
        fault: Fault | None = None
        if realistic:
            fault = self._event(spec, tool, arguments, u_rate)
        self._blocked = tool if fault is not None and fault.kind == "rate_limited" else None
        if fault is None and u_error < config.rates.get(tool, config.rate):
            code, message = random_error(spec, u_code, arguments, realistic=realistic)
            if code == "TIMEOUT":
                fault = Fault("timeout", code, message,
                              upstream=u_timeout < TIMEOUT_AFTER_CALL)
            else:
                fault = Fault("error", code, message)
        if fault is None and realistic and u_silent < _faults.SILENT_RATE:
            fault = Fault("silent", upstream=True,
                          mode="empty" if u_mode < 0.5 else "truncate")
        return n, fault

    def _event(self, spec: ToolSpec, tool: str, arguments: Any, u_rate: float) -> Fault | None:
        if self.down(tool):
            return Fault("outage", "SERVICE_UNAVAILABLE",
                         event_error(spec, "SERVICE_UNAVAILABLE", arguments))
        remote = self.config.is_remote(tool)
        if remote and self.credentials_expired and tool != self.config.auth_tool:
            message = event_error(spec, "AUTH_EXPIRED", arguments).replace(
                _faults.AUTHENTICATOR, str(self.config.auth_tool))
            return Fault("auth_expired", "AUTH_EXPIRED", message)
        if remote and (self._blocked == tool or u_rate < _faults.RATE_LIMIT_RATE):
            return Fault("rate_limited", "RATE_LIMITED",
                         event_error(spec, "RATE_LIMITED", arguments).replace("turn", "call"),
                         retry_after=_faults.RETRY_AFTER_TURNS)
        return None

    def settle(self, tool: str, ok: bool) -> None:
        """What the call's answer changes: a successful call of the auth tool renews the
        credentials."""
        if ok and tool == self.config.auth_tool:
            self.renewed = True


def silent_value(value: Any, mode: str) -> Any:
    """A success's value spoiled silently: emptied, or cut to its first half (texts, bytes,
    sequences, mappings); other values are emptied to their type's zero, or kept when cut."""
    if isinstance(value, (str, bytes, list, tuple)):
        return value[:0] if mode == "empty" else value[: len(value) // 2]
    if isinstance(value, Mapping):
        items = list(value.items())
        return dict(items[:0] if mode == "empty" else items[: len(items) // 2])
    if mode == "empty" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return type(value)()
    if mode == "empty":
        return None
    return value
