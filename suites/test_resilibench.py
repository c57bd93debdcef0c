"""The ResiliBench suite: one item per model x variant x task x repeat.

Run `pytest suites` (add `--resili-model=o3 -n 16`, `-k semantic_drift`, ... see the README).
Each item's status is its episode's verdict: FULL, PARTIAL or UNSOLVED (a benchmark result, not
a broken test); INFRA-ERROR when the model could not be reached. The body re-checks the record's
own coherence, so a harness bug fails loudly here instead of skewing the numbers.
"""

from __future__ import annotations

from pytest_resilibench.record import EpisodeRecord


def test_resilibench(resili_episode: EpisodeRecord) -> None:
    ep = resili_episode
    met = sum(ep.conditions.values())
    assert ep.outcome == ("full" if met == 4 else "partial" if met >= 2 else "failed")
    assert 0 <= ep.turns <= ep.max_turns
    assert 0.0 <= ep.coverage <= 1.0
