"""pytest hooks of pytest-resilibench: hooks and fixtures only, the logic lives beside it.

Loaded through the `pytest11` entry point and kept cheap to import (no model SDK, no torch).

Flow: options → `ResiliSession` (in `config.stash`) → `pytest_generate_tests` makes one item per
case of the suite functions that take `resili_case` or `resili_episode` (without xdist, forked
helpers start on them there: ahead.py) → at the start of the test loop this process starts the
episodes of its own items (all, or its xdist share) → each item's `resili_episode` fixture
waits for its record → the report carries the outcome and the episode as JSON → the
controller gathers them in `pytest_runtest_logreport` (the same path with and without xdist),
writes the JSON report, applies the gate and prints the tables.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_resilibench.integration import foreign_plugins
from pytest_resilibench.integration.options import CHAOS_MARKER as _CHAOS_MARKER
from pytest_resilibench.integration.options import CHAOS_MARKER_HELP as _CHAOS_MARKER_HELP
from pytest_resilibench.integration.options import (
    RunConfig,
    add_options,
    benchmark_requested,
    read_config,
    report_requested,
)

if TYPE_CHECKING:  # the session module loads only when a run asks for the benchmark
    from pytest_resilibench.integration.heap import FrozenHeap
    from pytest_resilibench.integration.session import ResiliSession
    from pytest_resilibench.reporting.sequential import SequentialGate

SESSION_KEY: pytest.StashKey[ResiliSession] = pytest.StashKey()
_CONFIGURED = pytest.StashKey[bool]()  # this plugin's pytest_configure has run
_ASKED = pytest.StashKey[bool]()  # a suite folder asked for the benchmark (`ask_for_benchmark`)


class _EpisodeFailure(Exception):
    def __init__(self, message: str, record: Any = None) -> None:
        super().__init__(message)
        self.record = record  # the episode, for the report of the failed setup


class InfrastructureFailure(_EpisodeFailure):
    """The model could not be reached for this episode (not the agent's failure)."""


class HarnessFailure(_EpisodeFailure):
    """The harness itself broke in this episode (a bug to report)."""


class AgentFailure(_EpisodeFailure):
    """The agent's own code raised in this episode (the agent's failure: a failed episode in
    every rate, and a failed item)."""


# An item's status: the record's outcome, with `error` told apart by its cause (a model that
# could not be reached, or a bug of the harness), and an agent error apart from the other
# failed episodes; these three are the failures the fixture raises.
_FAILURES: dict[str, type[_EpisodeFailure]] = {"infra_error": InfrastructureFailure,
                                               "harness_error": HarnessFailure,
                                               "agent_error": AgentFailure}


def _status(record: Any) -> str:
    if record.stop_reason == "agent_error":
        return "agent_error"
    if record.outcome != "error":
        return str(record.outcome)
    return "harness_error" if record.stop_reason == "harness_error" else "infra_error"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_resilibench import hookspec
    from pytest_resilibench.integration.preload import keep_out_of_assertion_rewriting

    pluginmanager.add_hookspecs(hookspec)
    # The first hook pytest calls on a plugin, as it registers: what is imported later is
    # not parsed by pytest's assertion rewriter (preload.py).
    keep_out_of_assertion_rewriting(pluginmanager)
    # ... and before the entry points after ours: other packages' plugins our dependencies
    # bring stay out of runs that do not name them (foreign_plugins.py).
    foreign_plugins.block_unasked(pluginmanager)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "resilibench: an episode of the ResiliBench benchmark (added automatically)")
    config.addinivalue_line("markers", _CHAOS_MARKER_HELP)
    foreign_plugins.register_markers(config)
    if not hasattr(config, "workerinput"):  # the controller gathers resili_faults results
        config.pluginmanager.register(_ChaosWatch(config), "resilibench-chaos")
    config.stash[_CONFIGURED] = True
    if benchmark_requested(config) or config.stash.get(_ASKED, False):
        _activate(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    foreign_plugins.check_items(config, items)  # a test needing a plugin kept out: say so


def ask_for_benchmark(config: pytest.Config) -> None:
    """Ask for the benchmark as a `--resili-*` option would (a suite folder's conftest calls it:
    `suites/conftest.py`). Until something asks, the plugin builds nothing, opens no file and
    leaves xdist's scheduler alone: it is installed beside other projects' tests."""
    config.stash[_ASKED] = True
    if config.stash.get(_CONFIGURED, False):
        _activate(config)


def _activate(config: pytest.Config) -> ResiliSession:
    """The run's session and the hook classes that serve it, made once per process."""
    existing = config.stash.get(SESSION_KEY, None)
    if existing is not None:
        return existing
    from pytest_resilibench.base.extras import check_run as check_extras
    from pytest_resilibench.integration.session import ResiliSession

    def agent_hook(spec: str) -> object:  # conftests may build agents (hookspec.py)
        return config.hook.pytest_resilibench_make_agent(config=config, spec=spec)

    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput.get("workercount", 1)) if workerinput is not None else 1
    session = ResiliSession(read_config(config), rootdir=config.rootpath, agent_hook=agent_hook,
                            workers=workers)  # the run's cost cap is shared among the workers
    running = not (config.option.collectonly or config.option.help)
    if workerinput is None:  # the controller checks once for everyone
        try:
            check_extras(session.config)
            session.check_otel()  # --resili-otel: the collector's URL
            if not (running and _is_distributed(config)):  # else once the workers start
                session.task_set  # noqa: B018  # the fixtures, verified: a damaged file stops
            session.check_models(probe=running)
            if running:
                session.check_live_services()
            session.prepare_gate()
            if running:
                session.prepare_resume()
                # Realistic plans the cache lacks, solved here before any worker starts.
                session.prepare_realistic_plans(_plan_progress())
        except ValueError as exc:
            from pytest_resilibench.base.redact import redact

            raise pytest.UsageError(redact(str(exc))) from None
    else:
        session.load_resumed(workerinput.get("resili_resume", ()))
        session.skip_models(workerinput.get("resili_skip_models", ()))
    config.stash[SESSION_KEY] = session
    from pytest_resilibench.integration.heap import FrozenHeap

    config.pluginmanager.register(_Benchmark(session, FrozenHeap(config)), "resilibench-benchmark")
    stopper = None
    if session.sequential is not None:
        stopper = _SequentialStop(session, session.sequential,
                                  distributed=_is_distributed(config))
        config.pluginmanager.register(stopper, "resilibench-sequential")
    elif workerinput is not None and workerinput.get("resili_stop_file"):
        config.pluginmanager.register(_StopWatcher(workerinput["resili_stop_file"]),
                                      "resilibench-stop-watcher")
    gatherer = _Gatherer(config, session, stopper)
    config.pluginmanager.register(gatherer, "resilibench-gatherer")
    if workerinput is None:
        config.pluginmanager.register(_Ending(session), "resilibench-ending")
        if running:  # Ctrl-C again ends the run at once, quietly (base/interrupts.py)
            from pytest_resilibench.base.interrupts import count_interrupts

            config.add_cleanup(count_interrupts(lambda: _stopped_at_once(config, session)))
    if config.pluginmanager.hasplugin("xdist") and workerinput is None:
        config.pluginmanager.register(_XdistController(session, gatherer, stopper),
                                      "resilibench-xdist")
    return session


