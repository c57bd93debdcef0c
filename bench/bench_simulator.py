"""Simulator throughput on one core, argument validation included (target: >= 50,000 calls/s).

    python bench/bench_simulator.py [--episodes 20000]

Two workloads: a pipeline agent that resends the same arguments on retries (the common case;
validation memoised), and one whose every call carries fresh argument values (no memo hits).
"""

from __future__ import annotations

import argparse
import time

from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.simulator import EpisodeKey, Simulator

PIPELINE = ("file_operations_reader", "data_processing_parser", "data_processing_aggregator",
            "file_operations_writer")
INPUTS = {"path": "/data/a.csv", "format": "csv", "destination": "/out/b.json"}
ARGS = ({"path": "/data/a.csv"}, {"format": "csv"}, {"function": "sum"},
        {"destination": "/out/b.json"})


def run(episodes: int, *, fresh_arguments: bool) -> tuple[int, float]:
    registry = default_registry()
    calls = 0
    start = time.perf_counter()
    for e in range(episodes):
        sim = Simulator(registry, EpisodeKey(1, f"t{e}", 0), task_tools=PIPELINE, inputs=INPUTS)
        for attempt in range(2):
            for tool, args in zip(PIPELINE, ARGS, strict=True):
                if fresh_arguments and tool == "data_processing_aggregator":
                    # a value never seen before defeats the validation memo
                    args = {**args, "group_by": f"field_{e}_{attempt}"}
                sim.call(tool, args)
                calls += 1
    return calls, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=20000)
    opts = parser.parse_args()
    for fresh in (False, True):
        calls, seconds = run(opts.episodes, fresh_arguments=fresh)
        label = "fresh arguments on some calls" if fresh else "retries resend arguments"
        print(f"{label:32s} {calls:8d} calls in {seconds:6.2f} s = {calls / seconds:9,.0f} calls/s")


if __name__ == "__main__":
    main()
