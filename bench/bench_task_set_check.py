"""What checking a task set by its content costs at start-up (core/task_set_check.py), in CPU
seconds (process time, best of --repeat, each in a fresh process so no cache of this one
helps):

- `load`: `load_tasks` as a run calls it (shipped sets: their stored verdict; other sets:
  the verdict remembered on disk after the first load);
- `first load`: the same with no remembered verdict (a set seen for the first time);
- `content check`: the check itself, `content_problems` over every file, in full.

Run: python bench/bench_task_set_check.py [--tasks DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import gzip, json, sys, time
from pathlib import Path
from pytest_resilibench.core import task_set_check
from pytest_resilibench.core.fixture_files import read_manifest
from pytest_resilibench.core.tasks import load_tasks, task_set_dir

what, directory = sys.argv[1], Path(sys.argv[2])
if what == "content":
    rows = {}
    for name in ("tasks.jsonl.gz", "workflows.jsonl.gz"):
        with gzip.open(directory / name, "rt", encoding="utf-8") as fh:
            rows[name] = [(n, json.loads(line)) for n, line in enumerate(fh, 1)]
    report = (directory / "solver_report.json").read_bytes()
    manifest = read_manifest(directory)
    start = time.process_time()
    problems = task_set_check.content_problems(manifest, rows["tasks.jsonl.gz"],
                                               rows["workflows.jsonl.gz"], report)
    assert problems == [], problems[:3]
else:
    start = time.process_time()
    load_tasks(directory)
print(json.dumps(time.process_time() - start))
"""


def _cpu(what: str, directory: Path, cache: Path, repeat: int) -> float:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD, what, str(directory)],
                                      env=env, check=True, capture_output=True,
                                      text=True).stdout)
            for _ in range(repeat)]
    return min(runs)


def main() -> None:
    from pytest_resilibench.core.tasks import TASK_SETS

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=Path, action="append",
                        help="a task set's folder (default: the shipped sets)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sets = {str(p): p for p in args.tasks} if args.tasks else dict(TASK_SETS)
    with tempfile.TemporaryDirectory() as tmp:
        for name, directory in sets.items():
            first = min(_cpu("load", directory, Path(tmp) / f"fresh{i}", 1)
                        for i in range(args.repeat))
            warm = Path(tmp) / "warm"
            _cpu("load", directory, warm, 1)  # remembers the verdict of a set not shipped
            print(f"{name}: load {_cpu('load', directory, warm, args.repeat):.3f} s, "
                  f"first load {first:.3f} s, content check "
                  f"{_cpu('content', directory, warm, args.repeat):.3f} s (CPU)")


if __name__ == "__main__":
    main()
