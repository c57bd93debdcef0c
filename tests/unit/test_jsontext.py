import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_resilibench.base.jsontext import json_text

_KEYS = st.one_of(st.text(max_size=4), st.integers(-2, 2), st.booleans(), st.none(),
                  st.floats(allow_nan=False, allow_infinity=False, width=16))
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text())
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12)
_OPTIONS: list[dict[str, Any]] = [{}, {"sort_keys": True}, {"ensure_ascii": False},
            {"sort_keys": True, "ensure_ascii": False}, {"sort_keys": True, "default": str}]


@given(_VALUES)
def test_the_text_is_json_dumps(value: Any) -> None:
    for options in _OPTIONS:
        try:
            expected = json.dumps(value, **options)
        except TypeError:  # sort_keys over keys of mixed types: refused alike
            with pytest.raises(TypeError):
                json_text(**options)(value)
            continue
        assert json_text(**options)(value) == expected


def test_default_and_refusals_as_json_dumps() -> None:
    assert json_text(default=str)({"d": Decimal("1.5")}) == '{"d": "1.5"}'
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_text()({"d": object()})


def test_without_the_c_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    value = {"b": [1, 2.5, float("inf")], "a": "é"}
    assert json_text(sort_keys=True)(value) == json.dumps(value, sort_keys=True)
