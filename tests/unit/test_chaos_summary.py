"""The resili_faults tests' figures in the run's report (reporting/chaos_summary.py): the
`chaos` section against its published schema, read back from a baseline, joined by a merge,
and judged seed for seed by the gate (integration/gate.py `judge_chaos`)."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest

from pytest_resilibench.integration.chaos import SCHEMA as ROW_SCHEMA
from pytest_resilibench.integration.gate import judge_chaos
from pytest_resilibench.integration.gate_policy import GatePolicy
from pytest_resilibench.reporting.chaos_summary import (
    RUN_SCHEMA,
    compare,
    headline_lines,
    merge_sections,
    section,
    section_runs,
    summarize,
)
from pytest_resilibench.reporting.schemas import chaos_section_schema

TEST = "t.py::test_agent"


def rows(outcomes: str, *, test: str = TEST, profile: str = "realistic") -> list[dict[str, Any]]:
    """The clean run passed, then one run per seed: `p` passed, `f` failed, `e` an error."""
    words = {"p": "passed", "f": "failed", "e": "error"}
    out = [{"schema": ROW_SCHEMA, "test": test, "run": f"{profile}-clean", "profile": profile,
            "seed": None, "outcome": "passed", "trace": f"{profile}-clean.jsonl", "calls": 2,
            "faults": 0, "measures": {"failures": 0, "fabricated": 0}}]
    for seed, letter in enumerate(outcomes):
        out.append({**out[0], "run": f"{profile}-s{seed}", "seed": seed,
                    "outcome": words[letter], "trace": f"{profile}-s{seed}.jsonl",
                    "faults": 1, "measures": {"failures": 1, "fabricated": 0}})
    return out


def test_the_section_is_its_schema_and_reads_back() -> None:
    assert RUN_SCHEMA == ROW_SCHEMA  # one vocabulary for the row the fixture writes
    runs = rows("pfpfe")
    data = section(runs, summary=summarize(runs), comparison=None)
    jsonschema.validate(data, chaos_section_schema())
    assert section_runs({"chaos": data}, "r.json") == data["runs"]
    assert section_runs({}, "r.json") == []
    entry = data["summary"]["tests"][TEST]
    assert (entry["clean"]["k"], entry["faults"]["k"], entry["faults"]["n"]) == (1, 2, 4)
    assert entry["errors"] == 1 and [f["seed"] for f in entry["flipped"]] == [1, 3]
    (line,) = headline_lines(data["summary"])
    assert line.startswith(f"{TEST} [realistic]: clean 100%") and "2 flipped seeds" in line
    broken = {**data, "runs": [{**runs[0], "seed": "s0"}]}
    with pytest.raises(ValueError, match=re.escape("r.json: the runs of its 'chaos' section")):
        section_runs({"chaos": broken}, "r.json")
    with pytest.raises(ValueError, match="not of schema"):
        section_runs({"chaos": {**data, "schema": "resilibench.chaos_report/1"}}, "r.json")


def test_the_gate_judges_each_test_seed_for_seed_by_the_run_s_policy() -> None:
    old, new = rows("p" * 30), rows("f" * 12 + "p" * 18)
    comparison = compare(new, old, max_drop_pp=5.0, alpha=0.05)
    (result,) = judge_chaos(comparison, GatePolicy(max_drop_pp=5.0), tests=[TEST])
    assert result.failed and result.kind == "regression" and result.subject == f"chaos {TEST}"
    assert result.line.startswith(f"chaos {TEST}: regression: drop {100 * 12 / 30:+.1f} pp")
    # Enough equal pairs pass; too few pairs are inconclusive, failing only by policy.
    many = rows("p" * 200)
    same = compare(many, many, max_drop_pp=5.0)
    assert [r.kind for r in judge_chaos(same, GatePolicy(), tests=[TEST])] == ["pass"]
    few = compare(rows("f"), rows("p"), max_drop_pp=5.0)
    (lenient,) = judge_chaos(few, GatePolicy(), tests=[TEST])
    (strict,) = judge_chaos(few, GatePolicy(inconclusive="fail"), tests=[TEST])
    assert (lenient.kind, lenient.failed, strict.failed) == ("inconclusive", False, True)
    # Another profile's seeds meet other faults: no pair; the test is named, not judged.
    other = compare(rows("p" * 30, profile="paper"), old, max_drop_pp=5.0)
    (alone,) = judge_chaos(other, GatePolicy(), tests=[TEST])
    assert other == {} and not alone.failed and TEST in alone.line


def test_merged_shards_keep_each_run_once_and_refuse_a_disagreement() -> None:
    runs = rows("pfp")
    one = {"chaos": section(runs, summary=summarize(runs), comparison=None)}
    merged = merge_sections([("a.json", one), ("b.json", one), ("c.json", {})])
    assert merged is not None and merged["runs"] == one["chaos"]["runs"]
    assert merged["summary"] == one["chaos"]["summary"] and merged["comparison"] is None
    assert merge_sections([("a.json", {}), ("b.json", {})]) is None
    changed = rows("pff")
    other = {"chaos": section(changed, summary=summarize(changed), comparison=None)}
    with pytest.raises(ValueError, match=re.escape(
            "b.json and a.json disagree on t.py::test_agent run realistic-s2")):
        merge_sections([("a.json", one), ("b.json", other)])
