"""The default task set's grammar of data flows (docs/BENCHMARK.md: Tasks; issue 34).

The paper's generator (`generate.py`, `templates.TEMPLATES`) draws each task from a handful of
fixed operation sequences: 91 tool structures in 5040 tasks, so a memoriser maps a task's input
keys to its plan. Here a task's flow is drawn from a grammar instead:

    flow    := sources branches [join] deliver
    sources := source [second source]         a second source is a join of two inputs
    branches:= processor* (in a drawn order)  parallel steps on the sources' data
    join    := aggregate | enqueue            combines the branches
    deliver := [output] output                one or two deliverables, the last one final
    side    := log | cache | track | tidy     a utility step at a drawn place
    guarded := any step above, under a condition on the data the text states
               ("if the data arrive as xml, ..."): required only when it holds
    declined:= a step with a value of its own (a source, a deliverable, a side step, a
               filter), stated under such a condition that does not hold: never required

with the paper's five task types (their tool counts, `generate.STEP_COUNTS`) and three
difficulties (shorter flows at easy, longer at hard) as strata. Each operation is still matched
to a tool by BM25 (spec: "RAG semantic matching"), and a guarded step's values are task inputs
whether or not its condition holds, so no set of input keys fixes the plan. A declined step
shows its value in the Inputs block too, so a genuine plan leaves a shown value unused about
as often as a plan that lost a step (`missing_step`, `semantic_drift`): only reading the
condition tells the two apart. Values come from
wider pools than the paper's (sites, batches, more organisations), so a fresh seed shares few.

A drawn flow is then settled (`_settle`) so that only reading gets it right (issue 34): where
its length allows, a step it requires takes an option the text words (core/wording.py), and two
of its steps have an order only the text fixes (two branches, a side step in place of a branch
or of the guarded step, two deliverables, two sources); and it gets a quiet step, one a plan
can lose without a trace, where its deliverer allows (`_quiet_step`).

Every draw comes from the task's own stream, so the bytes are a pure function of the config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.flow_sense import BRANCH_RANK, sense_problems
from pytest_resilibench.core.matcher import ToolMatcher
from pytest_resilibench.core.registry import DATA_FORMATS, FILE_EXTENSIONS, Role, ToolRegistry
from pytest_resilibench.core.wording import PHRASES, WORDED_PARAMS

from . import templates

__all__ = ["CONDITION_WORDINGS", "FLOW_SHAPES", "WORDED_CLAUSES", "FlowDraw", "FlowShape",
           "bind_flow_value", "draw_flow", "flow_data"]

# Steps that bring records (issue 50, typed flows): a health monitor reports on a service,
# not records, so it is never a flow's source (it stays a router's prerequisite).
SOURCES = ("read", "scan", "fetch", "connect")
PROCESSORS = ("parse", "validate", "check_response", "transform", "filter", "convert",
              "compress", "calculate", "analyze", "optimize", "simulate", "predict", "map")
JOINS = ("aggregate", "enqueue")
OUTPUTS = ("write", "post", "route", "schedule", "notify")
SIDES = ("log", "cache", "track", "tidy")
# Processors whose options the text states in words (core/wording.py).
WORDED_PROCESSORS = ("transform", "analyze", "optimize", "predict")
# The share of flows offered one guarded step beyond their drawn length, by difficulty
# (harder texts carry more conditions: the paper's "fewer hints" as difficulty rises).
GUARD_EXTRA = {"easy": 0.6, "medium": 0.85, "hard": 0.85}
# Steps a text may name and then decline (a condition that does not hold): each takes a value
# of its own the Inputs block shows, like the steps a flawed plan drops, by kind with its
# weight (a flawed plan most often loses a source's or a deliverable's value).
DECLINED_OPS: dict[str, tuple[float, tuple[str, ...]]] = {
    "source": (0.35, ("read", "scan", "fetch", "connect")),
    "output": (0.35, ("write", "post", "route", "notify")),
    "other": (0.3, ("enqueue", "log", "cache", "track", "filter", "calculate", "map",
                    "convert")),
}
# The share of flows that name a declined step (where one fits), by difficulty.
DECLINED_SHARE = {"easy": 0.55, "medium": 0.65, "hard": 0.75}
# The share of hard flows whose deliverable goes through a step with a prerequisite (a
# credential, a connection, a health check): longer plans as difficulty rises.
HARD_GATED = 0.6
# Formats a source's data may arrive in (what a guarded step's condition names).
RAW_FORMATS = tuple(f for f in DATA_FORMATS if f != "binary")


@dataclass(frozen=True)
class FlowShape:
    """What a task type's flows draw from."""

    sources: tuple[str, ...]
    second_sources: tuple[str, ...]   # empty: one source only
    processors: tuple[str, ...]
    delivers: tuple[str, ...]         # the final step (an output, or a join that outputs)
    extra_outputs: tuple[str, ...]    # a deliverable before the final one; empty: none
    weights: Mapping[str, float]      # kind of an extra step -> weight


