"""The plugin end to end, through pytester: items, statuses, report, gate, xdist."""

from __future__ import annotations

import gc
import json
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pytest_resilibench.integration.cases import Case
from pytest_resilibench.integration.heap import FULL_COLLECTION_AFTER
from tests.plugin.conftest import comparable, load
from tests.processes import stop

SMALL = ["--resili-sample=1", "-p", "no:cacheprovider"]


def test_items_per_model_variant_task_with_readable_ids(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--collect-only", "-q", *SMALL,
                             "--resili-model=builtin:follower,builtin:adaptive")
    ids = [line for line in result.outlines if "::test_resilibench[" in line]
    # 2 models x 10 variants x (5 types x 3 difficulties x 1 task) x 1 repeat
    assert len(ids) == 2 * 10 * 15
    assert len(set(ids)) == len(ids)
    pattern = re.compile(
        r"\[builtin_(follower|adaptive)-(baseline|cot|optimal|flawed-[a-z_]+)-"
        r"(simple_task|basic_task|data_pipeline|api_integration|multi_stage_pipeline)-"
        r"(easy|medium|hard)-t\d{4}-r0\]$")
    assert all(pattern.search(line) for line in ids), ids[:3]


def test_the_suites_items_set_up_one_fixture_whose_param_is_the_case(
        suite: pytest.Pytester) -> None:
    # The package's suite takes `resili_episode` alone: the case is that fixture's own param,
    # so pytest sets up one fixture an item, not a `resili_case` param and an episode on it.
    items, _ = suite.inline_genitems(*SMALL, "--resili-model=builtin:follower",
                                     "--resili-variants=optimal")
    assert len(items) == 15
    for item in items:
        assert isinstance(item, pytest.Function)
        assert "resili_case" not in item.fixturenames
        case = item.callspec.params["resili_episode"]
        assert isinstance(case, Case) and item.name == f"test_resilibench[{case.id}]"


def test_a_suite_function_may_take_the_case_and_its_episode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own_suite="""
        def test_own(resili_case, resili_episode):
            assert resili_episode.id == resili_case.id
            assert resili_episode.task_id == resili_case.task.id
    """)
    result = pytester.runpytest(*SMALL, "--resili-model=builtin:follower",
                                "--resili-variants=optimal,baseline", "-q")
    assert result.ret == 0, result.outlines[-20:]
    # One item per case, its status the episode's outcome; the package's suite not added.
    counts = re.findall(r"(\d+) (?:full|partial|episodes failed)", result.outlines[-1])
    assert sum(map(int, counts)) == 30, result.outlines[-1]
    assert "resilibench::" not in result.stdout.str()


