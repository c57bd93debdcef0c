"""Counter-based randomness: every draw is a pure function of its key.

A draw never depends on how many draws were made before it, by whom or in which process, so
results are identical with or without xdist, whatever the interleaving, and every agent faces the
same luck on the same (seed, task, repeat, tool, call) — common random numbers.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from hashlib import blake2b
from typing import TypeVar

__all__ = ["DrawStream", "key_int", "uniform"]

_SCALE = 2.0**-53
_WORDS = struct.Struct("<8Q")  # a 64-byte digest as eight little-endian 64-bit words
_T = TypeVar("_T")


def _block(key: bytes, counter: int) -> list[int]:
    digest = blake2b(key + counter.to_bytes(4, "little"), digest_size=64).digest()
    return list(_WORDS.unpack(digest))


def _key(parts: tuple[object, ...]) -> bytes:
    return "\x1f".join(map(str, parts)).encode()


def key_int(*parts: object) -> int:
    """A 64-bit integer hashed from the parts (their `str`, unit-separated)."""
    return _block(_key(parts), 0)[0]


def uniform(*parts: object) -> float:
    """A float in [0, 1) keyed by the parts."""
    return (key_int(*parts) >> 11) * _SCALE


class DrawStream:
    """An endless stream of draws keyed by the parts: blake2b in counter mode, eight 64-bit
    words a block. The i-th draw of a stream is a pure function of (parts, i); one hash serves
    a whole simulated call, which `random.Random` (5 us to seed) could not do on the hot path."""

    __slots__ = ("_buffer", "_counter", "_key")

    def __init__(self, *parts: object) -> None:
        self._key = _key(parts)
        self._counter = 0
        self._buffer: list[int] = []

    def restarted(self) -> DrawStream:
        """The same stream from its first draw (a retry that must not depend on the tries
        before it)."""
        stream = DrawStream.__new__(DrawStream)
        stream._key, stream._counter, stream._buffer = self._key, 0, []
        return stream

    def bits64(self) -> int:
        if not self._buffer:
            self._buffer = _block(self._key, self._counter)
            self._buffer.reverse()
            self._counter += 1
        return self._buffer.pop()

    def random(self) -> float:
        """A float in [0, 1)."""
        return (self.bits64() >> 11) * _SCALE

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self.random()

    def randint(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (modulo bias < 2^-40 for the ranges used here)."""
        return lo + self.bits64() % (hi - lo + 1)

    def choice(self, seq: Sequence[_T]) -> _T:
        return seq[self.bits64() % len(seq)]