FLOW_SHAPES: dict[str, FlowShape] = {
    "simple_task": FlowShape(
        SOURCES, (), PROCESSORS, OUTPUTS + JOINS, (),
        {"processor": 3.0, "side": 1.0, "guarded": 2.5}),
    "basic_task": FlowShape(
        SOURCES, (), PROCESSORS, OUTPUTS + JOINS, (),
        {"processor": 3.0, "join": 1.0, "side": 1.0, "guarded": 2.5}),
    "data_pipeline": FlowShape(
        ("read", "scan", "connect", "fetch"), ("read", "fetch", "connect"), PROCESSORS,
        ("write", "enqueue", "aggregate", "notify", "route"), (),
        {"processor": 3.0, "join": 1.5, "source": 0.7, "side": 1.0, "guarded": 2.5}),
    "api_integration": FlowShape(
        ("fetch", "connect"), ("authenticate", "fetch"),
        ("parse", "validate", "check_response", "transform", "filter", "map", "convert",
         "calculate"),
        ("post", "route", "notify", "enqueue", "write", "schedule"), (),
        {"processor": 3.0, "join": 0.7, "source": 1.0, "side": 0.7, "guarded": 2.5}),
    "multi_stage_pipeline": FlowShape(
        SOURCES, ("read", "fetch", "connect", "scan"), PROCESSORS, OUTPUTS + JOINS,
        ("write", "post", "route", "notify"),
        {"processor": 3.0, "join": 1.2, "source": 0.6, "output": 0.8, "side": 1.0,
         "guarded": 2.5}),
}

# How the text states a guarded step: {clause} is the step's wording, {if_format} the format
# the condition names. Every difficulty says plainly that the step is skipped otherwise.
CONDITION_WORDINGS: dict[str, tuple[str, ...]] = {
    "easy": ("if the data arrive as {if_format}, {clause}; otherwise skip that step",),
    "medium": ("only when the incoming data are {if_format}: {clause} (not needed for any "
               "other format)",),
    "hard": ("should the incoming data turn out to be {if_format}, {clause}; any other "
             "format needs no such step",),
}

# How the text states a step whose options it says in words (core/wording.py): each slot
# takes a phrase of `wording.PHRASES`, never the value itself. The other tools keep the
# paper's wordings (`templates.WORDINGS`).
WORDED_CLAUSES: dict[str, dict[str, tuple[str, ...]]] = {
    "data_processing_aggregator": {
        "easy": ("aggregate the records into {function} per group",
                 "aggregate the {function} for each group"),
        "medium": ("boil the records down to {function} per group, aggregated",
                   "aggregate the records, keeping the {function} per group"),
        "hard": ("management only wants the {function} per group, aggregated",),
    },
    "data_processing_transformer": {
        "easy": ("transform the records: {operation}",),
        "medium": ("reshape the records with a transformation: {operation}",
                   "transform the layout of the records, that is, {operation}"),
        "hard": ("consumers expect another layout: transform the records to {operation}",),
    },
    "computation_analyzer": {
        "easy": ("analyze the data for {method}",),
        "medium": ("look into the data with an analysis of {method}",
                   "analyze what the numbers say about {method}"),
        "hard": ("the numbers need someone to analyze {method}",),
    },
    "computation_optimizer": {
        "easy": ("optimize the allocation to push the objective {objective}",),
        "medium": ("search for the configuration that optimizes the objective {objective}",
                   "optimize the settings so the objective goes {objective}"),
        "hard": ("the aim is to optimize the outcome, {objective}",),
    },
    "utility_helper": {
        "easy": ("run a helper chore on the records: {action}",),
        "medium": ("do some housekeeping with a helper chore: {action}",
                   "run a small helper chore, namely {action}"),
        "hard": ("a small data chore is overdue: {action}",),
    },
    "integration_scheduler": {
        "easy": ("schedule the job {job_name} to run {schedule}",),
        "medium": ("register {job_name} as a job that runs {schedule}",),
        "hard": ("schedule this to run {schedule} under the name {job_name}",),
    },
    "computation_predictor": {
        "easy": ("forecast the next {horizon} periods",),
        "medium": ("predict the coming {horizon} periods from the history",),
        "hard": ("a forecast {horizon} periods ahead is needed",),
    },
}


