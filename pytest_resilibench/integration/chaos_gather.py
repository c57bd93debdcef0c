"""The controller's side of the `resili_faults` tests: their rows gathered off the reports
(the same path with and without xdist), then the summary, the comparison with a baseline, the
gate, the JSON report (reporting/chaos_summary.py does the figures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_resilibench.integration.options import CHAOS_PROPERTY as PROPERTY

__all__ = ["ChaosGatherer"]


class ChaosGatherer:
    def __init__(self, *, report: str | None, baseline: str | None,
                 max_drop_pp: float) -> None:
        self.report = report
        self.baseline_path = baseline
        self.max_drop_pp = max_drop_pp
        self.rows: list[dict[str, Any]] = []
        self.summary: dict[str, Any] | None = None
        self.comparison: dict[str, Any] | None = None
        self.gate_lines: list[tuple[bool, str]] = []  # (failed, line)
        self.problems: list[str] = []

    def add(self, report: Any) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY and isinstance(value, str):
                try:
                    self.rows.append(json.loads(value))
                except ValueError:
                    self.problems.append(f"resili_faults: an unreadable result on {report.nodeid}")

    @property
    def failed(self) -> bool:
        return any(failed for failed, _ in self.gate_lines)

    def finish(self) -> None:
        from pytest_resilibench.reporting.chaos_summary import (
            compare,
            read_report,
            report_json,
            summarize,
        )

        if not self.rows and self.baseline_path is None and self.report is None:
            return
        self.summary = summarize(self.rows)
        if self.baseline_path is not None:
            try:
                baseline = read_report(Path(self.baseline_path))
            except (OSError, ValueError) as exc:
                self.gate_lines.append((True, f"chaos baseline unusable: {exc}"))
            else:
                self.comparison = compare(self.rows, baseline, max_drop_pp=self.max_drop_pp)
                if not self.comparison:
                    self.problems.append("resili_faults: no test of this run has paired seeds "
                                         f"in {self.baseline_path}")
                for result in self.comparison.values():
                    self.gate_lines.append((result["verdict"]["kind"] == "regression",
                                            result["line"]))
        if self.report is not None:
            from pytest_resilibench.base.atomic import atomic_write
            from pytest_resilibench.base.outputs import prepare

            data = report_json(self.rows, summary=self.summary, comparison=self.comparison)
            atomic_write(prepare(self.report), (json.dumps(data, indent=1, sort_keys=True)
                                                + "\n").encode())

    def lines(self) -> list[tuple[str, dict[str, bool]]]:
        from pytest_resilibench.reporting.chaos_summary import render

        out: list[tuple[str, dict[str, bool]]] = []
        if self.summary is not None:
            out += [(line, {}) for line in render(self.summary, self.comparison)]
        out += [(line, {"yellow": True}) for line in self.problems]
        out += [(f"resilibench chaos gate: {line}", {"red" if failed else "green": True,
                                                     "bold": True})
                for failed, line in self.gate_lines]
        if self.report is not None and self.summary is not None:
            out.append((f"chaos JSON report: {self.report}", {}))
        return out
