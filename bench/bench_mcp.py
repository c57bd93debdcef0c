"""What `--resili-env=mcp` adds per episode over `--resili-env=sim` (target: <= 20 ms).

    python bench/bench_mcp.py [--episodes 200] [--model builtin:follower] [--concurrency 16]
                              [--skip-plugin] [--old-design 3]

Three measurements, each printed:

1. Episodes alone: the same episodes (tasks spread over the cells, `optimal` and `flawed`
   variants) run `--concurrency` at a time on one asyncio loop, as the runner runs them,
   in process (`sim`) and through one shared MCP server over stdio (`mcp`), after the server
   is up. Wall time per episode and the difference: the steady-state cost of the transport;
   and the CPU time per episode (this process's, plus, for `mcp`, the server's beyond what
   starting and stopping an idle one costs), which the neighbours' load disturbs less.
2. The server's start (once per pytest process or xdist worker): `SharedMcpServer` from
   nothing to its first listed tools.
3. End to end through the plugin: `pytest suites --resili-env=sim|mcp` on the same items,
   one subprocess each; wall time per episode (pytest start-up and the server's start
   included, spread over the episodes) and the difference.

`--old-design N` also times N episodes of the previous design (one server process per
episode) for comparison. Wall times on a shared machine include the neighbours' load: run it
more than once and read the spread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pytest_resilibench.core.flaws import FLAWS
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.record import episode_id
from pytest_resilibench.core.tasks import Task, load_tasks
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import run_episode
from pytest_resilibench.servers.mcp_environment import McpEnvironment, SharedMcpServer
from pytest_resilibench.servers.mcp_server import server_command

ROOT = Path(__file__).resolve().parents[1]
SEED = 0

Plan = list[tuple[Task, Variant]]
EnvFactory = Callable[[Task, Variant], Awaitable[Any]] | None


def plan(episodes: int) -> Plan:
    every = list(load_tasks())
    stride = max(1, len(every) // episodes)
    tasks = every[::stride][:episodes]
    return [(task, Variant("optimal") if i % 2 == 0 else Variant("flawed", FLAWS[i % 7]))
            for i, task in enumerate(tasks)]


async def run_all(episodes: Plan, model: str, concurrency: int, env: EnvFactory) -> float:
    """Wall seconds for all episodes, `concurrency` at a time (as the runner runs them)."""
    agent = make_agent(model)
    slots = asyncio.Semaphore(concurrency)

    async def one(task: Task, variant: Variant) -> str:
        async with slots:
            environment = await env(task, variant) if env is not None else None
            try:
                record = await run_episode(task, variant, agent, seed=SEED,
                                           environment=environment)
            finally:
                if environment is not None:
                    await environment.aclose()
            return record.outcome

    start = time.perf_counter()
    outcomes = await asyncio.gather(*[one(t, v) for t, v in episodes])
    seconds = time.perf_counter() - start
    if "error" in outcomes:
        raise SystemExit(f"{outcomes.count('error')} episodes ended in error")
    return seconds


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (a server counts once it has exited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def episodes_alone(episodes: Plan, model: str, concurrency: int) -> dict[str, float]:
    """Per episode: wall and CPU seconds with `sim` and `mcp` (this process's CPU, plus the
    server's beyond what an idle server costs); and the server's start (s)."""
    asyncio.run(run_all(episodes[:20], model, concurrency, None))  # warm the lazy parts
    cpu = time.process_time()
    sim = asyncio.run(run_all(episodes, model, concurrency, None))
    sim_cpu = time.process_time() - cpu

    def served(run: bool) -> tuple[float, float, float, float]:
        """(start s, wall s, this process's CPU s, the server's CPU s)."""
        shared = SharedMcpServer()

        async def env(task: Task, variant: Variant) -> Any:
            name = episode_id(model=model, variant=variant.label, severity=variant.severity,
                              task_type=task.type, difficulty=task.difficulty,
                              task_id=task.id, repeat=0)
            return await shared.environment(task, episode_id=name, seed=SEED)

        async def go() -> tuple[float, float, float]:
            try:
                start = time.perf_counter()
                await shared.connection()
                started = time.perf_counter() - start
                cpu = time.process_time()
                wall = await run_all(episodes, model, concurrency, env) if run else 0.0
                return started, wall, time.process_time() - cpu
            finally:
                await shared.aclose()

        before = children_cpu()
        started, wall, own = asyncio.run(go())
        return started, wall, own, children_cpu() - before

    _, _, _, idle_server = served(False)
    started, mcp, mcp_cpu, server_cpu = served(True)
    n = len(episodes)
    return {"sim": sim / n, "mcp": mcp / n, "sim_cpu": sim_cpu / n,
            "mcp_cpu": (mcp_cpu + max(0.0, server_cpu - idle_server)) / n, "start": started}


def old_design(episodes: Plan, model: str) -> float:
    """s/episode with one server process per episode (the previous `--resili-env=mcp`)."""
    fixtures = ROOT / "fixtures"

    async def env(task: Task, _: Variant) -> Any:
        return await McpEnvironment.open([*server_command(), "--task", task.id, "--seed",
                                          str(SEED), "--fixtures", str(fixtures)])

    return asyncio.run(run_all(episodes, model, 1, env)) / len(episodes)


def through_plugin(env: str, model: str, sample: int, concurrency: int) -> tuple[float, int]:
    """(wall s, episodes in the report) of `pytest suites` in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "run.json"
        args = ["suites", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                f"--resili-model={model}", "--resili-variants=optimal",
                f"--resili-sample={sample}", f"--resili-env={env}",
                f"--resili-concurrency={concurrency}", f"--resili-report={report}"]
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT,
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"pytest --resili-env={env} failed:\n{done.stdout[-2000:]}")
        count = len(json.loads(report.read_text())["episodes"])
    return wall, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--model", default="builtin:follower")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--skip-plugin", action="store_true")
    parser.add_argument("--old-design", type=int, default=0, metavar="N")
    opts = parser.parse_args()
    episodes = plan(opts.episodes)

    alone = episodes_alone(episodes, opts.model, opts.concurrency)
    print(f"episodes alone: {len(episodes)} x {opts.model}, {opts.concurrency} at a time, "
          "ms/episode")
    print(f"  {'':4s} {'wall':>8s} {'CPU':>8s}   (CPU: this process, plus the server's)")
    for env in ("sim", "mcp"):
        print(f"  {env:4s} {alone[env] * 1000:8.2f} {alone[env + '_cpu'] * 1000:8.2f}")
    print(f"  mcp adds {(alone['mcp'] - alone['sim']) * 1000:.2f} ms/episode of wall time "
          f"(target <= 20), {(alone['mcp_cpu'] - alone['sim_cpu']) * 1000:.2f} ms of CPU")
    print(f"server start, once per process: {alone['start']:.2f} s")
    if opts.old_design:
        old = old_design(episodes[:opts.old_design], opts.model)
        print(f"previous design, a server per episode: {old * 1000:.0f} ms/episode "
              f"({opts.old_design} episodes)")
    if not opts.skip_plugin:
        sample = max(1, round(opts.episodes / 15))  # 15 type x difficulty cells, one variant
        walls = {env: through_plugin(env, opts.model, sample, opts.concurrency)
                 for env in ("sim", "mcp")}
        n = walls["sim"][1]
        assert walls["mcp"][1] == n, walls
        print(f"through the plugin: pytest suites, {n} items, --resili-variants=optimal")
        for env, (wall, _) in walls.items():
            print(f"  {env:4s} {wall:6.2f} s  {wall / n * 1000:8.2f} ms/episode")
        added = (walls["mcp"][0] - walls["sim"][0]) / n
        print(f"  mcp adds {added * 1000:.2f} ms/episode, the server's start included")


if __name__ == "__main__":
    main()