# Hard clauses in several words each: a clause with no value of its own would otherwise recur
# word for word in hundreds of texts (issue 50, bench/check_task_sense.py). Each keeps a word
# of what the tool does (the built-in readers match clauses to tools by it).
FLOW_CLAUSES: dict[str, dict[str, tuple[str, ...]]] = {
    "data_processing_parser": {
        "hard": ("the raw content is of no use until its structure is recovered",
                 "someone has to make sense of the raw layout",
                 "the raw text still has to be parsed before anyone can use it")},
    "data_processing_validator": {
        "hard": ("bad rows have slipped through before, and that must not happen again",
                 "the quality of the data has been questioned",
                 "nobody trusts the data until every row is validated against the schema")},
    "network_validator": {
        "hard": ("the upstream replies have been malformed now and then",
                 "the service's replies cannot be taken on trust; validate each response",
                 "broken responses from the service have caused trouble before")},
    "file_operations_compressor": {
        "hard": ("storage is tight, so the result should take as little space as possible",
                 "the result has to be compressed, as disk space is short",
                 "only a compressed archive will fit where this is kept")},
    "computation_simulator": {
        "hard": ("leadership wants to know what could happen under different conditions",
                 "someone should simulate what-if scenarios over the data",
                 "the planners want simulated scenarios before they decide")},
    "data_processing_aggregator": {
        "hard": ("management only wants the {function} per group, aggregated",
                 "what counts is the {function} for each group, aggregated",
                 "the report needs only the {function} per group once aggregated")},
    "data_processing_transformer": {
        "hard": ("consumers expect another layout: transform the records to {operation}",
                 "the records need transforming downstream: {operation}",
                 "the layout has to be transformed first, namely to {operation}")},
    "computation_analyzer": {
        "hard": ("the numbers need someone to analyze {method}",
                 "someone has to analyze the data for {method}",
                 "the question is open until an analysis looks into {method}")},
    "computation_optimizer": {
        "hard": ("the aim is to optimize the outcome, {objective}",
                 "the configuration should be optimized so the objective goes {objective}",
                 "an optimizer has to push the objective {objective}")},
    "utility_helper": {
        "hard": ("a small data chore is overdue: {action}",
                 "one housekeeping chore is left on the records: {action}",
                 "before anything else ships, a helper chore: {action}")},
}

# A prerequisite the text does not list as a step, stated with the step that needs it (its
# first dependent in the flow): (prerequisite, dependent) -> difficulty -> sentence.
PREREQUISITE_SENTENCES: dict[tuple[str, str], dict[str, str]] = {
    ("integration_authenticator", "network_poster"): {
        "easy": "Posting to {target_url} needs credentials from the {service} service.",
        "medium": "Only callers with credentials from {service} may post to {target_url}.",
        "hard": "The partner behind {target_url} trusts only callers vouched for by "
                "{service}.",
    },
    ("integration_authenticator", "integration_connector"): {
        "easy": "Connecting to {endpoint} needs credentials from the {service} service.",
        "medium": "Sessions on {endpoint} need credentials from {service}.",
        "hard": "Whoever opens {endpoint} has to prove who they are to {service} first.",
    },
    ("integration_connector", "integration_queue"): {
        "easy": "The queue {queue_name} is reached through the connection {endpoint}.",
        "medium": "The broker holding {queue_name} answers on the connection {endpoint}.",
        "hard": "Whatever lands in {queue_name} goes through {endpoint}.",
    },
    ("integration_connector", "integration_scheduler"): {
        "easy": "Jobs such as {job_name} are registered through the connection {endpoint}.",
        "medium": "The scheduler that will run {job_name} is reached through {endpoint}.",
        "hard": "Registering {job_name} means talking to the system at {endpoint}.",
    },
    ("network_monitor", "network_router"): {
        "easy": "The health of {route_to} is reported at {url}.",
        "medium": "Whether {route_to} is healthy can be read from {url}.",
        "hard": "Word is that {route_to} publishes its health at {url}.",
    },
}

