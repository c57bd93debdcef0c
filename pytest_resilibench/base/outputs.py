"""Where a run's outputs go when no path is given: `.resilibench/` under the current
directory, a folder that ignores itself (it holds a `.gitignore` of `*`, as pytest's own
`.pytest_cache/` does), so reports never clutter the user's repository or its `git status`.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["OUTPUT_DIR", "default_path", "prepare"]

OUTPUT_DIR = Path(".resilibench")
_IGNORE_ALL = "# written by pytest-resilibench: run outputs, never committed\n*\n"


def default_path(name: str) -> Path:
    """`.resilibench/NAME`, relative to the current directory."""
    return OUTPUT_DIR / name


def prepare(path: str | Path) -> Path:
    """Make the folders `path` needs; a `.resilibench` folder among them gets its
    `.gitignore` (once: a user's own edits to it stay)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file where a folder must be
        raise ValueError(f"cannot write {path}: a file stands where a folder of its path "
                         "must be") from None
    for folder in (path.parent, *path.parent.parents):
        if folder.name == OUTPUT_DIR.name:
            ignore = folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text(_IGNORE_ALL, encoding="utf-8")
            break
    return path
