"""The tool registry: 30 tool specifications and the views other code needs of them.

A `ToolSpec` is frozen data (see `catalog.py` for the 30 of them). The registry adds what is
derived: compiled `jsonschema` validators, the per-task dependency graph, and the exports to
OpenAI function-calling and MCP tool definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_resilibench.base.names import DataFlow
from pytest_resilibench.core.quick_schema import quick_check

if TYPE_CHECKING:  # loaded on first validation: pytest start-up must not pay for it
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

__all__ = [
    "COMMON_ERRORS",
    "DATA_FORMATS",
    "EXPLICIT_FLOW",
    "FILE_EXTENSIONS",
    "Role",
    "ToolRegistry",
    "ToolSpec",
    "default_registry",
]

_A = TypeVar("_A")

COMMON_ERRORS = ("INVALID_INPUT", "OPERATION_FAILED", "TIMEOUT")
DATA_FORMATS = ("csv", "json", "xml", "yaml", "text", "binary")
# The file name extension of data in each format (task paths and destinations end with it).
FILE_EXTENSIONS = {"csv": "csv", "json": "json", "xml": "xml", "yaml": "yaml", "text": "txt",
                   "binary": "gz"}


# What the data-flow parameters say under the explicit data flow (base/names.py `DataFlow`,
# issue 50), in place of the catalog's words: the rule an agent must learn is told where it
# reads the parameter (docs/BENCHMARK.md: Simulator).
EXPLICIT_FLOW = {
    "source": "ref of an earlier output to consume, or a tool's name for its latest output; "
              "an omitted source reads the latest output of any tool, whichever tool made it",
    "format": "format of the input data; omitted, the input is read as json (data in another "
              "format are refused)",
}


class Role(str, Enum):
    """Where a tool sits in a workflow; the level orders dependencies (sources first)."""

    SOURCE = "source"
    PROCESSOR = "processor"
    AGGREGATOR = "aggregator"
    OUTPUT = "output"
    UTILITY = "utility"

    @property
    def level(self) -> int:
        return _LEVELS[self]


_LEVELS = {Role.SOURCE: 0, Role.PROCESSOR: 1, Role.AGGREGATOR: 2, Role.OUTPUT: 3, Role.UTILITY: 0}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its contract (schemas), its place in workflows and how it fails."""

    name: str
    category: str
    operation: str
    role: Role
    description: str
    keywords: tuple[str, ...]
    parameters: Mapping[str, Any]
    returns: Mapping[str, Any]
    # Tools that must have succeeded for this one to work well, whatever the task (acyclic).
    prerequisites: tuple[str, ...] = ()
    # Error codes this tool can return and the weights of the random ones.
    failure_modes: tuple[tuple[str, float], ...] = ()
    latency_s: float = 0.2
    timeout_s: float = 30.0
    # The data format of a successful output: a fixed format, or None for "as the input".
    output_format: str | None = None

    @property
    def level(self) -> int:
        return self.role.level

    @property
    def produces_output(self) -> bool:
        """Whether a success leaves a deliverable (the output step of a task must)."""
        return self.role in (Role.OUTPUT, Role.AGGREGATOR)

    @property
    def acts_outside(self) -> bool:
        """Whether a success acts on the world beyond the episode's data (a file written, a
        post, a notification, a route, a job scheduled, messages enqueued): a second success
        does it a second time (scoring.py: a deliverable is delivered once)."""
        return self.role is Role.OUTPUT or self.operation == "queue"

    @property
    def error_codes(self) -> tuple[str, ...]:
        return tuple(code for code, _ in self.failure_modes)

    @property
    def required_parameters(self) -> tuple[str, ...]:
        return tuple(self.parameters.get("required", ()))

    # --- the data flow: one home for the simulator, the flaws, the agents and the generator --
    @property
    def reads_input(self) -> bool:
        """Whether a call reads an earlier output: its `source`, else the default input
        (`ToolRegistry.default_source`). Sources read the task's own data."""
        return self.role is not Role.SOURCE and "source" in self.parameters.get("properties", {})

    def produced_format(self, arguments: Mapping[str, Any], consumed: str) -> str:
        """The data format of a successful call's output: the tool's fixed format, a
        parameter's value (`param:NAME`), or the consumed data's format."""
        if self.output_format is None:
            return consumed
        if self.output_format.startswith("param:"):
            return str(arguments.get(self.output_format.removeprefix("param:"), consumed))
        return self.output_format

    def shown_parameters(self, data_flow: DataFlow = "inferred") -> dict[str, Any]:
        """The parameter schema as an agent is shown it: under the explicit data flow the
        data-flow parameters say what an omitted one reads (`EXPLICIT_FLOW`)."""
        parameters: dict[str, Any] = _plain(self.parameters)
        if data_flow == "explicit":
            for name, props in parameters.get("properties", {}).items():
                if name in EXPLICIT_FLOW:
                    props["description"] = EXPLICIT_FLOW[name]
        return parameters

    def to_openai(self, data_flow: DataFlow = "inferred") -> dict[str, Any]:
        """The OpenAI function-calling `tools` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.shown_parameters(data_flow),
            },
        }

    def to_mcp(self, data_flow: DataFlow = "inferred") -> dict[str, Any]:
        """The MCP tool definition (`name`, `description`, `inputSchema`, `outputSchema`)."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.shown_parameters(data_flow),
            "outputSchema": _plain(self.returns),
        }

    def to_json(self) -> dict[str, Any]:
        """Everything about the tool as plain JSON-able data."""
        return {
            "name": self.name,
            "category": self.category,
            "operation": self.operation,
            "role": self.role.value,
            "level": self.level,
            "description": self.description,
            "keywords": list(self.keywords),
            "parameters": _plain(self.parameters),
            "returns": _plain(self.returns),
            "prerequisites": list(self.prerequisites),
            "error_codes": list(self.error_codes),
            "failure_modes": dict(self.failure_modes),
            "latency_s": self.latency_s,
            "timeout_s": self.timeout_s,
            "output_format": self.output_format,
            "produces_output": self.produces_output,
        }


