"""What `--resili-otel` costs (issue 49): a built-in agent's run with and without it, exporting
to an OTLP/HTTP sink on loopback (a real HTTP server that takes every batch and answers 200,
so the collector's own work is not counted); and what the [otel] extra costs a project that
does not use it: `pytest --co` of a small unrelated project with the plugin on and off, and
whether any opentelemetry module was imported (it must not be).

Runs interleaved (load on the machine hits both settings alike), the median of N runs each:
wall time and the CPU time of the whole process tree (getrusage(RUSAGE_CHILDREN)); the cost per
episode is the difference over the episodes run, against the run's own CPU time per episode.

    python bench/bench_otel.py [--runs 5] [--sample 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(10))
CONFTEST = ("import sys\n\n\ndef pytest_unconfigure(config):\n"
            "    found = [m for m in sys.modules if m.startswith('opentelemetry')]\n"
            "    (config.rootpath / 'otel_modules.txt').write_text(str(len(found)))\n")


class _Sink(BaseHTTPRequestHandler):
    """OTLP/HTTP's trace endpoint, taking everything: counts the bytes it got."""

    received = 0

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        type(self).received += len(self.rfile.read(size))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sample", default="10", help="tasks per cell (10: 1500 episodes)")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")]),
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}"}
    run = [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider", "-n", "0",
           "--resili-model=builtin:adaptive", f"--resili-sample={args.sample}",
           "--resili-resume=off"]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        _timed([*run, f"--resili-report={report}"], ROOT, env)  # warm: caches, plans
        import json

        episodes = json.loads(report.read_text())["episodes"]
        n = len(episodes)
        agent_wall = sum(e["wall_time_s"] for e in episodes) / n
        times: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
        for _ in range(args.runs):
            for name, extra in (("off", []), ("on", ["--resili-otel"])):
                times[name].append(_timed([*run, *extra], ROOT, env))
        median = statistics.median
        off_wall = median(w for w, _ in times["off"])
        on_wall = median(w for w, _ in times["on"])
        off_cpu = median(c for _, c in times["off"])
        on_cpu = median(c for _, c in times["on"])
        print(f"--resili-otel, builtin:adaptive, {n} episodes, -n 0, median of {args.runs} "
              "runs:")
        print(f"  wall  off {off_wall:.2f} s  on {on_wall:.2f} s  "
              f"+{(on_wall - off_wall) / n * 1e6:.0f} us/episode "
              f"({(on_wall - off_wall) / off_wall:+.1%} of the run)")
        print(f"  CPU   off {off_cpu:.2f} s  on {on_cpu:.2f} s  "
              f"+{(on_cpu - off_cpu) / n * 1e6:.0f} us/episode "
              f"({(on_cpu - off_cpu) / off_cpu:+.1%} of the run's CPU; "
              f"{(on_cpu - off_cpu) / n / (off_cpu / n):+.1%} of its CPU per episode)")
        print(f"  an episode's own wall time (its record's wall_time_s, mean): "
              f"{agent_wall * 1e3:.2f} ms; the export's CPU is "
              f"{(on_cpu - off_cpu) / n / agent_wall:.1%} of it")
        print(f"  sent to the sink: {_Sink.received / 2**20:.1f} MiB of OTLP protobuf "
              f"over {args.runs} runs")

        project = Path(tmp) / "plain"
        project.mkdir()
        (project / "test_plain.py").write_text(TESTS)
        (project / "conftest.py").write_text(CONFTEST)
        co: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        for _ in range(max(args.runs, 5) * 2):
            for name, extra in (("on", []), ("off", ["-p", "no:resilibench"])):
                co[name].append(_timed([sys.executable, "-m", "pytest", "--co", "-q",
                                        "-p", "no:cacheprovider", *extra], project, env))
        # Whether the plugin's run imported any (`-p no:resilibench` lets langsmith's plugin
        # load, which imports opentelemetry: foreign_plugins.py keeps it out otherwise).
        _timed([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"],
               project, env)
        loaded = (project / "otel_modules.txt").read_text()
        print("pytest --co of an unrelated 10-test project, the [otel] extra installed, "
              f"min of {len(co['on'])}:")
        print(f"  plugin on {min(w for w, _ in co['on']) * 1e3:.0f} ms wall, "
              f"{min(c for _, c in co['on']) * 1e3:.0f} ms CPU; -p no:resilibench "
              f"{min(w for w, _ in co['off']) * 1e3:.0f} ms wall, "
              f"{min(c for _, c in co['off']) * 1e3:.0f} ms CPU; "
              f"opentelemetry modules imported with the plugin on: {loaded}")
    server.shutdown()


if __name__ == "__main__":
    main()
