"""`--resili-gate=sequential` end to end: the run stops once the paired evidence decides, and
where it stops does not depend on the number of workers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.plugin.conftest import load

# Its tests share one expensive fixture: one worker builds it (make test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("sequential-baseline")

RUN = ["--resili-sample=2", "-p", "no:cacheprovider", "-p", "no:randomly"]
PLANNED = 2 * 15 * 10  # tasks per cell x cells x variants


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One oracle run, the baseline of every gate below (run once: it is the slow part)."""
    pytester_dir = tmp_path_factory.mktemp("baseline")
    path = pytester_dir / "base.json"
    import subprocess
    import sys

    suite = Path(__file__).resolve().parents[2] / "suites" / "test_resilibench.py"
    (pytester_dir / "test_resilibench.py").write_text(suite.read_text())
    (pytester_dir / "pytest.ini").write_text("[pytest]\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", *RUN, "--resili-model=builtin:oracle",
                    f"--resili-report={path}"], cwd=pytester_dir, check=True,
                   capture_output=True)
    return path


def gate_run(suite: pytest.Pytester, baseline: Path, model: str, workers: str
             ) -> tuple[pytest.RunResult, dict[str, object]]:
    report = suite.path / f"{model.replace(':', '_')}-{workers}.json"
    result = suite.runpytest_subprocess(
        *RUN, f"--resili-model={model}", f"--resili-baseline={baseline}",
        "--resili-gate=sequential", f"--resili-report={report}", "-n", workers)
    return result, load(report)


@pytest.mark.parametrize(("model", "verdict", "exit_code"),
                         [("builtin:random", "regression", 1), ("builtin:oracle", "pass", 0)])
def test_stops_early_and_decides_alike_with_and_without_workers(
    suite: pytest.Pytester, baseline: Path, model: str, verdict: str, exit_code: int
) -> None:
    decisions = []
    for workers in ("0", "2"):
        result, report = gate_run(suite, baseline, model, workers)
        assert result.ret == exit_code
        seq = report["sequential"]
        assert isinstance(seq, dict)
        assert seq["verdict"] == verdict
        assert seq["pairs_planned"] == seq["episodes_planned"] == PLANNED
        [judged] = seq["by_model"]
        assert judged["decided_at_pair"] == judged["pairs"] < PLANNED
        ran = len(report["episodes"])  # type: ignore[arg-type]
        assert seq["episodes_run"] == ran < PLANNED
        final = result.outlines[-1]
        deselected = re.search(r"(\d+) deselected", final)
        assert deselected and int(deselected.group(1)) == PLANNED - ran, final
        result.stdout.fnmatch_lines([f"*resilibench gate: baseline {model}*: sequential*"
                                     f"{verdict.upper()}*"])
        decisions.append((seq["verdict"], judged["decided_at_pair"], judged["drop_pp"]))
    assert decisions[0] == decisions[1]


def test_runs_in_a_seeded_random_order(suite: pytest.Pytester, baseline: Path) -> None:
    args = [*RUN, "--collect-only", "-q", f"--resili-baseline={baseline}"]
    fixed = suite.runpytest(*args)
    seq = suite.runpytest(*args, "--resili-gate=sequential")
    again = suite.runpytest(*args, "--resili-gate=sequential")

    def ids(result: pytest.RunResult) -> list[str]:
        return [line for line in result.outlines if "::test_resilibench[" in line]

    assert sorted(ids(seq)) == sorted(ids(fixed)) and ids(seq) != ids(fixed)
    assert ids(seq) == ids(again)
    # any prefix mixes the cells: the first 30 items hold several types and variants
    head = ids(seq)[:30]
    assert len({re.search(r"-(easy|medium|hard)-", i).group(1) for i in head}) == 3  # type: ignore[union-attr]


def test_needs_a_baseline(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*RUN, "--resili-gate=sequential")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resili-gate=sequential needs --resili-baseline*"])
