"""Instructions an episode: the one figure of the episode's cost that a busy machine leaves alone.

    python bench/bench_episode_instructions.py [--tasks 30] [--model builtin:follower]

Runs `--tasks` tasks (spread over the 5040) under every default variant, one episode after
another as the plugin's runner plays them, inside valgrind's callgrind, and prints the
instructions executed per episode. Wall and CPU times on a shared VM drift by a third within
minutes (docs/REPRODUCTION.md, "The harness's own cost"); an instruction count is the same on
every run of the same code and inputs (`PYTHONHASHSEED` is fixed, so are set orders), so a 2%
change is visible. Only the episodes are counted: start-up (imports, loading the tasks) and a
warm-up of five tasks run with collection off, and the measured loop runs inside the single
`functools.reduce` call of the process, the function callgrind's `--toggle-collect` switches
collection on for. Needs valgrind (on every machine of this project); under it an episode runs
about 50 times slower, so the default takes a minute and a half.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _episodes(model: str, n_tasks: int) -> None:
    """The measured process (under valgrind): warm up, then the episodes inside `reduce`."""
    import asyncio
    import functools

    from pytest_resilibench.core.registry import default_registry
    from pytest_resilibench.core.tasks import Task, load_tasks
    from pytest_resilibench.integration.cases import variants_of
    from pytest_resilibench.integration.options import RunConfig
    from pytest_resilibench.runtime.agents import make_agent
    from pytest_resilibench.runtime.episode import run_episode

    tasks = list(load_tasks())
    warm, rest = tasks[-50:], tasks[:-50]
    measured = rest[:: max(1, len(rest) // n_tasks)][:n_tasks]
    variants = variants_of(RunConfig())
    agent, registry = make_agent(model), default_registry()

    async def play(chosen: list[Task]) -> int:
        for task in chosen:
            for variant in variants:
                await run_episode(task, variant, agent, seed=0, registry=registry)
        return len(chosen) * len(variants)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(play(warm[:5]))
    count = functools.reduce(lambda _, chosen: loop.run_until_complete(play(chosen)),
                             [measured], 0)
    print(f"episodes {count}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="builtin:follower")
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.inner:
        _episodes(opts.model, opts.tasks)
        return
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run(
                ["valgrind", "--tool=callgrind", "--collect-atstart=no",
                 "--toggle-collect=functools_reduce", f"--callgrind-out-file={tmp}/out",
                 sys.executable, __file__, "--inner", f"--model={opts.model}",
                 f"--tasks={opts.tasks}"],
                cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    collected = re.search(r"Collected : (\d+)", proc.stderr)
    episodes = re.search(r"episodes (\d+)", proc.stdout)
    if proc.returncode != 0 or collected is None or episodes is None:
        sys.exit(f"the measured run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    count = int(episodes.group(1))
    print(f"{opts.model}: {int(collected.group(1)) // count:,} instructions an episode "
          f"({count} episodes: {opts.tasks} tasks x {count // opts.tasks} variants)")


if __name__ == "__main__":
    main()
