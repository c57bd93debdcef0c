"""One atomic writer for every file the project writes whole (reports, fixtures): a temporary
file beside the target, renamed over it, so a reader sees the old file or the new one, never
half of one, and an interrupted write leaves the old one intact."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_write"]


@contextmanager
def atomic_open(path: Path, mode: str = "wb", **options: Any) -> Iterator[IO[Any]]:
    """A file opened for writing (`mode` "wb" or "w", `options` as for `open`) that replaces
    `path` when the block ends without an exception. It is created 0644: mkstemp's 0600
    would hide a report from CI artifact readers."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, mode, **options) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: Path, data: bytes) -> None:
    with atomic_open(path) as fh:
        fh.write(data)
