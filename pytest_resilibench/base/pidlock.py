"""An exclusive lock on a file, held by one process and naming it: the lock a run takes beside
its report, so that a second run given the same report refuses to start.

`PidLock.take(path)` takes an `fcntl.flock` on `path` (created) and writes this process's pid
in it, or raises `LockHeld` with the pid the holder wrote. The kernel drops a flock when the
last descriptor of it closes, however the process ends (a crash, SIGKILL): a file a killed run
left is taken over, never stale. A forked child (ahead.py's helpers) closes its copy at once,
so that a helper outliving a killed controller holds nothing. `release()` removes the file
while still holding the lock; a taker whose file was removed between its open and its lock
takes the new one. Where there is no flock (Windows, a filesystem without locks) there is no
lock: `take` returns None.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path

__all__ = ["LockHeld", "PidLock"]

_HELD: dict[int, PidLock] = {}  # descriptor -> lock, of the locks this process holds


def _close_in_child() -> None:
    """After a fork, in the child: drop the copies of the parent's lock descriptors."""
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


class LockHeld(Exception):
    """Another process holds the lock; `pid` is the one it wrote (None before it wrote)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(f"{path} is held by {'pid ' + str(pid) if pid else 'another process'}")
        self.path = path
        self.pid = pid


def _pid_in(fd: int) -> int | None:
    """The pid a holder wrote; a holder that has just taken it writes it at once, so an empty
    file is read again for a moment."""
    for _ in range(50):
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return None
        if text:
            return int(text) if text.isdigit() else None
        time.sleep(0.01)
    return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:  # removed meanwhile
        return False


class PidLock:
    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._owner = os.getpid()
        _HELD[fd] = self

    @classmethod
    def take(cls, path: Path) -> PidLock | None:
        """Hold the lock of `path`, or raise `LockHeld`; OSError when it cannot be created."""
        try:
            import fcntl
        except ImportError:  # no flock on this platform
            return None
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if _same_file(fd, path):
                    pid = _pid_in(fd)
                    os.close(fd)
                    raise LockHeld(path, pid) from None
                os.close(fd)  # released and removed meanwhile: take the new file
                continue
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    return None  # a filesystem without locks: run unlocked
                raise
            except BaseException:
                os.close(fd)
                raise
            if _same_file(fd, path):
                break
            os.close(fd)  # removed by its holder between our open and our lock
        with contextlib.suppress(OSError):  # a full disk: the lock holds without its pid
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Remove the file and drop the lock (once; only in the process that took it)."""
        if self._fd < 0 or os.getpid() != self._owner:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        _HELD.pop(self._fd, None)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = -1
