"""The 30-tool registry: shape, schemas, dependencies and exports."""

from __future__ import annotations

from collections import Counter

import pytest
from jsonschema import Draft202012Validator

from pytest_resilibench.core.catalog import TOOLS
from pytest_resilibench.core.registry import (
    COMMON_ERRORS,
    Role,
    ToolRegistry,
    ToolSpec,
    default_registry,
)

CATEGORIES = {
    "file_operations": {"reader", "writer", "scanner", "compressor", "converter"},
    "data_processing": {"parser", "transformer", "validator", "aggregator", "filter"},
    "network": {"fetcher", "poster", "monitor", "validator", "router"},
    "computation": {"calculator", "analyzer", "optimizer", "simulator", "predictor"},
    "integration": {"connector", "authenticator", "mapper", "queue", "scheduler"},
    "utility": {"logger", "cache", "notifier", "tracker", "helper"},
}


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    return default_registry()


def test_six_categories_of_five_operations(registry: ToolRegistry) -> None:
    assert len(registry) == 30
    found: dict[str, set[str]] = {}
    for tool in registry:
        assert tool.name == f"{tool.category}_{tool.operation}"
        found.setdefault(tool.category, set()).add(tool.operation)
    assert found == CATEGORIES


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_schemas_are_valid_json_schema(tool: ToolSpec) -> None:
    Draft202012Validator.check_schema(dict(tool.parameters))
    Draft202012Validator.check_schema(dict(tool.returns))
    assert tool.parameters["type"] == "object"
    for name in tool.required_parameters:
        assert name in tool.parameters["properties"]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_failure_modes_include_the_common_three(tool: ToolSpec) -> None:
    assert tool.error_codes[:3] == COMMON_ERRORS
    assert len(tool.error_codes) > 3, "every category adds its own codes"
    assert all(weight > 0 for _, weight in tool.failure_modes)


def test_failure_distributions_fit_the_category(registry: ToolRegistry) -> None:
    def weight(tool: str, code: str) -> float:
        return dict(registry[tool].failure_modes).get(code, 0.0)

    # Network tools time out more than file tools; computation overflows, files go missing.
    assert weight("network_fetcher", "TIMEOUT") > weight("file_operations_reader", "TIMEOUT")
    assert weight("computation_calculator", "OVERFLOW") > 0
    assert weight("file_operations_reader", "FILE_NOT_FOUND") > 0
    assert weight("network_poster", "NETWORK_ERROR") > 0


def test_roles_give_levels_zero_to_three(registry: ToolRegistry) -> None:
    levels = Counter(tool.level for tool in registry)
    assert set(levels) == {0, 1, 2, 3}
    assert registry["file_operations_reader"].role is Role.SOURCE
    assert registry["file_operations_writer"].produces_output
    assert not registry["data_processing_parser"].produces_output


def test_dependencies_follow_roles(registry: ToolRegistry) -> None:
    task = ("network_fetcher", "data_processing_parser", "data_processing_aggregator",
            "network_poster")
    assert registry.dependencies("network_fetcher", task) == ()
    assert registry.dependencies("data_processing_parser", task) == ("network_fetcher",)
    assert registry.dependencies("data_processing_aggregator", task) == ("data_processing_parser",)
    # The poster needs the aggregate and, whatever the task, an authenticated session.
    assert set(registry.dependencies("network_poster", task)) == {
        "integration_authenticator", "data_processing_aggregator"}
    assert registry.dependencies("utility_logger", task) == ()


def test_closure_puts_prerequisites_first(registry: ToolRegistry) -> None:
    closure = registry.closure(["data_processing_parser", "integration_queue"])
    assert closure.index("integration_authenticator") < closure.index("integration_connector")
    assert closure.index("integration_connector") < closure.index("integration_queue")


def test_prerequisite_cycles_are_rejected() -> None:
    a = ToolSpec(name="a", category="c", operation="a", role=Role.SOURCE, description="",
                 keywords=(), parameters={"type": "object"}, returns={"type": "object"},
                 prerequisites=("b",))
    b = ToolSpec(name="b", category="c", operation="b", role=Role.SOURCE, description="",
                 keywords=(), parameters={"type": "object"}, returns={"type": "object"},
                 prerequisites=("a",))
    with pytest.raises(ValueError, match="cycle"):
        ToolRegistry((a, b))


def test_exports(registry: ToolRegistry) -> None:
    openai_tools = registry.to_openai()
    assert len(openai_tools) == 30
    assert openai_tools[0]["type"] == "function"
    assert set(openai_tools[0]["function"]) == {"name", "description", "parameters"}
    mcp_tools = registry.to_mcp(["utility_logger"])
    assert mcp_tools[0]["name"] == "utility_logger"
    assert mcp_tools[0]["inputSchema"]["required"] == ["message"]
    # Exports are copies: mutating one never reaches the registry.
    mcp_tools[0]["inputSchema"]["required"].append("x")
    assert registry["utility_logger"].required_parameters == ("message",)


def test_argument_errors_are_readable_and_type_exact(registry: ToolRegistry) -> None:
    assert registry.argument_errors("file_operations_compressor", {"level": 3}) == []
    # JSON booleans are not integers, even though True == 1 in Python (memo key includes type).
    assert registry.argument_errors("file_operations_compressor", {"level": True})
    errors = registry.argument_errors("file_operations_reader", {})
    assert errors == ["'path' is a required property"]
    assert registry.argument_errors("file_operations_reader", {"path": "/x", "extra": 1})
