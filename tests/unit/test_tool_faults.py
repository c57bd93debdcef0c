"""The fault model around a team's own tools (core/tool_faults.py): pure draws, the rules
that remember, the simulator's wording, bad configurations refused."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_resilibench.core.tool_faults import FaultConfig, FaultSession, silent_value

Step = tuple[str, int, "dict[str, Any] | None"]


def sequence(config: FaultConfig, session: str, tools: list[str]) -> list[Step]:
    faults = FaultSession(config, session)
    out: list[Step] = []
    for tool in tools:
        n, fault = faults.decide(tool, {"url": "https://api.example.com"})
        faults.settle(tool, fault is None or not fault.is_error)
        out.append((tool, n, None if fault is None else fault.to_json()))
    return out


TOOLS = ["search", "fetch", "search", "login", "fetch", "fetch", "search"] * 30


def test_decisions_are_a_function_of_seed_session_tool_and_index() -> None:
    config = FaultConfig(profile="realistic", seed=3, auth_tool="login")
    assert sequence(config, "a", TOOLS) == sequence(config, "a", TOOLS)
    assert sequence(config, "a", TOOLS) != sequence(config, "b", TOOLS)
    assert sequence(config, "a", TOOLS) != sequence(
        FaultConfig(profile="realistic", seed=4, auth_tool="login"), "a", TOOLS)


def test_paper_errors_use_the_simulators_codes_and_words() -> None:
    faults = [f for _, _, f in sequence(FaultConfig(rate=1.0), "s", TOOLS) if f]
    assert len(faults) == len(TOOLS)
    codes = {f["code"] for f in faults}
    assert codes <= {"INVALID_INPUT", "OPERATION_FAILED", "TIMEOUT", "NETWORK_ERROR",
                     "INVALID_RESPONSE", "RATE_LIMITED"}
    assert "TIMEOUT" in codes
    assert all(f["message"].startswith(f["code"] + ": ") for f in faults)


def test_spared_tools_and_zero_rates_never_fail() -> None:
    config = FaultConfig(profile="realistic", rate=1.0, rates={"fetch": 0.0},
                         spare=frozenset({"search"}), remote=frozenset())
    for tool, _, fault in sequence(config, "s", TOOLS):
        if tool == "search":
            assert fault is None
        if tool == "fetch" and fault is not None:
            assert fault["kind"] in ("outage", "silent")


def test_a_rate_limit_refuses_the_very_next_call_of_its_tool_again() -> None:
    config = FaultConfig(profile="realistic", rate=0.0, seed=1)
    faults = FaultSession(config, "s")
    limited = 0
    for _ in range(300):
        _, fault = faults.decide("api")
        if fault is not None and fault.kind == "rate_limited":
            limited += 1
            assert fault.retry_after == 1
            _, again = faults.decide("api")
            assert again is not None and again.kind == "rate_limited"
            faults.decide("other")  # a call in between: the wait is over
    assert limited > 0


def test_expired_credentials_last_until_the_auth_tool_succeeds() -> None:
    for seed in range(40):
        config = FaultConfig(profile="realistic", rate=0.0, seed=seed, auth_tool="login",
                             spare=frozenset({"login"}))
        faults = FaultSession(config, "s")
        if not faults.credentials_expired or faults.down("api"):
            continue
        _, fault = faults.decide("api")
        assert fault is not None and fault.kind == "auth_expired"
        assert "login" in fault.message and "integration_authenticator" not in fault.message
        faults.settle("login", True)
        assert not faults.credentials_expired
        return
    pytest.fail("no seed drew expired credentials")


def test_silent_values() -> None:
    assert silent_value("abcdef", "truncate") == "abc"
    assert silent_value("abcdef", "empty") == ""
    assert silent_value([1, 2, 3, 4], "truncate") == [1, 2]
    assert silent_value({"a": 1, "b": 2}, "empty") == {}
    assert silent_value(7, "empty") == 0
    assert silent_value(7, "truncate") == 7
    assert silent_value(object(), "empty") is None


@pytest.mark.parametrize("options, message", [
    ({"profile": "chaos"}, "unknown fault profile"),
    ({"rate": 1.5}, "must be in"),
    ({"rates": {"x": -0.1}}, "must be in"),
    ({"categories": {"x": "nope"}}, "unknown category"),
])
def test_bad_configurations_say_what_is_wrong(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FaultConfig(**options)  # type: ignore[arg-type]
