"""Worker shares match what the round-robin scheduler sends."""

from __future__ import annotations

from pytest_resilibench.integration.scheduling import ROUND_ROBIN_FLAG as FLAG
from pytest_resilibench.integration.scheduling import worker_index, worker_share


def test_worker_index() -> None:
    assert worker_index("gw0") == 0
    assert worker_index("gw12") == 12
    assert worker_index("main") is None


def test_shares_partition_the_items_in_order() -> None:
    items = list(range(10))
    shares = [worker_share(items, {"workerid": f"gw{k}", "workercount": 3, FLAG: True})
              for k in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(i for share in shares for i in share) == items


def test_replacement_and_unusual_workers_announce_nothing() -> None:
    items = [1, 2, 3]
    assert worker_share(items, {"workerid": "gw5", "workercount": 2, FLAG: True}) == []
    assert worker_share(items, {"workerid": "odd", FLAG: True}) == []


def test_workers_of_another_scheduler_announce_nothing() -> None:
    assert worker_share([1, 2], {"workerid": "gw0", "workercount": 2}) == []
