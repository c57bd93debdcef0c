"""The JSON report: its envelope and the streamed, atomic write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_resilibench.reporting.report import envelope, fixture_hash, write_report


def test_envelope_holds_config_environment_and_summary(tmp_path: Path) -> None:
    head = envelope(config={"seed": 1}, summary={"n": 2}, rootdir=tmp_path)
    assert head["schema"] == "resilibench.report/1"
    assert head["config"] == {"seed": 1} and head["summary"] == {"n": 2}
    assert set(head["environment"]) >= {"python", "platform", "commit", "created"}


def test_fixture_hash_tracks_the_manifest() -> None:
    assert fixture_hash({}) is None
    assert fixture_hash({"a": 1}) == fixture_hash({"a": 1}) != fixture_hash({"a": 2})


@pytest.mark.parametrize("count", [0, 1, 3])
def test_streamed_report_is_valid_json(tmp_path: Path, count: int) -> None:
    path = tmp_path / "sub" / "r.json"
    lines = [json.dumps({"id": f"e{i}", "outcome": "full"}) for i in range(count)]
    write_report(path, {"schema": "s", "summary": {"x": [1, 2]}}, iter(lines))
    data = json.loads(path.read_text())
    assert data["episodes"] == [{"id": f"e{i}", "outcome": "full"} for i in range(count)]
    assert data["summary"] == {"x": [1, 2]}


def test_failed_write_keeps_the_old_report_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_report(path, {"schema": "s"}, iter(['{"id": "a"}']))

    def broken() -> object:
        yield '{"id": "b"}'
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_report(path, {"schema": "s"}, broken())  # type: ignore[arg-type]
    assert json.loads(path.read_text())["episodes"] == [{"id": "a"}]
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
