"""The `resili_faults` tests' options and marker text, read as the plugin registers: nothing
heavy is imported here (integration/chaos.py holds the logic)."""

from __future__ import annotations

from typing import Any

__all__ = ["MARKER", "MARKER_HELP", "PROPERTY", "add_chaos_options"]

MARKER = "resili_faults"
PROPERTY = "resili_faults"  # the user property a chaos item's teardown report carries
MARKER_HELP = (
    "resili_faults(profile='realistic', seeds=20, rate=0.2, rates={}, remote=None, "
    "auth_tool=None, spare=()): run the test once clean and once per fault seed, its tools "
    "wrapped by the resili_faults fixture (docs/CHAOS.md)")


def _drop(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 100.0:
        raise ValueError(f"{text!r} is not a drop in percentage points in [0, 100]")
    return value


def add_chaos_options(parser: Any) -> None:
    group = parser.getgroup("resilibench", "ResiliBench agent benchmark")
    group.addoption("--resili-chaos-report", dest="resili_chaos_report", default=None,
                    metavar="PATH", help="write the resili_faults tests' JSON report "
                    "(resilibench.chaos_report/1) here")
    group.addoption("--resili-chaos-baseline", dest="resili_chaos_baseline", default=None,
                    metavar="PATH", help="compare the resili_faults tests with this earlier "
                    "chaos report, seed for seed (paired): a significant drop fails the run")
    group.addoption("--resili-chaos-max-drop", dest="resili_chaos_max_drop", default=5.0,
                    type=_drop, metavar="PP", help="the drop in pass rate under faults, in "
                    "percentage points, the chaos gate allows against its baseline "
                    "(default 5)")
