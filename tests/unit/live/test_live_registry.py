"""The live services' registry: the simulator's schema and error taxonomy."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from pytest_resilibench.core.catalog import CATEGORY_ERRORS
from pytest_resilibench.core.registry import COMMON_ERRORS, Role
from pytest_resilibench.servers.live.registry import LIVE_CATEGORY, live_registry
from pytest_resilibench.servers.live.services import SERVICES

# Every code a simulated tool can return.
TAXONOMY = {code for modes in CATEGORY_ERRORS.values() for code, _ in modes}


def test_twenty_three_tools_in_the_live_category() -> None:
    registry = live_registry()
    assert len(registry) == 23 == len(SERVICES)
    assert {t.category for t in registry} == {LIVE_CATEGORY}
    assert registry.names == tuple(s.name for s in SERVICES)


def test_failure_modes_use_the_simulators_taxonomy() -> None:
    for spec, tool in zip(SERVICES, live_registry(), strict=True):
        codes = tool.error_codes
        assert set(codes) <= TAXONOMY, tool.name
        assert codes[:3] == COMMON_ERRORS
        assert ("RATE_LIMITED" in codes) == (spec.misbehaviour.rate_limit > 0)
        m = spec.misbehaviour
        assert ("INVALID_RESPONSE" in codes) == (m.malformed + m.truncated > 0)
        assert all(w > 0 for _, w in tool.failure_modes)


def test_schemas_are_valid_and_export_like_the_simulators() -> None:
    registry = live_registry()
    for tool in registry:
        Draft202012Validator.check_schema(tool.parameters)
        Draft202012Validator.check_schema(tool.returns)
    assert [d["name"] for d in registry.to_mcp()] == list(registry.names)
    assert all(d["function"]["parameters"]["type"] == "object" for d in registry.to_openai())
    assert registry.argument_errors("word_definition", {}) == ["'word' is a required property"]


def test_roles_give_the_workflows_a_direction() -> None:
    registry = live_registry()
    assert registry["social_draft_poster"].role is Role.OUTPUT
    assert registry["text_composer"].produces_output
    # The composer depends on the task's sources, the poster on the composer.
    task = ("random_fact", "random_joke", "text_composer", "social_draft_poster")
    assert registry.dependencies("text_composer", task) == ("random_fact", "random_joke")
    assert registry.dependencies("social_draft_poster", task) == ("text_composer",)
