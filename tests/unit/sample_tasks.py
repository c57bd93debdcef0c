"""A hand-made task the flaw and prompt tests share: a five-step pipeline whose every step
has arguments, so each flaw has something to change."""

from __future__ import annotations

from pytest_resilibench.core.tasks import Task

SALES = Task(
    id="t9001", type="data_pipeline", difficulty="easy",
    description="Read the sales file, parse it, normalise it, sum it and post the report.",
    inputs={"format": "csv", "path": "data/sales_2025.csv", "operation": "normalize",
            "function": "sum", "target_url": "https://api.example.com/v1/reports"},
    expected_outputs={"report": "posted"},
    required_tools=("file_operations_reader", "data_processing_parser",
                    "data_processing_transformer", "data_processing_aggregator",
                    "network_poster"),
    constraints=("Post the report only once.",),
    step_arguments={
        "file_operations_reader": {"path": "data/sales_2025.csv"},
        "data_processing_parser": {"format": "csv"},
        "data_processing_transformer": {"operation": "normalize"},
        "data_processing_aggregator": {"function": "sum"},
        "network_poster": {"target_url": "https://api.example.com/v1/reports"},
    },
)