def _plain(value: Any) -> Any:
    """Deep-copy mappings/tuples into dicts/lists so callers can mutate or serialise them."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, eq=False)
class ToolRegistry:
    """An immutable, ordered set of tools with compiled validators. Equal and hashed by
    identity (`eq=False`): caches of what a registry derives key on the registry itself
    (`functools.lru_cache`, `weakref.WeakKeyDictionary`)."""

    tools: tuple[ToolSpec, ...]
    _by_name: dict[str, ToolSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {t.name: t for t in self.tools}
        if len(by_name) != len(self.tools):
            raise ValueError("duplicate tool names in registry")
        for tool in self.tools:
            for pre in tool.prerequisites:
                if pre not in by_name:
                    raise ValueError(f"{tool.name}: unknown prerequisite {pre}")
        object.__setattr__(self, "_by_name", by_name)
        self._check_acyclic()

    def _check_acyclic(self) -> None:
        done: set[str] = set()

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in path:
                raise ValueError(f"prerequisite cycle: {' -> '.join((*path, name))}")
            if name not in done:
                for pre in self._by_name[name].prerequisites:
                    visit(pre, (*path, name))
                done.add(name)

        for tool in self.tools:
            visit(tool.name, ())

    def __getitem__(self, name: str) -> ToolSpec:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def get(self, name: str) -> ToolSpec | None:
        return self._by_name.get(name)

    @cached_property
    def _argument_validators(self) -> dict[str, Draft202012Validator]:
        from jsonschema import Draft202012Validator

        return {t.name: Draft202012Validator(t.parameters) for t in self.tools}

    @cached_property
    def _output_validators(self) -> dict[str, Draft202012Validator]:
        from jsonschema import Draft202012Validator

        return {t.name: Draft202012Validator(t.returns) for t in self.tools}

    @cached_property
    def _quick_checks(self) -> dict[str, Callable[[Any], bool]]:
        return {t.name: quick_check(t.parameters) for t in self.tools}

    @cached_property
    def _argument_memo(self) -> dict[tuple[Any, ...], list[str]]:
        return {}

    def argument_errors(self, name: str, arguments: Any) -> list[str]:
        """Schema violations of a call's arguments, as short human-readable messages.

        Validation is a pure function of (tool, arguments) and agents resend the same
        arguments on every retry, so flat argument objects are memoised (bounded). Arguments
        the quick check (core/quick_schema.py) finds valid need neither: most calls, the
        first of each task's own paths and names included."""
        if self._quick_checks[name](arguments):
            return []
        key: tuple[Any, ...] | None = None
        if isinstance(arguments, dict):
            try:
                # The type is part of the key: True == 1 in Python, not in JSON Schema.
                key = (name, *[(k, type(v), v) for k, v in sorted(arguments.items())])
                hash(key)
            except TypeError:  # unhashable values (lists, dicts) or non-string keys
                key = None
        if key is not None:
            cached = self._argument_memo.get(key)
            if cached is not None:
                return cached
        errors = _messages(self._argument_validators[name].iter_errors(arguments))
        if key is not None and len(self._argument_memo) < _MEMO_LIMIT:
            self._argument_memo[key] = errors
        return errors

    def output_errors(self, name: str, output: Any) -> list[str]:
        return _messages(self._output_validators[name].iter_errors(output))

    @cached_property
    def _task_memo(self) -> dict[tuple[str, str, tuple[str, ...]], Any]:
        """Answers about one tool in one task (`dependencies`, `input_groups`): pure functions
        of (question, tool, task tools), asked on every simulated call; bounded."""
        return {}

    def _in_task(self, question: str, name: str, task_tools: Iterable[str],
                 answer: Callable[[str, tuple[str, ...]], _A]) -> _A:
        key = (question, name, tuple(task_tools))
        found: _A | None = self._task_memo.get(key)
        if found is None:
            found = answer(name, key[2])
            if len(self._task_memo) < _MEMO_LIMIT:
                self._task_memo[key] = found
        return found

    def dependencies(self, name: str, task_tools: Iterable[str]) -> tuple[str, ...]:
        """What `name` depends on in a task (see `_dependencies`); memoised."""
        return self._in_task("dependencies", name, task_tools, self._dependencies)

    def _dependencies(self, name: str, task_tools: tuple[str, ...]) -> tuple[str, ...]:
        """What `name` depends on in a task: its prerequisites and the task's nearest
        lower-level tools (a processor needs the sources, an output the aggregators, or the
        processors where the task has no aggregator). Utilities depend on nothing."""
        tool = self._by_name[name]
        deps = list(tool.prerequisites)
        if tool.role is not Role.UTILITY:
            lower = [
                self._by_name[t]
                for t in task_tools
                if t != name
                and t in self._by_name
                and self._by_name[t].role is not Role.UTILITY
                and self._by_name[t].level < tool.level
            ]
            if lower:
                nearest = max(t.level for t in lower)
                deps += [t.name for t in lower if t.level == nearest]
        return tuple(dict.fromkeys(deps))

    def input_groups(self, name: str, task_tools: Iterable[str]) -> tuple[tuple[str, ...], ...]:
        """Whose output `name` reads by default, in order of preference: its data (the task's
        nearest lower-level tools it depends on), then its prerequisites. A prerequisite
        gates a call (a token, a connection, a health check) but is not the task's data, so
        a router after its monitor routes the task's results, not the monitor's. Memoised
        (every simulated call and every plan flow asks)."""
        return self._in_task("input_groups", name, task_tools, self._input_groups)

    def _input_groups(self, name: str, task_tools: tuple[str, ...]
                      ) -> tuple[tuple[str, ...], ...]:
        prerequisites = self._by_name[name].prerequisites
        deps = self.dependencies(name, task_tools)
        return (tuple(d for d in deps if d not in prerequisites),
                tuple(d for d in deps if d in prerequisites))

    def default_source(self, name: str, task_tools: Iterable[str], latest: Mapping[str, int],
                       *, groups: Sequence[Sequence[str]] | None = None) -> str | None:
        """The tool whose output a call of `name` that names no `source` reads: among the
        tools that produced data (`latest`: tool -> rank of its latest output, later higher),
        the one with the latest output in the first of `groups` (default `input_groups`)
        that has any, else the latest of all; None before any output."""
        for group in self.input_groups(name, task_tools) if groups is None else groups:
            found = [d for d in group if d in latest]
            if found:
                return max(found, key=latest.__getitem__)
        return max(latest, key=latest.__getitem__) if latest else None

    def dependency_order(self, tools: Iterable[str],
                         task_tools: Iterable[str] | None = None) -> tuple[str, ...]:
        """A stable topological order of `tools`: each after what it depends on among them
        (its dependencies in a task of `task_tools`, by default `tools` themselves), else in
        the given order; where nothing is ready (a cycle) the first left goes next."""
        pending = list(dict.fromkeys(tools))
        context = tuple(pending) if task_tools is None else tuple(task_tools)
        deps = {t: set(self.dependencies(t, context)) & set(pending) for t in pending}
        ordered: list[str] = []
        while pending:
            ready = next((t for t in pending if deps[t] <= set(ordered)), pending[0])
            ordered.append(ready)
            pending.remove(ready)
        return tuple(ordered)

    def closure(self, names: Sequence[str]) -> tuple[str, ...]:
        """`names` plus all their prerequisites, transitively, prerequisites first."""
        out: dict[str, None] = {}

        def add(name: str) -> None:
            for pre in self._by_name[name].prerequisites:
                add(pre)
            out.setdefault(name, None)

        for name in names:
            add(name)
        return tuple(out)

    def to_openai(self, names: Iterable[str] | None = None, *,
                  data_flow: DataFlow = "inferred") -> list[dict[str, Any]]:
        return [self._by_name[n].to_openai(data_flow) for n in (names or self.names)]

    def to_mcp(self, names: Iterable[str] | None = None, *,
               data_flow: DataFlow = "inferred") -> list[dict[str, Any]]:
        return [self._by_name[n].to_mcp(data_flow) for n in (names or self.names)]

    def to_json(self) -> list[dict[str, Any]]:
        return [t.to_json() for t in self.tools]


def _messages(errors: Iterable[ValidationError]) -> list[str]:
    out = []
    for err in sorted(errors, key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in err.absolute_path)
        out.append(f"{where}: {err.message}" if where else err.message)
    return out


_MEMO_LIMIT = 65536
_DEFAULT: ToolRegistry | None = None


def default_registry() -> ToolRegistry:
    """The 30-tool registry of the benchmark (built once per process)."""
    global _DEFAULT
    if _DEFAULT is None:
        from pytest_resilibench.core.catalog import TOOLS

        _DEFAULT = ToolRegistry(TOOLS)
    return _DEFAULT
