"""The JSON report envelope and its atomic write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_resilibench.report import build_report, fixture_hash, write_atomic


def test_envelope_sorts_episodes(tmp_path: Path) -> None:
    report = build_report(config={"seed": 1}, episodes=[{"id": "b"}, {"id": "a"}],
                          summary={"n": 2}, rootdir=tmp_path)
    assert report["schema"] == "resilibench.report/1"
    assert [e["id"] for e in report["episodes"]] == ["a", "b"]
    assert set(report["environment"]) >= {"python", "platform", "commit", "created"}


def test_fixture_hash_tracks_the_manifest() -> None:
    assert fixture_hash({}) is None
    assert fixture_hash({"a": 1}) == fixture_hash({"a": 1}) != fixture_hash({"a": 2})


def test_atomic_write_leaves_no_temp_files_and_keeps_old_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_atomic(path, {"x": 1})
    assert json.loads(path.read_text()) == {"x": 1}
    with pytest.raises(TypeError):
        write_atomic(path, {"x": object()})
    assert json.loads(path.read_text()) == {"x": 1}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
