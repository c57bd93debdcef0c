"""Memo keys for the small flat argument objects calls carry.

A call's JSON (the reply a built-in agent sends, the key the episode compares repeated calls
by) is a pure function of its arguments; arguments recur (every retry, every variant of a task
makes the same calls), so the encodings are memoised on a key that is equal exactly when the
JSON is: string names, values of plain types with the type beside them (JSON tells 1 from
true, which Python holds equal). Floats are left out (0.0 == -0.0, but their JSON differs),
and so is anything nested: those are encoded every time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_flat", "plain_key"]

_PLAIN = frozenset({str, int, bool, type(None)})
_SCALARS = frozenset({str, int, float, bool, type(None)})


def is_flat(value: Any) -> bool:
    """Whether `value` is a dict of scalar values: a shallow copy of it is a whole copy (what
    a memo of parsed arguments hands each caller)."""
    return type(value) is dict and all(type(v) in _SCALARS for v in value.values())


def plain_key(head: str, arguments: Mapping[Any, Any]) -> tuple[Any, ...] | None:
    """`(head, (name, type, value), ...)` in the arguments' order, or None when a name is not
    a string or a value not of a plain type."""
    parts: list[Any] = [head]
    for name, value in arguments.items():
        kind = type(value)
        if type(name) is not str or kind not in _PLAIN:
            return None
        parts.append((name, kind, value))
    return tuple(parts)
