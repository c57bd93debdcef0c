"""Requests in flight through the whole plugin: pytest items -> runner -> real openai client ->
the OpenAI-compatible test server on loopback (100 ms per reply).

    python bench/bench_plugin_concurrency.py [--workers 2] [--concurrency 32] [--sample 2]

`-n W --resili-concurrency C` should keep about W x C requests in flight. The server counts
requests in flight; a sampler reads it every 10 ms while the run is busy.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from pytest_resilibench.servers.testserver import OpenAITestServer

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sample", default="2")
    parser.add_argument("--latency-ms", type=float, default=100.0)
    opts = parser.parse_args()
    with OpenAITestServer(latency_ms=opts.latency_ms) as server:
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.01):
                if server.stats.requests:
                    samples.append(server.stats.in_flight)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider",
             "-n", str(opts.workers), f"--resili-concurrency={opts.concurrency}",
             f"--resili-sample={opts.sample}", "--resili-variants=optimal,flawed",
             "--resili-model=openai:builtin:follower", f"--resili-base-url={server.base_url}"],
            cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
    last = [line for line in result.stdout.splitlines() if line.strip()][-1]
    busy = [s for s in samples if s > 0] or [0]
    rate = server.stats.requests / wall
    print(f"pytest: {last}")
    print(f"{server.stats.requests} requests in {wall:.1f} s = {rate:.0f} req/s; in flight: "
          f"peak {server.stats.peak_in_flight}, mean while busy {statistics.mean(busy):.1f}, "
          f"median {statistics.median(busy):.0f} (target about {opts.workers * opts.concurrency})")


if __name__ == "__main__":
    main()
