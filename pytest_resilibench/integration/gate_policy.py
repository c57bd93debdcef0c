"""The gate's thresholds (`GatePolicy`): one vocabulary for the run's options and
`resilibench report`, recorded in the report (integration/gate.py applies them).

Read at option registration, so it imports nothing heavy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["INCONCLUSIVE_RULES", "GatePolicy", "InfraTolerance", "parse_infra_tolerance"]

# What an inconclusive verdict does to the exit status. `pass` by default: an inconclusive
# verdict says the run was too small to show a regression or its absence, and failing on it
# would fail every small pull-request run; a release gate that must show the absence of a
# regression sets `fail` and sizes the run by the verdict's "more pairs needed".
INCONCLUSIVE_RULES = ("pass", "fail")


@dataclass(frozen=True)
class InfraTolerance:
    """How many infra errors (episodes the model could not be reached for) a run may have and
    still pass: at most `count`, or at most `share` of its episodes. The default, 0, fails a
    run on its first one: an unmeasured episode leaves its pair out of every comparison."""

    count: int | None = 0
    share: float | None = None

    def allows(self, errors: int, episodes: int) -> bool:
        if self.share is not None:
            return errors <= self.share * episodes + 1e-9
        return errors <= (self.count or 0)

    def __str__(self) -> str:
        return f"{100 * self.share:g}%" if self.share is not None else str(self.count or 0)


def parse_infra_tolerance(text: str) -> InfraTolerance:
    """`0`, `5` (a count) or `2%` (a share of the run's episodes)."""
    value = text.strip()
    try:
        if value.endswith("%"):
            share = float(value[:-1])
            if not math.isfinite(share) or not 0.0 <= share <= 100.0:
                raise ValueError
            return InfraTolerance(count=None, share=share / 100)
        count = int(value)
        if count < 0:
            raise ValueError
        return InfraTolerance(count=count)
    except ValueError:
        raise ValueError(f"{value!r} is not a count of infra errors (0, 5) or a share of the "
                         "run's episodes (2%)") from None


@dataclass(frozen=True)
class GatePolicy:
    """The thresholds every verdict is judged by, printed beside it and kept in the report."""

    max_drop_pp: float = 5.0
    confidence: float = 0.95
    fail_under: float | None = None
    inconclusive: str = "pass"
    max_infra_errors: InfraTolerance = field(default_factory=InfraTolerance)

    def to_json(self) -> dict[str, Any]:
        return {"max_drop_pp": self.max_drop_pp, "confidence": self.confidence,
                "fail_under": self.fail_under, "inconclusive": self.inconclusive,
                "max_infra_errors": str(self.max_infra_errors)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GatePolicy:
        """A report's recorded policy (`config.gate_policy`); raises ValueError if malformed."""
        try:
            policy = cls(max_drop_pp=float(data["max_drop_pp"]),
                         confidence=float(data["confidence"]),
                         fail_under=None if data.get("fail_under") is None
                         else float(data["fail_under"]),
                         inconclusive=str(data.get("inconclusive", "pass")),
                         max_infra_errors=parse_infra_tolerance(
                             str(data.get("max_infra_errors", "0"))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the recorded gate policy is malformed ({exc})") from None
        if policy.inconclusive not in INCONCLUSIVE_RULES or not (
                0.0 <= policy.max_drop_pp <= 100.0 and 0.5 <= policy.confidence < 1.0):
            raise ValueError(f"the recorded gate policy is out of range: {dict(data)}")
        return policy