# Hard texts open with a context and carry distractors, composed from parts with the task's
# own values so that no sentence recurs across hundreds of texts.
CONTEXTS: tuple[str, ...] = (
    "The {team} team is preparing its {period} review of the {label}.",
    "Ahead of the {period} planning meeting, the {team} team needs the {label} sorted out.",
    "A customer escalation in {site} has put the {label} on the {team} team's desk.",
    "The {team} team in {site} inherited this chore about the {label} from a colleague on "
    "leave.",
    "The {site} office asked the {team} team to deal with the {label} for {period}.",
    "Before the {period} close, the {team} team wants the {label} handled.",
)
DISTRACTORS: tuple[str, ...] = (
    "The {site} office's dashboard redesign is out of scope.",
    "Last time the {team} team did this by hand and it took {days} days.",
    "An old copy from {old_year} sits on a retired laptop in {site}; it is irrelevant.",
    "The {org} vendor contract renews in {month}, which is someone else's concern.",
    "The colour scheme of the {site} charts does not matter.",
    "There is a wiki page about this from {old_year}, but it is outdated.",
    "Legal signed off on the data usage back in {month}.",
    "Please ignore the mirror at /archive/{site}/legacy, it is stale.",
    "The {other} team asked about this too, but their request is separate.",
    "A spreadsheet kept in {site} is not the source of truth.",
    "A migration of the {org} wiki is planned for {month}; it changes nothing here.",
    "Nobody in {site} needs a printout this time.",
    "The {team} lead is away in {month}, which does not affect this.",
    "Ticket {ticket} about this was closed as a duplicate.",
    "The {old_year} review in {site} is finished and needs no follow-up.",
    "The {other} team's old numbers from {site} are a test set; leave them alone.",
)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_TEAMS = ("finance", "platform", "facilities", "billing", "logistics", "support",
          "operations", "people", "growth", "energy", "research", "forecasting", "security")


def distractors(rng: DrawStream, values: Mapping[str, Any], k: int) -> list[str]:
    """k distractor sentences drawn without repeats, each with drawn parts of its own."""
    picked: list[str] = []
    pool = list(DISTRACTORS)
    for _ in range(k):
        template = pool.pop(rng.randint(0, len(pool) - 1))
        picked.append(template.format(**values, days=rng.randint(2, 9),
                                      old_year=rng.randint(2009, 2020),
                                      month=rng.choice(_MONTHS),
                                      other=rng.choice([t for t in _TEAMS
                                                        if t != values.get("team")]),
                                      ticket=f"#{rng.randint(1000, 9999)}"))
    return picked


def prerequisite_sentence(tool: str, closure: Sequence[str], difficulty: str,
                          registry: ToolRegistry) -> tuple[str, str] | None:
    """The (prerequisite, dependent) wording of a prerequisite: its first dependent in the
    closure that has one (None: no sentence names it)."""
    for other in closure:
        if tool in registry[other].prerequisites and (tool, other) in PREREQUISITE_SENTENCES:
            return PREREQUISITE_SENTENCES[(tool, other)][difficulty], other
    return None

# Wider value pools than the paper's: a fresh seed draws mostly new values.
ORGS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell",
        "soylent", "cyberdyne", "aperture", "massive", "vandelay", "wonka", "oscorp",
        "pied-piper", "dunder", "gringotts", "monarch", "nakatomi", "virtucon", "wernham",
        "zorg", "duff")
SITES = ("berlin", "lyon", "osaka", "austin", "leeds", "porto", "quebec", "pune", "perth",
         "oslo", "lima", "cork", "turin", "graz", "ghent", "malmo")
PERIODS = ("q1", "q2", "q3", "q4", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
           "sep", "oct", "nov", "dec", "w07", "w19", "w33", "w48")


@dataclass(frozen=True)
class FlowDraw:
    """One drawn flow: its tools in the order the text states them (the guarded one
    included), which of them is guarded (required only when its condition holds), and a
    declined step (not among `tools`: the text states it under a condition that fails)."""

    tools: tuple[str, ...]
    guarded: str | None
    declined: str | None = None


