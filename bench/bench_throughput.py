"""Throughput at the provider's limit: a whole `pytest suites` run against the test server
in a process of its own (latency 0.5 s), achieved against Little's law.

Little's law: with L seconds a request and N requests in flight, the ideal rate is N / L and
the ideal wall time of R requests R x L / N; N is the concurrency without a limit, the
server's in-flight limit with one. Done when: limit 8 with concurrency 32 loses no episode
and takes <= 1.15 x the limit's ideal; without a limit, >= 90% of Little's law. The achieved
rate is the provider's own (`requests_per_s`: requests over the span from the first sent to
the last reply); the wall time is the whole pytest run, start-up included.

    python bench/bench_throughput.py [--latency-ms 500] [--only NAME] [--runs N]
                                     [--task-set default|paper] [--client-src DIR]

`--client-src` runs the pytest side from another source tree (`git archive HEAD | tar -x -C
DIR`: the figures before a change); a report without the limiter's span uses the wall time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# name, server in-flight limit, --resili-concurrency, -n
CASES = [("no limit", None, 16, 0), ("limit 8", 8, 32, 0), ("limit 8, -n 2", 8, 16, 2)]


def _serve(latency_ms: float, limit: int | None, ports: Any, stop: Any) -> None:
    from pytest_resilibench.runtime.agents import make_agent
    from pytest_resilibench.servers.testserver import OpenAITestServer

    served = {"o3": make_agent("builtin:adaptive")}
    with OpenAITestServer(served, latency_ms=latency_ms, max_in_flight=limit,  # type: ignore[arg-type]
                          limit_retry_after_s=1.0) as server:
        ports.put(server.port)
        stop.wait()
        ports.put(server.stats.to_json())


def one(name: str, limit: int | None, concurrency: int, workers: int,
        latency_s: float, client_src: str | None = None,
        task_set: str = "default") -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ports, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(latency_s * 1000, limit, ports, stop), daemon=True)
    server.start()
    port = ports.get(timeout=60)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "--resili-model=o3",
               f"--resili-base-url=http://127.0.0.1:{port}/v1", "--resili-sample=1",
               f"--resili-concurrency={concurrency}", f"--resili-report={report}",
               f"--resili-task-set={task_set}",
               "-n", str(workers)]
        env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
        if client_src:
            env["PYTHONPATH"] = client_src
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=client_src or ROOT, env=env, capture_output=True, text=True,
                              check=False)
        wall = time.perf_counter() - start
        stop.set()
        served = ports.get(timeout=30)
        server.join(timeout=10)
        if not report.exists():
            print(done.stdout[-3000:], done.stderr[-3000:])
            raise SystemExit(f"{name}: no report")
        summary = json.loads(report.read_text())["summary"]
    provider = summary["providers"]["o3"]
    in_flight = limit or concurrency * max(1, workers)
    sent = provider["api_calls"] - provider["faults"].get("rate_limit", 0)  # answered ones
    ideal_wall = sent * latency_s / in_flight
    span = provider["last_at"] - provider["first_at"] if provider.get("first_at") else wall
    return {"name": name, "wall_s": wall, "span_s": span, "ideal_s": ideal_wall,
            "answered": sent, "rate": sent / span, "ideal_rate": in_flight / latency_s,
            "infra": summary["counts"]["errors"], "episodes": summary["counts"]["episodes"],
            "429s": provider["faults"].get("rate_limit", 0), "limit": provider.get("window", 0),
            "concurrency": provider.get("concurrency", "–"),
            "waited_s": provider.get("limit_wait_s", 0.0),
            "server_peak": served["peak_in_flight"], "exit": done.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--only", help="run only the case of this name")
    parser.add_argument("--client-src", help="run pytest from this source tree instead")
    parser.add_argument("--runs", type=int, default=1, help="run each case this many times")
    parser.add_argument("--task-set", default="default", choices=("default", "paper"))
    args = parser.parse_args()
    latency = args.latency_ms / 1000.0
    rows = [one(*case, latency, args.client_src, args.task_set) for case in CASES
            for _ in range(args.runs) if args.only in (None, case[0])]
    print(f"latency {latency:g} s; 150 episodes of o3 (builtin:adaptive) on the test server, "
          f"{args.task_set} task set; load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':<15} {'wall s':>7} {'span s':>7} {'ideal s':>7} {'span/ideal':>10} "
          f"{'req/s':>6} {'ideal':>6} {'% LL':>5} {'429s':>5} {'infra':>5} {'limit':>5} "
          f"{'in flight':>9} {'waited s':>8}")
    for r in rows:
        print(f"{r['name']:<15} {r['wall_s']:7.1f} {r['span_s']:7.1f} {r['ideal_s']:7.1f} "
              f"{r['span_s'] / r['ideal_s']:10.2f} {r['rate']:6.1f} {r['ideal_rate']:6.1f} "
              f"{r['rate'] / r['ideal_rate']:5.0%} {r['429s']:5d} {r['infra']:5d} "
              f"{r['limit']:5d} {r['concurrency']:9} {r['waited_s']:8.1f}")
    for r in rows:
        if r["name"] == "no limit":
            ok = r["rate"] >= 0.9 * r["ideal_rate"]
            print(f"no limit: {r['rate'] / r['ideal_rate']:.0%} of Little's law (>= 90%: "
                  f"{'met' if ok else 'NOT met'})")
        elif r["name"] == "limit 8":
            ok = r["infra"] == 0 and r["span_s"] <= 1.15 * r["ideal_s"]
            print(f"limit 8, concurrency 32: {r['infra']} infra errors, "
                  f"{r['span_s'] / r['ideal_s']:.2f} x the ideal (0 and <= 1.15: "
                  f"{'met' if ok else 'NOT met'})")


if __name__ == "__main__":
    main()
