"""Worker shares match what the round-robin scheduler sends; xdist's work stealing (its real
scheduler class, fake workers) evens out their ends."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pytest_resilibench.integration.scheduling import ROUND_ROBIN_FLAG as FLAG
from pytest_resilibench.integration.scheduling import (
    SHARE_RUN,
    make_round_robin_scheduling,
    worker_index,
    worker_share,
)

R = SHARE_RUN


def test_worker_index() -> None:
    assert worker_index("gw0") == 0
    assert worker_index("gw12") == 12
    assert worker_index("main") is None


def test_shares_deal_runs_of_consecutive_items_in_order() -> None:
    items = list(range(7 * R + 5))
    shares = [worker_share(items, {"workerid": f"gw{k}", "workercount": 3, FLAG: True})
              for k in range(3)]
    runs = [items[i:i + R] for i in range(0, len(items), R)]  # 8 runs, the last of 5
    assert shares == [runs[0] + runs[3] + runs[6], runs[1] + runs[4] + runs[7],
                      runs[2] + runs[5]]
    assert sorted(i for share in shares for i in share) == items


def test_replacement_and_unusual_workers_announce_nothing() -> None:
    items = [1, 2, 3]
    assert worker_share(items, {"workerid": "gw5", "workercount": 2, FLAG: True}) == []
    assert worker_share(items, {"workerid": "odd", FLAG: True}) == []


def test_workers_of_another_scheduler_announce_nothing() -> None:
    assert worker_share([1, 2], {"workerid": "gw0", "workercount": 2}) == []


class _Node:
    """What xdist's scheduler uses of a `WorkerController`: its id and the commands it sends
    (xdist/workermanage.py)."""

    def __init__(self, workerid: str) -> None:
        self.gateway = SimpleNamespace(id=workerid)
        self.queue: list[int] = []  # what the worker still has to run, in order
        self.stolen: list[int] | None = None  # the last steal request
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.queue.extend(indices)

    def send_steal(self, indices: list[int]) -> None:
        self.stolen = list(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduler(nodeids: list[str], workers: int) -> tuple[Any, list[_Node]]:
    config = SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"])
    scheduler = make_round_robin_scheduling(config, None, lambda nodeid: "bench" in nodeid)
    nodes = [_Node(f"gw{k}") for k in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, nodeids)
    scheduler.schedule()
    return scheduler, nodes


def _run(scheduler: Any, node: _Node, count: int, done: list[int]) -> None:
    """The worker runs the next `count` items of its queue, as xdist reports them."""
    for _ in range(count):
        done.append(node.queue[0])
        scheduler.mark_test_complete(node, node.queue.pop(0))


def _grant(scheduler: Any, node: _Node) -> None:
    """The worker's answer to a steal request: all the items, as none has started yet."""
    assert node.stolen is not None and set(node.stolen) <= set(node.queue[1:])
    stolen, node.stolen = node.stolen, None
    node.queue = [i for i in node.queue if i not in stolen]
    scheduler.remove_pending_tests_from_node(node, stolen)


def test_the_first_distribution_is_the_workers_round_robin_shares() -> None:
    nodeids = ["own_a"] + [f"bench[{i}]" for i in range(3 * R)] + ["own_b"]
    scheduler, (gw0, gw1) = _scheduler(nodeids, 2)
    ours = list(range(1, 3 * R + 1))  # indices in the collection
    assert gw0.queue == worker_share(ours, {"workerid": "gw0", "workercount": 2, FLAG: True})
    assert gw1.queue == worker_share(ours, {"workerid": "gw1", "workercount": 2, FLAG: True})
    assert gw0.queue == ours[:R] + ours[2 * R:] and gw1.queue == ours[R:2 * R]
    assert scheduler.pending == [0, 3 * R + 1]  # the repository's own tests wait for a worker


def test_a_worker_that_runs_out_steals_the_end_of_the_busiest_queue() -> None:
    scheduler, (gw0, gw1) = _scheduler([f"bench[{i}]" for i in range(2 * R)], 2)
    done: list[int] = []
    _run(scheduler, gw1, 3, done)
    _run(scheduler, gw0, R - 1, done)  # one item left: gw0 is idle, gw1 has R - 3 to go
    later_half = list(range(2 * R - (R - 3) // 2, 2 * R))
    assert gw1.stolen == later_half  # the later half of gw1's queue
    assert gw0.stolen is None and not gw0.shutting_down
    _grant(scheduler, gw1)
    assert gw0.queue == [R - 1, *later_half]
    while gw0.queue or gw1.queue:  # gw0 three times as fast, every request granted
        _run(scheduler, gw0, min(3, len(gw0.queue)), done)
        _run(scheduler, gw1, min(1, len(gw1.queue)), done)
        for node in (gw0, gw1):
            if node.stolen is not None:
                _grant(scheduler, node)
    assert sorted(done) == list(range(2 * R))  # each item ran once
    assert scheduler.tests_finished and gw0.shutting_down and gw1.shutting_down