def _length(rng: DrawStream, difficulty: str, lo: int, hi: int) -> int:
    """How many steps: easy flows are the type's shortest, hard ones its longest, medium
    ones in between (the paper's strata: more steps as difficulty rises)."""
    if difficulty == "easy":
        return lo
    if difficulty == "hard":
        return hi
    return (lo + hi) // 2


def _weighted(rng: DrawStream, weights: Mapping[str, float]) -> str:
    kinds = sorted(k for k, w in weights.items() if w > 0)
    total = sum(weights[k] for k in kinds)
    point = rng.random() * total
    for kind in kinds:
        point -= weights[kind]
        if point < 0:
            return kind
    return kinds[-1]


def _match(rng: DrawStream, op: str, matcher: ToolMatcher, used: Sequence[str]) -> str:
    return matcher.best(rng.choice(templates.OPERATIONS[op]), exclude=list(used))


def _tool_of(op: str, matcher: ToolMatcher) -> str:
    return matcher.best(templates.OPERATIONS[op][0], exclude=[])


def _clash(a: str, b: str, registry: ToolRegistry) -> bool:
    """Whether a parameter one tool requires is an optional one of the other: its bound
    value would be a trap for an agent that picks its own (`generate.task_problems`)."""
    def optional(tool: str) -> set[str]:
        spec = registry[tool]
        return set(spec.parameters.get("properties", {})) - set(spec.required_parameters)

    shared = ((set(registry[a].required_parameters) & optional(b))
              | (set(registry[b].required_parameters) & optional(a)))
    return bool(shared - {"format", "source"})


def _fits(op: str, used: Sequence[str], matcher: ToolMatcher, registry: ToolRegistry) -> bool:
    tool = _tool_of(op, matcher)
    closure = registry.closure([*used, tool])
    return (tool not in used and not any(_clash(tool, other, registry) for other in closure)
            and not sense_problems([*used, tool], registry, partial=True))


def draw_flow(rng: DrawStream, task_type: str, difficulty: str, steps: tuple[int, int],
              matcher: ToolMatcher, registry: ToolRegistry) -> FlowDraw:
    """Draw a flow of the type's shape: its tools in level order (sources, branches, join,
    outputs), the parallel branches and side steps in the drawn order; the generator puts
    them in dependency order (`generate.order_by_dependencies`), which keeps that order."""
    shape = FLOW_SHAPES[task_type]
    lo, hi = steps
    n = _length(rng, difficulty, lo, hi)
    used: list[str] = []

    def take(op: str) -> str:
        tool = _match(rng, op, matcher, used)
        used.append(tool)
        return tool

    sources = [take(rng.choice(shape.sources))]
    delivers = [op for op in shape.delivers if _fits(op, used, matcher, registry)]
    if difficulty == "hard" and rng.random() < HARD_GATED:
        # Hard flows deliver through a gated step where they can (more steps to the plan).
        delivers = [op for op in delivers if registry[_tool_of(op, matcher)].prerequisites] \
            or delivers
    deliver = take(rng.choice(delivers or list(shape.delivers)))
    processors: list[str] = []
    joins: list[str] = []
    outputs: list[str] = []
    sides: list[str] = []
    guarded: str | None = None
    # The n - 2 steps between the first source and the deliverable; then, in a share of the
    # flows that have room for it, one guarded step more (required or not, the flow keeps
    # within the type's tool counts).
    extra = rng.random() < GUARD_EXTRA[difficulty]
    for slot in range(n - 2 + 1):
        if slot == n - 2 and not (extra and guarded is None and n < hi):
            break
        weights = dict(shape.weights) if slot < n - 2 else {"guarded": 1.0}
        if joins or registry[deliver].role is Role.AGGREGATOR:
            weights.pop("join", None)
        if len(sources) > 1 or not shape.second_sources:
            weights.pop("source", None)
        if outputs or not shape.extra_outputs or registry[deliver].role is not Role.OUTPUT:
            weights.pop("output", None)
        if len(sides) > 1:
            weights.pop("side", None)
        if guarded is not None or (slot < n - 2 and n - 1 < lo):
            weights.pop("guarded", None)  # without it the flow would be too short
        kind = _weighted(rng, weights)
        pool = {"processor": shape.processors, "join": JOINS, "source": shape.second_sources,
                "output": shape.extra_outputs, "side": SIDES,
                "guarded": shape.processors + SIDES}[kind]
        candidates = [op for op in pool if _fits(op, used, matcher, registry)]
        if not candidates:
            if kind == "guarded":
                break
            candidates = [op for op in shape.processors if _fits(op, used, matcher, registry)]
            kind = "processor"
        tool = take(rng.choice(candidates))
        if kind == "guarded":
            guarded = tool
            kind = "side" if registry[tool].role is Role.UTILITY else "processor"
        {"processor": processors, "join": joins, "source": sources, "output": outputs,
         "side": sides}[kind].append(tool)
    # Settling may add a worded step where the stratum leaves room (none at easy, one at
    # medium), and one side step more whose order only the text fixes (without one, a
    # disorder would have to break a dependency, which marks it).
    room = {"easy": n, "medium": min(hi, n + 1), "hard": hi}[difficulty]
    guarded = _settle(rng, shape, room, hi, guarded, used, take, matcher, registry,
                      sources, processors, joins, outputs, sides, deliver)
    deliver = _quiet_step(shape, guarded, used, matcher, registry,
                          [*sources, *processors, *joins, *outputs, *sides], deliver)
    # Branches in the order a reader takes them (a compressed archive feeds nothing else).
    processors.sort(key=lambda t: BRANCH_RANK.get(t, 1))
    body = [*sources, *processors, *joins, *outputs]
    for side in sides:  # before the final deliverable, after what it needs
        body.insert(rng.randint(_earliest(side, body, registry), len(body)), side)
    tools = (*body, deliver)
    return FlowDraw(tools, guarded, _declined(rng, difficulty, tools, matcher, registry))


