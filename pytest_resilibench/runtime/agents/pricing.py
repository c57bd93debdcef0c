"""What model tokens cost: a small dated price table, overridable from a JSON file.

Prices are USD per million tokens, from https://platform.openai.com/docs/pricing as of
`PRICES_DATE` (standard tier). Reasoning tokens are billed as output tokens and are already
part of `completion` (https://platform.openai.com/docs/guides/reasoning); cached prompt tokens
are billed at the cached-input rate (https://platform.openai.com/docs/guides/prompt-caching).
A model with no price costs `None` (unknown), never 0.

Override or extend with `--resili-prices FILE` (ini `resili_prices`), a JSON object:
``{"my-model": {"input": 0.5, "cached_input": 0.25, "output": 1.5}}`` (cached_input defaults
to input).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["PRICES", "PRICES_DATE", "Price", "cost_usd", "episode_cost", "load_prices",
           "price_of"]

PRICES_DATE = "2025-08-15"


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M prompt tokens
    cached_input: float
    output: float  # USD per 1M completion tokens (reasoning included)


PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
    "o1": Price(15.00, 7.50, 60.00),
    "o3": Price(2.00, 0.50, 8.00),
    "o3-mini": Price(1.10, 0.55, 4.40),
    "o4-mini": Price(1.10, 0.275, 4.40),
    "gpt-5": Price(1.25, 0.125, 10.00),
    "gpt-5-mini": Price(0.25, 0.025, 2.00),
    "gpt-5-nano": Price(0.05, 0.005, 0.40),
}


@lru_cache(maxsize=8)
def load_prices(path: Path | None = None) -> Mapping[str, Price]:
    """The table, with the file's entries over it. Raises ValueError on a bad file."""
    table = dict(PRICES)
    if path is None:
        return table
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--resili-prices: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--resili-prices: {path} must hold a JSON object of models")
    for model, entry in data.items():
        try:
            price = Price(float(entry["input"]), float(entry.get("cached_input", entry["input"])),
                          float(entry["output"]))
        except (TypeError, KeyError, ValueError, AttributeError):
            raise ValueError(f"--resili-prices: {model}: need numbers 'input' and 'output' "
                             f"(USD per 1M tokens), optional 'cached_input'") from None
        if min(price.input, price.cached_input, price.output) < 0:
            raise ValueError(f"--resili-prices: {model}: prices must be >= 0")
        table[str(model)] = price
    return table


def price_of(model: str, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of a model name: exact, else a dated snapshot of a listed model
    (`o3-2025-04-16` is `o3`); a vendor prefix (`openai:`, `openai/`) is ignored."""
    table = PRICES if prices is None else prices
    name = model.removeprefix("openai:")
    if name in table:
        return table[name]
    name = name.rsplit("/", 1)[-1]
    if name in table:
        return table[name]
    for listed in sorted(table, key=len, reverse=True):
        if name.startswith(listed + "-20"):
            return table[listed]
    return None


def cost_usd(price: Price | None, tokens: Mapping[str, int]) -> float | None:
    """The cost of `tokens` (prompt, completion, cached) at `price`; None when unknown."""
    if price is None:
        return None
    prompt = int(tokens.get("prompt", 0) or 0)
    cached = min(prompt, int(tokens.get("cached", 0) or 0))
    completion = int(tokens.get("completion", 0) or 0)
    total = ((prompt - cached) * price.input + cached * price.cached_input
             + completion * price.output) / 1e6
    return round(total, 8)


def episode_cost(tokens: Mapping[str, int], by_model: Mapping[str, Mapping[str, int]] | None,
                 names: Sequence[str], prices: Mapping[str, Price]) -> float | None:
    """An episode's cost: the agent's own price (the first of `names` with one: its spec, its
    name) on all its tokens; else, where its usage named the models that spent it (a
    framework adapter's, `tokens_by_model`), each model's price on its tokens. None when a
    price is unknown, or some tokens name no model."""
    for name in names:
        price = price_of(name, prices)
        if price is not None:
            return cost_usd(price, tokens)
    if not by_model:
        return None
    costs = [cost_usd(price_of(model, prices), spent) for model, spent in by_model.items()]
    named = sum(int(s.get("prompt", 0)) + int(s.get("completion", 0)) for s in by_model.values())
    if named < int(tokens.get("prompt", 0)) + int(tokens.get("completion", 0)):
        return None
    known = [cost for cost in costs if cost is not None]
    return round(sum(known), 8) if len(known) == len(costs) else None
