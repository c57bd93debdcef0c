"""Behaviour check for refactors: a fixed-seed run's report, minus what may differ between two
runs of the same code (timing fields, `environment`), written as canonical JSON.

    python bench/report_identity.py write OUT.json     # in one checkout (e.g. main)
    python bench/report_identity.py write NEW.json     # in the other (the branch)
    python bench/report_identity.py compare OUT.json NEW.json

The runs cover every built-in agent, every variant and flaw, both tool modes and both fault
profiles, with trajectories, so any change in prompts, tool luck, agents or scoring shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MODELS = "builtin:oracle,builtin:follower,builtin:adaptive,builtin:privileged,builtin:random"
RUNS = {
    "text-paper": ["--resili-tool-mode=text", "--resili-faults=paper"],
    "native-realistic": ["--resili-tool-mode=native", "--resili-faults=realistic"],
}
TIMING_FIELDS = {"wall_time_s", "created"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()
                if k not in TIMING_FIELDS and k != "environment"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _report(extra: list[str], out: Path) -> Any:
    cmd = [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider", "-n", "0",
           f"--resili-model={MODELS}", "--resili-seed=7", "--resili-sample=1",
           "--resili-flaws=all", "--resili-severity=light,medium,severe",
           "--resili-trajectories", "--resili-resume=off", f"--resili-report={out}", *extra]
    subprocess.run(cmd, check=False, capture_output=True)
    return _strip(json.loads(out.read_text(encoding="utf-8")))


def write(path: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        reports = {name: _report(extra, Path(tmp) / f"{name}.json") for name, extra in RUNS.items()}
    path.write_text(json.dumps(reports, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(path, sum(len(r["episodes"]) for r in reports.values()), "episodes")


def compare(old: Path, new: Path) -> int:
    a, b = old.read_bytes(), new.read_bytes()
    if a == b:
        print(f"identical ({len(a)} bytes)")
        return 0
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False)):
        if x != y:
            print(f"first difference at line {i + 1}:\n- {x!r}\n+ {y!r}")
            break
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["write"]:
        write(Path(sys.argv[2]))
    else:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