def test_k_selects_a_slice(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--collect-only", "-q", *SMALL, "-k", "semantic_drift and hard")
    ids = [line for line in result.outlines if "::test_resilibench[" in line]
    assert len(ids) == 5  # one hard task per type
    assert all("flawed-semantic_drift" in i and "-hard-" in i for i in ids)


def test_k_matches_the_model_as_typed(suite: pytest.Pytester) -> None:
    """Ids spell `builtin:random` as `builtin_random`; `-k` takes either."""
    models = "--resili-model=builtin:follower,builtin:random"
    for expression in ("builtin:random and hard", "builtin_random and hard"):
        result = suite.runpytest("--collect-only", "-q", *SMALL, models, "-k", expression)
        ids = [line for line in result.outlines if "::test_resilibench[" in line]
        assert len(ids) == 10 * 5, expression  # 10 variants x one hard task per type
        assert all("[builtin_random-" in i for i in ids)


def test_sweeps_show_severity_and_base_rate_in_ids(suite: pytest.Pytester) -> None:
    result = suite.runpytest(
        "--collect-only", "-q", *SMALL, "--resili-variants=flawed",
        "--resili-flaws=missing_step", "--resili-severity=light,severe",
        "--resili-base-success=0.9,0.6", "--resili-repeats=2")
    ids = [line for line in result.outlines if "::test_resilibench[" in line]
    assert len(ids) == 2 * 15 * 2 * 2
    assert any("flawed-missing_step-severe-" in i and "-b0.6-r1]" in i for i in ids)


def test_outcomes_are_statuses_and_the_report_has_every_episode(
    suite: pytest.Pytester,
) -> None:
    report = suite.path / "out" / "run.json"
    result = suite.runpytest(*SMALL, "--resili-model=builtin:follower",
                             "--resili-variants=optimal,flawed", "--resili-flaws=missing_step",
                             f"--resili-report={report}")
    result.assert_outcomes()  # no pytest failures or errors: verdicts are statuses
    final = result.outlines[-1]
    assert re.search(r"\d+ full", final) and not re.search(r"\d+ failed", final), final
    data = load(report)
    assert data["schema"] == "resilibench.report/1"
    assert len(data["episodes"]) == 30
    ep = data["episodes"][0]
    for key in ("id", "model", "variant", "flaw", "severity", "task_id", "task_type",
                "difficulty", "repeat", "base_success", "outcome", "turns", "tool_calls",
                "coverage"):
        assert key in ep
    assert {e["outcome"] for e in data["episodes"]} <= {"full", "partial", "failed"}
    counts = {k: sum(e["outcome"] == k for e in data["episodes"]) for k in ("full", "partial")}
    assert f"{counts['full']} full" in final
    assert data["config"]["fixture_hash"]
    assert "messages" not in ep, "trajectories are opt-in"
    result.stdout.fnmatch_lines(["*ResiliBench results*", "*optimal → flawed drop*"])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_trajectories_and_junit_properties(suite: pytest.Pytester, workers: list[str]) -> None:
    """Every test case of the JUnit XML carries its episode's figures as properties, once
    (they ride on the teardown report, which is where pytest's junitxml reads them)."""
    junit = suite.path / "junit.xml"
    report = suite.path / "run.json"
    run = suite.runpytest_subprocess if workers else suite.runpytest
    run(*SMALL, "--resili-variants=optimal", "-k", "simple_task", "--resili-trajectories",
        f"--resili-report={report}", f"--junitxml={junit}", *workers)
    data = load(report)
    assert data["episodes"] and all(ep["messages"] and "calls" in ep
                                    for ep in data["episodes"])
    episodes = {ep["id"]: ep for ep in data["episodes"]}
    cases = [case for case in ElementTree.parse(junit).getroot().iter("testcase")
             if "[" in case.get("name", "")]
    assert len(cases) == len(episodes)
    for case in cases:
        shown = [(p.get("name"), p.get("value")) for p in case.iter("property")]
        episode = episodes[case.get("name", "").partition("[")[2].rstrip("]")]
        assert shown == [(f"resili_{name}", str(episode[name])) for name in (
            "outcome", "coverage", "order_adherence", "turns", "tool_calls", "errors_met",
            "errors_recovered")]


def test_no_properties_on_the_reports_without_a_report_file_that_shows_them(
        suite: pytest.Pytester) -> None:
    """Without `--junitxml` (or `--report-log`) the figures stay off the reports: under xdist
    each report is encoded and decoded in pure Python, and the episode's JSON has them."""
    args = [*SMALL, "--resili-variants=optimal", "-k", "simple_task"]
    plain = suite.inline_run(*args).getreports("pytest_runtest_logreport")
    junit = suite.inline_run(*args, f"--junitxml={suite.path / 'j.xml'}").getreports(
        "pytest_runtest_logreport")
    assert len(plain) == len(junit) == 3 * 3  # setup, call, teardown of three items
    assert all(report.user_properties == [] for report in plain)
    assert [len(report.user_properties) for report in junit if report.when == "teardown"] \
        == [7, 7, 7]


def test_same_report_with_and_without_xdist_and_through_remote_style_gateways(
        suite: pytest.Pytester) -> None:
    """One in-process run is the reference for every distributed one: `-n 2`, `-n 4` and
    `--tx 2*popen` (how xdist reaches other hosts, ssh=...) give its report."""
    args = [*SMALL, "--resili-model=builtin:adaptive,builtin:random",
            "--resili-variants=baseline,optimal,flawed", "--resili-flaws=sequence_disorder"]
    reports = {}
    for name, more in (("n0", ["-n", "0"]), ("n2", ["-n", "2"]), ("n4", ["-n", "4"]),
                       ("tx", ["-d", "--tx", "2*popen"])):
        path = suite.path / f"{name}.json"
        result = suite.runpytest_subprocess(*args, *more, f"--resili-report={path}")
        assert result.ret == 0, result.stdout.str()[-2000:]
        reports[name] = comparable(load(path))
    assert len(reports["n0"][1]) == 90
    assert reports["n0"] == reports["n2"] == reports["n4"] == reports["tx"]


def test_fail_under_fails_the_run_with_one_red_line(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*SMALL, "--resili-variants=optimal",
                             "--resili-model=builtin:random", "--resili-fail-under=90%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*resilibench gate: builtin:random: full-success *< fail-under 90.0%*"])
    ok = suite.runpytest(*SMALL, "--resili-variants=optimal",
                         "--resili-model=builtin:oracle", "--resili-fail-under=0.05")
    assert ok.ret == 0


