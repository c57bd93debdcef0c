"""Faults around the JSON report end in one clear message and lose no episode: a full disk
under the episode log or the report, two runs given the same report, a report that holds an
episode twice, and Ctrl-C while an xdist run ends."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.plugin.conftest import load

ARGS = ["--resili-sample=1", "--resili-variants=optimal", "-p", "no:cacheprovider",
        "-p", "no:randomly", "-p", "no:xdist"]
EPISODES = 15  # what ARGS run


def _log(report: Path) -> Path:
    return report.with_name(report.name + ".episodes.jsonl")


def _no_traceback(result: pytest.RunResult) -> str:
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    return text


# --- a full disk ------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """A tmpfs of a few KB, mounted for the test: the writes of a run there meet a real
    ENOSPC. Needs root with CAP_SYS_ADMIN (CI has it); skipped elsewhere."""
    mounted: list[Path] = []

    def mount(kib: int) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        try:
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
                           check=True, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            why = getattr(exc, "stderr", None) or exc
            pytest.skip(f"cannot mount a small tmpfs here ({str(why).strip()}): a real full "
                        "disk needs root with CAP_SYS_ADMIN; test_session.py covers the same "
                        "paths with /dev/full")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=60)


def _grow(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True,
                   capture_output=True, timeout=60)


def test_a_disk_that_fills_under_the_episode_log_keeps_the_episodes_in_a_named_copy(
    suite: pytest.Pytester, small_disk: Callable[[int], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 KB: the log's header and a few episodes fit, then every write is ENOSPC. The run
    goes on (the spool holds the episodes), the report cannot be written, and its copy in
    the system temp dir holds every episode: one line says where, and it resumes."""
    disk = small_disk(8)
    spare = suite.path / "tmp"  # the system temp dir of the run
    spare.mkdir()
    monkeypatch.setenv("TMPDIR", str(spare))
    report = disk / "r.json"
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    text = _no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = {line for line in text.splitlines()
             if "could not write" in line and not line.startswith("FAILED ")}
    assert len(lines) == 1, lines  # one message (the failure's, and the summary's last line)
    line = lines.pop()
    match = re.search(r"its 15 episodes are kept in (\S+\.json): free space", line)
    assert match and f"could not write {report} (No space left on device)" in line, line
    assert "--resili-resume=" in line
    kept = Path(match.group(1))
    assert kept.parent == spare and len(load(kept)["episodes"]) == EPISODES
    # Nothing lost: a run that resumes from the copy replays all of them.
    again = suite.path / "again.json"
    result = suite.runpytest_subprocess(*ARGS, f"--resili-resume={kept}",
                                        f"--resili-report={again}")
    assert result.ret == 0
    assert (load(again)["resumed"], load(again)["complete"]) == (EPISODES, True)


def test_a_report_the_disk_cannot_hold_leaves_the_log_and_the_same_command_resumes(
    suite: pytest.Pytester, small_disk: Callable[[int], Path]
) -> None:
    """24 KB: the log takes every episode, the report (larger) does not fit: the log is
    named, and once there is room the same command writes the report from it."""
    disk = small_disk(24)
    report = disk / "r.json"
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    _no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED and not report.exists()
    result.stdout.fnmatch_lines([f"resilibench: could not write {report} (No space left on "
                                 f"device); its 15 episodes are kept in {_log(report)}: free "
                                 "space there, then run the same command again*"])
    _grow(disk)
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    assert result.ret == 0
    assert (load(report)["resumed"], load(report)["complete"]) == (EPISODES, True)
    assert not _log(report).exists()


# --- two runs, one report ---------------------------------------------------------------------
def test_a_second_run_on_the_same_report_refuses_to_start_and_names_the_first(
    suite: pytest.Pytester
) -> None:
    """The lock beside the report is taken here, as a first run's controller takes it: the
    run in the subprocess (with and without xdist) refuses, naming this process, and touches
    neither the log nor the report; once released, the report is the second run's."""
    from pytest_resilibench.base.pidlock import PidLock

    report = suite.path / "r.json"
    log = _log(report)
    log.write_text("the first run's episodes\n")
    lock = PidLock.take(report.with_name("r.json.lock"))
    assert lock is not None
    try:
        for xdist in (["-p", "no:xdist"], ["-n", "2"]):
            args = [a for a in ARGS if a not in ("-p", "no:xdist")] + xdist
            result = suite.runpytest_subprocess(*args, f"--resili-report={report}")
            assert result.ret == pytest.ExitCode.USAGE_ERROR
            result.stderr.fnmatch_lines([f"ERROR: --resili-report: another run (pid "
                                         f"{os.getpid()}) is writing {report}*"])
            _no_traceback(result)
            assert log.read_text() == "the first run's episodes\n" and not report.exists()
    finally:
        lock.release()
    log.unlink()
    result = suite.runpytest_subprocess(*ARGS, f"--resili-report={report}")
    assert result.ret == 0 and load(report)["received"] == EPISODES
    assert not report.with_name("r.json.lock").exists()  # released when the run ended