def _earliest(side: str, body: Sequence[str], registry: ToolRegistry) -> int:
    """The first place a side step fits: a log anywhere; a cache or a chore once records
    exist (after the first source); an event of work once a step has worked on them."""
    if side == "utility_logger":
        return 0
    if side == "utility_tracker":
        worked = [i for i, t in enumerate(body)
                  if registry[t].role in (Role.PROCESSOR, Role.AGGREGATOR)]
        return worked[0] + 1 if worked else len(body)
    return 1


def _declined(rng: DrawStream, difficulty: str, tools: Sequence[str], matcher: ToolMatcher,
              registry: ToolRegistry) -> str | None:
    """In `DECLINED_SHARE` of the flows, a step the text names but declines: one with a value
    of its own (not an option the text words), none of whose parameters a step of the flow
    takes, that needs no prerequisite the flow lacks."""
    if rng.random() >= DECLINED_SHARE[difficulty]:
        return None
    closure = set(registry.closure(list(tools)))
    taken = {p for t in closure for p in registry[t].parameters.get("properties", {})}

    def fits(tool: str) -> bool:
        params = set(registry[tool].required_parameters) - {"format", "source"}
        return (tool not in closure and bool(params) and not params & (taken | WORDED_PARAMS)
                and set(registry.closure([*tools, tool])) == closure | {tool}
                and not sense_problems([*tools, tool], registry, partial=True)
                and not any(_clash(tool, other, registry) for other in closure))

    candidates = {kind: [t for t in dict.fromkeys(_tool_of(op, matcher) for op in ops)
                         if fits(t)] for kind, (_, ops) in DECLINED_OPS.items()}
    weights = {kind: DECLINED_OPS[kind][0] for kind, tools in candidates.items() if tools}
    return rng.choice(candidates[_weighted(rng, weights)]) if weights else None


