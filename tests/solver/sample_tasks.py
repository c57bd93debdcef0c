"""Two small hand-made tasks the solver tests share: one with a prerequisite outside its
required tools (the poster needs an authenticator), one with a chain of them (the queue needs a
connector, which needs an authenticator), and one that asks a step twice (a notice once the data
are validated, and again once the run is logged)."""

from __future__ import annotations

from pytest_resilibench.core.tasks import Task

POSTING = Task(
    id="t9001", type="simple_task", difficulty="easy", description="fetch, validate, post",
    inputs={"url": "https://api.example.com/a", "target_url": "https://hook.example.com/b",
            "service": "crm", "format": "json"},
    expected_outputs={}, required_tools=("network_fetcher", "data_processing_validator",
                                         "network_poster"),
    step_arguments={"network_fetcher": {"url": "https://api.example.com/a"},
                    "data_processing_validator": {},
                    "network_poster": {"target_url": "https://hook.example.com/b"},
                    "integration_authenticator": {"service": "crm"}},
)
QUEUEING = Task(
    id="t9002", type="basic_task", difficulty="medium", description="read, parse, enqueue",
    inputs={"path": "/data/a.csv", "format": "csv", "queue_name": "jobs", "endpoint": "db",
            "service": "crm"},
    expected_outputs={}, required_tools=("file_operations_reader", "data_processing_parser",
                                         "integration_queue"),
    step_arguments={"file_operations_reader": {"path": "/data/a.csv"},
                    "data_processing_parser": {"format": "csv"},
                    "integration_queue": {"queue_name": "jobs"},
                    "integration_connector": {"endpoint": "db"},
                    "integration_authenticator": {"service": "crm"}},
)

NOTICING = Task(
    id="t9003", type="basic_task", difficulty="medium",
    description="read, validate, notify, log, notify again, write",
    inputs={"path": "/data/a.csv", "format": "csv", "recipient": "#ops", "message": "run",
            "destination": "/reports/a.csv"},
    expected_outputs={}, required_tools=("file_operations_reader", "data_processing_validator",
                                         "utility_notifier", "utility_logger",
                                         "utility_notifier", "file_operations_writer"),
    step_arguments={"file_operations_reader": {"path": "/data/a.csv"},
                    "data_processing_validator": {},
                    "utility_notifier": {"recipient": "#ops"},
                    "utility_logger": {"message": "run"},
                    "file_operations_writer": {"destination": "/reports/a.csv"}},
)