def test_baseline_gate_catches_a_worse_agent(suite: pytest.Pytester) -> None:
    old = suite.path / "old.json"
    common = [*SMALL, "--resili-sample=3", "--resili-variants=optimal,baseline"]
    suite.runpytest(*common, "--resili-model=builtin:oracle", f"--resili-report={old}")
    worse = suite.runpytest(*common, "--resili-model=builtin:random",
                            f"--resili-baseline={old}", "--resili-max-drop=5")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(["*resilibench gate: baseline builtin:random (against "
                                "builtin:oracle): regression: drop*"])
    same = suite.runpytest(*common, "--resili-model=builtin:oracle",
                           f"--resili-baseline={old}", "--resili-max-drop=5")
    assert same.ret == 0
    same.stdout.fnmatch_lines(["*resilibench gate: baseline builtin:oracle: pass: drop +0.0 pp*"])


def test_bad_options_fail_at_start_with_a_message(suite: pytest.Pytester) -> None:
    for bad, message in [
        ("--resili-sample=lots", "*--resili-sample*'lots' is not an integer*"),
        ("--resili-base-success=1.5", "*--resili-base-success*1.5 is not a probability*"),
        ("--resili-flaws=typo", "*--resili-flaws*typo not in*"),
        ("--resili-baseline=/no/such.json", "*--resili-baseline*no such file*"),
        ("--resili-fail-under=abc", "*--resili-fail-under*not a rate*"),
    ]:
        result = suite.runpytest(bad)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])


_EPISODE = {"schema": "resilibench.episode/1", "model": "builtin:oracle", "variant": "optimal",
            "task_id": "t0001", "outcome": "full", "repeat": 0, "seed": 0, "base_success": 0.8}


