"""The ResiliBench suite: one item per model x variant x task x repeat.

The plugin collects this module by itself when the benchmark is asked for (`--resili-model`, any
other `--resili-*` option or `resili_*` ini key) and no collected test takes `resili_case` or
`resili_episode`, so a repository needs no test file of its own; this repository's `suites/`
re-exports it.

Each item's status is its episode's outcome: FULL, PARTIAL or FAILED-EPISODE (a benchmark result,
not a broken test); INFRA-ERROR when the model could not be reached. The body re-checks the record's
own coherence, so a harness bug fails loudly here instead of skewing the numbers.
"""

from __future__ import annotations

from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.core.scoring import Conditions, outcome

__all__ = ["test_resilibench"]


def test_resilibench(resili_episode: EpisodeRecord) -> None:
    ep = resili_episode
    # A penalty (scoring.py `Score.penalties`: steps run too often) costs a level each.
    assert ep.outcome == outcome(Conditions(**ep.conditions), len(ep.penalties or {}))
    assert 0 <= ep.turns <= ep.max_turns
    assert 0.0 <= ep.coverage <= 1.0
