"""Option parsers: every bad value is a clear ValueError."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_resilibench.base import names
from pytest_resilibench.integration import options as o


def test_choices_accept_all_and_refuse_repeats_and_empty_items() -> None:
    parse = o._choices(names.VARIANT_KINDS)
    assert parse("all") == names.VARIANT_KINDS
    assert parse("optimal, flawed") == ("optimal", "flawed")
    with pytest.raises(ValueError, match="nope not in"):
        parse("optimal,nope")
    with pytest.raises(ValueError, match="optimal given twice"):
        parse("optimal, flawed optimal")
    with pytest.raises(ValueError, match="empty item"):
        parse("optimal,,flawed")


@pytest.mark.parametrize(("text", "value"), [("0.55", 0.55), ("55%", 0.55), ("0", 0.0)])
def test_rate(text: str, value: float) -> None:
    assert o._rate(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["1.5", "abc", "-1%", "101%", "x%"])
def test_bad_rate(text: str) -> None:
    with pytest.raises(ValueError):
        o._rate(text)


def test_sample_and_rates() -> None:
    assert o._sample("all") is None and o._sample("3") == 3
    with pytest.raises(ValueError):
        o._sample("0")
    assert o._rates("0.9, 0.6") == (0.9, 0.6)
    for bad in ("0.9, 0.6 0.9", "0.9,,0.8", "0.8,0.80", "0.8,"):
        with pytest.raises(ValueError, match=r"twice|empty item"):
            o._rates(bad)
    with pytest.raises(ValueError, match="probability"):
        o._rates("0")


def test_live_urls_and_url() -> None:
    assert o._live_urls(["jokes=http://h:1/j/"]) == {"jokes": "http://h:1/j"}
    with pytest.raises(ValueError, match="SERVICE=URL"):
        o._live_urls(["nourl"])
    with pytest.raises(ValueError, match="URL"):
        o._url("ftp://x")


def test_config_json_is_plain() -> None:
    data = o.RunConfig(sample=None).to_json()
    assert data["sample"] == "all" and data["models"] == [o.DEFAULT_MODEL]


def test_temperature() -> None:
    assert o._temperature("0.7") == 0.7 and o._temperature("default") is None
    with pytest.raises(ValueError, match=r"temperature .* in \[0, 2\]"):
        o._temperature("3")


def test_fault_profile_is_in_the_config() -> None:
    assert o.RunConfig().to_json()["faults"] == "paper"
    assert o.RunConfig(faults="realistic").to_json()["faults"] == "realistic"
    assert o._one_of(names.FAULT_PROFILES)("realistic") == "realistic"
    with pytest.raises(ValueError):
        o._one_of(names.FAULT_PROFILES)("chaos")


@pytest.mark.parametrize(("text", "value"), [("0.95", 0.95), ("95", 0.95), ("99.5%", 0.995),
                                             ("0.5", 0.5)])
def test_confidence(text: str, value: float) -> None:
    assert o._confidence(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0.3", "1", "100", "nan", "inf", "-5", "abc"])
def test_bad_confidence(text: str) -> None:
    with pytest.raises(ValueError):
        o._confidence(text)


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf"])
def test_numbers_must_be_finite(text: str) -> None:
    for parse in (o._rate, o._points, o._temperature, o._rates):
        with pytest.raises(ValueError):
            parse(text)


def test_seconds_are_finite_but_unbounded_above() -> None:
    for text in ("nan", "inf", "1e999"):
        with pytest.raises(ValueError):
            o._seconds(text)
        with pytest.raises(ValueError):
            o._dollars(text)
    assert o._seconds("3.5") == 3.5 and o._seconds("1e9") == 1e9


def test_report_path_is_checked_before_the_run(tmp_path: Path) -> None:
    assert o._output_file(str(tmp_path / "new" / "deeper" / "run.json")).name == "run.json"
    with pytest.raises(ValueError, match="is a directory"):
        o._output_file(str(tmp_path))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("")
    with pytest.raises(ValueError, match="not a writable directory"):
        o._output_file(str(a_file / "run.json"))  # refused even for root


@pytest.mark.parametrize(("allowed", "text"), [(names.TOOL_MODES, "text,native"),
                                               (names.ENVIRONMENTS, "sim,live"),
                                               (names.APIS, "chat responses"), (names.GATES, "")])
def test_single_valued_options_refuse_several_values(allowed: tuple[str, ...],
                                                     text: str) -> None:
    with pytest.raises(ValueError, match="is not one of"):
        o._one_of(allowed)(text)
    assert o._one_of(allowed)(f" {allowed[-1]} ") == allowed[-1]


@pytest.mark.parametrize("text", ["auto", "OFF"])
def test_resume_takes_a_word_or_a_path(text: str) -> None:
    assert o._resume(text) == text.lower()
    assert o._resume("runs/r.json") == Path("runs/r.json")


def test_model_args_are_a_json_object_read_as_any_outside_json_is() -> None:
    assert o._json_object('{"reasoning_effort": "low", "top_p": 0.5}') == {
        "reasoning_effort": "low", "top_p": 0.5}
    for bad in ('["low"]', '{"top_p": NaN}', '{"n": 1e999}', '{"a": ' + "[" * 200 + "]" * 200 + "}",
                "{oops"):
        with pytest.raises(ValueError, match="JSON"):
            o._json_object(bad)


def test_rate_limit_options() -> None:
    """--resili-rpm / --resili-tpm: budgets per minute; --resili-max-wait: seconds (600)."""
    rpm = next(parse for name, parse, *_ in o._OPTIONS if name == "rpm")
    wait = next((parse, default) for name, parse, default, _ in o._OPTIONS if name == "max-wait")
    assert rpm is not None and rpm("500") == 500.0 and o._per_minute("1.5e5") == 150000.0
    for bad in ("0", "-3", "many", "inf"):
        with pytest.raises(ValueError, match="budget per minute"):
            o._per_minute(bad)
    assert wait[1] == "600" and o.RunConfig().max_wait == 600.0
    assert o.RunConfig().rpm is None and o.RunConfig().tpm is None


def test_task_set_options(tmp_path: Path) -> None:
    assert o._one_of(o.TASK_SET_NAMES)("paper") == "paper"
    with pytest.raises(ValueError):
        o._one_of(o.TASK_SET_NAMES)("mine")
    with pytest.raises(ValueError, match=r"holds no tasks\.jsonl\.gz.*resilibench generate"):
        o._task_dir(str(tmp_path))
    (tmp_path / "tasks.jsonl.gz").write_bytes(b"")  # its contents are checked on load
    assert o._task_dir(str(tmp_path)) == tmp_path
    assert o._task_dir(str(tmp_path / "tasks.jsonl.gz")) == tmp_path
    assert o.RunConfig().to_json()["task_set"] == "default"
    assert o.RunConfig(task_set="paper").task_set_name == "paper"
    # A folder of one's own wins over the shipped set's name.
    assert o.RunConfig(task_set="paper", tasks=tmp_path).to_json()["task_set"] == str(tmp_path)


@pytest.mark.parametrize(("parse", "text", "said"), [
    (o._sample, "99999999999999999999", "(a 64-bit integer)"),
    (o._sample, "9" * 5000, "does not fit in a 64-bit integer"),
    (o._int_at_least(0), "9223372036854775808", "above the most this option takes"),
    (o._models, "o3,o3", "o3 given twice"),
    (o._models, "o3,,gpt-4o", "empty item"),
    (o._url, "http://[::1", "not an http(s) URL"),
    (o._url, "http://h:99999/v1", "not an http(s) URL"),
    (o._url, "http://:80/v1", "not an http(s) URL with a host"),
    (o._url, "http://h:0", "not an http(s) URL with a host"),
])
def test_values_that_do_not_fit_are_one_clear_error(parse: Any, text: str, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        parse(text)


def test_the_turn_budget_is_bounded() -> None:
    max_turns = next(parse for name, parse, *_ in o._OPTIONS if name == "max-turns")
    assert max_turns is not None and max_turns(str(o.MAX_TURNS)) == o.MAX_TURNS == 1000
    with pytest.raises(ValueError, match="above the most this option takes, 1000"):
        max_turns("100000000")
    assert o._url("http://[::1]:8000/v1/") == "http://[::1]:8000/v1"
