"""docs/CHAOS.md's example runs as written: its test over a real MCP server (`mcp-server-git`,
the dev extra), once clean and once per fault seed, with the same fault sequence per seed
under `-n 0` and `-n 2`."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.plugin.conftest import load

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)
if shutil.which("mcp-server-git", path=BIN + os.pathsep + os.environ.get("PATH", "")) is None:
    pytest.skip("mcp-server-git is not installed (pip install -e '.[dev]' installs it from PyPI)",
                allow_module_level=True)


def example() -> str:
    text = (ROOT / "docs" / "CHAOS.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL)
                if "resili_faults" in b and "from mcp import" in b]
    assert len(block.strip().splitlines()) <= 32  # about twenty lines of test, as promised
    return block


def fault_sequences(root: Path) -> dict[str, str]:
    """Per trace file: the calls' tools, indices and injected faults (the repository's path
    in the arguments differs between runs)."""
    folder = root / ".resilibench" / "chaos"
    return {p.name: json.dumps([(line["tool"], line["call_index"], line["fault"])
                                for line in map(json.loads, p.read_text().splitlines())])
            for p in sorted(folder.rglob("*.jsonl"))}


def test_the_docs_example_runs_and_its_faults_do_not_depend_on_workers(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ.get("PATH", ""))
    pytester.makepyfile(test_my_agent=example())
    runs: list[tuple[Any, dict[str, str], dict[str, Any]]] = []
    for workers in ("0", "2"):
        report = pytester.path / f"chaos{workers}.json"
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", workers,
                                               f"--resili-report={report}")
        runs.append((result, fault_sequences(pytester.path), load(report)["chaos"]))
        shutil.rmtree(pytester.path / ".resilibench" / "chaos")
    (solo, solo_faults, solo_report), (duo, duo_faults, duo_report) = runs
    outcomes = solo.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 11
    assert "errors" not in outcomes
    clean = [r for r in solo_report["runs"] if r["seed"] is None]
    assert [r["outcome"] for r in clean] == ["passed"]
    assert len(solo_faults) == 11 and solo_faults == duo_faults
    assert any(fault is not None for seq in solo_faults.values()
               for _, _, fault in json.loads(seq))  # faults were met
    key = lambda r: r["run"]  # noqa: E731
    assert [(r["run"], r["outcome"]) for r in sorted(solo_report["runs"], key=key)] == \
        [(r["run"], r["outcome"]) for r in sorted(duo_report["runs"], key=key)]
    assert duo.parseoutcomes() == outcomes
    print(json.dumps(solo_report["summary"], indent=1))
