"""Solver figures: exact DP over all tasks, on-the-fly solves, clairvoyant search, PPO.

    python bench/bench_solver.py            # DP, oracle API, clairvoyant (seconds)
    python bench/bench_solver.py --ppo      # plus a PPO training run (minutes, 2 threads)

Prints one line per figure. Targets (issue 4): all 5040 tasks by DP <= 60 s; on-the-fly solve
<= ~50 ms a task; PPO/DP >= 0.98 on held-out tasks within 10 minutes on 2 cores, <= 4 GB.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from pytest_resilibench.solver import dp
from pytest_resilibench.solver.clairvoyant import clairvoyant

from pytest_resilibench.core.optimum.mdp import TaskMDP
from pytest_resilibench.core.simulator import EpisodeKey
from pytest_resilibench.core.tasks import load_tasks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ppo", action="store_true")
    parser.add_argument("--updates", type=int, default=60)
    args = parser.parse_args()
    tasks = list(load_tasks())

    # Every structure solved from scratch (no cache): the worst case of an on-the-fly solve.
    structures = sorted({t.required_tools for t in tasks})
    start = time.perf_counter()
    sizes = []
    for s in structures:
        mdp = TaskMDP(s)
        dp.solve(mdp)
        sizes.append(mdp.n_states)
    cold = time.perf_counter() - start
    print(f"dp cold: {len(structures)} structures in {cold:.2f}s "
          f"({1000 * cold / len(structures):.1f} ms each, largest {max(sizes)} states)")

    start = time.perf_counter()
    for task in tasks:
        solution = dp.solve_task(task)
        solution.workflow  # noqa: B018 - the workflow is part of the job
        solution.naive_value  # noqa: B018
    total = time.perf_counter() - start
    print(f"dp all tasks (value, workflow, naive): {len(tasks)} in {total:.2f}s "
          f"({1000 * total / len(tasks):.2f} ms a task)")

    solution = dp.solve_task(tasks[0])
    start = time.perf_counter()
    steps = 0
    for _ in range(2000):
        state = solution.initial_state()
        while (tool := solution.action(state)) is not None:
            state = solution.observe(state, tool, ok=True)
            steps += 1
    print(f"oracle action+observe: {1e6 * (time.perf_counter() - start) / steps:.1f} us a call")

    start = time.perf_counter()
    episodes = 0
    for task in tasks[::50]:
        for seed in range(5):
            clairvoyant(task.required_tools, EpisodeKey(seed, task.id, 0))
            episodes += 1
    print(f"clairvoyant: {1000 * (time.perf_counter() - start) / episodes:.1f} ms an episode "
          f"({episodes} episodes)")

    if args.ppo:
        import tempfile

        from pytest_resilibench.solver.ppo import PpoConfig
        from pytest_resilibench.solver.solve import solve_all

        with tempfile.TemporaryDirectory() as out:
            report = solve_all(tasks, Path(out), ppo=PpoConfig(updates=args.updates, threads=2),
                               progress=False, log=lambda _: None)
        ppo = report["ppo"]
        print(f"ppo: {ppo['train_seconds']:.0f}s training, {ppo['env_steps']} steps, "
              f"held-out ratio {ppo['held_out_ratio_mean']:.4f} "
              f"(min {ppo['held_out_ratio_min']:.3f}), train ratio {ppo['train_ratio_mean']:.4f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory: {peak:.0f} MB")


if __name__ == "__main__":
    main()
