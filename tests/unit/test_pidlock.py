"""The lock beside a report: one holder, named by its pid; taken over once its holder ended
however it ended; never kept alive by a forked child (ahead.py's helpers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_resilibench.base.pidlock import LockHeld, PidLock

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows")


def test_one_holder_named_by_its_pid_and_released_with_its_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json.lock"
    lock = PidLock.take(path)
    assert lock is not None and path.read_text() == f"{os.getpid()}\n"
    with pytest.raises(LockHeld) as held:  # another open file, even in this process
        PidLock.take(path)
    assert held.value.pid == os.getpid()
    lock.release()
    lock.release()  # once
    assert not path.exists()
    again = PidLock.take(path)
    assert again is not None
    again.release()


def test_a_file_its_killed_holder_left_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "r.json.lock"
    path.write_text("999999999\n")  # nobody holds its flock
    lock = PidLock.take(path)
    assert lock is not None and path.read_text() == f"{os.getpid()}\n"
    lock.release()


# A controller takes the lock, forks a helper that outlives it, and dies without releasing:
# the helper, still alive (it waits on stdin), must not hold the lock.
KILLED_CONTROLLER = """
import os, sys
from pathlib import Path
from pytest_resilibench.base.pidlock import PidLock

lock = PidLock.take(Path(sys.argv[1]))
if os.fork() == 0:
    print("helper up", flush=True)  # past the fork hooks
    sys.stdin.buffer.read(1)
    os._exit(0)
os._exit(0)
"""


def test_a_forked_child_that_outlives_its_parent_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.json.lock"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CONTROLLER, str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "helper up\n"
        assert proc.wait(timeout=120) == 0
        assert path.exists()  # left behind, as by a SIGKILL
        lock = PidLock.take(path)
        assert lock is not None
        lock.release()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the helper reads EOF and ends
