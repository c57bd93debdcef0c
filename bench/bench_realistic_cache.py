"""What `--resili-faults=realistic` costs on the default task set with the plan cache
(core/realistic_plans.py, docs/FAULTS.md): a whole `pytest` run of the built-in suite at a
sample size, under the paper profile, then realistic with a cold plan cache (every structure
solved, on the controller), then realistic again (warm: every plan read from the cache).
Wall time, and the CPU of the whole process tree (getrusage(RUSAGE_CHILDREN), user +
system). A paper run first warms the task set's verdict (base/checked.py), so that only the
plans differ.

Run:  python bench/bench_realistic_cache.py [--sample 1] [-n 0]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\n")
        cache = folder / "cache"
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        common = (f"--resili-sample={args.sample}", "-n", args.n)
        _run(folder, env, *common)  # warms the task set's verdict
        rows = []
        for label, faults in (("paper", "paper"), ("realistic, cold cache", "realistic"),
                              ("realistic, warm cache", "realistic")):
            if label.endswith("cold cache"):
                shutil.rmtree(cache / "resilibench" / "checked" / "realistic-plans",
                              ignore_errors=True)
            wall, cpu, err = _run(folder, env, *common, f"--resili-faults={faults}")
            shown = re.findall(r"solving realistic plans: \d+/(\d+)", err)
            rows.append((label, wall, cpu, shown[-1] if shown else "0"))
        entries = len(list((cache / "resilibench" / "checked" / "realistic-plans").glob("*")))
    print(f"default set, --resili-sample={args.sample}, -n {args.n} "
          f"({entries} cached structures)")
    paper_wall = rows[0][1]
    for label, wall, cpu, solved in rows:
        print(f"  {label:24} wall {wall:6.1f} s ({wall / paper_wall:4.2f}x paper)  "
              f"CPU {cpu:6.1f} s  structures solved {solved}")


if __name__ == "__main__":
    main()