@pytest.mark.parametrize(("content", "message"), [
    ('{"schema": "resilibench.report/1", "episodes": ' + "[" * 50_000 + "]" * 50_000 + "}",
     "*--resili-baseline:*nested deeper than*"),
    (json.dumps({"schema": "resilibench.report/1", "episodes": [{**_EPISODE, "repeat": "0"}]}),
     "*--resili-baseline:*episode 0: episode field 'repeat' is str, not int*"),
    (json.dumps({"schema": "resilibench.report/1", "episodes": [{**_EPISODE, "tokens": [1]}]}),
     "*--resili-baseline:*episode field 'tokens' is list, not dict*"),
    ('{"schema": "resilibench.report/1", "episodes": [{"base_success": NaN}]}',
     "*--resili-baseline:*NaN is not a JSON number*"),
    (json.dumps({"schema": "resilibench.report/1", "episodes": [], "config": [1]}),
     "*--resili-baseline:*'config' must be an object*"),
])
def test_a_broken_baseline_stops_the_run_at_start_up(
        suite: pytest.Pytester, content: str, message: str) -> None:
    """Read at start-up and checked whole: before any episode, one line, no INTERNALERROR."""
    baseline = suite.path / "old.json"
    baseline.write_text(content)
    result = suite.runpytest(f"--resili-baseline={baseline}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("kind", ["directory", "corrupt", "foreign"])
def test_a_cache_file_that_is_not_ours_stops_the_run_at_start_up(
        suite: pytest.Pytester, kind: str) -> None:
    import sqlite3

    cache = suite.path / "calls.sqlite"
    if kind == "directory":
        cache.mkdir()
    elif kind == "corrupt":
        cache.write_bytes(b"SQLite format 3\x00" + b"\x07" * 500)
    else:
        db = sqlite3.connect(cache)
        db.execute("CREATE TABLE calls (key TEXT, model TEXT, task_id TEXT, repeat INT)")
        db.close()
    result = suite.runpytest(f"--resili-cache={cache}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--resili-cache: {cache}*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_bad_ini_value_is_a_usage_error(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nresili_sample = many\n")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option resili_sample*'many' is not an integer*"])


@pytest.mark.parametrize(("ini", "message"), [
    ("resili_fail_under = nan", "*ini option resili_fail_under*'nan' is not a rate*"),
    ("resili_base_success = inf", "*ini option resili_base_success*'inf' is not a probability*"),
    ("resili_tool_mode = text,native", "*ini option resili_tool_mode*one value only*"),
])
def test_bad_ini_numbers_and_choices_are_usage_errors(suite: pytest.Pytester, ini: str,
                                                      message: str) -> None:
    suite.makeini(f"[pytest]\n{ini}\n")
    result = suite.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_ini_options_apply(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nresili_model = builtin:follower\nresili_sample = 1\n"
                  "resili_variants = cot\n")
    result = suite.runpytest("--collect-only", "-q")
    ids = [line for line in result.outlines if "::test_resilibench[" in line]
    assert len(ids) == 15 and all("[builtin_follower-cot-" in i for i in ids)


def test_unreachable_model_stops_the_run_at_start_up(suite: pytest.Pytester) -> None:
    """The start-up request finds the model unreachable before any episode runs (infra
    errors during a run: tests/plugin/test_real_models.py)."""
    report = suite.path / "r.json"
    result = suite.runpytest(*SMALL, "-k", "simple_task and easy",
                             "--resili-model=openai:gpt-test", "--resili-variants=optimal",
                             "--resili-base-url=http://127.0.0.1:9", "--resili-retries=0",
                             f"--resili-report={report}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resili-model openai:gpt-test: the start-up request "
                                 "failed*connection error*"])
    assert not report.exists()


def test_live_env_runs_the_eight_tasks_over_http(suite: pytest.Pytester) -> None:
    report = suite.path / "live.json"
    result = suite.runpytest(*SMALL, "--resili-env=live", "--resili-variants=optimal",
                             "--resili-model=builtin:adaptive", f"--resili-report={report}")
    assert result.ret == 0
    data = load(report)
    assert sorted(ep["task_id"] for ep in data["episodes"]) == [f"live0{i}" for i in range(1, 9)]
    assert {ep["task_type"] for ep in data["episodes"]} == {"live_sequential"}
    assert sum(ep["outcome"] == "full" for ep in data["episodes"]) >= 6


