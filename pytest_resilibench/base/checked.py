"""Content already found sound, remembered on disk by its key (a sha256 of the content and of
the rules that checked it), so a check too dear for every start-up runs once per machine
(core/task_set_check.py: a task set's validation, about 2.5 s of CPU for 5040 tasks).

Only a passing verdict is kept, as an empty file named by its key under the user's cache
folder (`$XDG_CACHE_HOME/resilibench/checked/`, else `~/.cache/...`). Failing content is
checked again on every load, so its message is always the current one. The memo is a
shortcut and nothing more: a folder that cannot be read or written just means checking again.

`read`/`store` keep a small result under the same rules (the realistic profile's solved plans,
core/realistic_plans.py): written atomically, so concurrent xdist workers never see half an
entry; what is read must be validated by the caller, as anything on disk may be damaged.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_resilibench.base.atomic import atomic_write

__all__ = ["cache_dir", "is_known", "read", "remember", "store"]

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
    store(kind, key, b"")


def store(kind: str, key: str, data: bytes) -> None:
    """Keep `data` under the key (temporary file, then rename); an unwritable folder is no
    error: the result is computed again next time."""
    path = _path(kind, key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
    except OSError:
        pass


def read(kind: str, key: str, limit: int = 1 << 20) -> bytes | None:
    """What `store` kept under the key (None if nothing, unreadable, not a regular file or
    over `limit` bytes). Unchecked: the caller validates it."""
    path = _path(kind, key)
    try:
        if path is None or not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_bytes()
    except OSError:
        return None
