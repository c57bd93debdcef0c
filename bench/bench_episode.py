"""Cost of one episode with each built-in agent, on one core (the per-item cost of a
`--resili-model=builtin:...` run; target: follower and adaptive <= 0.5 ms on typical tasks).

    python bench/bench_episode.py [--tasks 300] [--agents follower,adaptive,random,oracle]
                                  [--tool-mode text|native]

Episodes run one after another on one asyncio loop, prompt rendering and scoring included, on
tasks spread over the types and difficulties (each agent its own tasks); the `flawed` row
cycles through the seven flaws. Variants come in the order a run takes them (baseline first,
then optimal, then flawed), so the `baseline` row is each task's first sight (text memos cold)
and the later rows see a task again under another variant, as 9 in 10 episodes of a run do.
A warm-up on other tasks first loads the lazy parts (BM25 matcher, similarity rankings).
Times are the process's CPU time (on a shared machine, wall time measures the neighbours).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from pytest_resilibench.base.names import FLAWS, TOOL_MODES
from pytest_resilibench.core.prompts import Variant
from pytest_resilibench.core.tasks import Task, load_tasks
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import run_episode

AGENTS = ("follower", "adaptive", "random", "oracle")


KINDS = ("baseline", "optimal", "flawed")


def variants_for(kind: str, count: int) -> list[Variant]:
    if kind == "flawed":
        return [Variant("flawed", FLAWS[i % len(FLAWS)]) for i in range(count)]
    return [Variant(kind)] * count


async def seconds_per_episode(
    agent_spec: str, tasks: list[Task], kind: str, tool_mode: str
) -> float:
    agent = make_agent(agent_spec)
    variants = variants_for(kind, len(tasks))
    start = time.process_time()
    for task, variant in zip(tasks, variants, strict=True):
        await run_episode(task, variant, agent, seed=0, tool_mode=tool_mode)
    return (time.process_time() - start) / len(tasks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--tool-mode", choices=TOOL_MODES, default="text")
    opts = parser.parse_args()
    every = list(load_tasks())
    names = [n.strip() for n in opts.agents.split(",")]
    groups = len(names) + 1  # disjoint task sets: the warm-up's and one per agent
    stride = max(1, len(every) // (groups * opts.tasks))
    slices = [every[i::groups][::stride][:opts.tasks] for i in range(groups)]
    print(f"{'agent':18s} {'variant':8s} {'ms/episode':>10s} {'episodes/s':>10s}")
    for name, measured in zip(names, slices[1:], strict=True):
        spec = f"builtin:{name}"
        for kind in KINDS:
            asyncio.run(seconds_per_episode(spec, slices[0][:30], kind, opts.tool_mode))
        for kind in KINDS:
            seconds = asyncio.run(seconds_per_episode(spec, measured, kind, opts.tool_mode))
            print(f"{spec:18s} {kind:8s} {seconds * 1000:10.3f} {1 / seconds:10,.0f}")


if __name__ == "__main__":
    main()