@pytest.fixture
def keyed_serve_live() -> Iterator[str]:
    """`resilibench serve-live --api-key LIVE_KEY` in a process of its own: its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_resilibench.cli", "serve-live", "--port", "0",
         "--api-key", LIVE_KEY], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        line = proc.stderr.readline() if ready else ""
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, f"serve-live printed {line!r}"
        yield found[0]
    finally:
        stop(proc, timeout=60)


LIVE_KEY = "live-key-DO-NOT-LEAK-4242"


def test_live_env_reaches_a_serve_live_started_with_a_key(
        suite: pytest.Pytester, keyed_serve_live: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_resilibench.integration.options import LIVE_KEY_ENV
    from pytest_resilibench.servers.live.services import SERVICES

    monkeypatch.delenv(LIVE_KEY_ENV, raising=False)
    there = [f"--resili-live-base-url={s.name}={keyed_serve_live}/{s.name}" for s in SERVICES]
    run = [*SMALL, "--resili-env=live", "--resili-variants=optimal", "--resili-trajectories",
           "--resili-model=builtin:adaptive", *there]

    def calls(report: Path) -> list[dict[str, Any]]:
        return [c for ep in load(report)["episodes"] for c in ep["calls"]]

    keyed = suite.path / "keyed.json"
    assert suite.runpytest(*run, f"--resili-live-api-key={LIVE_KEY}",
                           f"--resili-report={keyed}").ret == 0
    data = load(keyed)
    assert len(data["episodes"]) == 8
    assert sum(ep["outcome"] == "full" for ep in data["episodes"]) >= 6
    assert calls(keyed) and not any("Authorization" in str(c) for c in calls(keyed))
    assert LIVE_KEY not in keyed.read_text()

    # Without the key every call is refused (the services' 401), so no episode succeeds.
    bare = suite.path / "bare.json"
    suite.runpytest(*run, f"--resili-report={bare}")
    assert all("Authorization: Bearer" in str(c["message"]) for c in calls(bare))
    assert not any(ep["outcome"] == "full" for ep in load(bare)["episodes"])

    # The key from the environment, as CI secrets come.
    monkeypatch.setenv(LIVE_KEY_ENV, LIVE_KEY)
    from_env = suite.path / "env.json"
    suite.runpytest(*run, "-k", "live01", f"--resili-report={from_env}")
    assert calls(from_env) and not any("Authorization" in str(c) for c in calls(from_env))


def test_the_live_key_reaches_the_serve_live_named_and_no_public_api_beside_it(
        suite: pytest.Pytester, keyed_serve_live: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--resili-live-server` serves every service from one serve-live, which alone gets the
    key; a `--resili-live-base-url` elsewhere (a public API: here a recorder on loopback)
    gets the calls and never the key; URLs on two origins with a key and no server named are
    a usage error that names both."""
    from pytest_resilibench.integration.options import LIVE_KEY_ENV
    from tests.unit.live.recorder import header_recorder

    monkeypatch.delenv(LIVE_KEY_ENV, raising=False)
    run = [*SMALL, "--resili-env=live", "--resili-variants=optimal",
           "--resili-model=builtin:adaptive", f"--resili-live-api-key={LIVE_KEY}"]
    report = suite.path / "server.json"
    with header_recorder() as (public, seen):
        result = suite.runpytest(*run, f"--resili-live-server={keyed_serve_live}",
                                 f"--resili-live-base-url=weather_forecast={public}/w",
                                 f"--resili-report={report}")
    assert result.ret == 0
    episodes = load(report)["episodes"]
    assert sum(ep["outcome"] == "full" for ep in episodes) >= 6  # the key was taken
    assert seen and not any("authorization" in h or LIVE_KEY in str(h) for h in seen)

    result = suite.runpytest(*run, f"--resili-live-base-url=weather_forecast={public}/w",
                             f"--resili-live-base-url=number_fact={keyed_serve_live}/number_fact")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resili-live-api-key: the live service URLs are on 2 "
                                 "origins*--resili-live-server*"])


