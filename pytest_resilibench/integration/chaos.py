"""The benchmark's faults around a team's own tools, in its own tests (docs/CHAOS.md).

    @pytest.mark.resili_faults(profile="realistic", seeds=20)
    def test_my_agent(resili_faults):
        tools = resili_faults.wrap([search, fetch])      # callables, MCP clients, SDK tools
        result = my_agent(tools).run("...")
        resili_faults.claim(result.ok)                   # optional: for fabricated success
        assert result.ok

The marker makes the test `seeds` + 1 items: one clean run (`<profile>-clean`: no fault) and
one per fault seed (`<profile>-s0`, `<profile>-s1`, ...), ids pytest's `-k`, `-n` and JUnit
see like any other. Each run's faults are `core/tool_faults.FaultSession`'s, keyed by (seed,
the test function's name, tool, call index): two versions of an agent, or two parametrizations
of one test, meet the same faults on the same seed. Each run writes its call trace (JSONL,
the proxy's format) under `.resilibench/chaos/` and puts its result on its teardown report
(`user_properties`, which JUnit XML and xdist carry): the controller gathers them
(reporting/chaos_summary.py) into pass rates clean and under faults, the paired drop, the
flipped seeds with their traces, recovery measures, the JSON report and the gate.

Nothing here runs for a test that does not use the marker: the plugin looks for it in
`pytest_generate_tests` and for the property on reports, and does nothing else.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_resilibench.core.tool_faults import DEFAULT_RATE, Fault, FaultConfig, FaultSession
from pytest_resilibench.integration.options import CHAOS_MARKER as MARKER
from pytest_resilibench.integration.options import CHAOS_PROPERTY as PROPERTY

__all__ = ["MARKER", "PROPERTY", "SCHEMA", "ChaosRun", "ResiliFaults", "ToolFault", "base_id",
           "chaos_runs", "marker_runs", "row_of"]

SCHEMA = "resilibench.chaos/1"  # reporting/chaos_summary.py RUN_SCHEMA: a test checks
TRACE_DIR = Path(".resilibench") / "chaos"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MARKER_KEYS = {"profile", "seeds", "rate", "rates", "remote", "auth_tool", "spare",
                "categories", "first_seed"}


class ToolFault(Exception):
    """What a wrapped Python tool raises on an injected failure: `code` (the simulator's
    error codes: TIMEOUT, RATE_LIMITED, SERVICE_UNAVAILABLE, ...), `message` ("<CODE>:
    ..."), and `retry_after` (calls to wait) on a rate limit."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.message)
        self.code = fault.code
        self.message = fault.message
        self.retry_after = fault.retry_after
        self.kind = fault.kind


@dataclasses.dataclass(frozen=True)
class ChaosRun:
    """One item of a marked test: a fault seed, or None for the clean run."""

    config: FaultConfig
    seed: int | None

    @property
    def id(self) -> str:
        return f"{self.config.profile}-" + ("clean" if self.seed is None else f"s{self.seed}")


def marker_runs(mark: Any) -> list[ChaosRun]:
    """The runs a `resili_faults` marker asks for; ValueError names a bad argument."""
    if mark.args:
        raise ValueError("@pytest.mark.resili_faults takes keyword arguments only "
                         "(profile=, seeds=, rate=, rates=, remote=, auth_tool=, spare=)")
    options = dict(mark.kwargs)
    unknown = sorted(set(options) - _MARKER_KEYS)
    if unknown:
        raise ValueError(f"@pytest.mark.resili_faults: unknown argument(s) {', '.join(unknown)}"
                         f" (known: {', '.join(sorted(_MARKER_KEYS))})")
    seeds = options.pop("seeds", 20)
    first = options.pop("first_seed", 0)
    for name, value in (("seeds", seeds), ("first_seed", first)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"@pytest.mark.resili_faults: {name} must be an integer >= 0, "
                             f"got {value!r}")
    for name in ("remote", "spare"):
        if name in options and options[name] is not None:
            options[name] = frozenset(options[name])
    config = FaultConfig(profile=options.pop("profile", "realistic"),
                         rate=options.pop("rate", DEFAULT_RATE), **options)
    return [ChaosRun(config, None)] + [ChaosRun(config, first + s) for s in range(seeds)]


def chaos_runs(metafunc: Any) -> list[ChaosRun] | None:
    """The runs of a test function that carries the marker (None: it does not)."""
    mark = metafunc.definition.get_closest_marker(MARKER)
    if mark is None:
        return None
    if MARKER not in metafunc.fixturenames:  # the marker alone: nothing to wrap
        metafunc.fixturenames.append(MARKER)
        raise ValueError("@pytest.mark.resili_faults needs the test to take the "
                         "resili_faults fixture (its tools go through it)")
    return marker_runs(mark)


