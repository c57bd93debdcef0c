"""What the plugin costs a project that does not use it: `pytest --co` of a small unrelated
project with the plugin installed, against the same run with `-p no:resilibench`, side by
side and interleaved (so load on the machine hits both alike). Median of N runs each.

    python bench/bench_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(10))


def _once(directory: Path, *extra: str) -> tuple[float, float]:
    """(wall, cpu) seconds of one `pytest --co`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                    *extra], cwd=directory, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "test_unrelated.py").write_text(TESTS)
        _once(directory)  # warm the file cache and bytecode
        with_plugin, without = [], []
        for _ in range(args.runs):
            with_plugin.append(_once(directory))
            without.append(_once(directory, "-p", "no:resilibench"))
    for i, what in enumerate(("wall", "cpu")):
        a = statistics.median(run[i] for run in with_plugin)
        b = statistics.median(run[i] for run in without)
        print(f"pytest --co, unrelated project, {what} time, median of {args.runs}: with the "
              f"plugin {a * 1000:.0f} ms, -p no:resilibench {b * 1000:.0f} ms, "
              f"difference {(a - b) * 1000:+.0f} ms")


if __name__ == "__main__":
    main()