@pytest.mark.parametrize(("key", "said"), [
    (None, "asks for a key and none was set"),
    ("not-the-key-at-all", "refused the key it was sent"),
    (LIVE_KEY, "could not reach the live services at http://127.0.0.1:9/"),
], ids=["no-key", "wrong-key", "no-server"])
def test_a_serve_live_that_would_refuse_every_call_stops_the_run_at_start_up(
        suite: pytest.Pytester, keyed_serve_live: str, monkeypatch: pytest.MonkeyPatch,
        key: str | None, said: str) -> None:
    from pytest_resilibench.integration.options import LIVE_KEY_ENV

    monkeypatch.delenv(LIVE_KEY_ENV, raising=False)
    server = "http://127.0.0.1:9" if said.startswith("could not") else keyed_serve_live
    report = suite.path / "r.json"
    result = suite.runpytest(*SMALL, "--resili-env=live", "--resili-variants=optimal",
                             "--resili-model=builtin:adaptive", f"--resili-live-server={server}",
                             *([f"--resili-live-api-key={key}"] if key else []),
                             f"--resili-report={report}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{said}*"])
    assert not report.exists()
    if key:
        assert key not in result.stderr.str()  # the key never shows


def test_sample_all_takes_every_task_of_the_cell(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--collect-only", "-q", "--resili-sample=all",
                             "--resili-variants=cot", "--resili-task-types=simple_task",
                             "--resili-difficulties=easy")
    ids = [line for line in result.outlines if "::test_resilibench[" in line]
    assert len(ids) == 336


