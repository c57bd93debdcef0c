"""pytest hooks of pytest-resilibench: hooks and fixtures only, the logic lives beside it.

Loaded through the `pytest11` entry point and kept cheap to import (no model SDK, no torch).

Flow: options → `ResiliSession` (in `config.stash`) → `pytest_generate_tests` makes one item per
case of the suite functions that take `resili_case` → at the start of the test loop this process
starts the episodes of its own items (all, or its xdist share) → each item's `resili_episode`
fixture waits for its record → the report carries the outcome and the episode as JSON → the
controller gathers them in `pytest_runtest_logreport` (the same path with and without xdist),
writes the JSON report, applies the gate and prints the tables.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import pytest

from pytest_resilibench.options import RunConfig, add_options, read_config

SESSION_KEY = pytest.StashKey["Any"]()
RECORD_KEY = pytest.StashKey["Any"]()
OUTCOME_STATUS = {
    "full": ("full", ".", ("FULL", {"green": True})),
    "partial": ("partial", "p", ("PARTIAL", {"yellow": True})),
    "failed": ("unsolved", "u", ("UNSOLVED", {"red": True})),
    "infra_error": ("infra errors", "I", ("INFRA-ERROR", {"red": True, "bold": True})),
}


class InfrastructureFailure(Exception):
    """The model could not be reached for this episode (not the agent's failure)."""


class HarnessFailure(Exception):
    """The harness itself broke in this episode (a bug to report)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_resilibench.session import ResiliSession

    config.addinivalue_line(
        "markers", "resilibench: an episode of the ResiliBench benchmark (added automatically)")
    session = ResiliSession(read_config(config), rootdir=config.rootpath)
    if not hasattr(config, "workerinput"):  # the controller checks once for everyone
        try:
            session.check_models()
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(_Gatherer(config, session), "resilibench-gatherer")
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistController(session), "resilibench-xdist")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "resili_case" in metafunc.fixturenames:
        cases = metafunc.config.stash[SESSION_KEY].cases
        metafunc.parametrize("resili_case", cases, ids=[case.id for case in cases])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    marker = pytest.mark.resilibench
    for item in items:
        if _case_of(item) is not None:
            item.add_marker(marker)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    config = session.config
    if not config.option.collectonly and session.items:
        from pytest_resilibench.scheduling import worker_share

        workerinput = getattr(config, "workerinput", None)
        mine = worker_share(session.items, workerinput) if workerinput else session.items
        cases = [case for item in mine if (case := _case_of(item)) is not None]
        config.stash[SESSION_KEY].start(cases)
    try:
        return (yield)
    finally:
        config.stash[SESSION_KEY].stop()


@pytest.fixture
def resili_config(request: pytest.FixtureRequest) -> RunConfig:
    """The run's parsed options."""
    config: RunConfig = request.config.stash[SESSION_KEY].config
    return config


@pytest.fixture
def resili_episode(request: pytest.FixtureRequest, resili_case: Any) -> Any:
    """The `EpisodeRecord` of this item's case (its episode may have run ahead)."""
    __tracebackhide__ = True
    record = request.config.stash[SESSION_KEY].result(resili_case)
    request.node.stash[RECORD_KEY] = record
    for name in ("outcome", "coverage", "order_adherence", "turns", "tool_calls",
                 "errors_met", "errors_recovered"):
        request.node.user_properties.append((f"resili_{name}", getattr(record, name)))
    if record.outcome == "error":
        kind = HarnessFailure if record.stop_reason == "harness_error" else InfrastructureFailure
        raise kind(record.infra_error or record.stop_reason)
    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    record = item.stash.get(RECORD_KEY, None)
    attach = (call.when == "call") or (call.when == "setup" and report.failed)
    if record is not None and attach:
        session = item.config.stash[SESSION_KEY]
        outcome = record.outcome
        if outcome == "error":
            outcome = "harness_error" if record.stop_reason == "harness_error" else "infra_error"
        report.resili_outcome = outcome  # type: ignore[attr-defined]
        payload = record.to_json() if session.config.trajectories else record.summary_json()
        report.resili_episode = json.dumps(payload)  # type: ignore[attr-defined]
        session.attached += 1
        item.stash[RECORD_KEY] = None
    return report


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, Any] | None:
    outcome = getattr(report, "resili_outcome", None)
    if outcome == "infra_error":
        return OUTCOME_STATUS[outcome]
    if outcome in OUTCOME_STATUS and report.when == "call" and report.passed:
        return OUTCOME_STATUS[outcome]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash[SESSION_KEY]
    if hasattr(config, "workerinput"):  # the controller checks that nothing was lost
        config.workeroutput["resili_episodes"] = state.attached  # type: ignore[attr-defined]
        return
    if not state.episodes:
        return
    state.finish()
    if state.config.report is not None:
        state.write_report()
    if (state.gate_failed or state.lost) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(SESSION_KEY, None)
    if state is None or state.summary is None:
        return
    from pytest_resilibench.analysis import render_terminal

    tr = terminalreporter
    tr.section("ResiliBench results")
    tr.write_line(render_terminal(state.summary))
    tr.write_line("full = every condition met; partial = at least two of coverage, order, "
                  "output, completion; unsolved = the episode failed (a benchmark result, "
                  "not a broken test); infra errors are kept out of the rates.")
    if state.config.report is not None:
        tr.write_line(f"JSON report: {state.config.report}")
    for message in state.lost:
        tr.write_line(message, red=True, bold=True)
    for result in state.gate_results:
        color = {"pass": "green", "inconclusive": "yellow"}.get(result.kind, "red")
        tr.write_line(f"resilibench gate: {result.line}", **{color: True, "bold": True})


def _case_of(item: pytest.Item) -> Any:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("resili_case") if callspec is not None else None


class _Gatherer:
    """Collects episodes from the reports where they land: the controller under xdist, the
    only process without it."""

    def __init__(self, config: pytest.Config, session: Any) -> None:
        self.is_worker = hasattr(config, "workerinput")
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "resili_episode", None)
        if payload is None or self.is_worker:
            return
        node = getattr(report, "node", None)
        self.session.add_episode(payload, node.gateway.id if node is not None else None)
        # pytest keeps every report to the end; the episode now lives in the store.
        del report.resili_episode


class _XdistController:
    """xdist hooks, registered only when xdist is present (its hook specs must exist)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getoption("dist") != "load":
            return None  # the user chose a scheduler: keep it (episodes then run on demand)
        from pytest_resilibench.scheduling import make_round_robin_scheduling

        return make_round_robin_scheduling(config, log)

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        sent = output.get("resili_episodes")
        got = self.session.received_by_worker.get(node.gateway.id, 0)
        if sent is not None and sent != got:
            self.session.lost.append(
                f"resilibench: worker {node.gateway.id} sent {sent} episodes, {got} arrived")
