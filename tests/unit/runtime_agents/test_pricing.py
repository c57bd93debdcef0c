"""The price table: lookups, costs and user overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_resilibench.runtime.agents.pricing import PRICES, Price, cost_usd, load_prices, price_of


def test_lookup_by_name_snapshot_and_prefix() -> None:
    assert price_of("o3") == PRICES["o3"]
    assert price_of("o3-2025-04-16") == PRICES["o3"]
    assert price_of("o3-mini-2025-01-31") == PRICES["o3-mini"]  # not o3's
    assert price_of("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    assert price_of("openai:gpt-5-mini") == PRICES["gpt-5-mini"]
    assert price_of("openai/o4-mini") == PRICES["o4-mini"]
    assert price_of("qwen2.5:7b") is None and price_of("o3-pro") is None


def test_cost_bills_cached_prompt_tokens_at_the_cached_rate() -> None:
    price = Price(input=2.0, cached_input=0.5, output=8.0)
    tokens = {"prompt": 1_000_000, "cached": 400_000, "completion": 100_000, "reasoning": 50_000}
    # 600k x 2 + 400k x 0.5 + 100k x 8 (reasoning is inside completion) per million
    assert cost_usd(price, tokens) == pytest.approx(1.2 + 0.2 + 0.8)
    assert cost_usd(None, tokens) is None
    assert cost_usd(price, {"replayed": 10_000}) == 0.0  # replays are not spend


def test_a_file_overrides_and_extends_the_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"o3": {"input": 1, "output": 4},
                                "local": {"input": 0, "cached_input": 0, "output": 0}}))
    table = load_prices(path)
    assert table["o3"] == Price(1.0, 1.0, 4.0) and price_of("local", table) == Price(0, 0, 0)
    assert table["gpt-4o"] == PRICES["gpt-4o"]
    path.write_text(json.dumps({"o3": {"input": "cheap"}}))
    load_prices.cache_clear()
    with pytest.raises(ValueError, match="--resili-prices: o3: need numbers"):
        load_prices(path)


def test_episode_cost_prices_the_agent_first_then_the_models_that_spent_the_tokens() -> None:
    from pytest_resilibench.runtime.agents.pricing import Price, episode_cost

    tokens = {"prompt": 1000, "completion": 100, "cached": 0}
    by_model = {"gpt-4o": {"prompt": 1000, "completion": 100, "cached": 0}}
    table = {"gpt-4o": Price(2.5, 1.25, 10.0), "my-agent": Price(1.0, 1.0, 1.0)}
    assert episode_cost(tokens, by_model, ["py:m:f"], table) == 0.0035  # the model's
    assert episode_cost(tokens, by_model, ["py:m:f", "my-agent"], table) == 0.0011  # the agent's
    assert episode_cost(tokens, None, ["py:m:f"], table) is None  # no name prices it
    unknown = {"gpt-4o": by_model["gpt-4o"], "mystery": {"prompt": 1, "completion": 0}}
    assert episode_cost(tokens, unknown, [], table) is None  # one model without a price
    part = {"gpt-4o": {"prompt": 500, "completion": 100, "cached": 0}}
    assert episode_cost(tokens, part, [], table) is None  # some tokens name no model
