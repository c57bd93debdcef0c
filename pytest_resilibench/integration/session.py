"""The run's state: one `ResiliSession` per pytest process, kept in `config.stash`.

It owns what the hooks in `plugin.py` need: the parsed options, the cases, this process's
episode runner, and on the controller (or a run without xdist) the episodes gathered from the
reports, the summary, the JSON report and the gate.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_resilibench.base.interrupts import sigint_deferred
from pytest_resilibench.base.jsontext import json_text
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.integration.cases import Case, build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.integration.runner import EPISODES_PER_REQUEST_SLOT, EpisodeRunner
from pytest_resilibench.integration.store import SLIM_FIELDS, EpisodeStore
from pytest_resilibench.runtime.protocol import AnyAgent

if TYPE_CHECKING:
    from pytest_resilibench.base.pidlock import PidLock
    from pytest_resilibench.core.tasks import TaskSet
    from pytest_resilibench.integration.chaos_gather import ChaosGatherer
    from pytest_resilibench.integration.gate import GateResult
    from pytest_resilibench.integration.otel import EpisodeTracer
    from pytest_resilibench.integration.resume import EpisodeLog
    from pytest_resilibench.reporting.comparison import Comparison
    from pytest_resilibench.reporting.sequential import SequentialGate
    from pytest_resilibench.reporting.summarize import Summary
    from pytest_resilibench.servers.live.server import LiveServer
    from pytest_resilibench.servers.mcp_environment import SharedMcpServer

__all__ = ["ResiliSession"]

# json.dumps(record): an episode's report text (base/jsontext.py: an encoder built once).
_report_json = json_text()


def _check_sample(config: RunConfig, tasks: TaskSet) -> None:
    """`--resili-sample` above the set's biggest type x difficulty cell asks for tasks the set
    does not have: refused, naming what it has. The default (10) takes what a smaller set has
    (a held-out set of 2 a cell runs with no option)."""
    if config.sample is None or config.sample <= (RunConfig().sample or 0):
        return
    cells = Counter((task.type, task.difficulty) for task in tasks)
    biggest = max(cells.values(), default=0)
    if config.sample > biggest:
        raise ValueError(f"--resili-sample: {config.sample} tasks a cell, but the task set "
                         f"{config.task_set_name} has at most {biggest} (use all)")


def _task_id(case: Case) -> str:
    return case.task.id


def _lock_report(report: Path) -> PidLock | None:
    """The lock beside the report (`REPORT.lock`), held while this run writes it
    (`pidlock.py`); another run's is a ValueError that names it."""
    from pytest_resilibench.base.pidlock import LockHeld, PidLock

    path = report.with_name(report.name + ".lock")
    try:
        report.parent.mkdir(parents=True, exist_ok=True)
        return PidLock.take(path)
    except LockHeld as held:
        who = f"pid {held.pid}" if held.pid else "its pid unknown"
        raise ValueError(f"--resili-report: another run ({who}) is writing {report} (it holds "
                         f"{path}): wait for it to end, or give this run another "
                         "--resili-report") from None
    except OSError as exc:
        raise ValueError(f"--resili-report: cannot write beside {report} "
                         f"({exc.strerror or exc})") from None


