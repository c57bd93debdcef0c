"""JSON texts exactly as `json.dumps` writes them, from an encoder built once.

`json.dumps(value, **options)` builds the C accelerator's encoder at every call and tracks the
ids of the containers it enters, to refuse a cycle: about a third of the cost of encoding a
tool observation. The episode loop writes several small texts a turn (observations, call
keys, call replies) and a report text an episode, all trees of plain values, so the encoders
here are built once and skip the cycle check (a cyclic value would end in RecursionError
rather than ValueError). Without the C accelerator the standard encoder writes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _stdlib
from typing import Any

__all__ = ["json_text"]


def json_text(
    *, sort_keys: bool = False, ensure_ascii: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """A function that writes `json.dumps(value, sort_keys=..., ensure_ascii=..., default=...)`
    (default separators) of a value without cycles."""
    standard = json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=default)
    make = getattr(_stdlib, "c_make_encoder", None)  # CPython's, absent from the stubs
    if make is None:  # no C accelerator (another interpreter): the standard path
        return standard.encode
    strings = _stdlib.encode_basestring_ascii if ensure_ascii else _stdlib.encode_basestring
    # The arguments JSONEncoder.iterencode passes, but None for its cycle markers.
    chunks = make(None, standard.default, strings, None, standard.key_separator,
                  standard.item_separator, sort_keys, standard.skipkeys, standard.allow_nan)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode
