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
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
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
        # A sync LangChain tool under `ainvoke` runs in LangChain's executor threads.
        self._lock = threading.Lock()
        self.claimed: dict[str, Any] | None = None

    # --- what a test body calls ------------------------------------------------------------
    def claim(self, done: bool, needed: Iterable[str] | None = None) -> None:
        """The agent's own claim of success (and the tools the job needed: default, every
        tool it called): a claim made while one of them last failed or was spoilt silently
        counts as a fabricated success."""
        self.claimed = {"claimed": bool(done),
                        "needed": None if needed is None else sorted(set(needed))}

    def wrap(self, tool: Any, name: str | None = None) -> Any:
        """A tool, or a list / tuple / dict of tools, with this run's faults in front, its
        interface kept: a plain callable (sync or async), an MCP client or ClientSession (its
        `call_tool`), an OpenAI Agents SDK `FunctionTool`, a LangChain tool (`@tool`,
        StructuredTool, Tool, a BaseTool subclass). Each fails in its framework's own way
        (docs/CHAOS.md)."""
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
        with self._lock:
            if self._faults is None:
                n = sum(1 for line in self.trace if line["tool"] == tool) + 1
                return n, None
            return self._faults.decide(tool, arguments)

    def record(self, tool: str, n: int, arguments: Any, fault: Fault | None,
               upstream: tuple[bool, str] | None) -> None:
        ok = upstream is not None and not upstream[0]
        with self._lock:
            if self._faults is not None:
                self._faults.settle(tool, ok and (fault is None or not fault.is_error))
            self.trace.append({
                "session": self.session, "seq": len(self.trace) + 1, "tool": tool,
                "call_index": n, "arguments": _plain(arguments),
                "fault": None if fault is None else fault.to_json(),
                "upstream": None if upstream is None else {"is_error": upstream[0],
                                                           "text": upstream[1][:2000]}})

    def _callable(self, func: Any, name: str, *, error: Callable[[Fault], Exception] = ToolFault,
                  spoil: Callable[[Any, str], Any] | None = None,
                  keys: Collection[str] | None = None) -> Any:
        """`func` behind the faults: an injected error raised as `error(fault)`, a silent
        fault's answer spoilt by `spoil`; `keys`: the arguments the trace and the error
        wording see (a framework's injected ones left out)."""
        spoil = spoil or _silent

        def arguments_of(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
            if keys is not None:
                kwargs = {k: v for k, v in kwargs.items() if k in keys}
            return _arguments(args, kwargs)

        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await self._call_async(name, arguments_of(args, kwargs),
                                              lambda: func(*args, **kwargs), error, spoil)
            return async_wrapper

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            arguments = arguments_of(args, kwargs)
            n, fault = self.decide(name, arguments)
            if fault is not None and not fault.upstream:
                self.record(name, n, arguments, fault, None)
                raise error(fault)  # the call never reached the tool
            try:
                value = func(*args, **kwargs)
            except Exception as exc:
                self.record(name, n, arguments, fault, (True, f"{type(exc).__name__}: {exc}"))
                raise
            return self._after(name, n, arguments, fault, value, error, spoil)
        return wrapper

    async def _call_async(self, name: str, arguments: Any, run: Callable[[], Awaitable[Any]],
                          error: Callable[[Fault], Exception],
                          spoil: Callable[[Any, str], Any]) -> Any:
        """The async twin of `_callable`'s wrapper: `run()` is the tool's call."""
        n, fault = self.decide(name, arguments)
        if fault is not None and not fault.upstream:
            self.record(name, n, arguments, fault, None)
            raise error(fault)
        try:
            value = await run()
        except Exception as exc:
            self.record(name, n, arguments, fault, (True, f"{type(exc).__name__}: {exc}"))
            raise
        return self._after(name, n, arguments, fault, value, error, spoil)

    def _after(self, name: str, n: int, arguments: Any, fault: Fault | None, value: Any,
               error: Callable[[Fault], Exception], spoil: Callable[[Any, str], Any]) -> Any:
        self.record(name, n, arguments, fault, (False, repr(value)))
        if fault is None:
            return value
        if fault.is_error:  # a timeout after the call: the answer is lost
            raise error(fault)
        return spoil(value, fault.mode or "empty")

    def _agents_sdk(self, tool: Any) -> Any:
        """A copy of the FunctionTool (name, description, schema, guardrails, policies kept)
        whose calls meet the faults. An injected error goes where an exception of the tool
        goes: to the tool's own `failure_error_function`, whose answer the model reads (the
        SDK's default says only that an error occurred; one such as `lambda ctx, e: str(e)`
        passes the code and message on), or, with None, out of the run."""
        import agents.tool

        # An SDK older than its failure-policy helper (0.24 has it): the message as text.
        policy = getattr(agents.tool, "maybe_invoke_function_tool_failure_error_function", None)
        invoke = tool.on_invoke_tool

        async def on_invoke_tool(ctx: Any, input_json: str) -> Any:
            try:  # the original invoker: the tool's own errors meet its own policy there
                return await self._call_async(tool.name, _json_or_text(input_json),
                                              lambda: invoke(ctx, input_json), ToolFault,
                                              _silent)
            except ToolFault as exc:
                if policy is None:
                    return exc.message
                answer = await policy(function_tool=wrapped, context=ctx, error=exc)
                if answer is None:
                    raise
                return answer

        wrapped = dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)
        return wrapped

    def _langchain(self, tool: Any) -> Any:
        """The tool (name, description, schemas, `handle_tool_error`, response format,
        return_direct kept) with its function behind the faults: an injected error is a
        ToolException raised inside the tool, which LangChain handles as any of the tool's
        own (`handle_tool_error`, or a ToolNode's `handle_tool_errors`); a silent fault
        spoils the content (of `content_and_artifact`, the artifact is kept)."""
        from langchain_core.tools import BaseTool, ToolException

        pair = tool.response_format == "content_and_artifact"

        def spoil(value: Any, mode: str) -> Any:
            if pair and isinstance(value, tuple) and len(value) == 2:
                return _silent(value[0], mode), value[1]
            return _silent(value, mode)

        options: dict[str, Any] = {
            "error": lambda fault: ToolException(fault.message), "spoil": spoil,
            "keys": set(tool.args)}  # not the callbacks or config LangChain passes in
        func, coroutine = getattr(tool, "func", None), getattr(tool, "coroutine", None)
        if func is not None or coroutine is not None:  # @tool, StructuredTool, Tool: a copy
            return tool.model_copy(update={
                "func": func and self._callable(func, tool.name, **options),
                "coroutine": coroutine and self._callable(coroutine, tool.name, **options)})
        # A BaseTool subclass: a subclass of it whose _run (and _arun, where the class has
        # its own; BaseTool's runs _run in a thread) meets the faults.
        cls: Any = type(tool)

        def wrapped(method: Any) -> Any:
            def meet(this: Any, *args: Any, **kwargs: Any) -> Any:
                call = self._callable(functools.partial(method, this), tool.name, **options)
                return call(*args, **kwargs)
            # LangChain passes run_manager and config as the method's signature asks.
            return functools.wraps(method)(meet)

        namespace = {"_run": wrapped(cls._run), "__module__": cls.__module__}
        if cls._arun is not BaseTool._arun:
            namespace["_arun"] = wrapped(cls._arun)
        faulty = type(cls)(cls.__name__, (cls,), namespace)
        return faulty(**{name: getattr(tool, name) for name in cls.model_fields})

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

    async def __aenter__(self) -> _McpFaults:  # `async with wrap(session)` opens the session
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._client.__aexit__(*exc_info)

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
        if not hasattr(result, "is_error"):  # an input request, not yet the tool's answer
            faults.record(name, n, arguments, fault, (False, type(result).__name__))
            return result
        faults.record(name, n, arguments, fault, (bool(result.is_error), text_of(result)))
        if fault is None:
            return result
        if fault.is_error:
            return error_result(fault)
        return result if result.is_error else spoil(result, fault.mode or "empty")


def _silent(value: Any, mode: str) -> Any:
    """A success spoilt silently (core/tool_faults.silent_value), an output object with a
    text (the Agents SDK's ToolOutputText) in its own type."""
    from pytest_resilibench.core.tool_faults import silent_value

    if "text" in getattr(type(value), "model_fields", {}) and isinstance(value.text, str):
        return value.model_copy(update={"text": silent_value(value.text, mode)})
    return silent_value(value, mode)


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