class ResiliSession:
    """The run's state, private to this class; the hooks ask for what they need through its
    methods and read-only properties.

    What it holds, by when it is set:
    - start-up: `_config` (the parsed options), `_rootdir`, `_agent_hook`, `_workers` (the xdist
      workers sharing the `--resili-max-cost` budget); on the controller `_baseline` (the
      baseline report's episodes), `_sequential` (the sequential gate, with
      `--resili-gate=sequential`) and, when resuming (resume.py), `_resumed` (episode id -> JSON
      text of an earlier, unfinished run's episodes, replayed instead of run), `_resume_sources`
      (the files they came from, for the workers), `_resume_notes` and `_log` (this run's
      episode log beside the report);
    - collection (controller): `_planned`, case id -> node id of every benchmark item in run
      order: what the report must hold and the sequential gate's order;
    - the test loop: `_runner` (this process's episode runner), `_mcp` and `_live` (the
      servers its episodes started), `_attached` (episodes this process put on its reports),
      `_provider_stats` (what each real model's provider did: requests, retries, faults,
      tokens, cost; this process's runners and, on the controller, every worker's);
    - gathering (controller): `_store` (the arrived episodes), `_arrived` (their case ids),
      `_received_by_worker`, `_replayed` (how many were replays), `_left_out` (planned cases a
      decided sequential gate never ran), `_lost` (one line per way the report is incomplete);
    - the end (controller): `_summary`, `_gate_results` and `_chaos` (the run's resili_faults
      tests' report section, integration/chaos_gather.py), judged against `_baseline_chaos`
      (the baseline's runs of them, read with `_baseline`; `_baseline_note` when the baseline
      holds nothing else).
    """

    def __init__(self, config: RunConfig, *, rootdir: Path,
                 agent_hook: Callable[[str], object] | None = None, workers: int = 1) -> None:
        """`agent_hook(spec)`: the agent a `pytest_resilibench_make_agent` implementation
        builds for a spec, or None to build it here (hookspec.py); `workers`: the xdist
        workers sharing the run (each keeps to its share of `--resili-max-cost`)."""
        self._config = config
        self._rootdir = rootdir
        self._agent_hook = agent_hook
        self._workers = workers
        self._runner: EpisodeRunner | None = None
        # The whole records are read back only to write the JSON report.
        self._store = EpisodeStore(records=config.report is not None)
        self._received_by_worker: Counter[str] = Counter()
        self._lost: list[str] = []
        # Agents whose aclose() raised or hung, model-call caches that failed the run.
        self._close_problems: list[str] = []
        self._gate_results: list[GateResult] = []
        self._comparison: Comparison | None = None  # against the baseline (fixed gate)
        # The end, on the controller: items that were infra errors (pytest errors the
        # tolerance may forgive), the line naming the rule that set the exit status, and
        # notes for the terminal (a job summary that could not be written).
        self.infra_items = 0
        self.exit_line: str | None = None
        self.end_notes: list[str] = []
        self._summary: Summary | None = None
        # When the run began (the report's `environment.started`: a comparison names its runs).
        self._started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self._attached = 0
        self._baseline: list[dict[str, Any]] | None = None
        # The baseline's resili_faults runs, a note when it holds nothing else, and this
        # run's resili_faults section (`finish`).
        self._baseline_chaos: list[dict[str, Any]] | None = None
        self._baseline_note: GateResult | None = None
        self._chaos: dict[str, Any] | None = None
        self._sequential: SequentialGate | None = None
        self._arrived: list[str] = []
        self._planned: dict[str, str] = {}
        self._left_out: set[str] = set()
        self._live: LiveServer | None = None  # when this process started the live services
        self._mcp: SharedMcpServer | None = None  # once an mcp episode ran
        self._provider_stats: dict[str, dict[str, Any]] = {}
        self._resumed: dict[str, str] = {}
        self._resume_sources: list[str] = []
        self._resume_notes: list[str] = []
        self._log: EpisodeLog | None = None
        self._lock: PidLock | None = None  # beside the report, while this run writes it
        self._written = False  # the report, at the end
        self._unwritten_line: str | None = None  # or why not, and where its episodes are
        self._replayed = 0
        # Each model's agent `name` (built at start-up: `check_models`), and the bad specs
        # `--resili-skip-bad-agents` left out, with why.
        self.agent_names: dict[str, str] = {}
        self.skipped_agents: dict[str, str] = {}
        self._tracer: EpisodeTracer | None = None  # --resili-otel, at the first episode
        if config.otel:  # the turn keeper keeps the spans' times (runtime/episode.py)
            from pytest_resilibench.runtime.episode import trace_turns

            trace_turns(True)

    @property
    def config(self) -> RunConfig:
        """The run's parsed options."""
        return self._config

    # --- what runs ----------------------------------------------------------------------------
    @cached_property
    def registry(self) -> ToolRegistry:
        if self._config.env == "live":
            from pytest_resilibench.servers.live.registry import live_registry

            return live_registry()
        return default_registry()

    @cached_property
    def task_set(self) -> TaskSet:
        if self._config.env == "live":
            from pytest_resilibench.core.tasks import TaskSet
            from pytest_resilibench.servers.live.tasks import live_tasks

            return TaskSet(live_tasks(), {"live_tasks": [t.id for t in live_tasks()]})
        from pytest_resilibench.core.tasks import load_tasks, task_set_dir

        config = self._config
        tasks = load_tasks(config.tasks if config.tasks is not None
                           else task_set_dir(config.task_set))
        _check_sample(config, tasks)
        if config.tasks is not None:  # a set of your own stores its realistic plans too
            from pytest_resilibench.core.realistic_plans import use_stored

            use_stored(config.tasks)
        return tasks

    def task_set_identity(self) -> dict[str, Any]:
        """Which task set ran (name, sha256 of its tasks file, size): the report's
        `config.task_set_identity`, and the terminal's line."""
        from pytest_resilibench.core.tasks import task_set_identity

        name = "live" if self._config.env == "live" else self._config.task_set_name
        return task_set_identity(name, self.task_set.manifest)

    def task_set_line(self) -> str:
        found = self.task_set_identity()
        sha = (found["tasks_sha256"] or "unknown")[:12]
        return f"task set: {found['name']} ({found['tasks']} tasks, tasks.jsonl.gz sha256 {sha})"

    @cached_property
    def all_cases(self) -> list[Case]:
        """The whole run's cases, every shard's (`cases` is this job's)."""
        tasks = list(self.task_set)
        config = self._config
        if config.env == "live":  # eight sequential tasks: one type, every task, no cells
            config = replace(config, task_types=tuple({t.type for t in tasks}),
                             difficulties=tuple({t.difficulty for t in tasks}), sample=None)
        return build_cases(config, tasks)

    @cached_property
    def cases(self) -> list[Case]:
        """The cases this run plans: all of them, or its shard's (`--resili-shard`)."""
        shard = self._config.shard
        if shard is None:
            return self.all_cases
        from pytest_resilibench.integration.runner import expected_turns
        from pytest_resilibench.integration.shards import split_tasks

        owner = split_tasks(self.all_cases, shard.count, _task_id, expected_turns)
        return [case for case in self.all_cases if owner[case.task.id] == shard.index]

    @cached_property
    def cases_by_id(self) -> dict[str, Case]:
        return {case.id: case for case in self.cases}

    def prepare_realistic_plans(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Under the realistic profile, solve the plans of the run's task structures that are
        neither stored nor cached (core/realistic_plans.py), before any episode needs one:
        on the controller, once, so that workers and forked helpers only read. The count
        solved."""
        if self._config.faults != "realistic" or self._config.env == "live":
            return 0
        from pytest_resilibench.core.realistic_plans import solve_missing

        tasks = dict.fromkeys(case.task for case in self.cases)
        return solve_missing(tasks, self.registry, progress)

    # --- running episodes in this process -------------------------------------------------------
    def _ensure_runner(self) -> EpisodeRunner:
        if self._runner is None:
            self._runner = EpisodeRunner(
                self._config, self.registry, agent_factory=self._make_agent,
                environment_factory={"live": self._live_environment,
                                     "mcp": self._mcp_environment}.get(self._config.env),
                inline=self._is_cpu_bound, report_text=self._report_text,
                # Tools at the user's own URLs see no more episodes than the option says.
                episodes_per_slot=1 if self._config.live_base_urls else EPISODES_PER_REQUEST_SLOT,
            )
        return self._runner

    def prestart(self, cases: Sequence[Case]) -> None:
        """Without xdist, when the cases are known and before pytest collects its items: let
        the runner's helpers start on them (`EpisodeRunner.prestart`)."""
        if cases := self._to_run(cases):
            self._ensure_runner().prestart(cases)

    def start(self, cases: Sequence[Case]) -> None:
        """Start the episodes of the cases this process will run, in their order (a resumed
        case replays its recorded episode instead)."""
        if cases := self._to_run(cases):
            self._import_environment()
            self._ensure_runner().start(cases)

    def _import_environment(self) -> None:
        """The modules of the run's environment, imported on pytest's thread: the episode
        thread makes its environments, and must import nothing (preload.py)."""
        if self._config.env == "mcp":
            import pytest_resilibench.servers.mcp_environment
        elif self._config.env == "live":
            import pytest_resilibench.servers.live.environment
            import pytest_resilibench.servers.live.server  # noqa: F401

    def _to_run(self, cases: Sequence[Case]) -> list[Case]:
        return [case for case in cases if case.id not in self._resumed]

    def result(self, case: Case) -> EpisodeRecord:
        replay = self._resumed.get(case.id)
        if replay is not None:
            return EpisodeRecord.from_json(json.loads(replay))
        return self._ensure_runner().result(case)

    def stop(self) -> None:
        if self._mcp is not None:  # first: it lives on the runner's loop, which must run
            self._mcp.close()
            self._mcp = None
        if self._runner is not None:
            self._add_provider_stats(self._runner.agent_stats())
            self._runner.close()
            self._close_problems += self._runner.close_problems
            self._runner = None
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._tracer is not None:  # the spans still queued go out now
            problem = self._tracer.close()
            if problem is not None:
                self._close_problems.append(problem)
            self._tracer = None

    def close(self) -> None:
        """At the very end: stop everything and drop the spool."""
        self.stop()
        self._store.close()
        if self._log is not None:
            self._log.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # --- resuming (resume.py) --------------------------------------------------------------------
    def prepare_resume(self) -> None:
        """Controller, at start-up: find the episodes an unfinished run left (the report's
        episode log, or `--resili-resume=RUN.json`), check that they were made with the options
        that decide an episode, and open this run's log (which proves the report's directory
        writable before any episode runs). First of all it takes the lock beside the report:
        a second run given the same report stops here, before it reads the first's log."""
        config = self._config
        if config.report is None and not isinstance(config.resume, Path):
            return  # no log to keep, none to read
        if config.report is not None:
            self._lock = _lock_report(config.report)
        try:
            self._open_resume()
        except BaseException:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            raise

    def _open_resume(self) -> None:
        from pytest_resilibench.integration import resume

        config = self._config
        key = resume.resume_key(self._report_config(), trajectories=config.trajectories)
        log = resume.log_path(config.report) if config.report is not None else None
        sources: list[resume.ResumeSource] = []
        if isinstance(config.resume, Path):
            given = [p for p in (config.resume, resume.log_path(config.resume)) if p.is_file()]
            if not given:
                raise ValueError(f"--resili-resume: no such report or episode log: "
                                 f"{config.resume}")
            sources += [resume.read_source(path) for path in given]
        if config.resume != "off" and log is not None and log.is_file() and \
                all(source.path != log for source in sources):
            sources.append(resume.read_log(log))
        for source in sources:
            if source.key != key:
                raise ValueError(
                    f"--resili-resume: {source.path} holds episodes of a run with other "
                    f"options ({'; '.join(resume.differences(source.key, key))}): resume with "
                    "the same options, or pass --resili-resume=off to start afresh")
            self._resumed.update(source.episodes)
            self._resume_sources.append(str(source.path))
            skipped = f", {source.skipped} unreadable lines skipped" if source.skipped else ""
            self._resume_notes.append(f"resilibench: resuming from {source.path}: "
                                     f"{len(source.episodes)} episodes recorded{skipped}")
        if log is not None:
            keep = any(source.path == log for source in sources)
            try:
                self._log = resume.EpisodeLog(log, key, keep=keep)
            except OSError as exc:
                raise ValueError(f"--resili-report: cannot write beside {config.report} "
                                 f"({exc.strerror or exc})") from None

    def drop_empty_log(self) -> None:
        """No episode arrived: a log that holds none is no run to resume."""
        if self._log is not None and not self._resumed:
            self._log.close(remove=True)

    def load_resumed(self, paths: Sequence[str]) -> None:
        """An xdist worker: the replays the controller found (it checked them)."""
        from pytest_resilibench.integration.resume import read_source

        for name in paths:
            try:
                source = read_source(Path(name), check=False)
            except (OSError, ValueError):
                continue  # its cases run again: the same result
            self._resumed.update(source.episodes)

    def check_live_services(self) -> None:
        """Under `--resili-env=live`, ask each serve-live the run names (its
        `--resili-live-server`, the origin its key goes to) for its index with that key, so a
        missing or refused key, or a server that is not there, stops the run at start-up
        instead of failing every call (`live.environment.check_serve_live`)."""
        config = self._config
        if config.env != "live":
            return
        from pytest_resilibench.servers.live.environment import check_serve_live
        from pytest_resilibench.servers.live.key_scope import origin

        named = {origin(url) for url in (config.live_server, config.live_key_origin) if url}
        for where in sorted(named):
            key = config.live_api_key if where == config.live_key_origin else None
            check_serve_live(where, api_key=key)

    def check_models(self, *, probe: bool = True) -> None:
        """Build each model's agent once, so a bad spec (an unknown built-in, a missing API
        key, an option its family refuses) stops the run at start-up with its message instead
        of failing every item; with `probe`, send each real model one minimal request, so a
        refused key, model or option does too (`agents/probe.py`)."""
        import asyncio

        from pytest_resilibench.runtime.agents.probe import probe_agent

        if self._config.cache is not None:  # opened and schema-checked even if no model uses it
            from pytest_resilibench.runtime.agents.cache import ModelCallCache

            try:
                ModelCallCache(self._config.cache).close()
            except (ValueError, OSError) as exc:
                raise ValueError(f"--resili-cache: {exc}") from None
        bad: dict[str, str] = {}
        for spec in self._config.models:
            try:
                agent = self._make_agent(spec)
                asyncio.run(probe_agent(agent, spec, probe=probe))
            except (ValueError, TypeError, OSError) as exc:
                said = str(exc)
                bad[spec] = said if said.startswith("--resili-model ") else \
                    f"--resili-model {spec}: {said}"
                continue
            failure = getattr(getattr(agent, "cache", None), "failure", None)
            if isinstance(failure, str):  # the probe's reply could not be stored: before any
                # episode, a cache to fix, not to live without (agents/cache.py)
                raise ValueError(f"--resili-cache: {failure}")
            self.agent_names[spec] = agent.name
        if not bad:
            return
        good = [spec for spec in self._config.models if spec not in bad]
        if not (self._config.skip_bad_agents and good):
            more = ("" if len(self._config.models) == 1 or not good else
                    "\n(--resili-skip-bad-agents runs the others: "
                    f"{', '.join(good)})")
            raise ValueError("\n".join(bad.values()) + more)
        from pytest_resilibench.base.redact import redact

        self.skip_models(bad)
        # Shown in the terminal and kept in the report: masked as all the plugin writes.
        self.skipped_agents = {spec: redact(why) for spec, why in bad.items()}

    def skip_models(self, specs: Iterable[str]) -> None:
        """Leave these models out of the run (bad agents that `--resili-skip-bad-agents`
        skips; a worker hears of them from the controller)."""
        skipped = set(specs)
        if skipped:
            self._config = replace(self._config, models=tuple(
                spec for spec in self._config.models if spec not in skipped))

    @property
    def display_summary(self) -> Summary | None:
        """The summary as the terminal shows it: each model by its agent's name where it has
        one of its own (`model_labels`); the report keeps the specs, which pair episodes."""
        if self._summary is None:
            return None
        from pytest_resilibench.reporting.summarize import relabel_models

        return relabel_models(self._summary, self.model_labels())

    def model_labels(self) -> dict[str, str]:
        """The tables' name of each model whose agent has a `name` of its own (unique, and no
        other model's spec); the others are shown by their spec."""
        names = Counter(self.agent_names.values())
        specs = set(self._config.models)
        return {spec: name for spec, name in self.agent_names.items()
                if name != spec and names[name] == 1 and name not in specs}

    def prepare_gate(self) -> None:
        """Read the baseline at start-up (a bad file stops the run before any episode) and,
        with `--resili-gate=sequential`, set up the sequential gate. Controller only."""
        config = self._config
        if config.gate == "sequential" and config.baseline is None:
            raise ValueError("--resili-gate=sequential needs --resili-baseline=OLD.json "
                             "(it decides by pairing episodes with the baseline's)")
        if config.baseline is None:
            return
        from pytest_resilibench.integration.gate import GateResult
        from pytest_resilibench.reporting.chaos_summary import section_runs
        from pytest_resilibench.reporting.pairing import partners
        from pytest_resilibench.reporting.report import load_report

        try:
            data = load_report(config.baseline)
            self._baseline_chaos = section_runs(data, config.baseline)
            episodes = data["episodes"]
            if not episodes and self._baseline_chaos and config.gate != "sequential":
                # A report of resili_faults tests alone: they are judged, the episodes not.
                self._baseline_note = GateResult(
                    False, "not judged", f"baseline: {config.baseline} holds no benchmark "
                    "episode (its resili_faults tests alone): the episodes are not judged")
                return
            self._baseline = episodes
            # Runs whose models cannot pair stop here, not after every episode ran.
            partners({str(ep.get("model")) for ep in self._baseline}, config.models)
        except (OSError, ValueError) as exc:
            raise ValueError(f"--resili-baseline: {exc}") from None
        if config.gate == "sequential":
            from pytest_resilibench.reporting.sequential import SequentialGate

            self._sequential = SequentialGate(
                self._baseline, models=config.models, max_drop_pp=config.max_drop,
                alpha=1 - config.confidence)

    @property
    def planned(self) -> bool:
        return bool(self._planned)

    def plan(self, nodeids: dict[str, str]) -> None:
        """The run's benchmark items, case id -> node id in run order (once, on the controller,
        when the collection is known): what the report must hold, and the gate's order."""
        self._planned = {cid: nodeid for cid, nodeid in nodeids.items()
                         if cid in self.cases_by_id}
        if self._sequential is not None:
            self._sequential.plan((cid, self.pair_fields(self.cases_by_id[cid]))
                                  for cid in self._planned)

    def _not_arrived(self) -> dict[str, str]:
        """Planned items whose episode has not arrived (case id -> node id)."""
        arrived = set(self._arrived)
        return {cid: nodeid for cid, nodeid in self._planned.items() if cid not in arrived}

    def leave_out(self) -> dict[str, str]:
        """Once a sequential gate decided: the planned items that have not run (case id ->
        node id), now left out (deselected, not lost)."""
        left = self._not_arrived()
        self._left_out = set(left)
        return left

    def pair_fields(self, case: Case) -> dict[str, Any]:
        """The fields its episode record will carry that pair it with a baseline's episode."""
        variant = case.variant
        return {"model": case.model, "task_id": case.task.id, "variant": variant.label,
                "flaw": variant.flaw, "severity": variant.severity, "repeat": case.repeat,
                "seed": self._config.seed, "base_success": case.base_success}

    def _is_cpu_bound(self, case: Case) -> bool:
        """A scripted agent on the simulator does no I/O: nothing to overlap."""
        return self._config.env == "sim" and case.model.startswith("builtin:")

    def _make_agent(self, spec: str) -> AnyAgent:
        """The agent of a spec, the run's request options there for a framework adapter a
        factory or the hook builds (`runtime/agents/run_options.py`)."""
        from pytest_resilibench.runtime.agents.run_options import run_request_options

        with run_request_options(self._request_options()):
            return self._build_agent(spec)

    def _build_agent(self, spec: str) -> AnyAgent:
        """The agent of a spec: the one the `pytest_resilibench_make_agent` hook builds when an
        implementation answers, else the spec family's, with the run's options for it."""
        if self._agent_hook is not None:
            from pytest_resilibench.runtime.agents.python import call_factory, checked_agent

            hook, what = self._agent_hook, "the pytest_resilibench_make_agent hook"
            made = call_factory(lambda: hook(spec), what)
            if made is not None:
                return checked_agent(made, what)
        from pytest_resilibench.runtime.agents import make_agent, spec_family

        family = spec_family(spec)
        options = {"builtin": self._builtin_options, "py": self._no_options,
                   "openai": self._provider_options}[family]
        try:
            return make_agent(spec, **options(spec))
        except ValueError as exc:
            prefix, colon, _ = spec.partition(":")
            if family == "openai" and colon and prefix != "openai":
                # `team:typo`: most likely a spec a conftest hook was meant to build.
                raise ValueError(
                    f"no hook built agent {spec!r} (no pytest_resilibench_make_agent "
                    f"implementation returned one) and, as a model name, {exc}") from None
            raise

    def _builtin_options(self, spec: str) -> dict[str, Any]:
        return {"registry": self.registry, "seed": self._config.seed}

    def _no_options(self, spec: str) -> dict[str, Any]:
        return {}  # a `py:` factory configures its agent itself

    def _provider_options(self, spec: str) -> dict[str, Any]:
        cache = None
        if self._config.cache is not None:
            from pytest_resilibench.runtime.agents.cache import ModelCallCache

            try:  # checked at start-up (`check_models`): what fails now is mid-run (a worker)
                cache = ModelCallCache(self._config.cache)
            except (ValueError, OSError) as exc:  # never load-bearing (agents/cache.py)
                from pytest_resilibench.base.redact import redact

                self._close_problems.append(redact(
                    f"resilibench: --resili-cache: {exc}: the run went on without it"))
        from pytest_resilibench.runtime.agents.pricing import load_prices, price_of

        config = self._config
        max_cost = config.max_cost
        if max_cost is not None and self._workers > 1:  # each process keeps to its share
            max_cost /= self._workers
        return {**self._request_options(),
                "base_url": config.base_url, "seed": config.seed, "cache": cache,
                "temperature": config.temperature,
                "model_args": config.model_args, "api": config.api,
                "api_version": config.api_version,
                "price": price_of(spec, load_prices(config.prices)), "max_cost_usd": max_cost}

    def _request_options(self) -> dict[str, Any]:
        """How model requests are retried and limited: the direct path's, and a framework
        adapter's (adapters/common.py)."""
        config = self._config
        return {"max_concurrency": config.concurrency, "max_retries": config.retries,
                "timeout_s": config.request_timeout, "rpm": config.rpm, "tpm": config.tpm,
                "max_wait_s": config.max_wait, "shared_limit": True,
                "max_consecutive_errors": config.max_consecutive_errors}

    async def _mcp_environment(self, case: Case) -> Any:
        """The episode's simulator behind our MCP server over stdio: the same luck as in
        process, through a real MCP transport. One server for this process, started by the
        first episode and stopped in `stop`; each episode its own simulator there."""
        if self._mcp is None:
            from pytest_resilibench.servers.mcp_environment import SharedMcpServer

            self._mcp = SharedMcpServer()
        return await self._mcp.environment(case.task, episode_id=case.id, seed=self._config.seed,
                                           repeat=case.repeat, base_success=case.base_success,
                                           faults=self._config.faults)

    def _live_environment(self, case: Case) -> Any:
        from pytest_resilibench.servers.live.environment import LiveEnvironment

        urls = dict(self._config.live_base_urls)
        if self._live is None and len(urls) < len(self.registry):
            from pytest_resilibench.servers.live.server import start_live_server

            self._live = start_live_server(seed=self._config.seed)
        if self._live is not None:
            urls = {**self._live.base_urls, **urls}
        return LiveEnvironment.for_episode(case.task, urls, seed=self._config.seed,
                                           repeat=case.repeat, registry=self.registry,
                                           api_key=self._config.live_api_key,
                                           key_origin=self._config.live_key_origin)

    def _add_provider_stats(self, stats: Mapping[str, dict[str, Any]]) -> None:
        from pytest_resilibench.runtime.agents.probe import merge_stats

        for model, counts in stats.items():
            self._provider_stats[model] = merge_stats(self._provider_stats.get(model), counts)

    # --- what a process hands on ----------------------------------------------------------------
    def episode_json(self, record: EpisodeRecord) -> str:
        """The JSON text of an episode an item's report carries: the record's summary, its
        trajectory too with `--resili-trajectories`, or where no JSON report is written only
        what the gathering keeps of it (`store.SLIM_FIELDS`: ~40% less to encode, send and
        parse). The one kept when the episode ended, or made now (a replayed episode);
        counted, so the controller can tell whether all arrived."""
        self._attached += 1
        if self._config.otel and record.id not in self._resumed:  # exported when it ran
            self._export_trace(record)
        return record.report_text() or self._report_text(record)

    def check_otel(self) -> None:
        """At start-up, with --resili-otel: the collector's URL is one (a ValueError)."""
        if self._config.otel:
            from pytest_resilibench.integration.otlp_http import checked_endpoint

            checked_endpoint()

    def _export_trace(self, record: EpisodeRecord) -> None:
        """The episode as a trace (integration/otel.py), from the process that ran its item."""
        if self._tracer is None:
            from pytest_resilibench.integration.otel import EpisodeTracer

            self._tracer = EpisodeTracer(content=self._config.otel_content,
                                         agent_names=self.agent_names)
        self._tracer.export(record)

    def _report_text(self, record: EpisodeRecord) -> str:
        config = self._config
        if config.trajectories:
            payload = record.to_json()
        elif config.report is None:  # the gathering keeps only the slim row (store.py)
            payload = record.fields_json(SLIM_FIELDS)
        else:
            payload = record.summary_json()
        return _report_json(payload)

    def worker_output(self) -> dict[str, Any]:
        """An xdist worker's account for the controller (`worker_finished`)."""
        return {"resili_episodes": self._attached, "resili_providers": self._provider_stats,
                "resili_close_problems": self._close_problems}

    def worker_finished(self, worker: str, output: Mapping[str, Any]) -> None:
        """The controller, when a worker is down: add its providers' counts, and note in
        `lost` when fewer of its episodes arrived than it sent."""
        self._add_provider_stats(output.get("resili_providers") or {})
        self._close_problems += [str(line) for line in output.get("resili_close_problems") or ()]
        sent = output.get("resili_episodes")
        got = self._received_by_worker.get(worker, 0)
        if sent is not None and sent != got:
            self._lost.append(f"resilibench: worker {worker} sent {sent} episodes, {got} arrived")

    @property
    def resume_sources(self) -> list[str]:
        """The files the resumed episodes came from (the workers read them too)."""
        return list(self._resume_sources)

    # --- gathering results (controller) ---------------------------------------------------------
    @property
    def episodes(self) -> list[dict[str, Any]]:
        """The gathered episodes' scalar fields (`store.SLIM_FIELDS`)."""
        return self._store.rows

    @property
    def sequential(self) -> SequentialGate | None:
        """The sequential gate (`--resili-gate=sequential`), set up by `prepare_gate`."""
        return self._sequential

    @property
    def baseline(self) -> list[dict[str, Any]] | None:
        """The baseline report's episodes (`--resili-baseline`), read by `prepare_gate`."""
        return self._baseline

    @property
    def baseline_chaos(self) -> list[dict[str, Any]] | None:
        """The baseline report's resili_faults runs (its `chaos` section; [] without one),
        read by `prepare_gate`; None without --resili-baseline."""
        return self._baseline_chaos

    @property
    def chaos_summary(self) -> dict[str, Any] | None:
        """The run's resili_faults tests' summary (`finish`), for the headline."""
        return None if self._chaos is None else self._chaos["summary"]

    def add_episode(self, payload: str, worker: str | None, case_id: str | None = None) -> bool:
        """Keep an arrived episode; True when it made the sequential gate decide."""
        self._received_by_worker[worker or "main"] += 1
        if case_id is not None:
            self._arrived.append(case_id)
        if self._sequential is None and not self._resumed:  # no one reads its row now
            self._store.add_later(payload)
            if self._log is not None:
                self._log.append(payload)
            return False
        row = self._store.add(payload)
        if row["id"] in self._resumed:
            self._replayed += 1
        elif self._log is not None:
            self._log.append(payload)
        if self._sequential is None or case_id is None:
            return False
        return bool(self._sequential.add(case_id, row))

    def import_summary(self) -> None:
        """Import what `finish` needs now rather than at the end (an xdist controller, while
        its workers start)."""
        import pytest_resilibench.integration.gate
        import pytest_resilibench.reporting.comparison
        import pytest_resilibench.reporting.summarize  # noqa: F401

    def finish(self, chaos: ChaosGatherer | None = None) -> None:
        """Summarise, check the gate; called once on the controller at session end. `chaos`:
        the run's resili_faults tests, finished: their section goes in the report, their
        verdicts among the gate's."""
        # Imported here: analysis needs scipy, which every pytest run would pay for otherwise.
        from pytest_resilibench.integration.gate import (
            compare_with_baseline,
            fail_under,
            infra_errors,
            judge_sequential,
        )
        from pytest_resilibench.reporting.summarize import summary

        self._store.sort()
        self._summary = summary(self.episodes)
        if self._provider_stats:  # real models: what their providers did
            from pytest_resilibench.runtime.agents.probe import throughput

            self._summary["providers"] = {model: throughput(stats) for model, stats
                                          in sorted(self._provider_stats.items())}
        missing = [cid for cid in self._not_arrived() if cid not in self._left_out]
        if missing:
            self._lost.append(
                f"resilibench: {len(missing)} of {len(self._planned)} planned episodes never "
                f"arrived (a crashed worker, an interrupted run?), e.g. {', '.join(missing[:3])}:"
                " the report is incomplete")
        policy = self._config.gate_policy
        labels = self.model_labels()  # verdicts name each model as the tables do
        if policy.fail_under is not None:
            self._gate_results += fail_under(self.episodes, policy.fail_under, labels)
        if self._sequential is not None:
            self._gate_results += judge_sequential(self._sequential, policy, labels)
        elif self._baseline is not None:
            self._comparison, results = compare_with_baseline(self._baseline, self.episodes,
                                                              policy, labels)
            self._gate_results += results
        elif self._baseline_note is not None:
            self._gate_results.append(self._baseline_note)
        if chaos is not None and chaos.rows:
            self._chaos = chaos.section()
            self._gate_results += chaos.gate_results
        infra = infra_errors(self.episodes, policy)
        if infra is not None:
            self._gate_results.append(infra)

    def _report_config(self) -> dict[str, Any]:
        from pytest_resilibench import __version__
        from pytest_resilibench.reporting.report import fixture_hash

        labels = self.model_labels()
        return {**self._config.to_json(), "package_version": __version__,
                "fixture_hash": fixture_hash(self.task_set.manifest),
                "task_set_identity": self.task_set_identity(),
                **({"agent_names": labels} if labels else {}),
                # --resili-skip-bad-agents: the specs left out, and why
                **({"skipped_agents": self.skipped_agents} if self.skipped_agents else {})}

    def write_report(self) -> None:
        """The JSON report, atomically, with Ctrl-C held off until it is written (a second one
        interrupts at once). A fault costs no episode and ends in one line in `lost`: a report
        that could not be written names where its episodes are (the episode log when it took
        them all, else a copy in the system temp dir), a log that failed while the report
        could be written says so."""
        from pytest_resilibench.reporting.report import envelope

        assert self._config.report is not None and self._summary is not None
        head = envelope(
            config=self._report_config(), summary=self._summary, rootdir=self._rootdir,
            extra={"gate": [r.line for r in self._gate_results], "lost": list(self._lost),
                   "started": self._started},
        )
        head["complete"] = not self._lost
        head["expected"] = len(self._planned) - len(self._left_out)
        head["received"] = len(self.episodes)
        head["resumed"] = self._replayed
        head["prompt_cache"] = self._prompt_prefix()
        if self._sequential is not None:  # pairs used against planned, and the evidence
            head["sequential"] = self._sequential.to_json(episodes_run=len(self.episodes))
        if self._chaos is not None:  # the resili_faults tests (reporting/chaos_summary.py)
            head["chaos"] = self._chaos
        with sigint_deferred():
            self._write_report(head)

    def _write_report(self, head: dict[str, Any]) -> None:
        from pytest_resilibench.reporting.report import write_report

        report = self._config.report
        assert report is not None
        log = self._log
        try:
            write_report(report, head, self._store.full_lines())
        except (OSError, ValueError) as exc:  # ValueError: a file where its folder was
            self._unwritten_line = self._unwritten(report, head, exc)
            self._lost.append(self._unwritten_line)
            return
        self._written = True
        if log is None:
            return
        failed = log.error  # the report holds every episode: say what the log missed
        # Removed once a complete report holds all the log did.
        received = {row["id"] for row in self.episodes}
        log.close(remove=head["complete"] and received.issuperset(self._resumed))
        if failed is None:
            return
        said = f"resilibench: the episode log {log.path} failed after {log.episodes} " \
               f"episodes ({failed}); the report {report} holds"
        if head["complete"]:
            self._lost.append(f"{said} all {len(self.episodes)}: free space there before the "
                              "next run (an interrupted one could not resume)")
        else:  # the log lacks some the report holds: resume from the report
            self._lost.append(f"{said} the {len(self.episodes)} that arrived: free space "
                              f"there, then run again with --resili-resume={report}")

    def _unwritten(self, report: Path, head: dict[str, Any], exc: Exception) -> str:
        """The line for a report that could not be written, after keeping its episodes."""
        why = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        said = f"resilibench: could not write {report} ({why}); its {len(self.episodes)} " \
               "episodes are kept in"
        log = self._log
        if log is not None:
            log.close()  # synced: now it holds them, or says why not
            if log.error is None:
                return f"{said} {log.path}: free space there, then run the same command " \
                       "again (it replays them and writes the report)"
        try:
            copy = self._write_copy(report, head)
        except (OSError, ValueError) as also:
            why_copy = (also.strerror or str(also)) if isinstance(also, OSError) else str(also)
            where = f" nor in {tempfile.gettempdir()} ({why_copy})"
            kept = f"; the log {log.path} holds those that arrived before it failed " \
                   f"({log.error})" if log is not None else ": they are lost"
            return f"resilibench: could not write {report} ({why}){where}{kept}: free space, " \
                   "then run the same command again"
        return f"{said} {copy}: free space, then copy it to {report}, or run again with " \
               f"--resili-resume={copy}"

    def _write_copy(self, report: Path, head: dict[str, Any]) -> Path:
        """The report, written in the system temp dir instead (`TMPDIR`)."""
        from pytest_resilibench.reporting.report import write_report

        fd, name = tempfile.mkstemp(prefix=f"resilibench-{report.stem}-", suffix=".json")
        os.close(fd)
        copy = Path(name)
        try:
            write_report(copy, head, self._store.full_lines())
        except BaseException:
            copy.unlink(missing_ok=True)
            raise
        return copy

    def _prompt_prefix(self) -> dict[str, Any]:
        """What providers' prompt caches can reuse across the run's requests
        (`prompt_cache.shared_prefix`), measured on the first three tasks of every variant."""
        from pytest_resilibench.core.prompts import render_prompt
        from pytest_resilibench.integration.prompt_cache import shared_prefix

        picked: dict[str, list[Case]] = {}
        for case in self.all_cases:  # the whole run's: a shard's report says the same
            chosen = picked.setdefault(case.variant.label, [])
            if len(chosen) < 3 and all(c.task.id != case.task.id for c in chosen):
                chosen.append(case)
        prompts = (render_prompt(case.task, case.variant, tool_mode=self._config.tool_mode,
                                 registry=self.registry, faults=self._config.faults,
                                 max_turns=self._config.max_turns)
                   for chosen in picked.values() for case in chosen)
        return shared_prefix((prompt.messages, prompt.tools) for prompt in prompts)

    # --- what the run ends with (controller) ------------------------------------------------------
    @property
    def summary(self) -> Summary | None:
        """The summary of the gathered episodes, once `finish` made it."""
        return self._summary

    @property
    def gate_results(self) -> list[GateResult]:
        """The gates' verdicts (`finish`), in the order they were checked."""
        return list(self._gate_results)

    @property
    def comparison(self) -> Comparison | None:
        """The run against its baseline, per model (`finish`; the fixed gate's)."""
        return self._comparison

    @property
    def display_comparison(self) -> Comparison | None:
        """The comparison as the terminal shows it, models named as in `display_summary`."""
        if self._comparison is None:
            return None
        from pytest_resilibench.reporting.summarize import relabel_models

        return relabel_models(self._comparison, self.model_labels())

    @property
    def gate_failed(self) -> bool:
        return any(result.failed for result in self._gate_results)

    @property
    def lost(self) -> list[str]:
        """One line per way the report is incomplete (episodes that never arrived) or the run
        nearly lost episodes (a report that could not be written, an episode log that failed):
        any of them fails the run."""
        return list(self._lost)

    def interrupted_line(self) -> str:
        """The one line of a run interrupted while it ended: what became of its report."""
        said = "resilibench: interrupted while the run was ending"
        report = self._config.report
        if report is None or self._summary is None:  # no report asked for, or no episode
            return said
        if self._unwritten_line is not None:  # it says where the episodes are
            return f"{said}; {self._unwritten_line.removeprefix('resilibench: ')}"
        if not self._written:  # interrupted twice while it was written
            log = self._log
            kept = f"; its episodes are kept in {log.path}: run the same command again" \
                if log is not None and log.error is None else ""
            return f"{said}; the report {report} was not written{kept}"
        received = len(self.episodes)
        if received == len(self._planned) - len(self._left_out):
            return f"{said}; the report {report} holds all {received} episodes"
        return f"{said}; the report {report} holds {received} of the " \
               f"{len(self._planned) - len(self._left_out)} planned episodes"

    def stopped_at_once_line(self) -> str:
        """The one line of a run Ctrl-C pressed again stopped at once: where its episodes are.
        Reads what is set, computes nothing (it is said from a signal handler)."""
        said = "resilibench: interrupted again: stopped at once"
        report = self._config.report
        if report is None:
            return said
        if self._written:
            return f"{said}; the report {report} was written"
        log = self._log
        if log is not None and log.error is None:
            return f"{said}; the report {report} was not written: the episodes that ended are " \
                   f"kept in {log.path} (run the same command again to resume)"
        return f"{said}; the report {report} was not written"

    def close_lines(self) -> list[str]:
        """Agents that did not close cleanly (each line once, however many workers said it)."""
        return list(dict.fromkeys(self._close_problems))

    def resume_lines(self) -> list[str]:
        """What resuming did, for the terminal: where the replays came from, how many."""
        if not self._resume_notes:
            return []
        run = len(self.episodes) - self._replayed
        return [*self._resume_notes, f"resilibench: {self._replayed} episodes replayed from the "
                f"resumed run, {run} run now"]
