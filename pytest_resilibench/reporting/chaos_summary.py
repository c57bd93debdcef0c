"""What a run's `resili_faults` tests add up to (docs/CHAOS.md): per test (the "agent": the
test's id without its chaos run), its pass rate clean and under faults, the paired drop with
its interval (each fault seed paired with the test's clean run), the flipped seeds (clean
passed, the seed failed) with their traces, and the recovery measures summed over the runs.

Against a baseline (`--resili-baseline`, an earlier run's report holding the same tests, e.g.
the previous version of the agent) each test is compared seed for seed: the same seed meets
the same faults in both (core/tool_faults.py), so the pairs are common random numbers, and
`stats.paired_verdict` (the benchmark's gate test: McNemar, Newcombe's interval) decides
regression, pass or inconclusive against the allowed drop (integration/gate.py judges it).

A run's result, as the plugin gathers it, is one `row` per item:
`{"test", "run", "profile", "seed" (None: clean), "outcome" (passed, failed, error,
skipped), "trace", "calls", "faults", "measures"}`. Errors (a fixture of the test's own
failed) and skips are kept apart from the pass rates. The JSON report keeps the rows, the
summary and the comparison as its `chaos` section (`SECTION_SCHEMA`, reporting/schemas.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_resilibench.core.recovery import add_measures
from pytest_resilibench.reporting.stats import paired_binary, paired_verdict, wilson

__all__ = ["OUTCOMES", "RUN_SCHEMA", "SECTION_SCHEMA", "compare", "headline_lines",
           "merge_sections", "render", "section", "section_runs", "summarize"]

SECTION_SCHEMA = "resilibench.chaos_section/1"
RUN_SCHEMA = "resilibench.chaos/1"  # one item's run (integration/chaos.py `row_of`)
OUTCOMES = ("passed", "failed", "error", "skipped")
_SCORED = ("passed", "failed")


def _by_test(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (str(r["test"]), -1 if r["seed"] is None
                                           else int(r["seed"]))):
        out.setdefault(str(row["test"]), []).append(row)
    return out


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    tests = {}
    for test, runs in _by_test(rows).items():
        clean = [r for r in runs if r["seed"] is None and r["outcome"] in _SCORED]
        faulted = [r for r in runs if r["seed"] is not None and r["outcome"] in _SCORED]
        clean_ok = [r["outcome"] == "passed" for r in clean]
        fault_ok = [r["outcome"] == "passed" for r in faulted]
        entry: dict[str, Any] = {
            "profile": runs[0]["profile"],
            "clean": _rate(sum(clean_ok), len(clean_ok)),
            "faults": _rate(sum(fault_ok), len(fault_ok)),
            "errors": sum(1 for r in runs if r["outcome"] == "error"),
            "skipped": sum(1 for r in runs if r["outcome"] == "skipped"),
        }
        if clean_ok and fault_ok:
            # Each seed paired with the clean run: what the faults alone took away.
            paired = paired_binary([clean_ok[0]] * len(fault_ok), fault_ok)
            entry["drop_pp"] = None if paired.diff is None else 100 * paired.diff
            entry["drop_ci_pp"] = [100 * paired.ci[0], 100 * paired.ci[1]]
            entry["flipped"] = [{"seed": r["seed"], "trace": r.get("trace")}
                                for r in faulted if clean_ok[0] and r["outcome"] == "failed"]
        measures: dict[str, int] = {}
        for r in runs:
            add_measures(measures, r.get("measures") or {})
        entry["measures"] = measures
        entry["calls"] = sum(int(r.get("calls") or 0) for r in runs)
        entry["faults_injected"] = sum(int(r.get("faults") or 0) for r in runs)
        tests[test] = entry
    return {"tests": tests}


def _rate(k: int, n: int) -> dict[str, Any]:
    low, high = wilson(k, n)
    return {"k": k, "n": n, "rate": k / n if n else None, "ci": [low, high]}


def compare(rows: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]], *,
            max_drop_pp: float = 5.0, alpha: float = 0.05) -> dict[str, Any]:
    """Each test against its baseline runs, seed for seed under the same profile (faulted
    seeds only: the clean run is one pair, and the question is recovery). `alpha`: one minus
    the gate's confidence (`--resili-confidence`)."""
    old = {(str(r["test"]), r.get("profile"), r["seed"]): r for r in baseline
           if r["seed"] is not None and r["outcome"] in _SCORED}
    out = {}
    for test, runs in _by_test(rows).items():
        # A seed's faults are the same only under the same profile (core/tool_faults.py).
        pairs = [(old[key], r) for r in runs
                 if r["seed"] is not None and r["outcome"] in _SCORED
                 and (key := (test, r.get("profile"), r["seed"])) in old]
        if not pairs:
            continue
        verdict = paired_verdict([a["outcome"] == "passed" for a, _ in pairs],
                                 [b["outcome"] == "passed" for _, b in pairs],
                                 max_drop_pp=max_drop_pp, alpha=alpha)
        out[test] = {
            "verdict": verdict.to_json(), "line": f"{test}: {verdict.describe()}",
            "flipped": [{"seed": b["seed"], "baseline_trace": a.get("trace"),
                         "trace": b.get("trace")} for a, b in pairs
                        if a["outcome"] == "passed" and b["outcome"] == "failed"]}
    return out


