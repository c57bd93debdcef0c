"""A quick yes to "are these arguments valid?" for the flat schemas the catalog's tools have.

jsonschema's validator costs ~60 us a call here and the simulator validates every call; the
registry memoises by arguments, but every task has its own paths and names, so about one call
an episode misses. `quick_check(schema)` compiles the subset of JSON Schema (2020-12) that the
catalog writes (an object of typed properties: `required`, `additionalProperties: false`,
`enum`, `minLength`, `minimum`, `maximum`, `pattern`) into a predicate that answers True only
when the arguments certainly conform. Anything else, a doubt included (an `enum` value of
another type, an array, a keyword outside the subset), answers False, and the caller asks
jsonschema, which also words the errors: the predicate never decides that a call is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["quick_check"]

Check = Callable[[Any], bool]

# Keywords that say nothing about validity (annotations).
_ANNOTATIONS = frozenset({"description", "default", "title", "examples"})
_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties"})
_VALUE_KEYWORDS = frozenset({"type", "enum", "minLength", "minimum", "maximum", "pattern"})


def _never(value: Any) -> bool:
    return False


def _is_integer(value: Any) -> bool:
    # JSON Schema's integer: a number with no fraction; 2.0 counts, which jsonschema decides.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: Mapping[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
}


def quick_check(schema: Mapping[str, Any]) -> Check:
    """A predicate that is True only for arguments `schema` certainly accepts (module doc)."""
    keys = set(schema) - _ANNOTATIONS
    properties = schema.get("properties", {})
    if (schema.get("type") != "object" or not keys <= _OBJECT_KEYWORDS
            or schema.get("additionalProperties", False) is not False
            or not isinstance(properties, Mapping)):
        return _never
    checks = {name: _value_check(sub) for name, sub in properties.items()}
    required = tuple(schema.get("required", ()))

    def check(arguments: Any) -> bool:
        if not isinstance(arguments, dict):
            return False
        for name in required:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            value_check = checks.get(name)
            if value_check is None or not value_check(value):
                return False
        return True

    return check


def _value_check(schema: Any) -> Check:
    """A property's predicate: True only when the value certainly conforms."""
    if not isinstance(schema, Mapping) or not set(schema) - _ANNOTATIONS <= _VALUE_KEYWORDS:
        return _never
    kind = schema.get("type", "")
    is_type = _TYPES.get(kind)
    # Length and pattern speak of strings, bounds of numbers (other values pass them, which
    # is for jsonschema to say).
    if is_type is None or (kind != "string" and {"minLength", "pattern"} & set(schema)) or (
            kind not in ("integer", "number") and {"minimum", "maximum"} & set(schema)):
        return _never
    tests: list[Check] = [is_type]
    if "enum" in schema:
        # The same value and the same type: True == 1 in Python, not in JSON Schema.
        members = tuple((type(e), e) for e in schema["enum"])
        tests.append(lambda v: (type(v), v) in members)
    if "minLength" in schema:
        least = schema["minLength"]
        tests.append(lambda v: len(v) >= least)  # code points, as JSON Schema counts
    if "minimum" in schema:
        low = schema["minimum"]
        tests.append(lambda v: v >= low)
    if "maximum" in schema:
        high = schema["maximum"]
        tests.append(lambda v: v <= high)
    if "pattern" in schema:
        search = re.compile(schema["pattern"]).search  # unanchored, as jsonschema searches
        tests.append(lambda v: search(v) is not None)
    return lambda value: all(test(value) for test in tests)
