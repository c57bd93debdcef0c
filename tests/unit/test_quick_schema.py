"""The quick schema check (core/quick_schema.py): it says yes only where jsonschema finds no
error, and it says yes to the calls the built-in agents make, so the simulator seldom needs
jsonschema."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.core.quick_schema import quick_check
from pytest_resilibench.core.registry import _messages, default_registry

REGISTRY = default_registry()
TOOLS = [tool.name for tool in REGISTRY]
_ENUMS = sorted({str(e) for t in REGISTRY for p in t.parameters.get("properties", {}).values()
                 for e in p.get("enum", [])})
VALUES = st.one_of(
    st.sampled_from(_ENUMS), st.text(max_size=4), st.integers(-3, 10**7),
    st.floats(allow_nan=True), st.booleans(), st.none(), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))


def _jsonschema_errors(tool: str, arguments: Any) -> list[str]:
    return _messages(REGISTRY._argument_validators[tool].iter_errors(arguments))


@settings(max_examples=1500, deadline=None)
@given(tool=st.sampled_from(TOOLS), data=st.data())
def test_a_yes_is_always_jsonschemas_yes(tool: str, data: st.DataObject) -> None:
    names = [*REGISTRY[tool].parameters.get("properties", {}), "unknown"]
    arguments = data.draw(st.dictionaries(st.sampled_from(names), VALUES, max_size=4))
    if quick_check(REGISTRY[tool].parameters)(arguments):
        assert _jsonschema_errors(tool, arguments) == []


def test_typical_calls_get_a_quick_yes() -> None:
    """Required parameters with a schema-valid value each: no jsonschema needed."""
    said_yes = 0
    for tool in REGISTRY:
        arguments: dict[str, Any] = {}
        for name in tool.required_parameters:
            schema = tool.parameters["properties"][name]
            value = schema["enum"][0] if "enum" in schema else {
                "string": "x", "integer": schema.get("minimum", 1), "number": 1.5,
                "boolean": True}.get(schema.get("type"))
            arguments[name] = value
        if _jsonschema_errors(tool.name, arguments) == []:
            said_yes += quick_check(tool.parameters)(arguments)
            assert REGISTRY.argument_errors(tool.name, arguments) == []
    assert said_yes >= 25


def test_doubt_goes_to_jsonschema() -> None:
    """What the subset leaves to jsonschema: another type that JSON Schema might accept (2.0
    is an integer there), True where 1 is meant, keywords outside the subset."""
    check = quick_check({"type": "object", "properties": {"n": {"type": "integer"}},
                         "additionalProperties": False})
    assert check({"n": 2}) and not check({"n": 2.0}) and not check({"n": True})
    assert not check({"m": 1}) and not check([1])
    assert not quick_check({"type": "object", "properties": {},
                            "additionalProperties": True})({})
    assert not quick_check({"type": "object", "properties": {"s": {"type": "string",
                                                                  "format": "uri"}}})({"s": "x"})
    enum = quick_check({"type": "object", "properties": {"e": {"type": "integer",
                                                                "enum": [1]}}})
    assert enum({"e": 1}) and not enum({"e": True})


def test_the_registry_asks_the_quick_check_first() -> None:
    """A valid call never reaches jsonschema (nor its memo); an invalid one does, for the
    words of its errors."""
    from pytest_resilibench.core.catalog import TOOLS
    from pytest_resilibench.core.registry import ToolRegistry

    registry = ToolRegistry(TOOLS)
    registry.__dict__["_argument_validators"] = {}  # any use of jsonschema would fail
    assert registry.argument_errors("data_processing_aggregator", {"function": "sum"}) == []
    assert registry._argument_memo == {}
    del registry.__dict__["_argument_validators"]
    errors = registry.argument_errors("data_processing_aggregator", {"function": "median"})
    assert errors and "median" in errors[0]