def _plan_progress() -> Callable[[int, int], None]:
    """The controller's progress line while it solves realistic plans (none when all are
    cached): on stderr, as the terminal reporter is not yet there at configure time; one
    line rewritten in place on a terminal, else a line per tenth."""
    import sys

    from pytest_resilibench.core.realistic_plans import progress_line

    stream = sys.stderr
    tty = stream.isatty()

    def show(done: int, total: int) -> None:
        if tty:
            stream.write("\r" + progress_line(done, total) + ("\n" if done == total else ""))
        elif done in (0, total) or done * 10 // total != (done - 1) * 10 // total:
            stream.write(progress_line(done, total) + "\n")
        stream.flush()

    return show


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker(_CHAOS_MARKER) is not None:
        _parametrize_chaos(metafunc)
    takes_case = "resili_case" in metafunc.fixturenames
    if takes_case or "resili_episode" in metafunc.fixturenames:
        # A suite function asks for the benchmark by taking a case or an episode (`pytest -n 0`
        # of a suite file with no option: nothing asked before collection).
        session = _activate(metafunc.config)
        cases = session.cases
        ids = [case.id for case in cases]
        if takes_case:
            metafunc.parametrize("resili_case", cases, ids=ids)
        else:  # the episode's fixture gets the case as its param: one fixture an item, not two
            metafunc.parametrize("resili_episode", cases, ids=ids, indirect=True)
        if _runs_all_here(metafunc.config, session):
            # The items will most likely be these cases in this order: forked helpers
            # (ahead.py) may compute while pytest collects; the test loop checks.
            session.prestart(cases)


