"""Instructions an item of the suite against bare pytest's and the episode's: no machine noise.

    python bench/bench_item_instructions.py [--small 1] [--large 7] [--model builtin:follower]

`bench_plugin.py` measures wall and CPU time, which drift on a shared VM by more than a change
of a few percent (docs/REPRODUCTION.md, "The harness's own cost"). This counts instructions
under valgrind's callgrind instead, the same on every run of the same code (`PYTHONHASHSEED`
is fixed): three programs, each at two sizes, so that start-up and other fixed costs cancel in
the difference:
- the suite without xdist on one core (no forked helpers: valgrind would not count them),
  `--resili-sample` `--small` and `--large` (10 variants x 15 cells x the sample);
- bare pytest running as many trivial parametrized tests;
- the same episodes with no pytest at all (the suite's cases, `run_episode` one after another).

It prints, per item, the instructions of each and what the plugin adds beyond pytest's own work
and the episode: suite - bare - episode. Under callgrind a program runs about 50 times slower;
the defaults take about three minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# The same trivial tests and the same episodes as the wall-time bench (run as a script, this
# folder is on sys.path).
from bench_plugin import EPISODES_ALONE, TRIVIAL

ROOT = Path(__file__).resolve().parents[1]
# pytest's cache of assertion-rewritten modules applies, as in bench_plugin.py.
_ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "PYTHONHASHSEED": "0"}


def instructions(args: list[str], cwd: Path, core: int) -> int:
    """Instructions the program executed (its whole run), on one core."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["taskset", "-c", str(core), "valgrind", "--tool=callgrind",
             f"--callgrind-out-file={tmp}/out", sys.executable, *args],
            cwd=cwd, env=_ENV, capture_output=True, text=True, check=False)
    collected = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or collected is None:
        sys.exit(f"{' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(collected.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="builtin:follower")
    parser.add_argument("--small", type=int, default=1, help="--resili-sample of the small run")
    parser.add_argument("--large", type=int, default=7, help="--resili-sample of the large run")
    opts = parser.parse_args()
    items = {size: size * 15 * 10 for size in (opts.small, opts.large)}
    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[tuple[str, int], tuple[list[str], Path]] = {}
        for size, n in items.items():
            bare = Path(tmp, f"bare{size}")
            bare.mkdir()
            (bare / "test_trivial.py").write_text(TRIVIAL.format(n=n))
            (bare / "pytest.ini").write_text("[pytest]\n")
            runs["bare", size] = (["-m", "pytest", "-q", "-p", "no:cacheprovider"], bare)
            runs["suite", size] = (["-m", "pytest", "suites", f"--resili-model={opts.model}",
                                    f"--resili-sample={size}", "-q", "-p", "no:cacheprovider"],
                                   ROOT)
            runs["episodes", size] = (["-c", EPISODES_ALONE, opts.model, str(size)], ROOT)
        for args, cwd in runs.values():  # warm: the rewritten modules' cache, the .pyc files
            subprocess.run([sys.executable, *args], cwd=cwd, env=_ENV, capture_output=True,
                           check=False)
        cores = len(os.sched_getaffinity(0))
        with ThreadPoolExecutor(max_workers=cores) as pool:
            futures = {key: pool.submit(instructions, args, cwd, i % cores)
                       for i, (key, (args, cwd)) in enumerate(runs.items())}
            counts = {key: future.result() for key, future in futures.items()}
    extra = items[opts.large] - items[opts.small]
    per_item = {name: (counts[name, opts.large] - counts[name, opts.small]) / extra
                for name in ("suite", "bare", "episodes")}
    plugin = per_item["suite"] - per_item["bare"] - per_item["episodes"]
    print(f"{opts.model}, {items[opts.small]} and {items[opts.large]} items; instructions an "
          f"item (the difference of the two sizes over {extra} items):")
    for name in ("suite", "bare", "episodes"):
        print(f"  {name:9s} {per_item[name]:12,.0f}")
    print(f"  plugin    {plugin:12,.0f}  (suite - bare - episodes: "
          f"{plugin / per_item['bare']:.2f}x bare pytest's item, "
          f"{plugin / per_item['episodes']:.2f}x an episode)")
    print(f"fixed (start-up) instructions at {items[opts.small]} items: suite "
          f"{counts['suite', opts.small]:,}, bare {counts['bare', opts.small]:,}, episodes "
          f"{counts['episodes', opts.small]:,}")


if __name__ == "__main__":
    main()
