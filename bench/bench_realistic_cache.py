"""What `--resili-faults=realistic` costs on the default task set (core/realistic_plans.py,
docs/FAULTS.md): a whole `pytest` run of the built-in suite at a sample size, under the paper
profile, then realistic with an empty plan cache (what a first run on a machine pays: every
plan the set does not store is solved, on the controller), then realistic again (warm: every
such plan read from the cache). Wall time, and the CPU of the whole process tree
(getrusage(RUSAGE_CHILDREN), user + system); `--runs N` interleaves N rounds and prints the
medians [min-max] and each one's ratio to the paper run's median. A paper run first warms the
task set's verdict (base/checked.py), so that only the plans differ.

Run:  python bench/bench_realistic_cache.py [--sample 10] [-n 0] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(folder: Path, env: dict[str, str], *args: str) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest {' '.join(args)} exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, cpu, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="1")
    parser.add_argument("-n", default="0")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    labels = ("paper", "realistic, empty cache", "realistic, warm cache")
    found: dict[str, list[tuple[float, float, int]]] = {label: [] for label in labels}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\n")
        cache = folder / "cache"
        plans = cache / "resilibench" / "checked" / "realistic-plans"
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        common = (f"--resili-sample={args.sample}", "-n", args.n)
        _run(folder, env, *common)  # warms the task set's verdict
        for _ in range(args.runs):
            for label in labels:
                if label.endswith("empty cache"):
                    shutil.rmtree(plans, ignore_errors=True)
                faults = "paper" if label == "paper" else "realistic"
                wall, cpu, err = _run(folder, env, *common, f"--resili-faults={faults}")
                shown = re.findall(r"solving realistic plans: \d+/(\d+)", err)
                found[label].append((wall, cpu, int(shown[-1]) if shown else 0))
        entries = len(list(plans.glob("*"))) if plans.exists() else 0
    print(f"default set, --resili-sample={args.sample}, -n {args.n}, {args.runs} interleaved "
          f"run(s) ({entries} structures in the cache at the end); median [min-max]")
    paper_wall = statistics.median(r[0] for r in found["paper"])
    paper_cpu = statistics.median(r[1] for r in found["paper"])

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):6.1f} s [{min(values):.1f}-{max(values):.1f}]"

    for label, rows in found.items():
        walls, cpus = [r[0] for r in rows], [r[1] for r in rows]
        print(f"  {label:24} wall {spread(walls)} ({statistics.median(walls) / paper_wall:4.2f}x "
              f"paper)  CPU {spread(cpus)} ({statistics.median(cpus) / paper_cpu:4.2f}x paper)  "
              f"structures solved {max(r[2] for r in rows)}")


if __name__ == "__main__":
    main()
