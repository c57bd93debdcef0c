"""Time to generate all 5040 tasks (target <= 10 s on one core), and to serialise them.

Each repeat builds a fresh registry-backed matcher, so BM25 memoisation starts cold.
Run: python bench/bench_generate.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from pytest_resilibench.solver.generate import GeneratorConfig, generate_tasks, tasks_bytes

from pytest_resilibench.core.registry import ToolRegistry, default_registry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = GeneratorConfig()
    generate_times, serialise_times = [], []
    for _ in range(args.repeats):
        # A fresh registry: no memoised dependencies or validators carried between repeats.
        registry = ToolRegistry(default_registry().tools)
        start = time.perf_counter()
        tasks = generate_tasks(config, registry=registry)
        generate_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        data = tasks_bytes(tasks)
        serialise_times.append(time.perf_counter() - start)
    print(f"generate {len(tasks)} tasks: median {statistics.median(generate_times):.2f} s, "
          f"best {min(generate_times):.2f} s over {args.repeats} repeats (target <= 10 s)")
    print(f"serialise to tasks.jsonl.gz: median {statistics.median(serialise_times):.2f} s, "
          f"{len(data) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