def _parametrize_chaos(metafunc: pytest.Metafunc) -> None:
    """A test marked `resili_faults`: one item clean, one per fault seed (chaos.py)."""
    from pytest_resilibench.integration.chaos import chaos_runs

    runs: list[Any]
    try:
        runs = chaos_runs(metafunc) or []
        ids = [run.id for run in runs]
    except (TypeError, ValueError) as exc:  # this test fails with the message, not its module
        runs, ids = [f"{metafunc.definition.nodeid}: {exc}"], ["bad-marker"]
    metafunc.parametrize(_CHAOS_MARKER, runs, ids=ids, indirect=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and isinstance(callspec.params.get(_CHAOS_MARKER), str):
        pytest.fail(callspec.params[_CHAOS_MARKER], pytrace=False)  # a bad marker's message


_CHAOS_KEY = pytest.StashKey[Any]()  # an item's ResiliFaults and trace, after its teardown
_CHAOS_OUTCOME = pytest.StashKey[str]()  # how its setup or call ended


@pytest.fixture(name="resili_faults")
def resili_faults(request: pytest.FixtureRequest) -> Generator[Any, None, None]:
    """The benchmark's faults around this test's own tools: `resili_faults.wrap(tools)`
    (docs/CHAOS.md). Needs `@pytest.mark.resili_faults(...)` on the test."""
    from pytest_resilibench.integration.chaos import TRACE_DIR, ResiliFaults, base_id

    run = getattr(request, "param", None)
    if isinstance(run, str):  # a bad marker (_parametrize_chaos)
        pytest.fail(run, pytrace=False)
    if run is None:
        pytest.fail("the resili_faults fixture needs @pytest.mark.resili_faults(profile=..., "
                    "seeds=...) on the test (docs/CHAOS.md)", pytrace=False)
    node = request.node
    faults = ResiliFaults(run, session=getattr(node, "originalname", node.name))
    yield faults
    root = request.config.rootpath
    path = faults.write_trace(root / TRACE_DIR, base_id(node.nodeid, run.id))
    node.stash[_CHAOS_KEY] = (faults, os.path.relpath(path, root))


class _ChaosWatch:
    """The controller's hooks for `resili_faults` tests: inert (a look at each teardown
    report's user properties) until one reports, or the run asks for a report or a baseline.
    Their results go in the run's report, headline and gate: the benchmark's end takes them
    in (`_end_run`); a run without benchmark episodes ends here (`_end_chaos_alone`)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.gatherer: Any = None
        self.run_config: RunConfig | None = None  # read when no benchmark session reads it
        self.baseline: list[dict[str, Any]] | None = None  # the baseline's resili_faults runs
        self.exit_line: str | None = None
        self.report_problem: str | None = None
        self.unasked: str | None = None  # benchmark episodes arrived, no session took them

    def _gatherer(self) -> Any:
        if self.gatherer is None:
            from pytest_resilibench.integration.chaos_gather import ChaosGatherer

            self.gatherer = ChaosGatherer()
        return self.gatherer

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """A run with a report or a baseline but no benchmark (yet): the options read and the
        baseline's runs too, now, so that a bad file stops the run before any test."""
        config = self.config
        if SESSION_KEY in config.stash or not report_requested(config):
            return
        self.run_config = read_config(config)
        self._gatherer()
        if self.run_config.baseline is not None:
            from pytest_resilibench.integration.chaos_gather import baseline_runs

            try:
                self.baseline = baseline_runs(self.run_config.baseline)
            except (OSError, ValueError) as exc:
                from pytest_resilibench.base.redact import redact

                raise pytest.UsageError(redact(f"--resili-baseline: {exc}")) from None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and any(name == _CHAOS_MARKER
                                             for name, _ in report.user_properties):
            self._gatherer().add(report)
        elif self.unasked is None and hasattr(report, "resili_episode") \
                and SESSION_KEY not in self.config.stash:
            # xdist workers asked for the benchmark as they collected a suite function, this
            # controller never did (it collects nothing): say so, not drop them silently.
            self.unasked = (
                "resilibench: benchmark episodes ran on xdist workers, but nothing asked for "
                "the benchmark before collection, so they are in no report or gate: give an "
                "option that chooses episodes (e.g. --resili-model) or run `pytest suites`")

    def end(self, state: ResiliSession | None) -> Any:
        """The gathered results, summarised and judged against the baseline (the session's
        reading of it, or this watch's); None when no resili_faults test reported and no
        report was asked for."""
        if self.gatherer is None:
            return None
        if state is not None:
            config, baseline = state.config, state.baseline_chaos
        else:
            config = self.run_config or read_config(self.config)
            baseline = self.baseline
        self.gatherer.finish(config, baseline)
        return self.gatherer

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if SESSION_KEY not in self.config.stash:  # else the benchmark's end (`_end_run`)
            _end_chaos_alone(session, self, None)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        shown = _Shown(terminalreporter)
        if self.unasked is not None:
            shown.write_line(self.unasked, yellow=True, bold=True)
        gatherer = self.gatherer
        state = self.config.stash.get(SESSION_KEY, None)
        benchmark = state is not None and bool(state.episodes)
        if gatherer is None or gatherer.summary is None or (benchmark and not gatherer.rows):
            return
        shown.section("ResiliBench resili_faults")
        for line, markup in gatherer.lines():
            shown.write_line(line, **markup)
        if not gatherer.rows and self.unasked is None:
            shown.write_line("resilibench: no resili_faults test and no benchmark episode ran "
                             "(the benchmark runs with `pytest suites` or an option choosing "
                             "its episodes, e.g. --resili-model)", yellow=True)
        if benchmark:
            return  # the report, verdicts and exit line are the benchmark's (below)
        config = self.run_config
        if self.report_problem is not None:
            shown.write_line(self.report_problem, red=True, bold=True)
        elif config is not None and config.report is not None:
            shown.write_line(f"JSON report: {config.report}")
        for result in gatherer.gate_results:
            color = "red" if result.failed else {"pass": "green"}.get(result.kind, "yellow")
            shown.write_line(f"resilibench gate: {result.line}", **{color: True, "bold": True})
        if self.exit_line:
            shown.write_line(self.exit_line, **{"red" if " exit 0:" not in self.exit_line
                                                else "green": True, "bold": True})


def _end_chaos_alone(session: pytest.Session, watch: _ChaosWatch,
                     state: ResiliSession | None) -> None:
    """The end of a run with resili_faults tests and no benchmark episode: the report (the
    benchmark's, with no episode), the verdicts as `resilibench::gate`, the exit status."""
    gatherer = watch.end(state)
    if gatherer is None:
        return
    config = state.config if state is not None else watch.run_config
    if config is not None and config.report is not None:
        from pytest_resilibench.integration.chaos_gather import write_report

        try:
            write_report(config, gatherer, rootdir=session.config.rootpath)
        except (OSError, ValueError) as exc:
            why = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
            watch.report_problem = f"resilibench: could not write {config.report} ({why})"
    verdicts = _verdict_reports(gatherer.gate_results, [])
    for report in verdicts:
        session.config.hook.pytest_runtest_logreport(report=report)
    if not gatherer.gate_results and watch.report_problem is None:
        return
    from pytest_resilibench.integration.gate import exit_status

    status, watch.exit_line = exit_status(
        int(session.exitstatus), failed_items=session.testsfailed - sum(r.failed for r in verdicts),
        infra_items=0, results=gatherer.gate_results,
        incomplete=watch.report_problem is not None)
    session.exitstatus = pytest.ExitCode(status) if status in (0, 1) else session.exitstatus


class _Benchmark:
    """The hooks of an active benchmark run (registered by `_activate`)."""

    def __init__(self, session: ResiliSession, heap: FrozenHeap) -> None:
        self.session = session
        self.heap = heap

    @pytest.hookimpl(tryfirst=True)  # before `-k`/`-m` deselect, so they select among ours
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        if not any(_case_of(item) is not None for item in items):
            # Asked for, but no test takes a case: the package's own suite module.
            items.extend(session.genitems(_BuiltinSuite.from_parent(
                session, path=Path(_suite_module().__file__ or ""), nodeid="resilibench")))
        from pytest_resilibench.integration.cases import keywords

        marker = pytest.mark.resilibench
        for item in items:
            if (case := _case_of(item)) is not None:
                item.add_marker(marker)
                item.extra_keyword_matches.update(keywords(case))
        if self.session.config.gate == "sequential":
            # Episodes in a seeded random order, so that any prefix is a random sample of the
            # selection; the user's own tests keep their place in front.
            from pytest_resilibench.base.rng import key_int

            seed = self.session.config.seed
            ours = [item for item in items if _case_of(item) is not None]
            ours.sort(key=lambda item: key_int(seed, "sequential-order", _case_of(item).id))
            items[:] = [item for item in items if _case_of(item) is None] + ours

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        running = not session.config.option.collectonly
        if running:  # the heap lives through the loop: out of the collector's way (heap.py)
            self.heap.freeze()
        workerinput = getattr(session.config, "workerinput", None)
        if running and workerinput is None:
            # The summary's imports (numpy, scipy.special: ~0.4 s) now, not after the last
            # item: an xdist controller waits for its workers meanwhile, and without xdist the
            # helpers forked during collection (ahead.py) compute episodes while this process
            # imports. Before `start`: no import once the episode thread runs (preload.py).
            self.session.import_summary()
        if running and session.items:
            from pytest_resilibench.integration.scheduling import worker_share

            ours = [item for item in session.items if _case_of(item) is not None]
            mine = worker_share(ours, workerinput) if workerinput else ours
            self.session.start([_case_of(item) for item in mine])
        try:
            return (yield)
        finally:
            self.session.stop()
            if running:  # what the loop made too (an xdist controller's 150,000 reports):
                self.heap.freeze()  # pytest's collections at unconfigure would walk it all

    @pytest.fixture(name="resili_episode")
    def resili_episode(self, request: pytest.FixtureRequest) -> Any:
        """The `EpisodeRecord` of this item's case (its episode may have run ahead): the case
        is the fixture's own param (`pytest_generate_tests`), or the `resili_case` of a
        function that takes that too.

        Its param rather than a dependency on a `resili_case` param: one fixture an item
        instead of two (pytest's machinery for one, ~45 us an item, 2% of a 50,400-item
        run's CPU). A method of this plugin object, so that the session is at hand; pytest
        binds fixtures of plugin instances to the instance (`FixtureManager.parsefactories`)."""
        __tracebackhide__ = True
        case = getattr(request, "param", None)
        if case is None:
            case = request.getfixturevalue("resili_case")
        record = self.session.result(case)
        status = _status(record)
        if status in _FAILURES:
            raise _FAILURES[status](
                record.agent_error or record.infra_error or record.stop_reason, record)
        return record

    @pytest.fixture
    def resili_config(self) -> RunConfig:
        """The run's parsed options."""
        config: RunConfig = self.session.config
        return config


def _suite_module() -> Any:
    import importlib

    return importlib.import_module("pytest_resilibench.integration.suite")


class _BuiltinSuite(pytest.Module):
    """`pytest_resilibench/integration/suite.py` as a collected module, imported by its package name
    (the file lies in site-packages: no `sys.path` insertion, no rootdir-relative node id)."""

    def _getobj(self) -> Any:
        return _suite_module()


_SHOWN_KEY = pytest.StashKey[Any]()  # an item's episode, until its teardown report shows it
_PROPERTIES = ("outcome", "coverage", "order_adherence", "turns", "tool_calls", "errors_met",
               "errors_recovered")


def _record_of(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """The episode an item's phase reports: the fixture's value after the call, or the
    one its failure carries when the fixture raised (None outside an active benchmark)."""
    if SESSION_KEY not in item.config.stash:
        return None
    if call.when == "call":
        record = (getattr(item, "funcargs", None) or {}).get("resili_episode")
    elif call.when == "setup" and call.excinfo is not None:
        record = getattr(call.excinfo.value, "record", None)
    else:  # most phases: no import to pay for
        return None
    from pytest_resilibench.core.record import EpisodeRecord

    return record if isinstance(record, EpisodeRecord) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    record = _record_of(item, call)
    if record is not None:
        if _shows_properties(item.config):
            item.stash[_SHOWN_KEY] = record
    elif call.when == "teardown" and _SHOWN_KEY in item.stash:
        # JUnit XML reads a test's properties off its teardown report (pytest's junitxml,
        # `LogXML.finalize`), so they go on that report alone: xdist sends every report to
        # the controller, which decodes each in pure Python (execnet), ~40 us for these.
        shown = item.stash[_SHOWN_KEY]
        del item.stash[_SHOWN_KEY]
        item.user_properties.extend(
            (f"resili_{name}", getattr(shown, name)) for name in _PROPERTIES)
    report = yield
    if _CHAOS_MARKER in getattr(item, "fixturenames", ()):
        _chaos_report(item, call, report)
    if record is not None:
        session = item.config.stash[SESSION_KEY]
        outcome = _status(record)
        report.resili_outcome = outcome  # type: ignore[attr-defined]
        if outcome in ("infra_error", "agent_error"):  # `-v` shows why
            report.resili_reason = (  # type: ignore[attr-defined]
                record.infra_error if outcome == "infra_error" else record.agent_error)
        report.resili_episode = session.episode_json(record)  # type: ignore[attr-defined]
    return report


def _chaos_report(item: pytest.Item, call: pytest.CallInfo[None],
                  report: pytest.TestReport) -> None:
    """A resili_faults item's outcome, and its result on the teardown report (JUnit XML and
    xdist carry user properties to the controller)."""
    if call.when == "setup" and not report.passed:
        item.stash[_CHAOS_OUTCOME] = "skipped" if report.skipped else "error"
    elif call.when == "call":
        item.stash[_CHAOS_OUTCOME] = report.outcome
    elif call.when == "teardown" and _CHAOS_KEY in item.stash:
        import json

        from pytest_resilibench.integration.chaos import row_of

        faults, trace = item.stash[_CHAOS_KEY]
        del item.stash[_CHAOS_KEY]
        row = row_of(item.nodeid, faults, item.stash.get(_CHAOS_OUTCOME, "error"), trace)
        report.user_properties.append((_CHAOS_MARKER, json.dumps(row, sort_keys=True)))


def _shows_properties(config: pytest.Config) -> bool:
    """Whether an item's episode figures go on its report as `user_properties`: where a
    report file shows them (`--junitxml`, pytest-reportlog's `--report-log`). Elsewhere they
    would only be encoded by each xdist worker and decoded by the controller (~50 us an item,
    pure Python); every report carries the episode's JSON anyway. `report_log` is the option
    pytest-reportlog adds (it writes each report's `pytest_report_to_serializable` form)."""
    shows = config.stash.get(_PROPERTIES_KEY, None)
    if shows is None:
        shows = config.stash[_PROPERTIES_KEY] = bool(
            getattr(config.option, "xmlpath", None) or getattr(config.option, "report_log", None))
    return shows


_PROPERTIES_KEY = pytest.StashKey[bool]()


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, Any] | None:
    outcome = getattr(report, "resili_outcome", None)
    if outcome is None:  # not a benchmark item
        return None
    from pytest_resilibench.reporting.vocabulary import STATUSES

    if outcome in ("infra_error", "agent_error"):
        reason = getattr(report, "resili_reason", None)
        if reason and config.get_verbosity() > 0:
            category, letter, (word, markup) = STATUSES[outcome]
            from pytest_resilibench.runtime.protocol import error_cause

            if outcome == "infra_error":
                reason = error_cause(reason)
            from pytest_resilibench.base.redact import redact

            return category, letter, (f"{word} ({_short(redact(reason))})", markup)
        return STATUSES[outcome]
    if outcome in STATUSES and report.when == "call" and report.passed:
        return STATUSES[outcome]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(SESSION_KEY, None)
    if state is None:  # the benchmark was not asked for
        return
    if hasattr(config, "workerinput"):  # the controller checks that nothing was lost
        config.workeroutput.update(state.worker_output())  # type: ignore[attr-defined]
        return
    from pytest_resilibench.base.interrupts import sigint_deferred

    with sigint_deferred():  # Ctrl-C waits for the report (`_Ending` then ends the run)
        _end_run(session, state)


_ENDED = pytest.StashKey[bool]()


def _end_run(session: pytest.Session, state: ResiliSession) -> None:
    """The controller's end, once: summary, gate, JSON report, verdicts."""
    config = session.config
    if config.stash.get(_ENDED, False):
        return
    config.stash[_ENDED] = True
    watch = config.pluginmanager.get_plugin("resilibench-chaos")
    if not state.episodes:
        state.drop_empty_log()
        if watch is not None:  # resili_faults tests alone (the benchmark's items deselected)
            _end_chaos_alone(session, watch, state)
        return
    state.finish(chaos=None if watch is None else watch.end(state))
    if state.config.report is not None:
        state.write_report()
    verdicts = _verdict_reports(state.gate_results, state.lost)
    for report in verdicts:  # JUnit XML and the final line show the verdict
        config.hook.pytest_runtest_logreport(report=report)
    from pytest_resilibench.integration.gate import exit_status

    # The verdicts' own JUnit cases (just reported) are in `testsfailed` when they failed; so
    # is every infra-error item, which the tolerance may forgive.
    status, state.exit_line = exit_status(
        int(session.exitstatus),
        failed_items=session.testsfailed - sum(r.failed for r in verdicts),
        infra_items=state.infra_items, results=state.gate_results,
        incomplete=bool(state.lost or _no_result(state)))
    session.exitstatus = pytest.ExitCode(status) if status in (0, 1) else session.exitstatus
    _write_job_summary(state)


def _write_job_summary(state: ResiliSession) -> None:
    """On GitHub Actions (GITHUB_STEP_SUMMARY set): the headline, the verdict per model and
    the exit line, appended to the job's summary; a failure to write is one yellow line."""
    import os

    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    from pytest_resilibench.integration.job_summary import append_job_summary

    problem = append_job_summary(path, state)
    if problem is not None:
        state.end_notes.append(problem)


def _verdict_reports(gate_results: list[Any], lost: list[str]) -> list[pytest.TestReport]:
    """The run's verdicts as test reports of their own, so that CI UIs reading JUnit XML
    show a failed gate in red rather than "1500 passed": `resilibench::gate` when a gate was
    asked for (`--resili-fail-under`, `--resili-baseline`), `resilibench::episodes` when
    episodes never arrived."""
    verdicts = []
    if gate_results:
        failed = [r.line for r in gate_results if r.failed]
        verdicts.append(("gate", failed, [r.line for r in gate_results]))
    if lost:
        verdicts.append(("episodes", list(lost), []))
    return [pytest.TestReport(
        nodeid=f"resilibench::{name}", location=("resilibench", None, name), keywords={name: 1},
        outcome="failed" if failed else "passed", when="call",
        longrepr="\n".join(failed) if failed else None,
        sections=[("resilibench", "\n".join(lines))] if lines and not failed else [],
    ) for name, failed, lines in verdicts]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(SESSION_KEY, None)
    option = config.option
    if state is None and (option.keyword or option.markexpr):  # not asked: -k/-m looking?
        from pytest_resilibench.integration.hints import selection_hint

        hint = selection_hint(option.keyword, option.markexpr)
        if hint is not None:
            _Shown(terminalreporter).write_line(hint, yellow=True)
    if state is None or state.summary is None:
        return
    from pytest_resilibench.reporting.headline import build
    from pytest_resilibench.reporting.tables import render_terminal
    from pytest_resilibench.reporting.vocabulary import LEGEND, order_stats

    # Every line below may quote a model, an agent or a server (names, errors, causes):
    # written through `_Shown`, redacted and as data (base/redact.py, base/safe_text.py).
    tr = _Shown(terminalreporter)
    tr.section("ResiliBench results")
    for why in state.skipped_agents.values():  # --resili-skip-bad-agents
        tr.write_line(f"resilibench: skipped {why}", yellow=True, bold=True)
    full = state.config.summary == "full" or config.get_verbosity() > 0
    if state.config.env != "live":
        tr.write_line(state.task_set_line())
    # The tables name each model by its agent's `name` where it has one of its own.
    shown = state.display_summary or state.summary
    # The headline's gate lines are the coloured ones below (the same words); its verdict per
    # model is the fixed gate's comparison.
    head = build(shown, comparison=state.display_comparison, chaos=state.chaos_summary)
    if full:
        tr.write_line(LEGEND)
    tr.write_line(render_terminal(shown, head=head, full=full).rstrip("\n"), wide=True)
    if not full:
        tr.write_line("(every table: -v or --resili-summary=full)")
    for line in state.resume_lines():
        tr.write_line(line)
    for line in [*state.close_lines(), *state.end_notes]:
        tr.write_line(line, yellow=True)
    if state.config.report is not None:
        tr.write_line(f"JSON report: {state.config.report} (browse its episodes: "
                      f"resilibench report {state.config.report} --html)")
    for message in state.lost:
        tr.write_line(message, red=True, bold=True)
    no_result = _no_result(state)
    if no_result:
        tr.write_line(no_result, red=True, bold=True)
    for result in state.gate_results:
        color = "red" if result.failed else {"pass": "green"}.get(result.kind, "yellow")
        tr.write_line(f"resilibench gate: {result.line}", **{color: True, "bold": True})
    order_stats(terminalreporter)
    if state.exit_line:  # which rule set the exit status, last
        tr.write_line(state.exit_line, **{"red" if " exit 0:" not in state.exit_line
                                          else "green": True, "bold": True})


class _Shown:
    """The terminal reporter's `section` and `write_line`, every line redacted as the report is
    (base/redact.py) and shown as data (control characters as escapes), cut to a bound: a
    generous one, as our own lines name paths (what an agent or a server said is cut shorter
    where it is quoted); `wide` for the tables, whose cells are cut already
    (reporting/tables.py) and whose rows may be wider."""

    def __init__(self, reporter: Any) -> None:
        self.reporter = reporter

    def section(self, title: str) -> None:
        self.reporter.section(title)

    def write_line(self, text: str, *, wide: bool = False, **markup: bool) -> None:
        from pytest_resilibench.base.redact import redact
        from pytest_resilibench.base.safe_text import LINE_LIMIT, for_terminal

        limit = (8 if wide else 4) * LINE_LIMIT
        self.reporter.write_line(for_terminal(redact(text), limit=limit, block=True),
                                 **markup)


def _no_result(state: ResiliSession) -> str | None:
    """The line saying the run has no result (every episode an infra error), else None."""
    if state.summary is None:
        return None
    from pytest_resilibench.reporting.summarize import no_result

    return no_result(state.summary)


def _short(reason: str, limit: int = 160) -> str:
    """An agent's or a server's words on one `-v` line: shown as data, cut to `limit`."""
    from pytest_resilibench.base.safe_text import for_terminal

    return for_terminal(reason, limit=limit)


def _case_of(item: pytest.Item) -> Any:
    """A benchmark item's case: its `resili_case` param, or its episode fixture's."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    params = callspec.params
    case = params.get("resili_case")
    return case if case is not None else params.get("resili_episode")


def _case_id(nodeid: str) -> str | None:
    """The case id in a benchmark item's node id (`...::test_resilibench[<case id>]`)."""
    return nodeid[nodeid.rfind("[") + 1:-1] if nodeid.endswith("]") and "[" in nodeid else None


def _runs_all_here(config: pytest.Config, state: ResiliSession) -> bool:
    """This process runs the items it collects, in collection order: no xdist (neither
    controller nor worker), not `--collect-only`, no sequential gate (it reorders them)."""
    return (not hasattr(config, "workerinput") and not config.option.collectonly
            and not _is_distributed(config) and state.config.gate != "sequential")


def _is_distributed(config: pytest.Config) -> bool:
    """xdist's own test (its `DSession` registers after this plugin's configure)."""
    return config.getoption("dist", "no") != "no" and not config.option.collectonly


class _Ending:
    """On the controller: Ctrl-C while the run ends (xdist tearing its workers down, another
    plugin's end, the tables, unconfigure) ends it as interrupted with one line saying what
    became of the report, not a traceback. The report is written first (`_end_run`, Ctrl-C
    held off meanwhile), or here when the interrupt came before it."""

    def __init__(self, state: ResiliSession) -> None:
        self.state = state
        self.session: pytest.Session | None = None  # once it ends: its exit status is ours

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        self.session = session
        try:
            return (yield)
        except KeyboardInterrupt:
            pass
        from pytest_resilibench.base.interrupts import sigint_deferred

        # When the interrupt came before the report: write it now (interrupted already).
        with contextlib.suppress(KeyboardInterrupt), sigint_deferred():
            _end_run(session, self.state)
        self._interrupted(session.config)
        return None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> Generator[None, object, object]:
        try:
            return (yield)
        except KeyboardInterrupt:
            pass
        self.state.close()
        self._interrupted(config)
        return None

    def _interrupted(self, config: pytest.Config) -> None:
        if self.session is not None:
            self.session.exitstatus = pytest.ExitCode.INTERRUPTED
        from pytest_resilibench.base.redact import redact

        line = redact(self.state.interrupted_line())
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write("\n")  # after the progress line
            reporter.write_line(line, red=True, bold=True)
        else:
            import sys

            print(line, file=sys.stderr)


def _stopped_at_once(config: pytest.Config, state: ResiliSession) -> str:
    """The line of a run that Ctrl-C pressed again ended at once: to the terminal, not to a
    capture (an item's, under way) that nobody will read."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is not None:
        with contextlib.suppress(Exception):
            capture.stop_global_capturing()
    from pytest_resilibench.base.redact import redact

    return redact(state.stopped_at_once_line())


class _Gatherer:
    """Collects episodes from the reports where they land: the controller under xdist, the
    only process without it. It also learns the run's plan (the benchmark items, in run order)
    from the collection, so that an episode that never arrives is reported, not forgotten."""

    def __init__(self, config: pytest.Config, session: ResiliSession,
                 stopper: _SequentialStop | None) -> None:
        self.is_worker = hasattr(config, "workerinput")
        self.session = session
        self.stopper = stopper

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.is_worker and not session.config.option.collectonly:
            self.plan([item.nodeid for item in session.items])

    def plan(self, nodeids: list[str]) -> None:
        """Once: the planned items (from this process's collection, or xdist's first node's)."""
        if self.session.planned or self.is_worker:
            return
        self.session.plan({cid: nodeid for nodeid in nodeids if (cid := _case_id(nodeid))})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "resili_episode", None)
        if payload is None or self.is_worker:
            return
        if report.failed and getattr(report, "resili_outcome", None) == "infra_error":
            self.session.infra_items += 1  # an item --resili-max-infra-errors may forgive
        node = getattr(report, "node", None)
        decided = self.session.add_episode(
            payload, node.gateway.id if node is not None else None, _case_id(report.nodeid))
        # pytest keeps every report to the end; the episode now lives in the store.
        del report.resili_episode
        if decided and self.stopper is not None:
            self.stopper.stop()


class _SequentialStop:
    """With `--resili-gate=sequential`, on the controller: stops the run once the gate
    decides. Without xdist it sets `session.shouldstop`, as `-x` does; under xdist each worker
    sets its own (`_StopWatcher`) when the controller's stop file appears, so no worker starts
    another episode and xdist ends the run the way it ends a `-x` run. The items left are
    reported as deselected."""

    def __init__(self, state: ResiliSession, gate: SequentialGate, *, distributed: bool) -> None:
        self.state = state
        self.gate = gate
        self.session: pytest.Session | None = None
        self.stop_file: str | None = None
        if distributed:
            import tempfile

            self.stop_file = os.path.join(tempfile.mkdtemp(prefix="resilibench-"), "stop")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def stop(self) -> None:
        reason = self.gate.stop_reason()
        if self.stop_file is not None:
            from pathlib import Path

            Path(self.stop_file).write_text(reason, encoding="utf-8")
        elif self.session is not None:
            self.session.shouldstop = reason

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        except KeyboardInterrupt as exc:  # pytest's and xdist's Interrupted, from our stop
            if not (self.gate.decided and str(exc).startswith("resilibench:")):
                raise
            return True  # the run ended as planned: not an interruption
        finally:
            self._report_left_out(session)
            if self.stop_file is not None:
                shutil.rmtree(os.path.dirname(self.stop_file), ignore_errors=True)

    def _report_left_out(self, session: pytest.Session) -> None:
        """The items the decided gate made unnecessary: deselected, not lost."""
        if not self.gate.decided:
            return
        left = self.state.leave_out()
        if left:
            by_id = {item.nodeid: item for item in session.items}
            session.config.hook.pytest_deselected(
                items=[by_id.get(nodeid, _LeftOut(nodeid)) for nodeid in left.values()])


class _LeftOut:
    """A benchmark item the controller never held (xdist): enough for `pytest_deselected`."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


class _StopWatcher:
    """On an xdist worker of a sequential run: stop after the current item once the
    controller's stop file exists (the worker loop checks `session.shouldstop`)."""

    def __init__(self, stop_file: str) -> None:
        self.stop_file = stop_file
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logfinish(self) -> None:
        import os

        if self.session is not None and os.path.exists(self.stop_file):
            with contextlib.suppress(OSError), open(self.stop_file, encoding="utf-8") as why:
                self.session.shouldstop = why.read()
            self.session.shouldstop = self.session.shouldstop or "resilibench: gate decided"


class _XdistController:
    """xdist hooks, registered only when xdist is present (its hook specs must exist)."""

    def __init__(self, session: ResiliSession, gatherer: _Gatherer,
                 stopper: _SequentialStop | None) -> None:
        self.session = session
        self.gatherer = gatherer
        self.stopper = stopper

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The fixtures, loaded and verified (a damaged file stops the run here, as a usage
        error) after xdist's `DSession` has started the workers (registered after this, it
        runs first): the 0.5 s it takes no longer delays their start."""
        if _is_distributed(session.config):
            try:
                self.session.task_set  # noqa: B018
            except ValueError as exc:
                from pytest_resilibench.base.redact import redact

                raise pytest.UsageError(redact(str(exc))) from None

    def pytest_configure_node(self, node: Any) -> None:
        """Tell each worker whether it gets its items round-robin (`scheduling.py`) and where a
        sequential gate's stop signal will appear."""
        from pytest_resilibench.integration.scheduling import ROUND_ROBIN_FLAG

        node.workerinput[ROUND_ROBIN_FLAG] = node.config.getoption("dist") == "load"
        node.workerinput["resili_resume"] = self.session.resume_sources
        node.workerinput["resili_skip_models"] = list(self.session.skipped_agents)
        if self.stopper is not None and self.stopper.stop_file is not None:
            node.workerinput["resili_stop_file"] = self.stopper.stop_file

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.gatherer.plan(ids)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getoption("dist") != "load":
            return None  # the user chose a scheduler: keep it (episodes then run on demand)
        from pytest_resilibench.integration.scheduling import make_round_robin_scheduling

        cases = self.session.cases_by_id
        return make_round_robin_scheduling(
            config, log, lambda nodeid: _case_id(nodeid) in cases)

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.session.worker_finished(node.gateway.id, getattr(node, "workeroutput", None) or {})
