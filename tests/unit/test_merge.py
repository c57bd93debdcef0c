"""`resilibench report merge` (reporting/merge.py, cli.py): shards of one run join; a missing,
doubled, foreign or unsharded report is refused with one line naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.reporting.merge import check_shards

CONFIG = {"models": ["builtin:adaptive"], "seed": 0, "fixture_hash": "abc", "task_set": "default"}


def _shard(k: int, n: int, ids: list[str]) -> dict[str, Any]:
    episodes = [EpisodeRecord(
        id=i, model="builtin:adaptive", variant="optimal", flaw=None, severity=None,
        task_id=f"t{i}", task_type="data_pipeline", difficulty="easy", repeat=0, seed=0,
        base_success=0.8, tool_mode="text", max_turns=10).summary_json() for i in ids]
    return {"schema": "resilibench.report/1", "config": {**CONFIG, "shard": f"{k}/{n}"},
            "environment": {"gate": [], "lost": [], "started": f"2026-01-0{k}"},
            "summary": {}, "episodes": episodes, "complete": True, "expected": len(ids),
            "received": len(ids), "resumed": 0}


def _write(tmp: Path, name: str, report: dict[str, Any]) -> str:
    path = tmp / name
    path.write_text(json.dumps(report))
    return str(path)


def _merge(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(["report", "merge", *argv])
    out, err = capsys.readouterr()
    return status, out + err


def test_shards_merge_into_one_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path, "a.json", _shard(1, 2, ["e1", "e3"]))
    b = _write(tmp_path, "b.json", _shard(2, 2, ["e2"]))
    status, said = _merge(capsys, b, a, "-o", str(tmp_path / "run.json"))
    assert status == 0, said
    run = json.loads((tmp_path / "run.json").read_text())
    assert [e["id"] for e in run["episodes"]] == ["e1", "e2", "e3"]
    assert "shard" not in run["config"] and run["config"] == CONFIG
    assert run["expected"] == run["received"] == 3 and run["complete"]
    assert run["environment"]["started"] == "2026-01-01"
    assert [s["shard"] for s in run["environment"]["shards"]] == ["1/2", "2/2"]


@pytest.mark.parametrize(("reports", "says"), [
    ([(1, 3, ["e1"]), (3, 3, ["e2"])], "shard 2/3 missing"),
    ([(1, 4, ["e1"])], "shards 2/4, 3/4, 4/4 missing"),
    ([(1, 2, ["e1"]), (1, 2, ["e2"])], "r1.json and r0.json are both shard 1/2"),
    ([(1, 2, ["e1"]), (2, 2, ["e1"])], "r1.json and r0.json both hold episode e1"),
    ([(1, 2, ["e1"]), (2, 3, ["e2"])], "r1.json: shard 2/3 is of another split"),
])
def test_what_is_not_one_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        reports: list[tuple[int, int, list[str]]],
                                        says: str) -> None:
    paths = [_write(tmp_path, f"r{i}.json", _shard(*r)) for i, r in enumerate(reports)]
    status, said = _merge(capsys, *paths, "-o", str(tmp_path / "run.json"))
    said = said.replace(f"{tmp_path}/", "")
    assert status == 2 and says in said and "Traceback" not in said, said
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize(("key", "value"), [("seed", 1), ("fixture_hash", "other"),
                                            ("models", ["o3"])])
def test_a_foreign_shard_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            key: str, value: Any) -> None:
    foreign = _shard(2, 2, ["e2"])
    foreign["config"][key] = value
    a = _write(tmp_path, "a.json", _shard(1, 2, ["e1"]))
    b = _write(tmp_path, "foreign.json", foreign)
    status, said = _merge(capsys, a, b, "-o", str(tmp_path / "run.json"))
    assert status == 2, said
    assert f"foreign.json: not the same run as {a}: its config differs in {key}" in said


def test_an_unsharded_report_is_refused(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    whole = _shard(1, 1, ["e1"])
    del whole["config"]["shard"]
    path = _write(tmp_path, "whole.json", whole)
    status, said = _merge(capsys, path, "-o", str(tmp_path / "run.json"))
    assert status == 2 and "whole.json: not a shard's report" in said, said


def test_check_shards_needs_reports() -> None:
    with pytest.raises(ValueError, match="give the shards"):
        check_shards([])
