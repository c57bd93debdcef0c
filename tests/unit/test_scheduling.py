"""Worker shares match what the round-robin scheduler sends."""

from __future__ import annotations

from pytest_resilibench.scheduling import worker_index, worker_share


def test_worker_index() -> None:
    assert worker_index("gw0") == 0
    assert worker_index("gw12") == 12
    assert worker_index("main") is None


def test_shares_partition_the_items_in_order() -> None:
    items = list(range(10))
    shares = [worker_share(items, {"workerid": f"gw{k}", "workercount": 3}) for k in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(i for share in shares for i in share) == items


def test_unusual_workers_take_everything() -> None:
    items = [1, 2, 3]
    assert worker_share(items, {"workerid": "gw5", "workercount": 2}) == items
    assert worker_share(items, {"workerid": "odd"}) == items
