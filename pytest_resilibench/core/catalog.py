"""The 30 tools of the benchmark: 6 categories x 5 operations (docs/BENCHMARK.md: Tools), as
frozen data.

Conventions that the simulator relies on:
- every tool but the sources and utilities takes an optional `source`: the `ref` of an earlier
  output (default: the latest output of a tool it depends on; under the explicit data flow,
  the latest output of any tool, and an omitted `format` reads json: simulator.py);
- `format`, where a tool takes it, must equal the format of the data it consumes;
- parameters whose name is a task input (`path`, `url`, `destination`, ...) must carry the task's
  value: the simulator answers anything else with INVALID_INPUT.
"""

from __future__ import annotations

from typing import Any

from pytest_resilibench.core.registry import COMMON_ERRORS, DATA_FORMATS, Role, ToolSpec
from pytest_resilibench.core.tool_schema import parameters as _params
from pytest_resilibench.core.tool_schema import text as _str

__all__ = ["CATEGORY_ERRORS", "TOOLS"]

# Random failure modes per category: (code, weight). The common three come first.
CATEGORY_ERRORS: dict[str, tuple[tuple[str, float], ...]] = {
    "file_operations": (
        ("INVALID_INPUT", 0.10),
        ("OPERATION_FAILED", 0.25),
        ("TIMEOUT", 0.10),
        ("FILE_NOT_FOUND", 0.30),
        ("PERMISSION_DENIED", 0.25),
    ),
    "data_processing": (
        ("INVALID_INPUT", 0.25),
        ("OPERATION_FAILED", 0.30),
        ("TIMEOUT", 0.10),
        ("PARSE_ERROR", 0.20),
        ("SCHEMA_MISMATCH", 0.15),
    ),
    # Network calls mostly time out or drop; rate limits are rarer.
    "network": (
        ("INVALID_INPUT", 0.05),
        ("OPERATION_FAILED", 0.10),
        ("TIMEOUT", 0.35),
        ("NETWORK_ERROR", 0.30),
        ("INVALID_RESPONSE", 0.15),
        ("RATE_LIMITED", 0.05),
    ),
    # Computation fails numerically more than anything else.
    "computation": (
        ("INVALID_INPUT", 0.10),
        ("OPERATION_FAILED", 0.15),
        ("TIMEOUT", 0.15),
        ("CALCULATION_ERROR", 0.35),
        ("OVERFLOW", 0.25),
    ),
    "integration": (
        ("INVALID_INPUT", 0.10),
        ("OPERATION_FAILED", 0.20),
        ("TIMEOUT", 0.25),
        ("AUTH_FAILED", 0.25),
        ("CONNECTION_REFUSED", 0.20),
    ),
    "utility": (
        ("INVALID_INPUT", 0.15),
        ("OPERATION_FAILED", 0.45),
        ("TIMEOUT", 0.15),
        ("RESOURCE_EXHAUSTED", 0.25),
    ),
}
assert all(tuple(c for c, _ in codes[:3]) == COMMON_ERRORS for codes in CATEGORY_ERRORS.values())

# (typical latency, timeout) in simulated seconds per category.
_TIMING = {
    "file_operations": (0.15, 20.0),
    "data_processing": (0.4, 30.0),
    "network": (0.9, 15.0),
    "computation": (1.6, 60.0),
    "integration": (0.7, 20.0),
    "utility": (0.05, 5.0),
}

_FORMAT = {"type": "string", "enum": list(DATA_FORMATS), "description": "format of the input data"}
_SOURCE = {
    "type": "string",
    "minLength": 1,
    "description": "ref of an earlier output to consume (default: the latest upstream output)",
}


def _enum(description: str, values: list[str], default: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "enum": values, "description": description}
    if default is not None:
        schema["default"] = default
    return schema


def _int(description: str, lo: int, hi: int, default: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "integer", "minimum": lo, "maximum": hi, "description": description,
    }
    if default is not None:
        schema["default"] = default
    return schema


