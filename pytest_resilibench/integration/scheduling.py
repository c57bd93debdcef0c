"""xdist scheduling that lets every worker know its items up front.

xdist's default load scheduling hands out items a chunk at a time, so a worker cannot start the
episodes of items it does not have yet. `RoundRobinScheduling` (installed through the public
`pytest_xdist_make_scheduler` hook, only in a run that asks for the benchmark) deals the
benchmark items round-robin in runs of `SHARE_RUN` consecutive ones (worker `gwK` of N gets
runs K, K+N, K+2N, ..., counted among the benchmark items), all at start, in ascending order;
the worker computes the same share with `worker_share` and runs their episodes ahead.

From then on it is xdist's `WorkStealingScheduling`. The shares are even in items, not in
time: one worker can finish a second or two before another (a shared machine gives one process
less of its cores), so a worker whose queue runs out takes half of what is left of the busiest
one (xdist's `steal` command, which a worker grants only for items it has not started). The
victim gives up the end of its queue, far from the batch it computes ahead (`batches.py`); the
thief runs those items' episodes on demand. The run's other tests (a repository's own,
collected alongside) go to workers as they run out, the same way.

Which worker runs an episode never changes its result (every draw is keyed by the case), so
a stolen item, or a crashed worker's items re-sent elsewhere, still give the same report.

A crashed worker: xdist's `DSession` removes it (`remove_node` puts its unfinished items back
in `pending`, the item it was running is reported as crashed) and starts a replacement, whose
collection calls `schedule()` again, which hands the pending items to workers that run out.
Items a worker did not announce run their episode on demand, so a replacement (its id lies
outside the first partition) announces nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["ROUND_ROBIN_FLAG", "SHARE_RUN", "make_round_robin_scheduling", "share",
           "worker_index", "worker_share"]

ROUND_ROBIN_FLAG = "resili_round_robin"  # in workerinput: the controller schedules round-robin

# Consecutive benchmark items dealt to a worker at a time: a task's variants, next to each
# other in the collection (cases.py), stay together, so the agents' memos serve them all;
# one item at a time split them between the workers (5% more CPU an episode at -n 2).
SHARE_RUN = 32

_T = TypeVar("_T")
_GATEWAY = re.compile(r"^gw(\d+)$")


def worker_index(workerid: str) -> int | None:
    match = _GATEWAY.match(workerid)
    return int(match.group(1)) if match else None


def worker_share(items: Sequence[_T], workerinput: dict[str, Any]) -> list[_T]:
    """The items this xdist worker will be sent up front: none when the controller does not
    schedule round-robin (`--dist` other than `load`, flag set in `pytest_configure_node`) or
    for a worker outside the first partition (a replacement of a crashed one): their items
    run on demand."""
    if not workerinput.get(ROUND_ROBIN_FLAG):
        return []
    index = worker_index(str(workerinput.get("workerid", "")))
    count = int(workerinput.get("workercount", 1) or 1)
    if index is None or index >= count:
        return []
    return share(items, index, count)


def share(items: Sequence[_T], index: int, count: int) -> list[_T]:
    """Worker `index` of `count`'s items: every `count`-th run of `SHARE_RUN`, in order."""
    return [item for i, item in enumerate(items) if (i // SHARE_RUN) % count == index]


def make_round_robin_scheduling(config: Any, log: Any,
                                is_benchmark: Callable[[str], bool]) -> Any:
    """Build the scheduler; xdist is imported here only (the plugin must work without it).
    `is_benchmark(nodeid)` tells the benchmark items from the run's other tests."""
    from xdist.scheduler import WorkStealingScheduling
    from xdist.scheduler.worksteal import MIN_PENDING

    class RoundRobinScheduling(WorkStealingScheduling):  # type: ignore[misc]  # no types
        def mark_test_complete(self, node: Any, item_index: int,
                               duration: float | None = None) -> None:
            # xdist reschedules after every item; with every item handed out at start only a
            # worker running out changes anything (~6 us an item on the controller otherwise).
            pending = self.node2pending[node]
            pending.remove(item_index)
            if len(pending) < MIN_PENDING:
                self.check_schedule()

        def schedule(self) -> None:
            assert self.collection_is_completed
            if self.collection is not None:  # type: ignore[has-type]  # nodes added later
                self.check_schedule()
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            collection = next(iter(self.node2collection.values()))
            ours = [i for i, nodeid in enumerate(collection) if is_benchmark(nodeid)]
            count = len(self.nodes)
            nodes = {worker_index(node.gateway.id): node for node in self.nodes}
            if not ours or set(nodes) != set(range(count)):
                super().schedule()  # nothing of ours, or unexpected ids: xdist's own way
                return
            self.collection = collection
            taken = set(ours)
            self.pending[:] = [i for i in range(len(collection)) if i not in taken]
            for index, node in sorted((i, n) for i, n in nodes.items() if i is not None):
                mine = share(ours, index, count)
                if mine:
                    self.node2pending[node].extend(mine)
                    node.send_runtest_some(mine)
            self.check_schedule()  # the other tests to idle workers, then stealing

    return RoundRobinScheduling(config, log)