def base_id(nodeid: str, run_id: str) -> str:
    """The test's id without its chaos run: `t.py::test[careful-realistic-s3]` ->
    `t.py::test[careful]` (the unit two runs and two versions are paired on)."""
    head, sep, params = nodeid.partition("[")
    if not sep:
        return nodeid
    parts = [p for p in params.rstrip("]").split("-")]
    run = run_id.split("-")
    for i in range(len(parts) - len(run) + 1):
        if parts[i:i + len(run)] == run:
            del parts[i:i + len(run)]
            break
    return head + (f"[{'-'.join(parts)}]" if parts else "")


class ResiliFaults:
    """The `resili_faults` fixture's value: wraps the team's tools so that their calls meet
    this run's faults (none in the clean run), and keeps the call trace."""

    def __init__(self, run: ChaosRun, session: str) -> None:
        self.run = run
        self.profile = run.config.profile
        self.seed = run.seed
        self.clean = run.seed is None
        config = dataclasses.replace(run.config, seed=run.seed or 0)
        self._faults = None if self.clean else FaultSession(config, session)
        self.session = session
        self.trace: list[dict[str, Any]] = []
        self.claimed: dict[str, Any] | None = None

    # --- what a test body calls ------------------------------------------------------------
    def claim(self, done: bool, needed: Iterable[str] | None = None) -> None:
        """The agent's own claim of success (and the tools the job needed: default, every
        tool it called): a claim made while one of them last failed or was spoilt silently
        counts as a fabricated success."""
        self.claimed = {"claimed": bool(done),
                        "needed": None if needed is None else sorted(set(needed))}

    def wrap(self, tool: Any, name: str | None = None) -> Any:
        """A tool, or a list / tuple / dict of tools, with this run's faults in front:
        a plain callable (sync or async), an MCP client or ClientSession (its `call_tool`),
        an OpenAI Agents SDK `FunctionTool`, a LangChain tool."""
        if isinstance(tool, Mapping):
            return {key: self.wrap(value, name=str(key)) for key, value in tool.items()}
        if isinstance(tool, (list, tuple)):
            return type(tool)(self.wrap(t) for t in tool)
        if hasattr(tool, "on_invoke_tool") and hasattr(tool, "params_json_schema"):
            return self._agents_sdk(tool)
        if hasattr(tool, "args_schema") and hasattr(tool, "invoke"):
            return self._langchain(tool)
        if hasattr(tool, "call_tool") and inspect.iscoroutinefunction(tool.call_tool):
            return _McpFaults(self, tool)
        if callable(tool):
            return self._callable(tool, str(name or getattr(tool, "__name__", "tool")))
        raise TypeError(f"resili_faults.wrap: cannot wrap {type(tool).__name__} (a callable, "
                        "an MCP client session, an Agents SDK FunctionTool or a LangChain "
                        "tool)")

    # --- the decision and the trace ---------------------------------------------------------
    def decide(self, tool: str, arguments: Any) -> tuple[int, Fault | None]:
        if self._faults is None:
            n = sum(1 for line in self.trace if line["tool"] == tool) + 1
            return n, None
        return self._faults.decide(tool, arguments)

    def record(self, tool: str, n: int, arguments: Any, fault: Fault | None,
               upstream: tuple[bool, str] | None) -> None:
        ok = upstream is not None and not upstream[0]
        if self._faults is not None:
            self._faults.settle(tool, ok and (fault is None or not fault.is_error))
        self.trace.append({
            "session": self.session, "seq": len(self.trace) + 1, "tool": tool,
            "call_index": n, "arguments": _plain(arguments),
            "fault": None if fault is None else fault.to_json(),
            "upstream": None if upstream is None else {"is_error": upstream[0],
                                                       "text": upstream[1][:2000]}})

    def _callable(self, func: Any, name: str) -> Any:
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                n, fault = self.decide(name, _arguments(args, kwargs))
                return await self._finish_async(name, n, _arguments(args, kwargs), fault,
                                                func(*args, **kwargs))
            return async_wrapper

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            arguments = _arguments(args, kwargs)
            n, fault = self.decide(name, arguments)
            if fault is not None and not fault.upstream:
                self.record(name, n, arguments, fault, None)
                raise ToolFault(fault)
            try:
                value = func(*args, **kwargs)
            except Exception as exc:
                self.record(name, n, arguments, fault, (True, f"{type(exc).__name__}: {exc}"))
                raise
            return self._after(name, n, arguments, fault, value)
        return wrapper

    async def _finish_async(self, name: str, n: int, arguments: Any, fault: Fault | None,
                            pending: Any) -> Any:
        if fault is not None and not fault.upstream:
            pending.close()  # never awaited: the call did not reach the tool
            self.record(name, n, arguments, fault, None)
            raise ToolFault(fault)
        try:
            value = await pending
        except Exception as exc:
            self.record(name, n, arguments, fault, (True, f"{type(exc).__name__}: {exc}"))
            raise
        return self._after(name, n, arguments, fault, value)

    def _after(self, name: str, n: int, arguments: Any, fault: Fault | None, value: Any) -> Any:
        from pytest_resilibench.core.tool_faults import silent_value

        self.record(name, n, arguments, fault, (False, repr(value)))
        if fault is None:
            return value
        if fault.is_error:  # a timeout after the call: the answer is lost
            raise ToolFault(fault)
        return silent_value(value, fault.mode or "empty")

    def _agents_sdk(self, tool: Any) -> Any:
        """The SDK's tools answer failures as text to the model: so does the wrapper."""
        invoke = tool.on_invoke_tool

        async def on_invoke_tool(ctx: Any, input_json: str) -> Any:
            arguments = _json_or_text(input_json)
            n, fault = self.decide(tool.name, arguments)
            try:
                return await self._finish_async(tool.name, n, arguments, fault,
                                                invoke(ctx, input_json))
            except ToolFault as exc:
                return exc.message
        return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)

    def _langchain(self, tool: Any) -> Any:
        """A StructuredTool of the same name, description and schema; failures raise
        ToolException, which LangChain hands to the model when `handle_tool_error` is set."""
        from langchain_core.tools import StructuredTool, ToolException

        def run(**kwargs: Any) -> Any:
            n, fault = self.decide(tool.name, kwargs)
            if fault is not None and not fault.upstream:
                self.record(tool.name, n, kwargs, fault, None)
                raise ToolException(fault.message)
            value = tool.invoke(kwargs)
            try:
                return self._after(tool.name, n, kwargs, fault, value)
            except ToolFault as exc:
                raise ToolException(exc.message) from None

        return StructuredTool.from_function(func=run, name=tool.name,
                                            description=tool.description,
                                            args_schema=tool.args_schema,
                                            handle_tool_error=True)

    # --- the end of the run -----------------------------------------------------------------
    def write_trace(self, directory: Path, test_id: str) -> Path:
        from pytest_resilibench.base.outputs import prepare

        path = prepare(directory / _SAFE.sub("_", test_id).strip("_") / f"{self.run.id}.jsonl")
        path.write_text("".join(json.dumps(line, sort_keys=True) + "\n"
                                for line in self.trace), encoding="utf-8")
        return path