def _settle(rng: DrawStream, shape: FlowShape, room: int, hi: int, guarded: str | None,
            used: list[str], take: Callable[[str], str], matcher: ToolMatcher,
            registry: ToolRegistry, sources: list[str], processors: list[str],
            joins: list[str], outputs: list[str], sides: list[str], deliver: str) -> str | None:
    """Make the drawn flow one that reading alone gets right, where its length allows (the
    lists change in place): a step it requires takes an option the text states in words
    (core/wording.py), which a wrong value of parameter_error can only be caught by reading;
    and two of its steps have an order that only the text fixes (two branches, a side step,
    two deliverables, two sources), which sequence_disorder swaps (core/flaws.py). Returns
    the guarded step (None where a side step took its place)."""
    def firm(group: list[str]) -> list[str]:
        return [t for t in group if t != guarded]

    def count() -> int:
        return len(sources) + len(processors) + len(joins) + len(outputs) + len(sides) + 1

    def worded(tool: str) -> bool:
        return bool(set(registry[tool].required_parameters) & WORDED_PARAMS)

    stated = [*firm(sources), *firm(processors), *firm(joins), *firm(outputs), *firm(sides),
              deliver]
    if not any(worded(t) for t in stated):
        options = [op for op in WORDED_PROCESSORS if op in shape.processors]
        plain = firm(processors)
        if plain:
            replaced = rng.choice(plain)
            processors.remove(replaced)
            used.remove(replaced)
            fitting = [op for op in options if _fits(op, used, matcher, registry)]
            processors.append(take(rng.choice(fitting)) if fitting else replaced)
            if not fitting:
                used.append(replaced)
        elif count() < room:
            fitting = [op for op in options if _fits(op, used, matcher, registry)]
            if fitting:
                processors.append(take(rng.choice(fitting)))
            elif _fits("tidy", used, matcher, registry):  # a chore the text words, then
                sides.append(take("tidy"))
        stated = [*firm(sources), *firm(processors), *firm(joins), *firm(outputs),
                  *firm(sides), deliver]
    # A side step's order is free only where a reader would take either order: a log
    # anywhere, a cache or a chore beside a branch, an event of work among two that work.
    works = len(firm(processors)) + len(firm(joins))
    side_op = {"utility_logger": "log", "utility_cache": "cache", "utility_tracker": "track",
               "utility_helper": "tidy"}
    free = (len(firm(processors)) >= 2 or len(firm(sources)) >= 2
            or any(_side_is_free(side_op.get(t, "log"), works) for t in firm(sides))
            or (firm(outputs) and registry[deliver].role is Role.OUTPUT))
    if free:
        return guarded
    # No room for a side step: it takes the place of the guarded step, else of a branch.
    groups = (processors, sides, joins)
    dropped: str | None = None
    if count() >= min(hi, room + 1):
        dropped = guarded if guarded is not None else (
            rng.choice(firm(processors)) if firm(processors) else None)
        if dropped is None or (dropped != guarded and worded(dropped) and not any(
                worded(t) for t in stated if t != dropped)):
            return guarded  # (a branch with the flow's only worded option stays: a chain)
    if dropped is not None:
        next(g for g in groups if dropped in g).remove(dropped)
        used.remove(dropped)
    others = [t for t in stated if t != dropped]
    pool: tuple[str, ...] = SIDES if any(worded(t) for t in others) else ("tidy",)
    works -= dropped is not None and dropped not in sides
    pool = tuple(op for op in pool if _side_is_free(op, works)) or pool
    fitting = [op for op in pool if _fits(op, used, matcher, registry)]
    if fitting:
        sides.append(take(rng.choice(fitting)))
        return None if dropped == guarded else guarded
    if dropped is not None:  # nothing fits: the flow stays as drawn
        (sides if registry[dropped].role is Role.UTILITY else processors).append(dropped)
        used.append(dropped)
    return guarded


def _side_is_free(op: str, works: int) -> bool:
    """Whether a side step of `op` has a sensible free order in a flow with `works` steps
    that work on the records (core/flow_sense.py)."""
    return {"log": True, "cache": works >= 1, "tidy": works >= 1, "track": works >= 2}[op]


def _quiet_step(shape: FlowShape, guarded: str | None, used: list[str], matcher: ToolMatcher,
                registry: ToolRegistry, body: list[str], deliver: str) -> str:
    """Give a flow with no quiet step one, where its deliverer allows: a step whose loss
    leaves no trace on the plan's surface (it shows no value of the Inputs block and takes no
    option the text words that no other step takes), as most flows have one; without it a
    plan that lost a step reads as one (`missing_step`, core/flaws.py). A plain deliverable
    becomes an aggregate (whose function the text words) when that fits. Returns the
    deliverer."""
    def shown(tool: str) -> bool:
        return bool(set(registry[tool].required_parameters) - {"format", "source"}
                    - WORDED_PARAMS)

    def worded(tool: str) -> bool:
        return bool(set(registry[tool].required_parameters) & WORDED_PARAMS)

    firm = [t for t in (*body, deliver) if t != guarded]
    words = sum(worded(t) for t in firm)
    middle = [t for t in firm[1:-1] if registry[t].role is not Role.SOURCE]
    if any(not shown(t) and (not worded(t) or words > 1) for t in middle):
        return deliver
    if registry[deliver].role is not Role.OUTPUT or worded(deliver) or not words \
            or "aggregate" not in shape.delivers \
            or any(registry[t].role is Role.AGGREGATOR for t in body):
        return deliver
    used.remove(deliver)
    if not _fits("aggregate", used, matcher, registry):
        used.append(deliver)
        return deliver
    tool = _tool_of("aggregate", matcher)
    used.append(tool)
    return tool


