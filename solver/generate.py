"""The task generator (docs/BENCHMARK.md: Tasks): 5 types x 3 difficulties x 336 = 5040 tasks,
from a seed.

For each task: pick a template of its type and the optional steps its difficulty keeps, match
every operation phrase to a tool with BM25 (never a tool twice), order the tools consistently
with their dependencies, bind a realistic value to every required parameter of the prerequisite
closure, follow the data through the closure (as the simulator does) to know which format each
step consumes, then word the description for the difficulty.

Every draw comes from one counter-based stream per task, keyed by (seed, task id), so a task
never depends on the others and the fixture bytes are a pure function of the config.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_resilibench.base.names import FLAWS
from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.fixture_files import write_fixture_file
from pytest_resilibench.core.flaw_choices import FLAW_CHOICES_FILE, choices_bytes
from pytest_resilibench.core.flow_sense import sense_problems
from pytest_resilibench.core.matcher import ToolMatcher
from pytest_resilibench.core.registry import (
    DATA_FORMATS,
    FILE_EXTENSIONS,
    Role,
    ToolRegistry,
    default_registry,
)
from pytest_resilibench.core.tasks import DIFFICULTIES, FIXTURES_DIR, TASK_TYPES, Task
from pytest_resilibench.core.wording import PHRASES, WORDED_PARAMS, read_worded

from . import flows, templates

if TYPE_CHECKING:
    from .adversarial_filter import FilterConfig

__all__ = [
    "MANIFEST_SCHEMA",
    "STEP_COUNTS",
    "GeneratorConfig",
    "drawn_flow",
    "generate",
    "generate_task",
    "generate_tasks",
    "order_by_dependencies",
    "task_problems",
    "tasks_bytes",
    "write_fixtures",
]

MANIFEST_SCHEMA = "resilibench.manifest/1"
GENERATOR_VERSION = 1  # the paper's templates (the frozen `paper` task set)
FLOWS_VERSION = 4      # the grammar of data flows (`flows.py`, the default task set)
GRAMMARS = ("flows", "templates")
# Required tools per task type (docs/BENCHMARK.md: Tasks).
STEP_COUNTS: dict[str, tuple[int, int]] = {
    "simple_task": (2, 3),
    "basic_task": (3, 4),
    "data_pipeline": (3, 5),
    "api_integration": (3, 4),
    "multi_stage_pipeline": (4, 6),
}
# The parameter naming each output tool's deliverable, and what kind of deliverable it is.
_DELIVERABLES: dict[str, tuple[str, str]] = {
    "file_operations_writer": ("destination", "file"),
    "network_poster": ("target_url", "http_post"),
    "network_router": ("route_to", "routed_data"),
    "integration_scheduler": ("job_name", "scheduled_job"),
    "utility_notifier": ("recipient", "notification"),
    "data_processing_aggregator": ("function", "summary"),
    "integration_queue": ("queue_name", "queued_batch"),
}
_T = TypeVar("_T")


@dataclass(frozen=True)
class GeneratorConfig:
    """Everything the fixture bytes depend on (with the template data, hashed in `to_json`)."""

    seed: int = 2026
    per_cell: int = 336
    # "flows": the grammar of data flows (the default set); "templates": the paper's
    # operation sequences (the frozen `paper` set, whose manifest predates this field).
    grammar: str = "flows"

    def __post_init__(self) -> None:
        if self.grammar not in GRAMMARS:
            raise ValueError(f"unknown grammar {self.grammar!r} (one of {', '.join(GRAMMARS)})")

    def to_json(self) -> dict[str, Any]:
        data = {
            "seed": self.seed,
            "per_cell": self.per_cell,
            "version": GENERATOR_VERSION,
            "task_types": list(TASK_TYPES),
            "difficulties": list(DIFFICULTIES),
            "templates_sha256": _sha256(_canonical(_template_data())),
        }
        if self.grammar == "flows":
            data.update(version=FLOWS_VERSION, grammar="flows",
                        flows_sha256=_sha256(_canonical(flows.flow_data())))
        return data

    @property
    def digest(self) -> str:
        return _sha256(_canonical(self.to_json()))


def _template_data() -> dict[str, Any]:
    return {name: getattr(templates, name) for name in templates.__all__}


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- drawing ---------------------------------------------------------------------------------
def _sample(rng: DrawStream, items: Sequence[_T], k: int) -> list[_T]:
    """k distinct items in their original order (a partial Fisher-Yates on indices)."""
    idx = list(range(len(items)))
    for i in range(k):
        j = rng.randint(i, len(idx) - 1)
        idx[i], idx[j] = idx[j], idx[i]
    return [items[i] for i in sorted(idx[:k])]


def _optional_kept(rng: DrawStream, difficulty: str, n_optional: int) -> int:
    """How many optional steps a difficulty keeps: easy few, hard most."""
    if n_optional == 0:
        return 0
    if difficulty == "easy":
        return 0 if rng.random() < 0.7 else 1
    if difficulty == "hard":
        return n_optional if rng.random() < 0.7 else n_optional - 1
    return rng.randint(0, n_optional)


# --- tools -----------------------------------------------------------------------------------
def order_by_dependencies(tools: Sequence[str], registry: ToolRegistry) -> tuple[str, ...]:
    """The registry's stable topological order (each tool after its dependencies within
    `tools`, otherwise the given order kept); a cycle is an error here."""
    task = tuple(tools)
    ordered = registry.dependency_order(task)
    cyclic = [t for i, t in enumerate(ordered)
              if set(registry.dependencies(t, task)) & set(ordered[i + 1:])]
    if cyclic:
        raise ValueError(f"dependency cycle among {cyclic}")
    # Dependencies are level-based, so the order cannot change them; recheck to be sure.
    if any(set(registry.dependencies(t, ordered)) != set(registry.dependencies(t, task))
           for t in task):
        raise AssertionError("dependencies changed with the order")
    return ordered


def _match_tools(
    rng: DrawStream, operations: Sequence[str], matcher: ToolMatcher
) -> list[str]:
    used: list[str] = []
    for op in operations:
        phrase = rng.choice(templates.OPERATIONS[op])
        used.append(matcher.best(phrase, exclude=used))
    return used


# --- values ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Context:
    theme: Mapping[str, str]
    year: int
    period: str
    org: str


_ORGS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell")
_PERIODS = ("q1", "q2", "q3", "q4", "jan", "apr", "jul", "oct")


def _bind(param: str, rng: DrawStream, ctx: _Context, consumed: str) -> Any:
    """A realistic value for a task-bound parameter (valid against the tool's schema)."""
    t, stem = ctx.theme, ctx.theme["stem"]
    simple: dict[str, Any] = {
        "directory": f"/data/{stem}/incoming/{ctx.year}",
        "url": f"https://api.{ctx.org}.example.com/v{rng.randint(1, 3)}/{t['resource']}",
        "target_url": f"https://partners.{ctx.org}.example.com/ingest/{t['resource']}",
        "route_to": f"{stem.replace('_', '-')}-{rng.choice(('eu-west', 'us-east', 'ap-south'))}",
        "endpoint": f"postgresql://db.{ctx.org}.internal:5432/{stem}",
        "service": f"{ctx.org}-{rng.choice(('gateway', 'identity', 'sso'))}",
        "recipient": rng.choice((f"{t['team']}-team@{ctx.org}.example.com",
                                 f"#{t['team']}-alerts", f"oncall@{ctx.org}.example.com")),
        "queue_name": f"{stem.replace('_', '-')}-batches",
        "job_name": f"{stem.replace('_', '-')}-{ctx.period}-refresh",
        "function": rng.choice(("sum", "mean", "count", "min", "max")),
        "operation": rng.choice(("normalize", "pivot", "flatten", "rename", "enrich")),
        "expression": t["expression"],
        "condition": t["condition"],
        "horizon": rng.choice((7, 12, 14, 30, 90)),
        "method": rng.choice(("statistical", "trend", "correlation", "anomaly")),
        "objective": rng.choice(("minimize", "maximize")),
        "target_schema": t["schema"],
        "schedule": rng.choice(("once", "hourly", "daily", "weekly")),
        "target_format": rng.choice([f for f in DATA_FORMATS if f not in (consumed, "binary")]),
        "action": rng.choice(("format", "split", "merge", "dedupe")),
        "event": f"{stem}_{ctx.period}_processed",
        "key": f"{stem}:{ctx.year}-{ctx.period}",
        "message": f"{t['label']} run for {ctx.period} {ctx.year} started",
    }
    if param in simple:
        return simple[param]
    if param == "path":
        return f"/data/{stem}_{ctx.year}_{ctx.period}.{FILE_EXTENSIONS[consumed]}"
    if param == "destination":
        kind = rng.choice(("summary", "report", "clean", "export"))
        return f"/reports/{stem}_{kind}_{ctx.year}_{ctx.period}.{FILE_EXTENSIONS[consumed]}"
    raise KeyError(f"no value generator for parameter {param!r}")


def _data_format(rng: DrawStream, closure: Sequence[str], registry: ToolRegistry) -> str:
    """The format of the task's raw data: what its first format-less source reads."""
    for tool in closure:
        spec = registry[tool]
        if spec.role is Role.SOURCE and spec.output_format is None:
            choices = {"network_fetcher": ("json", "json", "xml", "csv"),
                       "integration_connector": ("csv", "json")}
            return rng.choice(choices.get(tool, ("csv", "csv", "json", "xml", "yaml", "text")))
    return "json"


Binder = Callable[[str, DrawStream, str], Any]


def _bind_closure(
    rng: DrawStream, ctx: _Context, required: tuple[str, ...], closure: tuple[str, ...],
    registry: ToolRegistry, *, data_format: str | None = None, bind: Binder | None = None,
) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """Bind every required parameter along the closure, following the data as the simulator
    does when the closure runs in order (each step consuming the latest output of a
    data dependency, else of a prerequisite, else the latest output): returns inputs and,
    per tool, the format it consumes and the format it produces. `data_format` and `bind`
    are the flow grammar's (drawn before, wider value pools); the paper's by default."""
    if data_format is None:
        data_format = _data_format(rng, closure, registry)
    if bind is None:
        def bind(param: str, rng: DrawStream, fmt: str) -> Any:
            return _bind(param, rng, ctx, fmt)
    inputs: dict[str, Any] = {"format": data_format}
    consumed: dict[str, str] = {}
    produced: dict[str, str] = {}
    latest: dict[str, int] = {}  # tool -> rank of its output (the closure runs each once)
    for tool in closure:
        spec = registry[tool]
        producer = registry.default_source(tool, required, latest) if spec.reads_input else None
        fmt = data_format if producer is None else produced[producer]
        consumed[tool] = fmt
        for param in spec.required_parameters:
            if param != "format" and param not in inputs:
                inputs[param] = bind(param, rng, fmt)
        produced[tool] = spec.produced_format(inputs, fmt)
        latest[tool] = len(latest)
    return inputs, consumed, produced


def _step_arguments(
    closure: Sequence[str], inputs: Mapping[str, Any], consumed: Mapping[str, str],
    registry: ToolRegistry,
) -> dict[str, dict[str, Any]]:
    args: dict[str, dict[str, Any]] = {}
    for tool in closure:
        call: dict[str, Any] = {}
        for param in registry[tool].required_parameters:
            call[param] = consumed[tool] if param == "format" else inputs[param]
        args[tool] = call
    return args


# --- wording ---------------------------------------------------------------------------------
def _join(clauses: Sequence[str], *, last: str) -> str:
    if len(clauses) == 1:
        return clauses[0]
    return ", ".join(clauses[:-1]) + f"{last}{clauses[-1]}"


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _describe(
    rng: DrawStream, difficulty: str, required: Sequence[str], closure: Sequence[str],
    values: Mapping[str, Any],
) -> str:
    clauses = [rng.choice(templates.WORDINGS[t][difficulty]).format(**values) for t in required]
    hidden = [
        templates.PREREQUISITE_WORDINGS[t][difficulty].format(**values)
        for t in closure if t not in required
    ]
    return _arrange(rng, clauses, hidden, difficulty, values)


def _arrange(rng: DrawStream, clauses: Sequence[str], hidden: Sequence[str],
             difficulty: str, values: Mapping[str, Any], *,
             contexts: Sequence[str] = templates.CONTEXTS,
             noise: Callable[[DrawStream, Mapping[str, Any], int], list[str]] | None = None,
             ) -> str:
    """A description's sentences: the stated clauses as the difficulty words them (hard adds
    a context and two distractors, `noise` drawing them; the paper's fixed ones by
    default), then the hidden prerequisites."""
    if difficulty == "easy":
        body = [_sentence(_join(clauses, last=", and finally "))]
    elif difficulty == "medium":
        body = [_sentence(clauses[0]), _sentence(_join(clauses[1:], last=" and then "))]
    else:
        context = rng.choice(contexts).format(**values)
        drawn = (_sample(rng, templates.DISTRACTORS, 2) if noise is None
                 else noise(rng, values, 2))
        body = [context, *(_sentence(c) for c in clauses)]
        # Distractors land between the facts that matter, not only at the end.
        body.insert(1 + rng.randint(0, len(clauses)), drawn[0])
        body.append(drawn[1])
    return " ".join(body + [_sentence(h) for h in hidden])


def _constraints(rng: DrawStream, required: Sequence[str]) -> tuple[str, ...]:
    out = ["finish within 10 turns", *_sample(rng, templates.CONSTRAINTS, rng.randint(0, 2))]
    specific = [templates.TOOL_CONSTRAINTS[t] for t in required if t in templates.TOOL_CONSTRAINTS]
    if specific:
        out.append(rng.choice(specific))
    return tuple(out)


# --- tasks -----------------------------------------------------------------------------------
def task_cell(index: int) -> tuple[str, str]:
    """(type, difficulty) of task `index`: cells interleave, so any prefix of the ids covers
    every type x difficulty evenly."""
    cell = index % (len(TASK_TYPES) * len(DIFFICULTIES))
    return TASK_TYPES[cell // len(DIFFICULTIES)], DIFFICULTIES[cell % len(DIFFICULTIES)]


def generate_task(
    index: int,
    *,
    config: GeneratorConfig = GeneratorConfig(),
    registry: ToolRegistry | None = None,
    matcher: ToolMatcher | None = None,
) -> Task:
    registry = registry or default_registry()
    matcher = matcher or ToolMatcher.default()
    task_id = f"t{index:04d}"
    task_type, difficulty = task_cell(index)
    rng = DrawStream(config.seed, "task", task_id)
    if config.grammar == "flows":
        return _flow_task(rng, task_id, task_type, difficulty, registry, matcher)

    slots = rng.choice(templates.TEMPLATES[task_type]).split()
    optional = [i for i, s in enumerate(slots) if s.startswith("?")]
    kept = set(_sample(rng, optional, _optional_kept(rng, difficulty, len(optional))))
    operations = [s.lstrip("?") for i, s in enumerate(slots) if i not in optional or i in kept]
    required = order_by_dependencies(_match_tools(rng, operations, matcher), registry)
    closure = registry.closure(required)

    theme = rng.choice(templates.THEMES)
    ctx = _Context(theme, rng.randint(2023, 2026), rng.choice(_PERIODS), rng.choice(_ORGS))
    inputs, consumed, produced = _bind_closure(rng, ctx, required, closure, registry)
    values = {**inputs, "label": theme["label"], "team": theme["team"],
              "period": f"{ctx.period} {ctx.year}"}
    output = required[-1]
    param, kind = _DELIVERABLES[output]
    return Task(
        id=task_id,
        type=task_type,
        difficulty=difficulty,
        description=_describe(rng, difficulty, required, closure, values),
        inputs=inputs,
        expected_outputs={"deliverable": inputs[param], "kind": kind, "format": produced[output]},
        required_tools=required,
        constraints=_constraints(rng, required),
        step_arguments=_step_arguments(closure, inputs, consumed, registry),
    )


def _flow_task(rng: DrawStream, task_id: str, task_type: str, difficulty: str,
               registry: ToolRegistry, matcher: ToolMatcher) -> Task:
    """A task of the default set: a flow drawn from the grammar (`flows.py`), its guarded
    step required only when the condition the text states holds for the task's data; a
    flow a person would not ask for (`core/flow_sense.py`) is drawn again from the same
    stream."""
    return _sensible_flow_task(rng, task_id, task_type, difficulty, registry, matcher)[0]


def drawn_flow(index: int, *, config: GeneratorConfig = GeneratorConfig(),
               registry: ToolRegistry | None = None,
               matcher: ToolMatcher | None = None) -> flows.FlowDraw:
    """The flow a default-set task was drawn from (the first sensible draw of its stream)."""
    registry = registry or default_registry()
    task_type, difficulty = task_cell(index)
    rng = DrawStream(config.seed, "task", f"t{index:04d}")
    return _sensible_flow_task(rng, f"t{index:04d}", task_type, difficulty, registry,
                               matcher or ToolMatcher.default())[1]


def _sensible_flow_task(rng: DrawStream, task_id: str, task_type: str, difficulty: str,
                        registry: ToolRegistry, matcher: ToolMatcher
                        ) -> tuple[Task, flows.FlowDraw]:
    for _ in range(_SENSE_TRIES):
        task, flow = _flow_task_once(rng, task_id, task_type, difficulty, registry, matcher)
        # (the steps it runs, and those it states: a skipped guarded step is read too)
        if not (sense_problems(task.required_tools, registry)
                or sense_problems(order_by_dependencies(flow.tools, registry), registry)):
            return task, flow
    raise ValueError(f"{task_id}: no sensible flow in {_SENSE_TRIES} draws")


_SENSE_TRIES = 64


def _flow_task_once(rng: DrawStream, task_id: str, task_type: str, difficulty: str,
                    registry: ToolRegistry, matcher: ToolMatcher
                    ) -> tuple[Task, flows.FlowDraw]:
    flow = flows.draw_flow(rng, task_type, difficulty, STEP_COUNTS[task_type], matcher,
                           registry)
    stated = order_by_dependencies(flow.tools, registry)
    theme = rng.choice(templates.THEMES)
    ctx = _Context(theme, rng.randint(2022, 2027), rng.choice(flows.PERIODS),
                   rng.choice(flows.ORGS))
    pools = {"theme": theme, "year": ctx.year, "period": ctx.period, "org": ctx.org,
             "site": rng.choice(flows.SITES), "batch": f"b{rng.randint(100, 999)}",
             "health": "network_router" in registry.closure(flow.tools)}

    def bind(param: str, rng: DrawStream, fmt: str) -> Any:
        value = flows.bind_flow_value(param, rng, pools, fmt)
        return _bind(param, rng, ctx, fmt) if value is None else value

    data_format = _data_format(rng, registry.closure(stated), registry)
    required = stated
    conditions: dict[str, str] = {}  # a guarded or declined step -> the format it names
    if flow.guarded is not None:
        holds = rng.random() < 0.5
        conditions[flow.guarded] = data_format if holds else rng.choice(
            [f for f in flows.RAW_FORMATS if f != data_format])
        if not holds:
            required = tuple(t for t in stated if t != flow.guarded)
    closure = registry.closure(required)
    inputs, consumed, produced = _bind_closure(rng, ctx, required, closure, registry,
                                               data_format=data_format, bind=bind)
    if flow.guarded is not None and flow.guarded not in required:
        # The skipped step's values are inputs all the same: the text states them in its
        # condition, and no set of input keys tells whether the step runs.
        for param in registry[flow.guarded].required_parameters:
            if param not in inputs:
                inputs[param] = bind(param, rng, data_format)
    if flow.declined is not None:
        # Its values are shown too; its condition names a format the data do not have.
        for param in registry[flow.declined].required_parameters:
            if param not in inputs:
                inputs[param] = bind(param, rng, data_format)
        conditions[flow.declined] = rng.choice(
            [f for f in flows.RAW_FORMATS if f != data_format])
        stated = _placed(rng, stated, flow.declined, registry)
    # A step's options are stated in words, not shown as values (core/wording.py).
    worded = tuple(sorted(k for k in inputs if k in WORDED_PARAMS))
    words = {k: rng.choice(PHRASES[k][inputs[k]]) for k in worded}
    values = {**inputs, **words, "label": theme["label"], "team": theme["team"],
              "period": f"{ctx.period} {ctx.year}", "site": pools["site"], "org": ctx.org}
    output = required[-1]
    param, kind = _DELIVERABLES[output]
    # The deliverable by its kind and format; an option the text gives in words is not
    # restated here (the answer would be in the question: issue 50).
    expected = {"kind": kind, "format": produced[output]}
    if param not in WORDED_PARAMS:
        expected["deliverable"] = inputs[param]
    task = Task(
        id=task_id,
        type=task_type,
        difficulty=difficulty,
        description=_describe_flow(rng, difficulty, stated, closure, conditions, values,
                                   registry),
        inputs=inputs,
        expected_outputs=expected,
        required_tools=required,
        constraints=_constraints(rng, required),
        step_arguments=_step_arguments(closure, inputs, consumed, registry),
        worded=worded,
    )
    return task, flow


def _placed(rng: DrawStream, stated: tuple[str, ...], tool: str,
            registry: ToolRegistry) -> tuple[str, ...]:
    """`stated` with `tool` at a drawn place where it breaks no dependency, before the final
    deliverable; the others keep their order (the one the task requires)."""
    tools = (*stated, tool)
    places = [i for i in range(len(stated))
              if not any(tool in registry.dependencies(t, tools) for t in stated[:i])
              and not set(registry.dependencies(tool, tools)) & set(stated[i:])]
    at = rng.choice(places) if places else len(stated) - 1
    return (*stated[:at], tool, *stated[at:])


def _describe_flow(
    rng: DrawStream, difficulty: str, stated: Sequence[str], closure: Sequence[str],
    conditions: Mapping[str, str], values: Mapping[str, Any], registry: ToolRegistry,
) -> str:
    """`_describe` for a flow: a guarded or declined step's clause, at its place, states its
    condition, the format it names (`conditions`: tool -> format); both are in `stated`
    whether or not they are required. A prerequisite no clause states comes with the step
    that needs it; hard texts draw their context and distractors from the flows' parts."""
    clauses = []
    for tool in stated:
        wordings = {**templates.WORDINGS[tool], **flows.WORDED_CLAUSES.get(tool, {}),
                    **flows.FLOW_CLAUSES.get(tool, {})}
        clause = rng.choice(wordings[difficulty]).format(**values)
        if tool in conditions:
            clause = rng.choice(flows.CONDITION_WORDINGS[difficulty]).format(
                clause=clause, **{**values, "if_format": conditions[tool]})
        clauses.append(clause)
    hidden = []
    for tool in closure:
        if tool in stated:
            continue
        found = flows.prerequisite_sentence(tool, closure, difficulty, registry)
        hidden.append(found[0].format(**values) if found else
                      templates.PREREQUISITE_WORDINGS[tool][difficulty].format(**values))
    return _arrange(rng, clauses, hidden, difficulty, values,
                    contexts=flows.CONTEXTS, noise=flows.distractors)


def generate_tasks(
    config: GeneratorConfig = GeneratorConfig(), *, registry: ToolRegistry | None = None
) -> list[Task]:
    registry = registry or default_registry()
    matcher = ToolMatcher(registry)
    total = config.per_cell * len(TASK_TYPES) * len(DIFFICULTIES)
    return [generate_task(i, config=config, registry=registry, matcher=matcher)
            for i in range(total)]


# --- checks ----------------------------------------------------------------------------------
def task_problems(task: Task, registry: ToolRegistry) -> list[str]:
    """Every way a task breaks the generator's contract (empty when it is sound)."""
    problems: list[str] = []
    req = task.required_tools
    lo, hi = STEP_COUNTS[task.type]
    if not lo <= len(req) <= hi:
        problems.append(f"{len(req)} required tools, expected {lo}-{hi}")
    if len(set(req)) != len(req):
        problems.append("a tool is required twice")
    for i, tool in enumerate(req):
        late = [d for d in registry.dependencies(tool, req) if d in req[i:]]
        if late:
            problems.append(f"{tool} comes before its dependencies {late}")
    if not registry[req[-1]].produces_output:
        problems.append(f"the last tool {req[-1]} produces no output")
    closure = registry.closure(req)
    if set(task.step_arguments) != set(closure):
        problems.append("step_arguments do not cover exactly the closure")
    if task.inputs.get("format") not in set(DATA_FORMATS) - {"binary"}:
        problems.append(f"bad data format {task.inputs.get('format')!r}")
    for tool in closure:
        spec = registry[tool]
        args = task.step_arguments.get(tool, {})
        problems += [f"{tool}: {e}" for e in registry.argument_errors(tool, args)]
        for param in spec.required_parameters:
            if param != "format" and task.inputs.get(param) != args.get(param):
                problems.append(f"{tool}.{param} is not bound in inputs")
        # An optional parameter named like a bound input would be a trap: any other value an
        # agent picks for it is refused.
        for param in spec.parameters.get("properties", {}):
            if param not in ("format", "source") and param in task.inputs \
                    and param not in spec.required_parameters:
                problems.append(f"{tool}.{param} is optional but bound in inputs")
    names = [t for t in registry.names if t in task.description]
    if names:
        problems.append(f"the description names tools {names}")
    stated = read_worded(task.description)
    for key, value in task.inputs.items():
        if key in task.worded:
            if stated.get(key) != value:
                problems.append(f"the description does not word {key}={value!r}")
        elif str(value) not in task.description:
            problems.append(f"the description does not mention {key}={value!r}")
    return problems


# --- fixtures --------------------------------------------------------------------------------
def tasks_bytes(tasks: Sequence[Task]) -> bytes:
    """The gzip'd JSONL of the tasks, byte-for-byte reproducible (no name, no mtime)."""
    raw = b"".join(_canonical(t.to_json()) + b"\n" for t in sorted(tasks, key=lambda t: t.id))
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(raw)
    return buffer.getvalue()


def write_fixtures(
    tasks: Sequence[Task], directory: Path, config: GeneratorConfig
) -> dict[str, Any]:
    """Write tasks.jsonl.gz and update manifest.json (keeping keys other writers added)."""
    data = tasks_bytes(tasks)
    counts = {ty: {d: 0 for d in DIFFICULTIES} for ty in TASK_TYPES}
    for task in tasks:
        counts[task.type][task.difficulty] += 1
    return write_fixture_file(directory, "tasks.jsonl.gz", data, {
        "schema": MANIFEST_SCHEMA,
        "generator": config.to_json(),
        "generator_hash": config.digest,
        "counts": counts,
        "total": len(tasks),
    })


def generate(
    directory: Path = FIXTURES_DIR, *, seed: int | None = None, per_cell: int = 336,
    grammar: str = "flows", solve: bool = False, log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Generate all tasks and write the fixtures; returns the manifest. With `solve`, also
    each task's reference workflow (exact DP, `solve.solve_all`) and its optimal plan under
    the realistic profile (`realistic_report.write_plans`: no run solves one), then load the
    folder back as a run would (every file against the manifest's sha256, and by content):
    a complete, verified task set that `--resili-tasks=DIR` runs."""
    config = GeneratorConfig(seed=2026 if seed is None else seed, per_cell=per_cell,
                             grammar=grammar)
    registry = default_registry()
    tasks = generate_tasks(config, registry=registry)
    broken = [(t.id, p) for t in tasks for p in task_problems(t, registry)]
    if broken:
        raise ValueError(f"{len(broken)} generator contract breaches, e.g. {broken[:3]}")
    manifest = write_fixtures(tasks, directory, config)
    if not solve:
        return manifest
    from pytest_resilibench.core.fixture_files import read_manifest
    from pytest_resilibench.core.tasks import load_tasks

    from .realistic_report import write_plans
    from .solve import solve_all

    solve_all(tasks, directory, progress=False, log=log)
    write_plans(tasks, directory, log=log)
    load_tasks.cache_clear()
    loaded = load_tasks(directory)
    if [t.id for t in loaded] != sorted(t.id for t in tasks):
        raise ValueError(f"{directory} does not load back the {len(tasks)} tasks written")
    if grammar == "flows":  # the paper's set keeps the injections it always had
        write_flaw_choices(list(loaded), directory, registry, log=log)
        load_tasks.cache_clear()
        load_tasks(directory)
    return read_manifest(directory)


def write_flaw_choices(tasks: Sequence[Task], directory: Path, registry: ToolRegistry,
                       config: FilterConfig | None = None,
                       log: Callable[[str], None] = print) -> dict[str, Any]:
    """Choose each task's candidate injection per flaw and severity by adversarial filtering
    (`adversarial_filter.py`, which needs scikit-learn: the `solver` extra) and write
    `flaw_choices.json.gz`; returns the manifest."""
    from .adversarial_filter import FilterConfig, filter_flaws

    config = config or FilterConfig()
    choices = filter_flaws(tasks, FLAWS, config.severities, registry, config, log=log)
    return write_fixture_file(directory, FLAW_CHOICES_FILE,
                              choices_bytes(choices, config.to_json()))
