"""Per-service observed failure rate and latency of the live services over real HTTP.

    python bench/bench_live.py [--calls 200] [--seed 0] [--concurrency 16]

Starts the 23 services on loopback (default hang and client timeout), sends `--calls` valid
requests to each through `LiveEnvironment` (each request its own key, as episodes send them),
and prints per service: the designed fault rate, the observed failure rate and codes, and
latency percentiles of the successful calls (client-measured, milliseconds).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from typing import Any

from tabulate import tabulate

from pytest_resilibench.core.simulator import CallResult, EpisodeKey
from pytest_resilibench.servers.live.environment import LiveEnvironment
from pytest_resilibench.servers.live.server import live_services
from pytest_resilibench.servers.live.services import SERVICES
from pytest_resilibench.servers.live.tasks import live_tasks

_SHORT = {"OPERATION_FAILED": "5xx", "RATE_LIMITED": "429", "TIMEOUT": "timeout",
          "INVALID_RESPONSE": "bad body", "NETWORK_ERROR": "network", "INVALID_INPUT": "400"}


def valid_arguments() -> dict[str, dict[str, Any]]:
    """A valid call of each service, taken from the live tasks' plans (else no arguments)."""
    out: dict[str, dict[str, Any]] = {}
    for task in live_tasks():
        for tool, args in task.step_arguments.items():
            out.setdefault(tool, dict(args))
    return out


async def measure(base_urls: dict[str, str], *, calls: int, seed: int, concurrency: int
                  ) -> dict[str, list[CallResult]]:
    env = LiveEnvironment(base_urls, episode=EpisodeKey(seed, "bench", 0))
    gate = asyncio.Semaphore(concurrency)
    args = valid_arguments()

    async def one(name: str) -> CallResult:
        async with gate:
            return await env.call(name, args.get(name, {}))

    try:
        results = await asyncio.gather(*(one(s.name) for s in SERVICES for _ in range(calls)))
    finally:
        await env.aclose()
    by_service: dict[str, list[CallResult]] = {s.name: [] for s in SERVICES}
    for r in results:
        by_service[r.tool].append(r)
    return by_service


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="requests per service")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=16)
    opts = parser.parse_args()
    with live_services(opts.seed) as server:
        start = time.perf_counter()
        by_service = asyncio.run(measure(server.base_urls, calls=opts.calls, seed=opts.seed,
                                         concurrency=opts.concurrency))
        wall = time.perf_counter() - start
    rows = []
    total_fail = total = 0
    for spec in SERVICES:
        results = by_service[spec.name]
        failures = [r for r in results if not r.ok]
        codes = Counter(_SHORT.get(r.error_code or "", r.error_code) for r in failures)
        ok_ms = sorted(r.latency_s * 1000 for r in results if r.ok)
        total_fail += len(failures)
        total += len(results)
        rows.append([
            spec.name, f"{spec.misbehaviour.failure_rate:.0%}",
            f"{len(failures) / len(results):.1%}",
            ", ".join(f"{c} {n}" for c, n in codes.most_common()) or "-",
            f"{spec.misbehaviour.latency_ms:.0f}",
            f"{statistics.median(ok_ms):.1f}" if ok_ms else "-",
            f"{ok_ms[int(0.95 * (len(ok_ms) - 1))]:.1f}" if ok_ms else "-",
        ])
    print(tabulate(rows, headers=["service", "designed", "observed", "failures",
                                  "median ms (design)", "p50 ms", "p95 ms"]))
    print(f"\n{total} calls, {total_fail / total:.1%} failed, {wall:.1f}s wall "
          f"({total / wall:.0f} calls/s at concurrency {opts.concurrency})")


if __name__ == "__main__":
    main()
