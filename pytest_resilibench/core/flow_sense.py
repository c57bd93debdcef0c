"""Typed data flows (issue 50, docs/BENCHMARK.md: Tasks): what makes a sequence of steps one
no person would ask for. The default set's generator draws only flows without a problem here
(solver/flows.py), and the flaw injectors keep a plan as sensible as its parent where they
can (core/flaws.py: `Marks.sensible`), so that "the plan makes no sense" is no tell.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pytest_resilibench.core.registry import Role, ToolRegistry

__all__ = ["BRANCH_RANK", "RECORD_TOOLS", "makes_sense", "sense_problems"]

# Steps that bring records (a health monitor reports on a service, not records).
RECORD_TOOLS = frozenset({"file_operations_reader", "file_operations_scanner",
                          "network_fetcher", "integration_connector"})
SERVICE_TOOLS = frozenset({"network_fetcher", "integration_connector", "network_poster"})
# Tools whose output is a result to deliver, never records to parse, filter or aggregate.
RESULT_TOOLS = frozenset({"computation_optimizer"})
RECORD_READERS = frozenset({"data_processing_parser", "data_processing_transformer",
                            "data_processing_filter", "data_processing_aggregator"})
# The rank of a branch in the order a reader takes it: a parse first, an archive last (1 for
# every other); equal ranks keep the drawn order (two branches only the text orders).
BRANCH_RANK = {"data_processing_parser": 0, "file_operations_compressor": 2}


def sense_problems(tools: Sequence[str], registry: ToolRegistry, *,
                   partial: bool = False) -> list[str]:
    """What makes a flow (its steps' tools, in order) one no person would ask for: a step
    that works on records before any step brings them, records read from an optimiser's
    result, an event of work done before any work, a response check with no service, a
    router whose health check would share the source's URL (one `url` per task), branches
    out of the order a reader takes them. With `partial` (a flow still being drawn), only
    what no later step can mend. Tools the registry lacks are skipped."""
    return list(_problems(tools, registry, partial))


def makes_sense(tools: Sequence[str], registry: ToolRegistry) -> bool:
    """Whether `sense_problems` finds nothing: up to the first problem, none worded (the flaw
    injectors ask this of every candidate edit)."""
    return next(_problems(tools, registry, False), None) is None


def _problems(tools: Sequence[str], registry: ToolRegistry, partial: bool) -> Iterator[str]:
    present = set(tools)
    if RESULT_TOOLS & present and RECORD_READERS & present:
        yield "records read from an optimiser's result"
    if "network_router" in present and "network_fetcher" in present:
        yield "a router's health check at the source's URL"
    if partial:
        return
    if "network_validator" in present and not SERVICE_TOOLS & present:
        yield "a service's reply checked with no service"
    sourced = worked = False
    rank = -1
    for tool in tools:
        spec = registry.get(tool)
        if spec is None:
            continue
        works = spec.role in (Role.PROCESSOR, Role.AGGREGATOR) or tool == "utility_helper"
        if works and not sourced:
            yield f"{tool} works on records before any step brings them"
        if tool == "utility_tracker" and not worked:
            yield "an event of work done before any work"
        if spec.role is Role.PROCESSOR:
            if BRANCH_RANK.get(tool, 1) < rank:
                yield f"{tool} out of the order a reader takes the branches"
            rank = max(rank, BRANCH_RANK.get(tool, 1))
        sourced |= tool in RECORD_TOOLS
        worked |= works