def bind_flow_value(param: str, rng: DrawStream, ctx: Mapping[str, Any], consumed: str) -> Any:
    """A value for a task-bound parameter from the wider pools (None: the paper's generator
    binds it, `generate._bind`)."""
    stem, site, batch = ctx["theme"]["stem"], ctx["site"], ctx["batch"]
    period, year, org = ctx["period"], ctx["year"], ctx["org"]
    resource = ctx["theme"]["resource"]
    dashed = stem.replace("_", "-")
    values: dict[str, Any] = {
        "directory": f"/data/{site}/{stem}/incoming/{year}",
        # A router's health check is at the destination (the flow has no fetcher then).
        "url": (f"https://{dashed}-{site}.{org}.example.com/health" if ctx.get("health")
                else f"https://api.{org}.example.com/v{rng.randint(1, 4)}/{site}/{resource}"),
        "target_url": f"https://partners.{org}.example.com/ingest/{site}/{resource}",
        "route_to": f"{dashed}-{site}",
        "endpoint": f"postgresql://db-{site}.{org}.internal:5432/{stem}",
        "service": f"{org}-{rng.choice(('gateway', 'identity', 'sso', 'vault', 'iam'))}",
        "recipient": rng.choice((f"{ctx['theme']['team']}-{site}@{org}.example.com",
                                 f"#{ctx['theme']['team']}-{site}",
                                 f"oncall-{site}@{org}.example.com")),
        "queue_name": f"{dashed}-{site}-batches",
        "job_name": f"{dashed}-{site}-{period}-refresh",
        "event": f"{stem}_{site}_{period}_{batch}_processed",
        "key": f"{stem}:{site}:{year}-{period}:{batch}",
        "message": f"{ctx['theme']['label']} batch {batch} for {site}, {period} {year}, started",
        "horizon": rng.choice((3, 6, 7, 12, 14, 24, 30, 52, 90)),
        "path": f"/data/{site}/{stem}_{year}_{period}_{batch}.{FILE_EXTENSIONS[consumed]}",
    }
    if param == "destination":
        kind = rng.choice(("summary", "report", "clean", "export", "digest", "extract"))
        return (f"/reports/{site}/{stem}_{kind}_{year}_{period}_{batch}."
                f"{FILE_EXTENSIONS[consumed]}")
    return values.get(param)


def flow_data() -> dict[str, Any]:
    """The grammar's data, hashed into the generator config (`GeneratorConfig.to_json`)."""
    return {
        "sources": SOURCES, "processors": PROCESSORS, "joins": JOINS, "outputs": OUTPUTS,
        "sides": SIDES, "worded_processors": WORDED_PROCESSORS, "raw_formats": RAW_FORMATS,
        "guard_extra": GUARD_EXTRA, "declined_share": DECLINED_SHARE, "hard_gated": HARD_GATED,
        "declined_ops": {k: [w, list(ops)] for k, (w, ops) in DECLINED_OPS.items()},
        "orgs": ORGS, "sites": SITES, "periods": PERIODS, "condition_wordings": CONDITION_WORDINGS,
        "worded_clauses": WORDED_CLAUSES, "flow_clauses": FLOW_CLAUSES,
        "prerequisite_sentences": {f"{a}>{b}": w for (a, b), w in
                                   PREREQUISITE_SENTENCES.items()},
        "contexts": CONTEXTS, "distractors": DISTRACTORS,
        "phrases": {param: {str(v): list(p) for v, p in by_value.items()}
                    for param, by_value in PHRASES.items()},
        "shapes": {k: {"sources": s.sources, "second_sources": s.second_sources,
                       "processors": s.processors, "delivers": s.delivers,
                       "extra_outputs": s.extra_outputs, "weights": dict(s.weights)}
                   for k, s in FLOW_SHAPES.items()},
    }
