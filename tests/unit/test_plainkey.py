import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.base.plainkey import is_flat, plain_key

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "a", "1"]),
                    st.floats(allow_nan=False), st.lists(st.integers(0, 2), max_size=2))


def _look_alike(value: Any) -> Any:
    """A value Python holds equal to `value` whose JSON may differ."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value) if value not in (0, 1) else bool(value)
    if isinstance(value, float):
        return -value if value == 0 else value
    return value


@given(st.dictionaries(st.sampled_from(["path", "format", "n"]), _VALUES, max_size=3),
       st.lists(st.booleans(), min_size=3, max_size=3))
def test_equal_keys_mean_equal_json(arguments: dict[str, Any], swap: list[bool]) -> None:
    other = {k: _look_alike(v) if s else v
             for (k, v), s in zip(arguments.items(), swap[:len(arguments)], strict=True)}
    key, other_key = plain_key("tool", arguments), plain_key("tool", other)
    if key is not None and key == other_key:
        assert json.dumps(arguments, sort_keys=True) == json.dumps(other, sort_keys=True)
    if key is not None:
        assert hash(key) == hash(plain_key("tool", dict(arguments)))


def test_what_has_no_key() -> None:
    assert plain_key("t", {"a": 1}) != plain_key("t", {"a": True})
    assert plain_key("t", {"a": 1}) != plain_key("u", {"a": 1})
    for arguments in ({"a": 0.5}, {"a": [1]}, {"a": {"b": 1}}, {1: "a"}):
        assert plain_key("t", arguments) is None
    assert plain_key("t", {}) == ("t",)


def test_flat_means_scalar_values_in_a_dict() -> None:
    assert is_flat({}) and is_flat({"a": 1, "b": 0.5, "c": None, "d": "x", "e": True})
    for value in ({"a": [1]}, {"a": {"b": 1}}, [("a", 1)], "a"):
        assert not is_flat(value)
