"""What installing pytest-resilibench costs a project that does not use it: `pytest --co` of a
small unrelated project in a venv holding the wheel with every extra, against a venv holding
pytest alone (the install's own cost: our plugin, and the other packages' plugins our
dependencies bring: anyio's, from the base install), against a venv holding the wheel without
extras (what the extras add: nothing, once langsmith's plugin is kept out), and against the
first venv with `-p no:resilibench` (what the plugin itself costs, and saves: with it off,
langsmith's plugin loads; foreign_plugins.py).
Runs interleaved (so load on the machine hits every setting alike); median of N runs each,
wall time and the CPU time of the whole process tree (getrusage(RUSAGE_CHILDREN)).

    python bench/bench_startup.py [--runs 15] [--venvs DIR] [--wheel PATH]

The venvs are made under --venvs (kept there and reused: a second call only reinstalls the
wheel) or in a temporary folder; the wheel is built from this checkout unless --wheel names
one. Needs network or a wheelhouse for the extras (torch's CPU wheel: the Makefile's setup).
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

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = "solver,mcp,report,agents-sdk,langgraph,otel"  # every extra a user installs (not dev)
TESTS = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(10))


def _run(*command: str | Path) -> str:
    done = subprocess.run([str(c) for c in command], check=True, capture_output=True, text=True)
    return done.stdout


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _venvs(folder: Path, wheel: Path) -> tuple[Path, Path, Path]:
    """(with the wheel and every extra, with the wheel alone, with pytest alone: the same
    version)."""
    with_it, base, without = folder / "with", folder / "base", folder / "without"
    for venv, spec in ((with_it, f"{wheel}[{EXTRAS}]"), (base, str(wheel))):
        if not venv.exists():
            _run(sys.executable, "-m", "venv", venv)
            _run(_python(venv), "-m", "pip", "install", "-q", spec)
        else:  # the dependencies are there: only this wheel changes
            _run(_python(venv), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                 wheel)
    if not without.exists():
        version = _run(_python(with_it), "-c", "import pytest; print(pytest.__version__)")
        _run(sys.executable, "-m", "venv", without)
        _run(_python(without), "-m", "pip", "install", "-q", f"pytest=={version.strip()}")
    return with_it, base, without


def _once(python: Path, directory: Path, *extra: str) -> tuple[float, float]:
    """(wall, cpu) seconds of one `pytest --co`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(python), "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                    *extra], cwd=directory, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--venvs", type=Path, help="make and keep the venvs here")
    parser.add_argument("--wheel", type=Path, help="the wheel to install (default: build one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel
        if wheel is None:
            _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp, ROOT)
            (wheel,) = Path(tmp).glob("pytest_resilibench-*.whl")
        with_it, base_install, without = _venvs(args.venvs or Path(tmp), wheel.resolve())
        project = Path(tmp) / "unrelated"
        project.mkdir()
        (project / "test_unrelated.py").write_text(TESTS)
        settings = {
            "pytest alone (no install)": (_python(without), ()),
            "the base install (no extra)": (_python(base_install), ()),
            "with every extra": (_python(with_it), ()),
            "with every extra, -p no:resilibench": (_python(with_it), ("-p", "no:resilibench")),
        }
        for python, extra in settings.values():
            _once(python, project, *extra)  # warm the file cache and bytecode
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
        for _ in range(args.runs):
            for name, (python, extra) in settings.items():
                times[name].append(_once(python, project, *extra))
    base = {i: statistics.median(t[i] for t in times["pytest alone (no install)"])
            for i in (0, 1)}
    print(f"pytest --co, unrelated project, median of {args.runs} (wall / cpu of the process "
          f"tree), difference to pytest alone; wheel {wheel.name}, extras [{EXTRAS}]:")
    for name, runs in times.items():
        wall, cpu = (statistics.median(t[i] for t in runs) for i in (0, 1))
        print(f"  {name:38} {wall * 1000:5.0f} ms / {cpu * 1000:5.0f} ms  "
              f"({(wall - base[0]) * 1000:+5.0f} / {(cpu - base[1]) * 1000:+5.0f} ms)")


if __name__ == "__main__":
    main()
