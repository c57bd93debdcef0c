"""An episode's CPU by part: the prompt (flaw injection included), the simulation, the scoring,
and the whole episode, in microseconds of process CPU an episode (issue 47).

    python bench/bench_episode_parts.py [--sample 20] [--model builtin:follower] [--rounds 3]

The suite's cases (`--resili-sample`, every default variant, task by task as a run takes them)
are played once to record their calls. Then, each round, in one process: every prompt rendered
again (the flaws injected again: nothing of the previous round's prompts is kept), every
episode's calls replayed on a fresh simulator (the same luck: every draw is keyed), every
episode scored again (`run_episode`'s scoring: conditions, metrics, the deviation from a shown
plan), and every episode played whole. Each figure is the median over the rounds of CPU time /
episodes; the parts do not add up to the whole (the agent, the turn books and the observation
JSON are the rest). Process CPU time: on a loaded machine compare figures of runs made one
after another, not across hours.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from pytest_resilibench.core.prompts import render_prompt
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.simulator import EpisodeKey, Simulator
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.cases import build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import _score, run_episode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--model", default="builtin:follower")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    config = RunConfig(models=(opts.model,), sample=opts.sample)
    registry = default_registry()
    cases = build_cases(config, list(load_tasks()))
    agent = make_agent(opts.model)

    async def play() -> list:
        return [await run_episode(c.task, c.variant, agent, seed=config.seed, repeat=c.repeat,
                                  base_success=c.base_success, max_turns=config.max_turns,
                                  tool_mode=config.tool_mode, registry=registry,
                                  model_name=c.model, faults=config.faults) for c in cases]

    records = asyncio.run(play())
    calls = [[(call["tool"], call["arguments"]) for call in r.calls] for r in records]

    def prompts() -> None:
        for case in cases:
            render_prompt(case.task, case.variant, tool_mode=config.tool_mode,
                          registry=registry, max_turns=config.max_turns)

    def simulation() -> None:
        for case, episode in zip(cases, calls, strict=True):
            simulator = Simulator(registry, EpisodeKey(config.seed, case.task.id, case.repeat),
                                  task_tools=case.task.required_tools, inputs=case.task.inputs,
                                  base_success=case.base_success)
            for name, arguments in episode:
                simulator.call(name, arguments)

    shown = [render_prompt(c.task, c.variant, tool_mode=config.tool_mode, registry=registry,
                           max_turns=config.max_turns) for c in cases]

    def scoring() -> None:  # as the episode scores: the conditions, and the plan's deviation
        for case, record, prompt in zip(cases, records, shown, strict=True):
            _score(record, case.task, prompt, completed=record.stop_reason == "completed",
                   registry=registry)

    def episodes() -> None:
        asyncio.run(play())

    parts: dict[str, Callable[[], None]] = {
        "prompt (flaw injected)": prompts, "simulation": simulation, "scoring": scoring,
        "whole episode": episodes}
    times: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(opts.rounds):
        for name, part in parts.items():  # interleaved: a drift meets every part alike
            start = time.process_time()
            part()
            times[name].append(time.process_time() - start)
    print(f"{len(cases)} episodes ({opts.model}, sample {opts.sample}), median of "
          f"{opts.rounds} rounds, CPU us an episode:")
    for name, seconds in times.items():
        print(f"  {name:24s} {1e6 * statistics.median(seconds) / len(cases):8.0f}")


if __name__ == "__main__":
    main()
