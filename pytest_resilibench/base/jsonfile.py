"""Reading JSON that someone else may have written (a baseline, a report, an episode log):
bounded in size and nesting, strict about numbers, and every failure one `ValueError`.

Python's `json` accepts `NaN`, `Infinity` and `1e999` (an infinite float), recurses once per
nesting level (a deep enough document raises `RecursionError`) and reads any size; none of
those may reach the statistics, and none may surface as anything but a clear message.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["MAX_BYTES", "MAX_DEPTH", "load_json_file", "loads_bounded"]

MAX_BYTES = 1 << 30  # 1 GiB: a 50,400-episode report without trajectories is ~100 MB
MAX_DEPTH = 64  # a report nests ~8 levels (episode > messages > tool_calls > function)
MAX_INT = 2 ** 63  # token counts and the like: anything larger is not a count


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text) > 20:  # also keeps int() away from its 4300-digit limit
        raise ValueError(f"integer {text[:20]}... is out of range")
    value = int(text)
    if abs(value) > MAX_INT:
        raise ValueError(f"integer {text} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep(value: Any, limit: int) -> bool:
    """Whether containers nest deeper than `limit` (iterative: no recursion of its own)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in node
                     if isinstance(child, (dict, list)))
    return False


def loads_bounded(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` with finite floats, bounded integers and nesting; ValueError otherwise."""
    try:
        value = json.loads(text, parse_float=_finite, parse_int=_bounded_int,
                           parse_constant=_no_constant)
    except RecursionError:
        value = None
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    else:
        if not _too_deep(value, max_depth):
            return value
    raise ValueError(f"nested deeper than {max_depth} levels")


def load_json_file(path: Path, *, what: str, max_bytes: int = MAX_BYTES,
                   max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document in `path`; ValueError (naming the file and `what` it should be)
    for a directory, an oversized, undecodable, malformed or over-nested file; OSError only
    for a file that cannot be opened."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not {what}")
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: {size} bytes, larger than any {what} ({max_bytes})")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not {what} (not UTF-8: {exc.reason})") from None
    try:
        return loads_bounded(text, max_depth=max_depth)
    except ValueError as exc:
        raise ValueError(f"{path}: not {what} ({exc})") from None