def test_bad_models_stop_the_run_at_start(suite: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for model, message in [
        ("builtin:nope", "*--resili-model builtin:nope: unknown built-in agent 'nope'*"),
        ("gpt-test", "*--resili-model gpt-test: OPENAI_API_KEY is not set*"),
    ]:
        result = suite.runpytest(f"--resili-model={model}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])


def test_live_base_urls_from_the_ini_are_checked(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nresili_live_base_url =\n    random_joke=http://127.0.0.1:1\n"
                  "    broken\n")
    result = suite.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option resili_live_base_url: 'broken' is not SERVICE=URL*"])


def test_mcp_env_gives_the_simulators_episodes(suite: pytest.Pytester) -> None:
    """--resili-env=mcp: the episodes' tools sit behind our MCP server in another process
    (stdio), one server for the run, several episodes in flight on it at once, two variants
    of each task on the same luck; the luck is keyed the same, so the episodes equal the
    in-process ones."""
    pytest.importorskip("mcp")
    reports = {}
    for env in ("sim", "mcp"):
        path = suite.path / f"{env}.json"
        result = suite.runpytest(*SMALL, f"--resili-env={env}", "--resili-concurrency=4",
                                 "--resili-variants=optimal,flawed",
                                 "--resili-flaws=missing_step", "-k", "easy or hard",
                                 f"--resili-report={path}")
        assert result.ret == 0, result.stdout.str()[-2000:]
        reports[env] = comparable(load(path))[1]
    assert len(reports["mcp"]) == 20
    assert reports["mcp"] == reports["sim"]


def test_realistic_faults_end_to_end(suite: pytest.Pytester) -> None:
    report = suite.path / "out" / "realistic.json"
    result = suite.runpytest(*SMALL, "--resili-model=builtin:adaptive",
                             "--resili-variants=optimal", "--resili-faults=realistic",
                             "-k", "simple_task", f"--resili-report={report}")
    result.assert_outcomes()
    data = load(report)
    assert data["config"]["faults"] == "realistic"
    assert all(ep["faults"] == "realistic" and "events" in ep for ep in data["episodes"])
    assert data["summary"]["faults"] == ["realistic"]
    result.stdout.fnmatch_lines(["*realistic profile *% [[]*] of *"])  # the headline's rate
    refused = suite.runpytest(*SMALL, "--resili-faults=realistic", "--resili-env=live")
    assert refused.ret != 0
    refused.stderr.fnmatch_lines(["*realistic needs --resili-env=sim or mcp*"])


def test_a_run_without_episodes_keeps_xdists_own_scheduling(pytester: pytest.Pytester) -> None:
    """Round-robin is for benchmark items only: a user's plain tests keep xdist's load
    scheduling, whose first chunk gives neighbours (and their module fixture) one worker."""
    pytester.makepyfile(test_plain='''
        import os, pathlib, pytest

        @pytest.mark.parametrize("i", range(8))
        def test_where(i):
            pathlib.Path(f"ran-{i}").write_text(os.environ["PYTEST_XDIST_WORKER"])
    ''')
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider",
                                           "-p", "no:randomly")
    assert result.ret == 0
    where = [(pytester.path / f"ran-{i}").read_text() for i in range(8)]
    assert where[0] == where[1] and where[2] == where[3] and where[0] != where[2]


GC_PROBE = """
import gc, json, os

def test_resilibench(resili_episode):
    frozen = gc.get_freeze_count()
    gc.collect()  # a full collection: what survives it is frozen too
    with open(os.environ["FROZEN_OUT"], "a") as fh:
        fh.write(json.dumps([frozen, gc.get_freeze_count(), gc.get_threshold()]) + "\\n")
"""


def test_the_run_freezes_what_lives_through_it_and_thaws_after(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Collected objects leave the cyclic collector's generations while items run and through
    # pytest's own final collections (integration/heap.py); the process gets them back after,
    # for whatever it runs next.
    import _pytest.unraisableexception as unraisable

    out = pytester.path / "frozen.jsonl"
    monkeypatch.setenv("FROZEN_OUT", str(out))
    pytester.makepyfile(test_freeze_count_during_run=GC_PROBE)
    final_collections: list[int] = []
    reports_walked: list[int] = []  # the run's reports the final collections would walk
    collect = unraisable.gc_collect_harder

    def counted(iterations: int) -> None:
        final_collections.append(gc.get_freeze_count())
        reports_walked.append(sum(isinstance(o, pytest.TestReport) for o in gc.get_objects()))
        collect(iterations)

    monkeypatch.setattr(unraisable, "gc_collect_harder", counted)
    before, thresholds = gc.get_freeze_count(), gc.get_threshold()
    result = pytester.runpytest(*SMALL, "--resili-model=builtin:follower",
                                "--resili-variants=optimal", "-k", "simple_task and easy")
    assert result.ret == 0
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(seen) == 1 and before < seen[0][0] < seen[0][1]
    # While items run, full collections wait for FULL_COLLECTION_AFTER young ones.
    assert seen[0][2] == [*thresholds[:2], max(thresholds[2], FULL_COLLECTION_AFTER)]
    # pytest collects in the unraisable plugin's unconfigure and in its cleanup: both frozen
    assert len(final_collections) == 2 and min(final_collections) > before
    # ... and what the loop made after it, its reports included (frozen when the loop ends)
    assert reports_walked == [0, 0]
    assert gc.get_freeze_count() == before
    assert gc.get_threshold() == thresholds


EXIT_PROBE = """
import atexit, gc, os

# Registered before the plugin activates, so it runs after the plugin's own exit hook.
atexit.register(lambda: open(os.environ["FROZEN_OUT"], "w").write(str(gc.get_freeze_count())))
"""


def test_a_benchmark_process_exits_with_the_heap_frozen(pytester: pytest.Pytester) -> None:
    """Shutting the interpreter down walks nothing (integration/heap.py); a run that is not
    a benchmark leaves exit alone."""
    out = pytester.path / "frozen-at-exit"
    pytester.makeconftest(EXIT_PROBE)
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    env = {"FROZEN_OUT": str(out)}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        plain = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_plain.py")
        assert plain.ret == 0 and out.read_text() == "0"
        result = pytester.runpytest_subprocess(
            *SMALL, "--resili-model=builtin:follower", "--resili-variants=optimal",
            "-k", "simple_task and easy", "-p", "no:randomly")
    assert result.ret == 0
    assert int(out.read_text()) > 0
