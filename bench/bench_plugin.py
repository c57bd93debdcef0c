"""The plugin at full size: 50,400 items against bare pytest running 50,400 trivial tests.

    python bench/bench_plugin.py [--model builtin:follower] [--workers 0,2] [--sample all]

Prints, for both, the collection time (`--collect-only`) and, for each `-n` of `--workers`,
the full run's wall time and CPU time (user + system over all its processes: the figure a
loaded machine disturbs least), their ratios (targets: run <= 1.5x wall, collection <= 2x) and
each run's peak resident memory (target for a process with all 5040 tasks loaded: <= 500 MB).
Bare pytest runs before and after the suite's run of each `-n`, and the ratio takes the mean of
the two, so that a drift in the machine's speed (a shared VM's often drifts) meets both alike;
the ratios of every `-n` come out of one invocation. Every figure is one measured run (wall
time: on a shared machine, run it when the machine is quiet, and read it with that in mind).

Both sides run without PYTHONDONTWRITEBYTECODE, so that pytest's cache of assertion-rewritten
plugin modules applies as in an ordinary environment.

It also times the same episodes with no pytest at all, one after another in one process (the
suite's cases, `run_episode` as the plugin's runner calls it): the part of a suite run that no
plugin work can remove, whatever `-n` (docs/REPRODUCTION.md, "The harness's own cost").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRIVIAL = '''
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_trivial(i):
    assert i >= 0
'''

# The suite's episodes with no pytest: the cases a plugin run builds, run as its runner does.
EPISODES_ALONE = '''
import asyncio, sys
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.tasks import load_tasks
from pytest_resilibench.integration.cases import build_cases
from pytest_resilibench.integration.options import RunConfig
from pytest_resilibench.runtime.agents import make_agent
from pytest_resilibench.runtime.episode import run_episode

model, sample = sys.argv[1], sys.argv[2]
config = RunConfig(models=(model,), sample=None if sample == "all" else int(sample))
registry, agent = default_registry(), make_agent(model)

async def main():
    n = 0
    for case in build_cases(config, list(load_tasks())):
        await run_episode(case.task, case.variant, agent, seed=config.seed, repeat=case.repeat,
                          base_success=case.base_success, max_turns=config.max_turns,
                          tool_mode=config.tool_mode, registry=registry, model_name=case.model,
                          faults=config.faults)
        n += 1
    print(f"{n} episodes")

asyncio.run(main())
'''


# Steady state, for both sides alike: pytest caches the assertion-rewritten modules of every
# plugin in __pycache__ (this one's ~80 and the other installed plugins'); with
# PYTHONDONTWRITEBYTECODE set (as on this project's machines) it rewrites and compiles them
# again at every process start, ~1.3 s a process here, which an ordinary environment pays once.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(args: list[str], cwd: Path) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds (user + system) of the pytest process and every process it
    reaped (xdist workers, forked helpers), peak RSS in MB of the largest of them, last output
    line). `wait4` gives this child's usage with that of the children it waited for."""
    with tempfile.TemporaryFile("w+") as log:
        start = time.perf_counter()
        command = args if args[:1] == ["-c"] else ["-m", "pytest", *args]
        proc = subprocess.Popen([sys.executable, *command], cwd=cwd, env=_ENV,
                                stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        lines = [line for line in log.read().splitlines() if line.strip()]
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="builtin:follower")
    parser.add_argument("--sample", default="all")
    parser.add_argument("--workers", default="0,2", help="comma-separated -n values")
    opts = parser.parse_args()
    workers = [w.strip() for w in opts.workers.split(",") if w.strip()]
    common = ["-q", "-p", "no:cacheprovider"]
    suite = ["suites", f"--resili-model={opts.model}", f"--resili-sample={opts.sample}"]
    with tempfile.TemporaryDirectory() as tmp:
        probe = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", *suite, "-p",
             "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
        n = sum("::test_resilibench[" in line for line in probe.stdout.splitlines())
        Path(tmp, "test_trivial.py").write_text(TRIVIAL.format(n=n))
        Path(tmp, "pytest.ini").write_text("[pytest]\n")
        runs = [("bare collect", ["--collect-only", *common], Path(tmp)),
                ("suite collect", ["--collect-only", *suite, *common], ROOT)]
        runs.append(("episodes alone", ["-c", EPISODES_ALONE, opts.model, opts.sample], ROOT))
        for n_workers in workers:  # bare on both sides of the suite: a drift in the
            # machine's speed (a shared VM's often is) then meets both alike
            bare = [*common, "-n", n_workers]
            runs += [(f"bare run -n {n_workers}", bare, Path(tmp)),
                     (f"suite run -n {n_workers}", [*suite, *common, "-n", n_workers], ROOT),
                     (f"bare again -n {n_workers}", bare, Path(tmp))]
        walls, cpus = {}, {}
        for label, args, cwd in runs:
            wall, cpu, peak, last = measure(args, cwd)
            walls[label], cpus[label] = wall, cpu
            print(f"{label:16s} {wall:8.1f} s  cpu {cpu:8.1f} s  peak {peak:7.0f} MB  | {last}",
                  flush=True)
    print(f"items: {n}, model: {opts.model}, cores: {len(os.sched_getaffinity(0))}")
    print(f"collection ratio {walls['suite collect'] / walls['bare collect']:.2f}x wall "
          f"(target <= 2x), {cpus['suite collect'] / cpus['bare collect']:.2f}x CPU")
    alone = cpus["episodes alone"]
    print(f"episodes alone: {alone:.1f} s CPU, {1000 * alone / n:.2f} ms an episode")
    for n_workers in workers:
        suite_run = f"suite run -n {n_workers}"
        bares = (f"bare run -n {n_workers}", f"bare again -n {n_workers}")
        bare_wall = sum(walls[b] for b in bares) / 2
        bare_cpu = sum(cpus[b] for b in bares) / 2
        print(f"run ratio -n {n_workers}: {walls[suite_run] / bare_wall:.2f}x wall "
              f"(target <= 1.5x), {cpus[suite_run] / bare_cpu:.2f}x CPU (bare: the mean of "
              f"its two runs); the episodes alone are {alone / bare_cpu:.2f}x bare's CPU")


if __name__ == "__main__":
    main()
