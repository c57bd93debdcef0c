"""Requests in flight through the whole plugin: pytest items -> runner -> real openai client ->
the OpenAI-compatible test server on loopback (100 ms per reply).

    python bench/bench_plugin_concurrency.py [--workers 2] [--concurrency 32] [--sample 2]

`-n W --resili-concurrency C` should keep about W x C requests in flight. The server counts
requests in flight; a sampler reads it every 10 ms while the run is busy.

    python bench/bench_plugin_concurrency.py --tail [--repeats 4] [--concurrencies 16,64]
        [--latency-ms 500] [--latency-sd-ms 500] [--client-src DIR]

The tail of long runs (issue 47): `pytest suites` with `--resili-model=o3` (builtin:adaptive
served by the test server in a process of its own), `--resili-sample=1 --resili-repeats=4`
(600 episodes), at each concurrency, one process (-n 0). Figures, all over the provider's
span (its first request sent to its last reply, the run's report):
  Little's law  = the requests' own latencies summed (the server's draws; requests x latency
                  for a fixed one) / (concurrency x span): the share of the ideal throughput;
  busy slots    = the limiter's integral of requests in flight / (concurrency x span);
  wall, CPU     = the whole pytest run, start-up included, and the CPU of its process tree
                  (user + system; the server's own CPU apart).
`--client-src DIR` runs the pytest side from another tree (`git archive BASE | tar -x -C DIR`:
the figures before a change); the server is always this tree's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pytest_resilibench.servers.testserver import OpenAITestServer

ROOT = Path(__file__).resolve().parents[1]


def _serve(latency_ms: float, latency_sd_ms: float, ports: Any, stop: Any) -> None:
    from pytest_resilibench.runtime.agents import make_agent

    served = {"o3": make_agent("builtin:adaptive")}
    with OpenAITestServer(served, latency_ms=latency_ms,  # type: ignore[arg-type]
                          latency_sd_ms=latency_sd_ms) as server:
        ports.put(server.port)
        stop.wait()
        own = resource.getrusage(resource.RUSAGE_SELF)
        ports.put({**server.stats.to_json(), "cpu_s": own.ru_utime + own.ru_stime})


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def tail_run(concurrency: int, repeats: int, latency_ms: float, latency_sd_ms: float,
             client_src: str | None) -> dict[str, Any]:
    """One `pytest suites` run against a server process of its own; its figures."""
    ctx = mp.get_context("spawn")
    ports, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(latency_ms, latency_sd_ms, ports, stop),
                         daemon=True)
    server.start()
    port = ports.get(timeout=60)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "-n", "0", "--resili-model=o3",
               f"--resili-base-url=http://127.0.0.1:{port}/v1", "--resili-sample=1",
               f"--resili-repeats={repeats}", f"--resili-concurrency={concurrency}",
               f"--resili-report={report}"]
        env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
        if client_src:
            env["PYTHONPATH"] = client_src
        cpu0 = _children_cpu()
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=client_src or ROOT, env=env, capture_output=True,
                              text=True, check=False)
        wall = time.perf_counter() - start
        cpu = _children_cpu() - cpu0  # pytest and whatever it waited for, before the server
        stop.set()
        served = ports.get(timeout=30)
        server.join(timeout=10)
        if not report.exists():
            print(done.stdout[-3000:], done.stderr[-3000:])
            raise SystemExit("no report")
        summary = json.loads(report.read_text())["summary"]
    provider = summary["providers"]["o3"]
    span = provider["last_at"] - provider["first_at"]
    return {"concurrency": concurrency, "episodes": summary["counts"]["episodes"],
            "errors": summary["counts"]["errors"], "requests": served["requests"],
            "wall_s": wall, "span_s": span, "cpu_s": cpu, "server_cpu_s": served["cpu_s"],
            "littles_law": served["latency_s"] / (concurrency * span),
            "busy": provider["busy_s"] / (concurrency * span), "exit": done.returncode}


def tail(opts: argparse.Namespace) -> None:
    concurrencies = [int(c) for c in opts.concurrencies.split(",")]
    rows = [tail_run(c, opts.repeats, opts.latency_ms, opts.latency_sd_ms, opts.client_src)
            for c in concurrencies]
    shape = (f"lognormal, sd {opts.latency_sd_ms:g} ms" if opts.latency_sd_ms else "fixed")
    print(f"latency {opts.latency_ms:g} ms ({shape}); client {opts.client_src or 'this tree'}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'conc':>4} {'episodes':>8} {'errors':>6} {'requests':>8} {'wall s':>7} "
          f"{'span s':>7} {'LL':>5} {'busy':>5} {'CPU s':>6} {'server CPU s':>12}")
    for r in rows:
        print(f"{r['concurrency']:4d} {r['episodes']:8d} {r['errors']:6d} {r['requests']:8d} "
              f"{r['wall_s']:7.1f} {r['span_s']:7.1f} {r['littles_law']:5.0%} {r['busy']:5.0%} "
              f"{r['cpu_s']:6.1f} {r['server_cpu_s']:12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sample", default="2")
    parser.add_argument("--latency-ms", type=float, default=None,
                        help="default 100 (500 with --tail)")
    parser.add_argument("--tail", action="store_true", help="the tail-of-long-runs figures")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--concurrencies", default="16,64")
    parser.add_argument("--latency-sd-ms", type=float, default=0.0)
    parser.add_argument("--client-src", help="run pytest from this source tree (--tail)")
    opts = parser.parse_args()
    if opts.tail:
        opts.latency_ms = 500.0 if opts.latency_ms is None else opts.latency_ms
        tail(opts)
        return
    opts.latency_ms = 100.0 if opts.latency_ms is None else opts.latency_ms
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
