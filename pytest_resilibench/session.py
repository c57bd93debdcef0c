"""The run's state: one `ResiliSession` per pytest process, kept in `config.stash`.

It owns what the hooks in `plugin.py` need: the parsed options, the cases, this process's
episode runner, and on the controller (or a run without xdist) the episodes gathered from the
reports, the summary, the JSON report and the gate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pytest_resilibench.agents.base import Agent
from pytest_resilibench.cases import Case, build_cases
from pytest_resilibench.options import RunConfig
from pytest_resilibench.record import EpisodeRecord
from pytest_resilibench.registry import ToolRegistry, default_registry
from pytest_resilibench.runner import EpisodeRunner
from pytest_resilibench.store import EpisodeStore

__all__ = ["ResiliSession"]


class ResiliSession:
    def __init__(self, config: RunConfig, *, rootdir: Path) -> None:
        self.config = config
        self.rootdir = rootdir
        self.runner: EpisodeRunner | None = None
        self.store = EpisodeStore()
        self.received_by_worker: Counter[str] = Counter()
        self.lost: list[str] = []
        self.gate_results: list[Any] = []  # gate.GateResult
        self.summary: dict[str, Any] | None = None
        self.attached = 0  # episodes this process put on its reports
        self._live: Any = None  # the loopback live services, when this process started them

    # --- what runs ----------------------------------------------------------------------------
    @cached_property
    def registry(self) -> ToolRegistry:
        if self.config.env == "live":
            from pytest_resilibench.live.registry import live_registry

            return live_registry()
        return default_registry()

    @cached_property
    def task_set(self) -> Any:
        if self.config.env == "live":
            from pytest_resilibench.live.tasks import live_tasks
            from pytest_resilibench.tasks import TaskSet

            return TaskSet(live_tasks(), {"live_tasks": [t.id for t in live_tasks()]})
        from pytest_resilibench.tasks import load_tasks

        return load_tasks()

    @cached_property
    def cases(self) -> list[Case]:
        tasks = list(self.task_set)
        config = self.config
        if config.env == "live":  # eight sequential tasks: one type, every task, no cells
            config = replace(config, task_types=tuple({t.type for t in tasks}),
                             difficulties=tuple({t.difficulty for t in tasks}), sample=None)
        return build_cases(config, tasks)

    @cached_property
    def cases_by_id(self) -> dict[str, Case]:
        return {case.id: case for case in self.cases}

    # --- running episodes in this process -------------------------------------------------------
    def _ensure_runner(self) -> EpisodeRunner:
        if self.runner is None:
            self.runner = EpisodeRunner(
                self.config, self.registry, agent_factory=self._make_agent,
                environment_factory={"live": self._live_environment,
                                     "mcp": self._mcp_environment}.get(self.config.env),
                inline=self._is_cpu_bound,
            )
        return self.runner

    def start(self, cases: Sequence[Case]) -> None:
        """Start the episodes of the cases this process will run, in their order."""
        if cases:
            self._ensure_runner().start(cases)

    def result(self, case: Case) -> EpisodeRecord:
        return self._ensure_runner().result(case)

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.runner = None
        if self._live is not None:
            self._live.stop()
            self._live = None

    def close(self) -> None:
        """At the very end: stop everything and drop the spool."""
        self.stop()
        self.store.close()

    def check_models(self) -> None:
        """Build each model's agent once, so a bad spec (an unknown built-in, a missing API
        key) stops the run at start-up with its message instead of failing every item."""
        import asyncio

        for spec in self.config.models:
            try:
                agent = self._make_agent(spec)
            except (ValueError, TypeError, OSError) as exc:
                raise ValueError(f"--resili-model {spec}: {exc}") from None
            asyncio.run(agent.aclose())

    def _is_cpu_bound(self, case: Case) -> bool:
        """A scripted agent on the simulator does no I/O: nothing to overlap."""
        return self.config.env == "sim" and case.model.startswith("builtin:")

    def _make_agent(self, spec: str) -> Agent:
        from pytest_resilibench.agents import make_agent

        if spec.startswith("builtin:"):
            return make_agent(spec, registry=self.registry, seed=self.config.seed)
        cache = None
        if self.config.cache is not None:
            from pytest_resilibench.agents.cache import ModelCallCache

            cache = ModelCallCache(self.config.cache)
        return make_agent(spec, base_url=self.config.base_url, seed=self.config.seed,
                          cache=cache, max_concurrency=self.config.concurrency,
                          max_retries=self.config.retries,
                          timeout_s=self.config.request_timeout,
                          temperature=self.config.temperature)

    async def _mcp_environment(self, case: Case) -> Any:
        """The episode's simulator behind our MCP server, over stdio in its own process: the
        same luck as in process, through a real MCP transport."""
        import sys

        from pytest_resilibench.mcp_environment import McpEnvironment

        return await McpEnvironment.open([
            sys.executable, "-m", "pytest_resilibench.mcp_server", "--task", case.task.id,
            "--seed", str(self.config.seed), "--repeat", str(case.repeat),
            "--base-success", str(case.base_success)])

    def _live_environment(self, case: Case) -> Any:
        from pytest_resilibench.live.environment import LiveEnvironment

        urls = dict(self.config.live_base_urls)
        if self._live is None and len(urls) < len(self.registry):
            from pytest_resilibench.live.server import start_live_server

            self._live = start_live_server(seed=self.config.seed)
        if self._live is not None:
            urls = {**self._live.base_urls, **urls}
        return LiveEnvironment.for_episode(case.task, urls, seed=self.config.seed,
                                           repeat=case.repeat, registry=self.registry)

    # --- gathering results (controller) ---------------------------------------------------------
    @property
    def episodes(self) -> list[dict[str, Any]]:
        """The gathered episodes' scalar fields (`store.SLIM_FIELDS`)."""
        return self.store.rows

    def add_episode(self, payload: str, worker: str | None) -> None:
        self.store.add(payload)
        self.received_by_worker[worker or "main"] += 1

    def finish(self) -> None:
        """Summarise, check the gate; called once on the controller at session end."""
        # Imported here: analysis needs scipy, which every pytest run would pay for otherwise.
        from pytest_resilibench.analysis import summary
        from pytest_resilibench.gate import GateResult, compare_with_baseline, fail_under

        self.store.sort()
        self.summary = summary(self.episodes)
        if self.config.fail_under is not None:
            self.gate_results += fail_under(self.episodes, self.config.fail_under)
        if self.config.baseline is not None:
            from pytest_resilibench.analysis import load_report

            try:
                old = load_report(self.config.baseline)["episodes"]
            except (OSError, ValueError) as exc:
                self.gate_results.append(GateResult(True, "error", f"baseline: {exc}"))
            else:
                self.gate_results.append(compare_with_baseline(
                    old, self.episodes, max_drop_pp=self.config.max_drop))

    def report_config(self) -> dict[str, Any]:
        from pytest_resilibench import __version__
        from pytest_resilibench.report import fixture_hash

        return {**self.config.to_json(), "package_version": __version__,
                "fixture_hash": fixture_hash(self.task_set.manifest)}

    def write_report(self) -> None:
        from pytest_resilibench.report import envelope, write_report

        assert self.config.report is not None and self.summary is not None
        head = envelope(
            config=self.report_config(), summary=self.summary, rootdir=self.rootdir,
            extra={"gate": [r.line for r in self.gate_results], "lost": self.lost},
        )
        write_report(self.config.report, head, self.store.full_lines())

    @property
    def gate_failed(self) -> bool:
        return any(result.failed for result in self.gate_results)
