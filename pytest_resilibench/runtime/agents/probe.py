"""Fail fast: one minimal request per real model before the first episode.

A wrong key, an unknown model or an option the model refuses would otherwise be paid once per
episode (50,400 refused requests for a full run) and shown only as `IIII...`. The probe goes
through the agent's own path and options (`OpenAIAgent.probe`), so what it meets is what the
episodes would meet; its failure becomes a usage error that quotes the server and names the
option to change. Also: merging provider counters across processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_resilibench.runtime.agent_boundary import (
    CLOSE_TIMEOUT_S,
    AgentError,
    close_agent,
    raised_where,
)
from pytest_resilibench.runtime.protocol import AnyAgent, InfrastructureError

__all__ = ["hint_for", "merge_stats", "probe_agent", "throughput"]

_HINTS = {
    401: "check OPENAI_API_KEY (the key the server at --resili-base-url expects)",
    403: "check OPENAI_API_KEY: this key may not use this model",
    404: "check --resili-model (the model name) and --resili-base-url",
    400: "check --resili-model-args, --resili-temperature and --resili-api",
    422: "check --resili-model-args, --resili-temperature and --resili-api",
}


def hint_for(exc: InfrastructureError) -> str:
    if exc.status in _HINTS:
        return _HINTS[exc.status]
    if exc.retryable:
        return ("the server did not answer after every retry: check --resili-base-url, or "
                "raise --resili-retries / --resili-request-timeout")
    return "check --resili-model and --resili-base-url"


async def probe_agent(agent: AnyAgent, spec: str, *, probe: bool = True) -> None:
    """Probe `agent` when it can be probed (real models), then close it. Raises ValueError
    (a usage error at start-up) quoting the server's answer."""
    try:
        ask = getattr(agent, "probe", None)
        if probe and ask is not None:
            await ask()
    except InfrastructureError as exc:
        await _close(agent, spec, quiet=True)
        raise ValueError(f"--resili-model {spec}: the start-up request failed: {exc}; "
                         f"{hint_for(exc)}") from None
    except BaseException:
        await _close(agent, spec, quiet=True)
        raise
    await _close(agent, spec)


async def _close(agent: AnyAgent, spec: str, *, quiet: bool = False) -> None:
    """Close the probed agent. A user's `aclose()` that raises is a usage error that says so
    (`quiet`: not while the probe's own failure is the news)."""
    try:
        await close_agent(agent, timeout_s=CLOSE_TIMEOUT_S)
    except Exception as exc:
        if not quiet:
            line = exc.line if isinstance(exc, AgentError) else raised_where(exc)
            raise ValueError(f"--resili-model {spec}: closing the agent failed: "
                             f"{line}") from None


def merge_stats(total: Mapping[str, Any] | None, more: Mapping[str, Any]) -> dict[str, Any]:
    """Two processes' `ProviderStats.to_json()` as one: counts add up, `faults` by kind, and
    `cost_usd` stays None only when both are; the limiter's span is the earliest `first_at`
    to the latest `last_at`, `window` (the one the processes share) the largest seen, and
    `busy_s` adds up."""
    out: dict[str, Any] = dict(total or {})
    for key, value in more.items():
        have = out.get(key)
        if key in ("first_at", "last_at", "window") and value is not None and have is not None:
            out[key] = min(have, value) if key == "first_at" else max(have, value)
        elif isinstance(value, Mapping):
            merged = dict(have or {})
            for kind, n in value.items():
                merged[kind] = merged.get(kind, 0) + n
            out[key] = dict(sorted(merged.items()))
        elif value is None or have is None:
            out[key] = value if have is None else have
        else:
            out[key] = have + value
    if isinstance(out.get("cost_usd"), float):
        out["cost_usd"] = round(out["cost_usd"], 6)
    return out


def throughput(stats: Mapping[str, Any]) -> dict[str, Any]:
    """`stats` (merged) with what the run achieved: `requests_per_s` (HTTP requests over the
    span from the first sent to the last reply) and `concurrency` (requests in flight on
    average over that span); both None without a span."""
    first, last = stats.get("first_at"), stats.get("last_at")
    span = last - first if isinstance(first, float | int) and isinstance(last, float | int) \
        else 0.0
    out = dict(stats)
    out["requests_per_s"] = round(stats.get("api_calls", 0) / span, 3) if span > 0 else None
    out["concurrency"] = round(stats.get("busy_s", 0.0) / span, 2) if span > 0 else None
    return out
