"""A full disk on demand for the cache tests: a real 256 KB tmpfs (`small_fs`, the fixture in
tests/conftest.py; skipped where mounting is refused) and `fill`, which takes its every free
byte. 256 KB rather than less: sqlite's write-ahead files alone take 56 KB at start-up."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(mount: Path, size: str = "256k") -> Iterator[Path]:
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(fs: Path) -> None:
    """Every free byte of `fs` taken."""
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while os.write(fd, b"\0" * 512):
            pass
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(fd)
