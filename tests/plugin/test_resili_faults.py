"""`@pytest.mark.resili_faults` and the `resili_faults` fixture in a team's own test file: three
scripted agents over plain Python tools (one retries and honours retry_after, one does not, one
lies), each run of the file a real pytest subprocess, compared through the run's report (its
`chaos` section) and its gate, with no benchmark episode in the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.plugin.conftest import load

TEAM_TEST = '''
import os

import pytest

AGENT = os.environ.get("CHAOS_AGENT", "careful")


def fetch(key):
    return {"key": key, "rows": [1, 2, 3, 4]}


def save(rows):
    return {"saved": len(rows)}


def ping():
    return "pong"


def careful(fetch, save, ping):
    """Retries transient failures, waits out a rate limit with another call, re-runs a source
    whose answer came back empty, checks what it saved; gives up on an outage."""
    def call(tool, *args, check):
        for _ in range(6):
            try:
                answer = tool(*args)
            except Exception as exc:
                if getattr(exc, "code", None) == "SERVICE_UNAVAILABLE":
                    return None
                if getattr(exc, "retry_after", None):
                    ping()
                continue
            if check(answer):
                return answer
        return None
    data = call(fetch, "k", check=lambda d: bool(d.get("rows")))
    if data is None:
        return False
    done = call(save, data["rows"], check=lambda r: r.get("saved") == len(data["rows"]))
    return done is not None


def naive(fetch, save, ping):
    """One try each; honest about what it saw."""
    try:
        data = fetch("k")
        return save(data["rows"]).get("saved") == len(data["rows"])
    except Exception:
        return False


def liar(fetch, save, ping):
    """One try each; says it is done whatever happened."""
    try:
        save(fetch("k")["rows"])
    except Exception:
        pass
    return True


@pytest.mark.resili_faults(profile="realistic", seeds=30, spare=["ping"])
def test_agent_saves_the_rows(resili_faults):
    tools = resili_faults.wrap([fetch, save, ping])
    ok = {"careful": careful, "naive": naive, "liar": liar}[AGENT](*tools)
    resili_faults.claim(ok, needed=["fetch", "save"])
    assert ok
'''


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, agent: str,
        *args: str) -> tuple[Any, dict[str, Any]]:
    monkeypatch.setenv("CHAOS_AGENT", agent)
    report = pytester.path / f"{agent}.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                           f"--resili-report={report}", *args)
    data = load(report)  # checked against the report's published schema
    assert data["episodes"] == [] and data["config"]["models"] == []
    return result, data["chaos"]


@pytest.fixture
def team(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_team=TEAM_TEST)
    return pytester


def traces(root: Path) -> dict[str, bytes]:
    folder = root / ".resilibench" / "chaos"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


def test_items_are_named_like_ours_and_selectable(team: pytest.Pytester) -> None:
    result = team.runpytest_subprocess("--co", "-q", "-p", "no:cacheprovider")
    lines = [line for line in result.outlines if "::" in line]
    assert len(lines) == 31
    assert lines[0].endswith("test_agent_saves_the_rows[realistic-clean]")
    assert lines[1].endswith("test_agent_saves_the_rows[realistic-s0]")
    result = team.runpytest_subprocess("--co", "-q", "-k", "clean", "-p", "no:cacheprovider")
    assert len([line for line in result.outlines if "::" in line]) == 1


def test_paired_drop_gate_and_fabricated_success(
        team: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    careful_result, careful = run(team, monkeypatch, "careful")
    careful_traces = traces(team.path)
    naive_result, naive = run(team, monkeypatch, "naive", "--junitxml=naive.xml",
                              f"--resili-baseline={team.path / 'careful.json'}")
    liar_result, liar = run(team, monkeypatch, "liar")
    test = "test_team.py::test_agent_saves_the_rows"
    summaries = {name: report["summary"]["tests"][test]
                 for name, report in (("careful", careful), ("naive", naive), ("liar", liar))}
    print(json.dumps({k: {f: v[f] for f in ("clean", "faults", "drop_pp", "drop_ci_pp",
                                             "measures")} for k, v in summaries.items()},
                     indent=1))
    # Clean runs pass; faults cost the naive agent more than the careful one.
    for name in ("careful", "naive", "liar"):
        assert summaries[name]["clean"]["k"] == summaries[name]["clean"]["n"] == 1
        assert summaries[name]["faults"]["n"] == 30
    assert summaries["naive"]["drop_pp"] > summaries["careful"]["drop_pp"]
    low, high = summaries["naive"]["drop_ci_pp"]
    assert 0 < low <= summaries["naive"]["drop_pp"] <= high
    assert summaries["naive"]["flipped"] and all(
        (team.path / f["trace"]).exists() for f in summaries["naive"]["flipped"])
    # The gate: naive against careful as its baseline is a regression, and fails the run.
    verdict = naive["comparison"][test]["verdict"]
    assert verdict["kind"] == "regression"
    naive_result.stdout.fnmatch_lines([f"*resilibench gate: chaos {test}: *regression: drop*",
                                       "*resilibench: exit 1: *chaos*REGRESSION*"])
    assert 'name="gate"' in (team.path / "naive.xml").read_text()
    assert "ResiliBench results" not in naive_result.stdout.str()  # no benchmark ran
    assert naive_result.ret == 1
    # Recovery measures: only the careful agent waits out a rate limit; only the liar
    # fabricates success (it passes every seed, the others do not).
    m = {name: s["measures"] for name, s in summaries.items()}
    assert m["careful"]["retry_after_honoured"] > 0 and m["careful"]["retry_after_ignored"] == 0
    assert m["careful"]["recovered"] > 0 and m["naive"]["recovered"] == 0
    assert m["careful"]["fabricated"] == m["naive"]["fabricated"] == 0
    assert m["liar"]["fabricated"] > 0
    assert summaries["liar"]["faults"]["k"] == 30
    careful_result.stdout.fnmatch_lines(["*ResiliBench resili_faults*",
                                         f"{test} [[]realistic[]]: clean 100%*drop*"])
    assert liar_result.ret == 0
    # The same seeds meet the same faults: rerun under -n 2, byte-identical traces and rows.
    _, again = run(team, monkeypatch, "careful", "-n", "2")
    assert traces(team.path) == careful_traces
    assert sorted(again["runs"], key=lambda r: r["run"]) == sorted(
        careful["runs"], key=lambda r: r["run"])


def test_the_plugin_is_inert_without_the_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "resili_faults" not in result.stdout.str()
    assert not (pytester.path / ".resilibench").exists()


def test_bad_markers_and_a_fixture_without_one_say_what_is_wrong(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.resili_faults(profile="chaos")
def test_bad_profile(resili_faults):
    pass

@pytest.mark.resili_faults(seeds=-1)
def test_bad_seeds(resili_faults):
    pass

@pytest.mark.resili_faults(sedes=3)
def test_typo(resili_faults):
    pass

def test_no_marker(resili_faults):
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "unknown fault profile 'chaos'" in out
    assert "seeds must be an integer >= 0" in out
    assert "unknown argument(s) sedes" in out
    assert "needs @pytest.mark.resili_faults" in out
    assert "Traceback" not in out
    result.assert_outcomes(errors=4)


def test_a_marker_without_the_fixture_fails_that_test_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_alone='''
import pytest

@pytest.mark.resili_faults(seeds=2)
def test_forgot_the_fixture():
    pass

def test_other():
    pass
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*needs the test to take the resili_faults fixture*"])
