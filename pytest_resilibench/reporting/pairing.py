"""Which baseline episode a new episode is judged against: the one home of the pairing rule that
the fixed gate, the sequential gate and `resilibench report --compare` share.

Two episodes pair when they met the same tool luck (`PAIR_FIELDS`: the same task, variant,
flaw, severity, repeat, seed and base rate; docs/ARCHITECTURE.md) and their models are
partners. A model's partner is the baseline's model of the same name; when, after that, one
model on each side is left without one, those two are partners too (a new release of an agent
under a new name, beside unchanged ones). Models left over are named, never pooled: each model
is judged against its own partner alone (README.md, "Gate an agent release in CI").

Kept free of scipy and numpy, so the sequential gate can use it at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PAIR_FIELDS", "Partners", "pair_key", "partners"]

# Fields that give two episodes the same luck.
PAIR_FIELDS = ("task_id", "variant", "flaw", "severity", "repeat", "seed", "base_success")


@dataclass(frozen=True)
class Partners:
    """new model -> its baseline model, and the models of each side left without one."""

    of_new: dict[str, str]
    new_alone: tuple[str, ...]
    old_alone: tuple[str, ...]

    def lines(self) -> list[str]:
        """What was not judged, one line per side (empty when every model has a partner)."""
        out = []
        if self.new_alone:
            out.append(f"not judged, no partner in the baseline: {', '.join(self.new_alone)}")
        if self.old_alone:
            out.append(f"in the baseline but not in this run: {', '.join(self.old_alone)}")
        return out


def partners(old_models: Iterable[str], new_models: Iterable[str]) -> Partners:
    """Pair models by name; one model left on each side pairs across names. Raises
    ValueError when no model has a partner."""
    old, new = sorted(set(old_models)), sorted(set(new_models))
    of_new = {m: m for m in new if m in old}
    new_alone = [m for m in new if m not in of_new]
    old_alone = [m for m in old if m not in of_new]
    if len(new_alone) == 1 and len(old_alone) == 1:
        of_new[new_alone.pop()] = old_alone.pop()
    if not of_new:
        raise ValueError(f"no model of this run {new} has a partner in the baseline {old}: "
                         "models pair by name, or one left on each side pairs across names")
    return Partners(dict(sorted(of_new.items())), tuple(new_alone), tuple(old_alone))


def pair_key(fields: Mapping[str, Any], model: str) -> tuple[Any, ...]:
    """The key on which episodes meet: the (baseline's) model, then the luck's fields."""
    return (model, *(fields.get(name) for name in PAIR_FIELDS))
