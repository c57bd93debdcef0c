"""Content already found sound, remembered on disk by its key (a sha256 of the content and of
the rules that checked it), so a check too dear for every start-up runs once per machine
(core/task_set_check.py: a task set's validation, about 2.5 s of CPU for 5040 tasks).

Only a passing verdict is kept, as an empty file named by its key under the user's cache
folder (`$XDG_CACHE_HOME/resilibench/checked/`, else `~/.cache/...`). Failing content is
checked again on every load, so its message is always the current one. The memo is a
shortcut and nothing more: a folder that cannot be read or written just means checking again.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_resilibench.base.atomic import atomic_write

__all__ = ["cache_dir", "is_known", "remember"]

_KEY = re.compile(r"[0-9a-f]{64}")


def cache_dir() -> Path:
    """Where verdicts are kept (XDG's cache folder, as most tools' caches)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "resilibench" / "checked"


def _path(kind: str, key: str) -> Path | None:
    if not _KEY.fullmatch(key) or not re.fullmatch(r"[a-z-]+", kind):
        return None  # never a path made of anything but a hex digest
    return cache_dir() / kind / key


def is_known(kind: str, key: str) -> bool:
    """Whether content of this key passed the check of this kind on this machine before."""
    path = _path(kind, key)
    try:
        return path is not None and path.is_file()
    except OSError:
        return False


def remember(kind: str, key: str) -> None:
    """Keep the passing verdict; a cache folder that cannot be written is left alone."""
    path = _path(kind, key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, b"")
    except OSError:
        pass