def _returns(name: str, **props: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "status": {"const": "success"},
        "tool": {"const": name},
        "ref": {"type": "string", "pattern": r"^[a-z_]+#[0-9]+$"},
        "format": {"type": "string", "enum": list(DATA_FORMATS)},
        "records": {"type": "integer", "minimum": 0},
        "inputs": {"type": "array", "items": {"type": "string"}},
    }
    base.update(props)
    return {
        "type": "object",
        "properties": base,
        "required": list(base),
        "additionalProperties": False,
    }


def _tool(
    category: str,
    operation: str,
    role: Role,
    description: str,
    keywords: str,
    parameters: dict[str, Any],
    returns: dict[str, dict[str, Any]],
    *,
    prerequisites: tuple[str, ...] = (),
    output_format: str | None = None,
) -> ToolSpec:
    name = f"{category}_{operation}"
    latency, timeout = _TIMING[category]
    return ToolSpec(
        name=name,
        category=category,
        operation=operation,
        role=role,
        description=description,
        keywords=tuple(keywords.split()),
        parameters=parameters,
        returns=_returns(name, **returns),
        prerequisites=prerequisites,
        failure_modes=CATEGORY_ERRORS[category],
        latency_s=latency,
        timeout_s=timeout,
        output_format=output_format,
    )


_S = {"type": "string"}
_I = {"type": "integer", "minimum": 0}
_N = {"type": "number"}
_B = {"type": "boolean"}
_SL = {"type": "array", "items": {"type": "string"}}

