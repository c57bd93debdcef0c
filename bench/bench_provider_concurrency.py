"""How many requests one process keeps in flight through `OpenAIAgent` (the real `openai`
client) against the loopback test server.

With a server latency of L seconds and concurrency C, the ideal rate is C / L; the target is
>= 80% of it (C=64, L=0.1 s: 640 req/s ideal, 512 req/s target). The server runs in a process of
its own by default, so the figure is the client's (one process, one event loop), not the two
sharing one interpreter's GIL.

    python bench/bench_provider_concurrency.py [--requests 3000] [--concurrency 64]
        [--latency-ms 100] [--fault-rate 0] [--in-process]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import time
from typing import Any

from pytest_resilibench.runtime.agents.openai_provider import OpenAIAgent
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest, ToolCall
from pytest_resilibench.servers.testserver import FaultConfig, OpenAITestServer


def echo_policy(request: ModelRequest) -> ModelReply:
    """A cheap scripted reply: one tool call naming the last user message."""
    last = str(request.messages[-1].get("content", ""))
    return ModelReply(content=None, tool_calls=(
        ToolCall(id="call_0", name="read_file", arguments=f'{{"path": "{last}"}}'),))


def _serve(latency_ms: float, fault_rate: float, ports: Any, stop: Any) -> None:
    faults = FaultConfig(rate=fault_rate, kinds=("429", "500", "503"), retry_after_s=0.01)
    with OpenAITestServer(echo_policy, latency_ms=latency_ms, faults=faults) as server:
        ports.put(server.port)
        stop.wait()


async def _drive(base_url: str, *, requests: int, concurrency: int) -> dict[str, float]:
    agent = OpenAIAgent("bench", base_url=base_url, max_concurrency=concurrency,
                        backoff_base_s=0.01, backoff_max_s=0.05)
    in_flight = peak = 0
    latencies: list[float] = []

    async def one(i: int) -> None:
        nonlocal in_flight, peak
        request = ModelRequest(messages=[{"role": "user", "content": f"/data/{i}.csv"}],
                               task_id=f"b{i}")
        in_flight += 1
        peak = max(peak, in_flight)
        start = time.perf_counter()
        reply = await agent.complete(request)
        latencies.append(time.perf_counter() - start)
        in_flight -= 1
        assert reply.tool_calls[0].arguments == f'{{"path": "/data/{i}.csv"}}'

    async def worker(indices: range) -> None:
        for i in indices:
            await one(i)

    # Warm-up opens the connections; then `concurrency` workers, each one request at a time.
    await asyncio.gather(*(one(-1 - i) for i in range(concurrency)))
    latencies.clear()
    peak = 0
    start = time.perf_counter()
    await asyncio.gather(*(worker(range(w, requests, concurrency)) for w in range(concurrency)))
    wall = time.perf_counter() - start
    await agent.aclose()
    latencies.sort()
    return {"requests": requests, "wall_s": wall, "rate": requests / wall,
            "mean_in_flight": sum(latencies) / wall, "peak_in_flight": peak,
            "p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
            "retries": agent.stats.retries}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--in-process", action="store_true",
                        help="run the server in a thread of this process instead")
    args = parser.parse_args()

    ctx = mp.get_context("spawn")
    ports, stop = ctx.Queue(), ctx.Event()
    server_process = None
    local = None
    if args.in_process:
        local = OpenAITestServer(echo_policy, latency_ms=args.latency_ms,
                                 faults=FaultConfig(rate=args.fault_rate,
                                                    kinds=("429", "500", "503"),
                                                    retry_after_s=0.01)).start()
        port = local.port
    else:
        server_process = ctx.Process(target=_serve, daemon=True,
                                     args=(args.latency_ms, args.fault_rate, ports, stop))
        server_process.start()
        port = ports.get(timeout=30)
    try:
        figures = asyncio.run(_drive(f"http://127.0.0.1:{port}/v1", requests=args.requests,
                                     concurrency=args.concurrency))
    finally:
        stop.set()
        if local is not None:
            local.stop()
        if server_process is not None:
            server_process.join(timeout=10)

    ideal = args.concurrency / (args.latency_ms / 1000.0)
    rate = figures["rate"]
    print(f"server: {'in-process thread' if args.in_process else 'separate process'}, "
          f"latency {args.latency_ms:g} ms, fault rate {args.fault_rate:g}")
    print(f"{figures['requests']} requests in {figures['wall_s']:.2f} s at concurrency "
          f"{args.concurrency}: {rate:.0f} req/s = {rate / ideal:.0%} of the ideal "
          f"{ideal:.0f} req/s (target >= 80%: {'met' if rate >= 0.8 * ideal else 'NOT met'})")
    print(f"requests in flight: mean {figures['mean_in_flight']:.1f} (Little's law), "
          f"peak {figures['peak_in_flight']}; latency p50 {figures['p50_ms']:.1f} ms, "
          f"p95 {figures['p95_ms']:.1f} ms; retries {figures['retries']}")


if __name__ == "__main__":
    main()
