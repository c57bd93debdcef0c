"""An interrupted run resumes: SIGINT or a SIGKILLed controller leaves the episode log beside
the report, and the next run replays it, runs only the missing episodes, and writes the report
an uninterrupted run writes (common random numbers), timing aside."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.plugin.conftest import comparable, load

ARGS = ["--resili-sample=1", "--resili-variants=optimal", "-p", "no:cacheprovider",
        "-p", "no:randomly", "-p", "no:xdist"]
STOPPER = '''
import os, signal

# A shell's background job inherits SIGINT ignored; a user's Ctrl-C reaches Python's handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
done = 0

def pytest_runtest_logfinish(nodeid):
    global done
    done += 1
    if done == int(os.environ["RESILI_STOP_AFTER"]):
        os.kill(os.getpid(), getattr(signal, os.environ["RESILI_SIGNAL"]))
'''


def _log(report: Path) -> Path:
    return report.with_name(report.name + ".episodes.jsonl")


def _interrupt(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, signal: str,
               after: int, report: Path) -> pytest.RunResult:
    (suite.path / "conftest.py").write_text(STOPPER)
    monkeypatch.setenv("RESILI_STOP_AFTER", str(after))
    monkeypatch.setenv("RESILI_SIGNAL", signal)
    try:
        return suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    finally:
        os.remove(suite.path / "conftest.py")


def test_sigint_and_a_killed_controller_resume_to_the_uninterrupted_report(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = suite.path / "whole.json"
    assert suite.runpytest_subprocess(*ARGS, f"--resili-report={whole}").ret == 0
    expected = load(whole)
    assert not _log(whole).exists()  # a complete report leaves no log

    # SIGINT after 6 items: an honest partial report, and the log beside it.
    report = suite.path / "run.json"
    result = _interrupt(suite, monkeypatch, "SIGINT", 6, report)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    partial = load(report)
    assert partial["complete"] is False
    assert (partial["expected"], partial["received"]) == (15, 6)
    assert "9 of 15 planned episodes never arrived" in partial["environment"]["lost"][0]
    assert _log(report).exists()
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*6 episodes replayed from the resumed run, 9 run now*"])
    resumed = load(report)
    assert (resumed["complete"], resumed["received"], resumed["resumed"]) == (True, 15, 6)
    assert comparable(resumed) == comparable(expected)
    # The six were replayed, not run again: their timing is the interrupted run's own.
    replayed = {ep["id"]: ep for ep in resumed["episodes"]}
    assert all(replayed[ep["id"]] == ep for ep in partial["episodes"])
    assert not _log(report).exists()

    # SIGKILL of the controller after 4 items: no report at all, the log survives.
    report = suite.path / "killed.json"
    result = _interrupt(suite, monkeypatch, "SIGKILL", 4, report)
    assert result.ret == -9 and not report.exists()
    assert len(_log(report).read_text().splitlines()) == 1 + 4  # header + the four episodes
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*4 episodes replayed from the resumed run, 11 run now*"])
    assert comparable(load(report)) == comparable(expected)


def test_a_log_of_other_options_is_a_usage_error_and_off_starts_afresh(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = suite.path / "run.json"
    _interrupt(suite, monkeypatch, "SIGINT", 3, report)
    before = _log(report).read_text()
    result = suite.runpytest_subprocess(*ARGS, "--resili-seed=3", f"--resili-report={report}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*run.json.episodes.jsonl holds episodes of a run with other "
                                 "options (seed: recorded 0, now 3)*--resili-resume=off*"])
    assert "Traceback" not in result.stderr.str()
    assert _log(report).read_text() == before  # nothing lost
    result = suite.runpytest_subprocess(*ARGS, "--resili-seed=3", "--resili-resume=off",
                                        f"--resili-report={report}")
    assert result.ret == 0 and "resuming from" not in result.stdout.str()
    assert load(report)["resumed"] == 0 and load(report)["config"]["seed"] == 3


def test_a_narrower_resumed_run_keeps_the_log_of_the_wider_one(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = suite.path / "run.json"
    _interrupt(suite, monkeypatch, "SIGINT", 6, report)
    narrow = suite.runpytest_subprocess(*ARGS, "-k", "simple_task", f"--resili-report={report}")
    assert narrow.ret == 0 and load(report)["complete"] is True
    assert _log(report).exists()  # it still holds episodes this run did not need
    wide = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    assert wide.ret == 0 and load(report)["resumed"] >= 6 and not _log(report).exists()


def test_resume_from_a_named_report_reuses_its_episodes(suite: pytest.Pytester) -> None:
    first = suite.path / "first.json"
    suite.runpytest_subprocess(*ARGS, "--resili-task-types=basic_task", f"--resili-report={first}")
    second = suite.path / "second.json"
    result = suite.runpytest_subprocess(*ARGS, f"--resili-resume={first}",
                                        f"--resili-report={second}")
    assert result.ret == 0
    data = load(second)
    assert data["resumed"] == 3 and data["received"] == 15  # the 3 basic tasks replayed
    first_eps = {ep["id"]: ep for ep in load(first)["episodes"]}
    assert all(ep == first_eps[ep["id"]] for ep in data["episodes"] if ep["id"] in first_eps)
    missing = suite.runpytest_subprocess(*ARGS, "--resili-resume=nowhere.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--resili-resume: no such report or episode log*"])


def _unwritable_dir(tmp: Path) -> Path:
    """A directory this process cannot create files in (root ignores mode bits: /sys)."""
    locked = tmp / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    for candidate in (locked, Path("/sys")):
        try:
            (candidate / ".probe").touch()
        except OSError:
            return candidate
        (candidate / ".probe").unlink()
    pytest.skip("no unwritable directory on this machine")


def test_an_unwritable_report_directory_stops_the_run_at_start_up(
    suite: pytest.Pytester
) -> None:
    target = _unwritable_dir(suite.path)
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={target / 'r.json'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --resili-report: cannot write*"])
    assert "Traceback" not in result.stderr.str() and "passed" not in result.stdout.str()


MARKER = '''
import os, signal

signal.signal(signal.SIGINT, signal.default_int_handler)  # a user's terminal, not a background job
done = 0

def pytest_runtest_logfinish(nodeid):
    global done
    done += 1
    if done == 20:
        open(os.environ["RESILI_MARKER"], "w").close()
'''


@pytest.mark.parametrize("presses", [1, 2, 3])
def test_ctrl_c_any_number_of_times_ends_quietly_with_the_report_intact(
    suite: pytest.Pytester, presses: int
) -> None:
    """A real run, SIGINT sent 1, 2 and 3 times 50 ms apart once 20 items ran: the first ends
    it as interrupted (report written, exit 2), a later one at once (exit 130, or 2 when the
    run had ended already); no traceback either way, and what is on disk is valid JSON."""
    import signal
    import subprocess
    import sys
    import time

    (suite.path / "conftest.py").write_text(MARKER)
    marker, report = suite.path / "twenty", suite.path / "run.json"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "RESILI_MARKER": str(marker),
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:xdist", "--resili-sample=all", "--resili-variants=optimal,flawed",
         f"--resili-report={report}"],
        cwd=suite.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)  # signals to it alone
    try:
        for _ in range(1200):  # bounded: 120 s for the collection of 40,320 items
            if marker.exists() or run.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), "20 items never ran"
        for _ in range(presses):
            run.send_signal(signal.SIGINT)
            time.sleep(0.05)
        output, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]
    allowed = {2} if presses == 1 else {2, 130}
    assert run.returncode in allowed, output[-3000:]
    if run.returncode == 130:
        assert output.rstrip().splitlines()[-1].startswith(
            "resilibench: interrupted again: stopped at once; the report"), output[-2000:]
    else:
        partial = load(report)  # schema-checked
        assert partial["complete"] is False and partial["received"] >= 20
    if report.exists():
        load(report)
    log = _log(report)
    if log.exists():  # every line the log holds is whole JSON (the resumable episodes)
        for line in log.read_text().splitlines():
            json.loads(line)