TOOLS: tuple[ToolSpec, ...] = (
    # --- file operations -----------------------------------------------------------------
    _tool(
        "file_operations", "reader", Role.SOURCE,
        "Read the contents of a file from disk and load its raw records for later steps.",
        "read open load file disk contents input document local dataset import ingest records",
        _params(["path"], path=_str("path of the file to read"),
                encoding=_enum("text encoding", ["utf-8", "latin-1", "ascii"], "utf-8"),
                max_bytes=_int("read at most this many bytes", 1, 10**9)),
        {"path": _S, "size_bytes": _I, "preview": _S},
    ),
    _tool(
        "file_operations", "writer", Role.OUTPUT,
        "Write processed data to a file on disk, saving the final result as an output file.",
        "write save store persist output file disk export result report dump",
        _params(["destination"], destination=_str("path of the file to write"), source=_SOURCE,
                format=_FORMAT, overwrite={"type": "boolean", "default": False}),
        {"path": _S, "bytes_written": _I},
    ),
    _tool(
        "file_operations", "scanner", Role.SOURCE,
        "Scan a directory tree and list the files matching a pattern, with sizes and types.",
        "scan list directory folder files search find glob inventory discover crawl",
        _params(["directory"], directory=_str("directory to scan"),
                pattern=_str("glob pattern", default="*"),
                recursive={"type": "boolean", "default": True}),
        {"files": _SL, "count": _I},
        output_format="json",
    ),
    _tool(
        "file_operations", "compressor", Role.PROCESSOR,
        "Compress data or files into an archive to reduce size for storage or transfer.",
        "compress zip gzip archive pack shrink reduce size bundle",
        _params([], source=_SOURCE,
                algorithm=_enum("compression algorithm", ["gzip", "zip", "bz2"], "gzip"),
                level=_int("compression level", 1, 9, 6)),
        {"algorithm": _S, "ratio": _N},
        output_format="binary",
    ),
    _tool(
        "file_operations", "converter", Role.PROCESSOR,
        "Convert a file or dataset from one format to another, such as CSV to JSON or XML.",
        "convert format change csv json xml yaml translate encode reformat",
        _params(["target_format"], source=_SOURCE, format=_FORMAT,
                target_format=_enum("format to convert to", list(DATA_FORMATS))),
        {"from_format": _S},
        output_format="param:target_format",
    ),
    # --- data processing ----------------------------------------------------------------
    _tool(
        "data_processing", "parser", Role.PROCESSOR,
        "Parse raw text or structured data into records with typed fields, extracting structure.",
        "parse extract structure raw text tokenize interpret decode records fields",
        _params(["format"], source=_SOURCE, format=_FORMAT,
                strict={"type": "boolean", "default": False}),
        {"fields": _SL},
        output_format="json",
    ),
    _tool(
        "data_processing", "transformer", Role.PROCESSOR,
        "Transform records by reshaping, normalizing, renaming or enriching their fields.",
        "transform reshape normalize modify clean enrich map restructure convert fields records",
        _params(["operation"], source=_SOURCE, format=_FORMAT,
                operation=_enum("transformation", ["normalize", "pivot", "flatten", "rename",
                                                   "enrich"]),
                fields={"type": "array", "items": {"type": "string"}}),
        {"operation": _S},
        output_format="json",
    ),
    _tool(
        "data_processing", "validator", Role.PROCESSOR,
        "Validate records against a schema and rules, checking data quality and integrity.",
        "validate check verify schema rules quality integrity correctness conform constraints",
        _params([], source=_SOURCE, format=_FORMAT,
                schema=_enum("validation schema", ["strict", "lenient", "custom"], "strict"),
                rules={"type": "array", "items": {"type": "string"}}),
        {"valid": _B, "errors_found": _I},
    ),
    _tool(
        "data_processing", "aggregator", Role.AGGREGATOR,
        "Aggregate records into summary statistics grouped by a field: sums, means, counts.",
        "aggregate summarize combine group total sum mean count rollup summary statistics merge",
        _params(["function"], source=_SOURCE, format=_FORMAT,
                function=_enum("aggregate function", ["sum", "mean", "count", "min", "max"]),
                group_by=_str("field to group by")),
        {"groups": _I, "function": _S},
        output_format="json",
    ),
    _tool(
        "data_processing", "filter", Role.PROCESSOR,
        "Filter records with a condition, keeping only the rows that match the criteria.",
        "filter select subset exclude remove rows criteria condition match keep",
        _params(["condition"], source=_SOURCE, format=_FORMAT,
                condition=_str("boolean condition over fields, e.g. amount > 100")),
        {"kept": _I, "dropped": _I},
    ),
    # --- network ------------------------------------------------------------------------
    _tool(
        "network", "fetcher", Role.SOURCE,
        "Fetch data from a remote URL or web API endpoint with an HTTP GET request.",
        "fetch download retrieve get http url web api endpoint remote request pull",
        _params(["url"], url=_str("URL to fetch", pattern="^https?://"),
                method=_enum("HTTP method", ["GET", "HEAD"], "GET"),
                timeout_s=_int("request timeout in seconds", 1, 120, 30)),
        {"url": _S, "status_code": _I},
    ),
    _tool(
        "network", "poster", Role.OUTPUT,
        "Post data to a remote web API endpoint with an HTTP POST request, publishing a result.",
        "post send upload publish submit http api endpoint remote push deliver",
        _params(["target_url"], target_url=_str("URL to post to", pattern="^https?://"),
                source=_SOURCE,
                content_type=_enum("content type", ["application/json", "text/csv",
                                                    "application/xml"], "application/json")),
        {"status_code": _I, "response_id": _S, "target_url": _S},
        prerequisites=("integration_authenticator",),
        output_format="json",
    ),
    _tool(
        "network", "monitor", Role.SOURCE,
        "Monitor a service endpoint, collecting health metrics such as latency and uptime.",
        "monitor watch health uptime latency metrics observe ping status service availability",
        _params(["url"], url=_str("URL of the service to monitor", pattern="^https?://"),
                interval_s=_int("sampling interval", 1, 3600, 60),
                metrics={"type": "array",
                         "items": {"enum": ["latency", "uptime", "errors"]}}),
        {"url": _S, "uptime": _N},
        output_format="json",
    ),
    _tool(
        "network", "validator", Role.PROCESSOR,
        "Validate an HTTP response or payload: status codes, response schema, headers.",
        "validate response payload http status headers ssl verify api reply check",
        _params([], source=_SOURCE, format=_FORMAT,
                checks={"type": "array",
                        "items": {"enum": ["status", "schema", "ssl", "headers"]}}),
        {"valid": _B, "checks_passed": _I},
    ),
    _tool(
        "network", "router", Role.OUTPUT,
        "Route data or requests to a destination service, balancing load across endpoints.",
        "route dispatch forward direct balance load traffic destination redirect proxy",
        _params(["route_to"], route_to=_str("destination service or endpoint"), source=_SOURCE,
                strategy=_enum("routing strategy", ["round_robin", "least_latency", "hash"],
                               "round_robin")),
        {"route_to": _S, "routed": _I},
        prerequisites=("network_monitor",),
    ),
    # --- computation --------------------------------------------------------------------
    _tool(
        "computation", "calculator", Role.PROCESSOR,
        "Calculate a numeric expression over the records: totals, ratios, arithmetic and formulas.",
        "calculate compute arithmetic formula expression math total ratio numeric evaluate",
        _params(["expression"], source=_SOURCE, format=_FORMAT,
                expression=_str("expression to evaluate, e.g. price * quantity"),
                precision=_int("decimal places", 0, 15, 2)),
        {"result": _N},
        output_format="json",
    ),
    _tool(
        "computation", "analyzer", Role.PROCESSOR,
        "Analyze data statistically to find trends, correlations and anomalies, giving insights.",
        "analyze analysis statistics trend correlation anomaly insight pattern examine study",
        _params(["method"], source=_SOURCE, format=_FORMAT,
                method=_enum("analysis method", ["statistical", "trend", "correlation",
                                                 "anomaly"])),
        {"method": _S, "findings": _SL},
        output_format="json",
    ),
    _tool(
        "computation", "optimizer", Role.PROCESSOR,
        "Optimize parameters toward an objective, finding the best allocation or configuration.",
        "optimize best maximize minimize objective tune allocation improve search solution",
        _params(["objective"], source=_SOURCE, format=_FORMAT,
                objective=_enum("direction of the objective", ["minimize", "maximize"]),
                max_iterations=_int("iteration budget", 1, 10000, 100)),
        {"objective_value": _N, "iterations": _I},
        output_format="json",
    ),
    _tool(
        "computation", "simulator", Role.PROCESSOR,
        "Simulate scenarios with a model, running what-if experiments over the data.",
        "simulate scenario model experiment what-if monte carlo run emulate",
        _params([], source=_SOURCE, format=_FORMAT,
                scenarios=_int("number of scenarios", 1, 1000, 100),
                model=_enum("simulation model", ["monte_carlo", "discrete_event",
                                                 "agent_based"], "monte_carlo")),
        {"scenarios": _I, "mean_outcome": _N},
        output_format="json",
    ),
    _tool(
        "computation", "predictor", Role.PROCESSOR,
        "Predict future values with a forecasting model trained on historical data.",
        "predict forecast future estimate projection model machine learning trend",
        _params(["horizon"], source=_SOURCE, format=_FORMAT,
                horizon=_int("number of periods to forecast", 1, 365),
                model=_enum("forecasting model", ["linear", "arima", "prophet"], "linear")),
        {"horizon": _I, "forecast": {"type": "array", "items": {"type": "number"}}},
        output_format="json",
    ),
    # --- integration --------------------------------------------------------------------
    _tool(
        "integration", "connector", Role.SOURCE,
        "Connect to an external system or database and pull its data through the connection.",
        "connect connection database external system link integrate session pull sql",
        _params(["endpoint"], endpoint=_str("connection string of the system"),
                protocol=_enum("protocol", ["sql", "rest", "grpc", "ftp"], "rest")),
        {"endpoint": _S, "session": _S},
        prerequisites=("integration_authenticator",),
    ),
    _tool(
        "integration", "authenticator", Role.SOURCE,
        "Authenticate with a service and obtain an access token or credentials for later calls.",
        "authenticate login credentials token authorize oauth api key identity access",
        _params(["service"], service=_str("service to authenticate with"),
                auth_method=_enum("auth method", ["oauth2", "api_key", "basic"], "api_key")),
        {"service": _S, "token": _S, "expires_in": _I},
        output_format="json",
    ),
    _tool(
        "integration", "mapper", Role.PROCESSOR,
        "Map fields from one schema to another so that two systems can exchange the data.",
        "map mapping schema fields align translate correspond match integrate exchange",
        _params(["target_schema"], source=_SOURCE, format=_FORMAT,
                target_schema=_str("name of the schema to map onto")),
        {"target_schema": _S, "mapped_fields": _I},
        output_format="json",
    ),
    _tool(
        "integration", "queue", Role.AGGREGATOR,
        "Enqueue messages into a message queue, batching the data for asynchronous consumers.",
        "queue enqueue message broker batch buffer asynchronous publish consumer",
        _params(["queue_name"], queue_name=_str("name of the queue"), source=_SOURCE,
                priority=_enum("message priority", ["low", "normal", "high"], "normal")),
        {"queue_name": _S, "enqueued": _I},
        prerequisites=("integration_connector",),
    ),
    _tool(
        "integration", "scheduler", Role.OUTPUT,
        "Schedule a job to run the workflow at a time or interval, registering it for execution.",
        "schedule job cron timer recurring periodic plan run later trigger register",
        _params(["job_name", "schedule"], job_name=_str("name of the job"), source=_SOURCE,
                schedule=_enum("how often", ["once", "hourly", "daily", "weekly"])),
        {"job_id": _S, "next_run": _S, "job_name": _S},
        prerequisites=("integration_connector",),
        output_format="json",
    ),
    # --- utility ------------------------------------------------------------------------
    _tool(
        "utility", "logger", Role.UTILITY,
        "Log a message or event to the audit log for tracing what the workflow did.",
        "log record audit trace message event journal debug history",
        _params(["message"], message=_str("the message to log"),
                level=_enum("log level", ["debug", "info", "warning", "error"], "info")),
        {"entry_id": _S},
        output_format="text",
    ),
    _tool(
        "utility", "cache", Role.UTILITY,
        "Cache intermediate data under a key to reuse it later and avoid recomputation.",
        "cache store memoize reuse key temporary fast memory save intermediate",
        _params(["key"], key=_str("cache key"), source=_SOURCE,
                ttl_s=_int("time to live in seconds", 1, 86400, 300)),
        {"key": _S, "hit": _B},
    ),
    _tool(
        "utility", "notifier", Role.OUTPUT,
        "Send a notification message about the result to a recipient by email, chat or SMS.",
        "notify notification alert message email slack sms send inform recipient result",
        _params(["recipient"], recipient=_str("who to notify"), source=_SOURCE,
                message=_str("notification text"),
                channel=_enum("channel", ["email", "slack", "sms", "webhook"], "email")),
        {"recipient": _S, "delivered": _B},
        output_format="text",
    ),
    _tool(
        "utility", "tracker", Role.UTILITY,
        "Track progress and metrics of the workflow, recording status events over time.",
        "track progress status metric monitor record measure events count",
        _params(["event"], event=_str("event to record"), source=_SOURCE),
        {"event": _S, "total_events": _I},
        output_format="json",
    ),
    _tool(
        "utility", "helper", Role.UTILITY,
        "General helper for small data chores: formatting, splitting, merging, de-duplication.",
        "helper utility format split merge deduplicate misc chore general assist",
        _params(["action"], source=_SOURCE,
                action=_enum("what to do", ["format", "split", "merge", "dedupe"])),
        {"action": _S},
    ),
)
