"""Runs that never crash, counted: fresh pytest processes from an installed wheel, on every
Python this machine has, for the paths that start the episode thread (integration/preload.py):
a real model through chat completions and the Responses API (the strict loopback test server),
and the README's `py:` turn and loop agents (docs/examples), each at `-n 0` and `-n 2`.

Each Python gets a virtual environment under the temporary folder (kept between runs, keyed
by the wheel's hash) with the wheel and its dependencies from the package index. A launch
counts as a crash when it prints INTERNALERROR or exits non-zero.

    python bench/bench_no_crash.py [--launches 20] [--pythons 3.11,3.12] [--wheel OLD.whl]

`--wheel` measures another build (an older commit's wheel, to see the crash rate before).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
KEY = "sk-bench-no-crash-0123456789"
AGENTS = {
    "chat": ["--resili-model=o3", "--resili-api=chat"],
    "responses": ["--resili-model=o3", "--resili-api=responses", "--resili-tool-mode=native"],
    "py-turn": ["--resili-model=py:turn_agent:make_agent"],
    "py-loop": ["--resili-model=py:planner_agent:make_agent"],
}
RUN = ["--resili-sample=1", "-q", "-p", "no:cacheprovider"]


def build_wheel(out: Path) -> Path:
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "out"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True)
    (wheel,) = out.glob("pytest_resilibench-*.whl")
    return wheel


def environment(python: str, wheel: Path) -> Path | None:
    """A venv of `python` with `wheel` installed (None where that Python is missing)."""
    interpreter = _interpreter(python)
    if interpreter is None:
        return None
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:12]
    venv = Path(tempfile.gettempdir()) / f"resili-bench-py{python}-{digest}"
    stamp = venv / ".installed"
    if not stamp.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                       check=True, capture_output=True)
        stamp.touch()
    return venv


def _interpreter(python: str) -> str | None:
    """A working `python3.X`: on PATH, or one pyenv installed (its shims fail for a version
    that is installed but not selected)."""
    candidates = [shutil.which(f"python{python}"), *sorted(map(str, (
        Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions").glob(
        f"{python}.*/bin/python{python}")))]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    return None


def serve(venv: Path) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [str(venv / "bin" / "resilibench"), "serve-openai", "--strict", "--api-key", KEY,
         "--model", "o3=builtin:adaptive", "--port", "0"],
        stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    first = server.stdout.readline()  # "serving http://127.0.0.1:PORT/v1 (...)"
    return server, first.split()[1]


def launch(venv: Path, base_url: str, agent: str, workers: str, where: Path) -> str | None:
    """None for a clean run, else what went wrong (the last line that says so)."""
    env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": str(EXAMPLES)}
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", *RUN, *AGENTS[agent], "-n", workers,
         f"--resili-base-url={base_url}"], cwd=where, env=env, capture_output=True, text=True)
    out = run.stdout + run.stderr
    if "INTERNALERROR" in out:
        return next((line for line in reversed(out.splitlines()) if "Error" in line),
                    "INTERNALERROR")
    return None if run.returncode == 0 else f"exit {run.returncode}: {out.splitlines()[-1:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20, help="per agent and -n")
    parser.add_argument("--pythons", default="3.11,3.12,3.13")
    parser.add_argument("--wheel", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or build_wheel(Path(tmp))
        where = Path(tmp) / "project"  # a user's empty project
        where.mkdir()
        print(f"wheel {wheel.name} ({hashlib.sha256(wheel.read_bytes()).hexdigest()[:12]}), "
              f"{args.launches} launches per agent and -n")
        print(f"{'python':8} {'agent':10} {'-n':3} {'launches':>8} {'crashes':>8} {'s/launch':>9}")
        for python in args.pythons.split(","):
            venv = environment(python, wheel)
            if venv is None:
                print(f"{python:8} (not installed here)")
                continue
            version = subprocess.run([str(venv / "bin" / "python"), "--version"],
                                     capture_output=True, text=True).stdout.split()[1]
            server, base_url = serve(venv)
            try:
                for agent in AGENTS:
                    for workers in ("0", "2"):
                        started = time.perf_counter()
                        failures = [f for _ in range(args.launches)
                                    if (f := launch(venv, base_url, agent, workers, where))]
                        took = (time.perf_counter() - started) / args.launches
                        print(f"{version:8} {agent:10} {workers:3} {args.launches:8} "
                              f"{len(failures):8} {took:9.1f}", flush=True)
                        for failure in sorted(set(failures))[:2]:
                            print(f"    {failure[:150]}")
            finally:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    main()