def section(rows: Sequence[Mapping[str, Any]], *, summary: Mapping[str, Any],
            comparison: Mapping[str, Any] | None) -> dict[str, Any]:
    """The report's `chaos` section."""
    return {"schema": SECTION_SCHEMA, "runs": sorted((dict(r) for r in rows), key=_run_key),
            "summary": dict(summary), "comparison": None if comparison is None
            else dict(comparison)}


def _run_key(row: Mapping[str, Any]) -> tuple[str, int]:
    return str(row["test"]), -1 if row["seed"] is None else int(row["seed"])


def section_runs(report: Mapping[str, Any], where: object) -> list[dict[str, Any]]:
    """The runs of a report's `chaos` section ([] when it has none); ValueError says what is
    wrong with it, naming `where` (the file)."""
    chaos = report.get("chaos")
    if chaos is None:
        return []
    if not isinstance(chaos, dict) or chaos.get("schema") != SECTION_SCHEMA:
        raise ValueError(f"{where}: its 'chaos' section is not of schema {SECTION_SCHEMA}")
    runs = chaos.get("runs")
    if not isinstance(runs, list) or not all(
            isinstance(r, dict) and isinstance(r.get("test"), str) and "seed" in r
            and (r["seed"] is None or (isinstance(r["seed"], int)
                                       and not isinstance(r["seed"], bool)))
            and r.get("outcome") in OUTCOMES for r in runs):
        raise ValueError(f"{where}: the runs of its 'chaos' section are malformed")
    return runs


def merge_sections(reports: Sequence[tuple[object, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """The shards' `chaos` sections as one run's (None when none has one): every shard runs
    the same resili_faults tests, so a (test, run) found in several must have the same result
    (kept once); a different one is a ValueError naming both files. The comparison is not
    kept: the merged report's gate is judged again (cli.py)."""
    found: dict[tuple[str, object], tuple[object, dict[str, Any]]] = {}
    any_section = False
    for where, report in reports:
        any_section = any_section or report.get("chaos") is not None
        for row in section_runs(report, where):
            key = (str(row["test"]), row["seed"])
            if key in found:
                other, kept = found[key]
                if kept.get("outcome") != row.get("outcome"):
                    raise ValueError(
                        f"{where} and {other} disagree on {row['test']} run {row.get('run')} "
                        f"({row.get('outcome')} against {kept.get('outcome')}): not one run's "
                        "resili_faults tests")
                continue
            found[key] = (where, row)
    if not any_section:
        return None
    rows = [row for _, row in found.values()]
    return section(rows, summary=summarize(rows), comparison=None)


def render(summary: Mapping[str, Any], comparison: Mapping[str, Any] | None) -> list[str]:
    """The terminal lines: a headline per test, its flipped seeds, its recovery measures."""
    lines = []
    for test, entry in summary["tests"].items():
        clean, faults = entry["clean"], entry["faults"]
        head = (f"{test} [{entry['profile']}]: clean {_pct(clean)}, under faults "
                f"{_pct(faults)}")
        if entry.get("drop_pp") is not None:
            low, high = entry["drop_ci_pp"]
            head += f"; drop {entry['drop_pp']:+.1f} pp [{low:+.1f}, {high:+.1f}]"
        if entry["errors"]:
            head += f"; {entry['errors']} error(s) kept apart"
        lines.append(head)
        m = entry["measures"]
        lines.append(
            f"  recovery: {m.get('failures', 0)} failed calls, {m.get('retried', 0)} retried, "
            f"{m.get('recovered', 0)} recovered, {m.get('storms', 0)} retry storms, "
            f"{m.get('gave_up', 0)} given up with retries left, retry_after honoured "
            f"{m.get('retry_after_honoured', 0)} / ignored {m.get('retry_after_ignored', 0)}, "
            f"fabricated success {m.get('fabricated', 0)}")
        for flip in entry.get("flipped", [])[:5]:
            lines.append(f"  flipped seed {flip['seed']}: {flip['trace']}")
        if len(entry.get("flipped", [])) > 5:
            lines.append(f"  ... {len(entry['flipped']) - 5} more flipped seeds in the report")
    for test, result in (comparison or {}).items():
        for flip in result["flipped"][:3]:
            lines.append(f"  {test} seed {flip['seed']} passed in the baseline, fails now: "
                         f"{flip['trace']} (baseline {flip['baseline_trace']})")
    return lines


def headline_lines(summary: Mapping[str, Any]) -> list[str]:
    """The headline's words for the resili_faults tests: one line per test (its pass rates,
    the drop the faults cost with its interval, how many seeds flipped)."""
    out = []
    for test, entry in summary.get("tests", {}).items():
        line = (f"{test} [{entry['profile']}]: clean {_pct(entry['clean'])}, under faults "
                f"{_pct(entry['faults'])}")
        if entry.get("drop_pp") is not None:
            low, high = entry["drop_ci_pp"]
            flipped = len(entry.get("flipped", []))
            line += (f"; drop {entry['drop_pp']:+.1f} pp [{low:+.1f}, {high:+.1f}], "
                     f"{flipped} flipped seed{'s' if flipped != 1 else ''}")
        fabricated = entry["measures"].get("fabricated", 0)
        if fabricated:
            line += f"; fabricated success {fabricated}"
        out.append(line)
    return out


def _pct(rate: Mapping[str, Any]) -> str:
    if not rate["n"]:
        return "n/a"
    low, high = rate["ci"]
    return f"{100 * rate['rate']:.0f}% ({rate['k']}/{rate['n']}, [{100 * low:.0f}, " \
           f"{100 * high:.0f}])"
