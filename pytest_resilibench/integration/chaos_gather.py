"""The controller's side of the `resili_faults` tests: their rows gathered off the reports
(the same path with and without xdist), then the summary, the comparison with the baseline
and its verdicts (integration/gate.py), and the report's `chaos` section
(reporting/chaos_summary.py does the figures).

The tests share the benchmark's report, headline and gate options (`--resili-report`,
`--resili-baseline`, `--resili-max-drop`, `--resili-confidence`, `--resili-inconclusive`),
which do not by themselves ask for the benchmark (options.py `benchmark_requested`). In a run
with benchmark episodes the session's end takes the section and the verdicts in
(plugin.py `_end_run`); in a run without any, `write_report` writes the same report with no
episode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_resilibench.integration.options import CHAOS_PROPERTY as PROPERTY

if TYPE_CHECKING:
    from pytest_resilibench.integration.gate import GateResult
    from pytest_resilibench.integration.options import RunConfig

__all__ = ["ChaosGatherer", "baseline_runs", "write_report"]


def baseline_runs(path: Path) -> list[dict[str, Any]]:
    """The resili_faults runs of a baseline report ([] when it has none); ValueError or
    OSError says what is wrong with the file."""
    from pytest_resilibench.reporting.chaos_summary import section_runs
    from pytest_resilibench.reporting.report import load_report

    return section_runs(load_report(path), path)


class ChaosGatherer:
    """The rows of this run's resili_faults items, and once `finish`ed their summary,
    comparison and verdicts."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.summary: dict[str, Any] | None = None
        self.comparison: dict[str, Any] | None = None
        self.gate_results: list[GateResult] = []
        self.problems: list[str] = []
        self._finished = False

    def add(self, report: Any) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY and isinstance(value, str):
                try:
                    self.rows.append(json.loads(value))
                except ValueError:
                    self.problems.append(f"resili_faults: an unreadable result on {report.nodeid}")

    def finish(self, config: RunConfig, baseline: list[dict[str, Any]] | None) -> None:
        """Summarise, and judge each test against `baseline` (the baseline report's runs,
        None without --resili-baseline) by the run's gate policy. Once."""
        if self._finished:
            return
        self._finished = True
        from pytest_resilibench.integration.gate import judge_chaos
        from pytest_resilibench.reporting.chaos_summary import compare, summarize

        self.summary = summarize(self.rows)
        if baseline is None:
            return
        policy = config.gate_policy
        self.comparison = compare(self.rows, baseline, max_drop_pp=policy.max_drop_pp,
                                  alpha=1 - policy.confidence)
        self.gate_results = judge_chaos(self.comparison, policy,
                                        tests=list(self.summary["tests"]))

    def section(self) -> dict[str, Any] | None:
        """The report's `chaos` section (None before `finish`)."""
        from pytest_resilibench.reporting.chaos_summary import section

        if self.summary is None:
            return None
        return section(self.rows, summary=self.summary, comparison=self.comparison)

    def lines(self) -> list[tuple[str, dict[str, bool]]]:
        """The terminal's lines: each test's figures, recovery and flipped seeds, then any
        problem (the verdicts are the gate's lines, printed with the benchmark's)."""
        from pytest_resilibench.reporting.chaos_summary import render

        out: list[tuple[str, dict[str, bool]]] = []
        if self.summary is not None:
            out += [(line, {}) for line in render(self.summary, self.comparison)]
        out += [(line, {"yellow": True}) for line in self.problems]
        return out


def write_report(config: RunConfig, gatherer: ChaosGatherer, *, rootdir: Path) -> None:
    """The JSON report of a run without benchmark episodes: the benchmark's envelope
    (`resilibench.report/1`: no model, no episode) with the `chaos` section and the gate
    lines, so that one reader, one baseline option and `resilibench report merge` serve both
    kinds of run."""
    from pytest_resilibench import __version__
    from pytest_resilibench.reporting.report import envelope
    from pytest_resilibench.reporting.report import write_report as write
    from pytest_resilibench.reporting.summarize import summary

    assert config.report is not None
    head = envelope(
        config={**config.to_json(), "models": [], "package_version": __version__,
                "fixture_hash": None},
        summary=summary([], confidence=config.confidence), rootdir=rootdir,
        extra={"gate": [r.line for r in gatherer.gate_results], "lost": []})
    head.update({"complete": True, "expected": 0, "received": 0, "resumed": 0,
                 "chaos": gatherer.section()})
    write(config.report, head, [])