# --- an episode twice -------------------------------------------------------------------------
def test_a_baseline_with_an_episode_twice_is_refused(suite: pytest.Pytester) -> None:
    report = suite.path / "r.json"
    assert suite.runpytest_subprocess(*ARGS, f"--resili-report={report}").ret == 0
    data = json.loads(report.read_text())
    twice = data["episodes"][3]["id"]
    data["episodes"].append(dict(data["episodes"][3]))
    doubled = suite.path / "doubled.json"
    doubled.write_text(json.dumps(data))
    result = suite.runpytest_subprocess(*ARGS, f"--resili-baseline={doubled}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --resili-baseline: {doubled}: episode id {twice!r} "
                                 "appears twice*"])
    _no_traceback(result)


# --- Ctrl-C while an xdist run ends -----------------------------------------------------------
# Loaded with -p by the controller and the workers: the controller stops in its
# pytest_sessionfinish, before xdist tears the workers down ("workers": its own impl,
# registered after xdist's DSession, runs before it) or after ("end": trylast), writes
# RESILI_READY and waits there for the test's SIGINT (RESILI_WAIT_S bounds a lost signal).
PAUSE = '''
import os, signal, time
from pathlib import Path
import pytest

signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job ignores it


def _pause():
    Path(os.environ["RESILI_READY"]).write_text(str(os.getpid()))
    deadline = time.monotonic() + float(os.environ["RESILI_WAIT_S"])
    while time.monotonic() < deadline:
        time.sleep(0.02)


class BeforeTeardown:
    def pytest_sessionfinish(self, session):
        _pause()


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if not hasattr(config, "workerinput") and os.environ["RESILI_PAUSE"] == "workers":
        config.pluginmanager.register(BeforeTeardown(), "resili-pause")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput") and os.environ["RESILI_PAUSE"] == "end":
        _pause()


if os.environ["RESILI_PAUSE"] == "write":  # the run's own Ctrl-C, as the report is written
    import contextlib
    import pytest_resilibench.reporting.report as report_module

    real = report_module.atomic_open

    @contextlib.contextmanager
    def atomic_open(path, *args, **kwargs):
        with real(path, *args, **kwargs) as fh:
            yield fh
            os.kill(os.getpid(), signal.SIGINT)  # before the file is renamed into place

    report_module.atomic_open = atomic_open
'''


@pytest.mark.parametrize(("where", "to"), [("workers", "group"), ("end", "controller"),
                                         ("write", None)])
def test_ctrl_c_while_an_xdist_run_ends_keeps_the_report_and_shows_no_traceback(
    suite: pytest.Pytester, where: str, to: str | None
) -> None:
    """SIGINT once every episode arrived: to the whole process group (a terminal's Ctrl-C,
    the workers too) while xdist tears its workers down, to the controller alone in the last
    of the end, or by the controller itself while it writes the report. The run ends as
    interrupted, with one line, the report whole."""
    (suite.path / "resili_pause.py").write_text(PAUSE)
    report = suite.path / "r.json"
    ready = suite.path / "ready"
    env = {**os.environ, "RESILI_PAUSE": where, "RESILI_READY": str(ready),
           "RESILI_WAIT_S": "600", "PYTHONPATH": str(suite.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "resili_pause", "-p", "no:cacheprovider",
         "-p", "no:randomly", "--resili-sample=1", "-n", "2", f"--resili-report={report}"],
        cwd=suite.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # its own process group: the test's runner gets no SIGINT
    try:
        while to is not None and not ready.exists():  # the run writes it: no timing here
            assert proc.poll() is None, proc.communicate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
        if to == "group":
            os.killpg(proc.pid, signal.SIGINT)
        elif to == "controller":
            os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = out + err
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text
    data = load(report)
    assert data["complete"] is True and data["received"] == data["expected"] == 150
    assert len(data["episodes"]) == 150
    assert f"resilibench: interrupted while the run was ending; the report {report} " \
           "holds all 150 episodes" in out
