"""Reading files from elsewhere: the bounded JSON reader, and, fuzzed with hypothesis, every
loader built on it (the report loader the CLI and the baseline use, the gate on what it
loads, the episode log of resume) and the model-call cache opener: each gives a valid result
that the code after it can use, or one clear error, never another exception."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_resilibench.base.jsonfile import load_json_file, loads_bounded
from pytest_resilibench.core.record import EpisodeRecord
from pytest_resilibench.integration.gate import compare_with_baseline, fail_under
from pytest_resilibench.integration.gate_policy import GatePolicy
from pytest_resilibench.integration.resume import read_log
from pytest_resilibench.reporting.comparison import compare
from pytest_resilibench.reporting.report import REPORT_SCHEMA, load_report
from pytest_resilibench.reporting.summarize import summary
from pytest_resilibench.reporting.tables import render_terminal
from pytest_resilibench.runtime.agents.cache import CallKey, ModelCallCache

EPISODE = EpisodeRecord(
    id="m-optimal-basic_task-easy-t0001-r0", model="builtin:oracle", variant="optimal",
    flaw=None, severity=None, task_id="t0001", task_type="basic_task", difficulty="easy",
    repeat=0, seed=0, base_success=0.8, tool_mode="text", max_turns=10, outcome="full",
).summary_json()
SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                  max_size=4),
    max_leaves=12)


@st.composite
def reports(draw: st.DrawFn) -> Any:
    """Mostly reports with some fields replaced by random JSON (deep enough to reach the code
    after the loader), sometimes any JSON at all."""
    if draw(st.booleans()) and draw(st.booleans()):
        return draw(json_values)
    episodes = []
    for _ in range(draw(st.integers(0, 3))):
        episode = dict(EPISODE)
        for name in draw(st.lists(st.sampled_from(sorted(EPISODE)), max_size=3)):
            episode[name] = draw(json_values)
        episodes.append(episode)
    report: dict[str, Any] = {"schema": REPORT_SCHEMA, "episodes": episodes}
    for name in draw(st.lists(st.sampled_from(["config", "environment", "summary"]),
                              max_size=2)):
        report[name] = draw(json_values)
    return report


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@SETTINGS
@given(report=reports())
def test_report_and_baseline_loaders_give_usable_data_or_one_clear_error(
        tmp_path: Path, report: Any) -> None:
    path = _write(tmp_path / "r.json", report)
    try:
        data = load_report(path)
    except ValueError as exc:
        assert str(path) in str(exc)
        return
    episodes = data["episodes"]
    render_terminal(summary(episodes))
    try:
        compare(episodes, episodes, max_drop_pp=5.0)
    except ValueError as exc:  # a report without models pairs with nothing: said, not raised
        assert "no model" in str(exc)
    compare_with_baseline(episodes, episodes, GatePolicy())
    fail_under(episodes, 0.5)


@SETTINGS
@given(blob=st.binary(max_size=300))
def test_random_bytes_are_no_report_no_log_and_no_cache(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "blob"
    path.write_bytes(blob)
    with pytest.raises(ValueError):
        load_report(path)
    with pytest.raises(ValueError):
        read_log(path)
    cache_path = tmp_path / "blob.sqlite"
    cache_path.write_bytes(blob)
    try:
        cache = ModelCallCache(cache_path)
    except ValueError as exc:
        assert str(cache_path) in str(exc)
    else:  # an empty file is a new sqlite database: ours from now on
        with cache:
            key = CallKey(model="m", base_url="", messages=[], tools=None, params={}, repeat=0)
            assert cache.get(key) is None
    for stale in tmp_path.iterdir():
        stale.unlink()


@SETTINGS
@given(lines=st.lists(json_values.map(json.dumps)
                     | st.text(st.characters(exclude_characters="\r\n",
                                           exclude_categories=["Cs"]), max_size=30),
                     max_size=5))
def test_an_episode_log_reads_back_its_episodes_or_skips_lines(
        tmp_path: Path, lines: list[str]) -> None:
    header = json.dumps({"schema": "resilibench.episode-log/1", "resume": {"seed": 0}})
    good = json.dumps(EPISODE)
    path = tmp_path / "r.json.episodes.jsonl"
    path.write_text("\n".join([header, good, *lines]) + "\n", encoding="utf-8")
    source = read_log(path)
    assert source.key == {"seed": 0} and EPISODE["id"] in source.episodes
    assert len(source.episodes) + source.skipped <= 1 + len(lines)


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),
    ('{"a": ' * 70 + "1" + "}" * 70, "nested deeper"),
    ('{"n": NaN}', "not a JSON number"),
    ('{"n": 1e999}', "out of range"),
    ('{"n": 1' + "0" * 4000 + "}", "out of range"),
    ("{", "Expecting"),
])
def test_bounded_reading_refuses_what_would_break_later(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        loads_bounded(text)


def test_bounded_reading_keeps_what_reports_hold() -> None:
    value = {"a": [1.5, -2, {"b": [None, True, "x"]}], "big": 2 ** 62}
    assert loads_bounded(json.dumps(value)) == value
    assert math.isfinite(loads_bounded("1e308"))


def test_files_too_large_or_not_files_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.json", {"x": "y" * 100})
    with pytest.raises(ValueError, match="larger than"):
        load_json_file(path, what="a report", max_bytes=50)
    with pytest.raises(ValueError, match="is a directory"):
        load_json_file(tmp_path, what="a report")
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match="not UTF-8"):
        load_json_file(path, what="a report")
