"""The real-model options: --resili-model-args, --resili-api, the stops, the price file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_resilibench.integration import options as o


def test_model_args_must_be_a_json_object() -> None:
    assert o._json_object('{"reasoning_effort": "low"}') == {"reasoning_effort": "low"}
    with pytest.raises(ValueError, match="not JSON"):
        o._json_object("{reasoning_effort: low}")
    with pytest.raises(ValueError, match="a JSON list where a JSON object was expected"):
        o._json_object("[1, 2]")


def test_temperature_auto_default_and_numbers() -> None:
    assert o._temperature("auto") == "auto" and o._temperature("default") is None
    assert o._temperature("0.5") == 0.5


def test_dollars() -> None:
    assert o._dollars("$20") == 20.0 and o._dollars("0.5") == 0.5
    with pytest.raises(ValueError, match="USD"):
        o._dollars("0")


def test_defaults_and_report_config() -> None:
    config = o.RunConfig()
    assert (config.temperature, config.api, config.max_consecutive_errors) == ("auto", "chat", 10)
    assert config.request_timeout == 600.0 and config.max_cost is None
    data = o.RunConfig(model_args={"reasoning_effort": "low"}, api="responses").to_json()
    assert data["model_args"] == {"reasoning_effort": "low"} and data["api"] == "responses"


def test_options_reach_the_run_config(pytester: pytest.Pytester, tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text("{}")
    pytester.makeini(f"""
        [pytest]
        resili_model_args = {{"max_completion_tokens": 4000}}
        resili_api = responses
        resili_prices = {prices}
    """)
    config = pytester.parseconfigure("--resili-max-cost=12", "--resili-max-consecutive-errors=3")
    run = o.read_config(config)
    assert run.model_args == {"max_completion_tokens": 4000} and run.api == "responses"
    assert (run.max_cost, run.max_consecutive_errors, run.prices) == (12.0, 3, prices)