class _McpFaults:
    """An MCP client (or ClientSession) whose `call_tool` meets the faults: an injected error
    is an `isError` result "<CODE>: message" as the proxy sends it (servers/mcp_proxy.py);
    everything else is the client's own."""

    def __init__(self, faults: ResiliFaults, client: Any) -> None:
        self._faults = faults
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None,
                        *args: Any, **kwargs: Any) -> Any:
        from pytest_resilibench.servers.mcp_proxy import error_result, spoil, text_of

        faults = self._faults
        arguments = dict(arguments or {})
        n, fault = faults.decide(name, arguments)
        if fault is not None and not fault.upstream:
            faults.record(name, n, arguments, fault, None)
            return error_result(fault)
        result = await self._client.call_tool(name, arguments, *args, **kwargs)
        faults.record(name, n, arguments, fault, (bool(result.is_error), text_of(result)))
        if fault is None:
            return result
        if fault.is_error:
            return error_result(fault)
        return result if result.is_error else spoil(result, fault.mode or "empty")


def _arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    if not args:
        return dict(kwargs)
    return {"args": list(args), **kwargs} if kwargs else list(args)


def _plain(value: Any) -> Any:
    """The arguments as JSON can hold them (the rest by repr)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def row_of(nodeid: str, faults: ResiliFaults, outcome: str, trace: str | None) -> dict[str, Any]:
    """The run's result as the report carries it (reporting/chaos_summary.py reads it)."""
    from pytest_resilibench.core.recovery import measures

    return {"schema": SCHEMA, "test": base_id(nodeid, faults.run.id), "run": faults.run.id,
            "profile": faults.profile, "seed": faults.seed, "outcome": outcome,
            "trace": trace, "calls": len(faults.trace),
            "faults": sum(1 for line in faults.trace if line["fault"] is not None),
            "measures": measures(faults.trace, faults.claimed)}
