"""The task generator's raw material: operation phrases, sequence templates, wordings, themes.

Pure data. An operation is a set of interchangeable phrases; the BM25 matcher (not this file)
decides which tool a phrase means. A template is a sequence of operations per task type, `?`
marking the optional ones (more of them at harder difficulties). Wordings are per *tool*, so a
description always fits the tool that was matched; placeholders are `inputs` keys plus `label`.
No wording may contain a tool's registry name.
"""

from __future__ import annotations

__all__ = [
    "CONSTRAINTS",
    "CONTEXTS",
    "DISTRACTORS",
    "OPERATIONS",
    "PREREQUISITE_WORDINGS",
    "TEMPLATES",
    "THEMES",
    "TOOL_CONSTRAINTS",
    "WORDINGS",
]

# Operation -> phrases handed to the matcher (each phrase of an operation must match one tool).
OPERATIONS: dict[str, tuple[str, ...]] = {
    "read": ("read the input file from disk", "load the local dataset",
             "open the input document and ingest its records"),
    "scan": ("scan the directory for new files", "list the files in the folder",
             "discover the files in the directory tree"),
    "fetch": ("fetch the data from the web api", "download the records from the remote url",
              "retrieve the data with an http get request"),
    "monitor": ("monitor the service health and latency", "watch the endpoint uptime"),
    "connect": ("connect to the external database", "pull the rows through a database connection"),
    "authenticate": ("authenticate with the service and obtain a token",
                     "get an oauth access token"),
    "parse": ("parse the raw records", "extract structured fields from the raw text"),
    "validate": ("validate the records against the schema", "check data quality and integrity"),
    "check_response": ("validate the http response status and headers",
                       "verify the api reply payload"),
    "transform": ("normalize and reshape the records", "transform the fields of each record"),
    "filter": ("filter the rows matching a condition",
               "keep only the records that match the criteria"),
    "convert": ("convert the data to another format", "change the file format"),
    "compress": ("compress the output into an archive", "gzip the data to reduce its size"),
    "calculate": ("calculate a numeric expression over the records",
                  "compute the totals with a formula"),
    "analyze": ("analyze the data for trends and anomalies", "run a statistical analysis"),
    "optimize": ("optimize the allocation toward the objective",
                 "find the best configuration to maximize the objective"),
    "simulate": ("simulate what-if scenarios", "run a monte carlo experiment"),
    "predict": ("forecast future values", "predict the coming periods from historical data"),
    "map": ("map the fields onto the target schema", "align the records with the target schema"),
    "aggregate": ("aggregate the records into summary statistics",
                  "summarize the figures by group"),
    "enqueue": ("enqueue the batch into the message queue", "push the messages onto the broker"),
    "write": ("write the result to an output file", "save the final report to disk"),
    "post": ("post the results to the api endpoint", "publish the summary with an http post"),
    "route": ("route the data to the destination service",
              "dispatch the records to the target service"),
    "schedule": ("schedule a recurring job for the workflow",
                 "register the job to run periodically"),
    "notify": ("notify the recipient about the result", "send an email alert with the outcome"),
    "log": ("log the event to the audit trail", "record a message in the audit log"),
    "cache": ("cache the intermediate data under a key",
              "memoize the intermediate results for reuse"),
    "track": ("track the workflow progress", "keep track of the pipeline status events"),
    "tidy": ("deduplicate the records", "merge and split the entries with a helper"),
}

# Task type -> operation sequences ("?op" is optional). Each must fit its type's tool count
# whatever optional steps are kept, and end with an output-producing operation.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "simple_task": (
        "read ?convert write",
        "fetch ?parse write",
        "read ?filter aggregate",
        "read ?analyze notify",
        "scan ?compress write",
        "fetch ?check_response post",
        "read ?calculate route",
    ),
    "basic_task": (
        "read parse ?filter write",
        "read validate ?transform aggregate",
        "fetch parse ?calculate notify",
        "read transform ?cache write",
        "read analyze ?predict notify",
        "connect filter ?aggregate write",
        "read calculate ?log route",
        "fetch parse ?transform enqueue",
    ),
    "data_pipeline": (
        "read validate ?transform ?aggregate write",
        "scan parse ?filter ?aggregate write",
        "read parse ?transform ?aggregate enqueue",
        "connect map ?validate ?aggregate write",
        "read filter ?convert ?track write",
        "read parse validate ?transform notify",
    ),
    "api_integration": (
        "fetch parse ?check_response post",
        "fetch check_response ?transform post",
        "authenticate fetch ?parse post",
        "fetch map ?transform route",
        "monitor check_response ?track notify",
        "fetch parse ?filter aggregate",
        "fetch validate ?map write",
    ),
    "multi_stage_pipeline": (
        "read parse validate ?transform ?aggregate write",
        "fetch parse transform ?calculate ?aggregate post",
        "scan parse filter ?calculate ?aggregate notify",
        "connect validate transform ?predict ?log schedule",
        "read transform analyze ?optimize ?cache write",
        "read filter simulate ?aggregate write ?notify",
        "fetch parse map ?validate ?track route",
    ),
}

# Tool -> difficulty -> clause variants. Easy names the action plainly, medium paraphrases,
# hard states the need abstractly. Every bound value of the tool appears in every variant.
WORDINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "file_operations_reader": {
        "easy": ("read the {format} file {path}", "load the {format} file at {path}"),
        "medium": ("pull in the {label} export stored at {path} ({format})",
                   "start from the {format} data kept in {path}"),
        "hard": ("the {label} live in an export at {path}, formatted as {format}",
                 "everything starts from {path}, a dump of the {label} in {format}"),
    },
    "file_operations_scanner": {
        "easy": ("scan the directory {directory} for files (listed as {format})",
                 "list the files in {directory} as {format}"),
        "medium": ("take an inventory ({format}) of what has landed in {directory}",
                   "go through the folder {directory} and list its files as {format}"),
        "hard": ("nobody is sure what has accumulated under {directory} lately; an inventory as "
                 "{format} would help", "whatever has piled up in {directory} is the starting "
                 "point, and inventories here are kept as {format}"),
    },
    "network_fetcher": {
        "easy": ("fetch the {format} data from {url}", "download the {format} records from {url}"),
        "medium": ("grab the latest {label} from the web service at {url} (it answers in "
                   "{format})", "pull the {format} feed that {url} serves"),
        "hard": ("the {label} are exposed by a remote service at {url}, which speaks {format}",
                 "the upstream system publishes its {label} as {format} at {url}"),
    },
    "network_monitor": {
        "easy": ("monitor the service at {url} ({format} metrics)",
                 "check the health of {url} and collect {format} metrics"),
        "medium": ("keep an eye on how {url} is doing (latency, uptime, as {format})",
                   "collect {format} health metrics for {url}"),
        "hard": ("there have been complaints about how {url} behaves; its metrics come as "
                 "{format}", "the service behind {url} has been flaky, judging by its {format} "
                 "metrics"),
    },
    "integration_connector": {
        "easy": ("connect to the database {endpoint} and pull its {format} rows",),
        "medium": ("open a session on {endpoint} to get at the {format} records",),
        "hard": ("the {label} sit behind {endpoint} and come out as {format}",),
    },
    "integration_authenticator": {
        "easy": ("authenticate with the {service} service", "log in to {service} for a token"),
        "medium": ("get credentials for {service} first",),
        "hard": ("the {service} service only talks to callers who have proven who they are",),
    },
    "data_processing_parser": {
        "easy": ("parse the records into structured fields", "parse the raw data"),
        "medium": ("break the raw content into typed fields",
                   "turn the raw text into structured records"),
        "hard": ("the raw content is of no use until its structure is recovered",
                 "someone has to make sense of the raw layout"),
    },
    "data_processing_transformer": {
        "easy": ("transform the records ({operation})",
                 "apply the {operation} transformation to the records"),
        "medium": ("reshape the records with the {operation} step",
                   "give the fields of every record the {operation} treatment"),
        "hard": ("the layout is not what consumers expect, so the records need the "
                 "{operation} treatment",),
    },
    "data_processing_validator": {
        "easy": ("validate the records against the schema", "check the data quality"),
        "medium": ("make sure every record passes the quality rules",
                   "confirm the rows conform to the schema"),
        "hard": ("bad rows have slipped through before, and that must not happen again",
                 "the quality of the data has been questioned"),
    },
    "network_validator": {
        "easy": ("validate the HTTP response", "check the response status and headers"),
        "medium": ("confirm the service's reply is well-formed",
                   "verify that the reply came back intact"),
        "hard": ("the upstream replies have been malformed now and then",),
    },
    "data_processing_filter": {
        "easy": ("filter the records with the condition {condition}",
                 "keep only the rows where {condition}"),
        "medium": ("drop everything except rows satisfying {condition}",),
        "hard": ("only rows with {condition} are relevant",),
    },
    "file_operations_converter": {
        "easy": ("convert the data to {target_format}",),
        "medium": ("reformat the data as {target_format}",),
        "hard": ("downstream consumers only read {target_format}",),
    },
    "file_operations_compressor": {
        "easy": ("compress the data into an archive",),
        "medium": ("pack the result into a compact archive",),
        "hard": ("storage is tight, so the result should take as little space as possible",),
    },
    "data_processing_aggregator": {
        "easy": ("aggregate the records with {function}", "compute the {function} per group"),
        "medium": ("roll the records up into {function} statistics",),
        "hard": ("management only cares about the {function} figures, not individual rows",),
    },
    "computation_calculator": {
        "easy": ("calculate {expression} over the records",),
        "medium": ("work out {expression} for every record",),
        "hard": ("the figure that matters is {expression}",),
    },
    "computation_analyzer": {
        "easy": ("analyze the data (method: {method})",),
        "medium": ("look into the numbers using {method} analysis",),
        "hard": ("the numbers call for {method} analysis",),
    },
    "computation_optimizer": {
        "easy": ("optimize the allocation to {objective} the objective",),
        "medium": ("search for the configuration that would {objective} the objective",),
        "hard": ("the aim is to {objective} the outcome",),
    },
    "computation_simulator": {
        "easy": ("simulate scenarios over the data",),
        "medium": ("run what-if experiments on the data",),
        "hard": ("leadership wants to know what could happen under different conditions",),
    },
    "computation_predictor": {
        "easy": ("forecast the next {horizon} periods",),
        "medium": ("predict the coming {horizon} periods from the history",),
        "hard": ("a view {horizon} periods ahead is needed",),
    },
    "integration_mapper": {
        "easy": ("map the fields to the {target_schema} schema",),
        "medium": ("align the fields with {target_schema}",),
        "hard": ("the receiving side only understands {target_schema}",),
    },
    "integration_queue": {
        "easy": ("put the records on the queue {queue_name}",),
        "medium": ("hand the batch to consumers through the {queue_name} queue",),
        "hard": ("consumers pick their work up from {queue_name}",),
    },
    "file_operations_writer": {
        "easy": ("write the result to {destination}", "save the output to {destination}"),
        "medium": ("store the final output as {destination}",),
        "hard": ("the result should end up in {destination}",),
    },
    "network_poster": {
        "easy": ("post the result to {target_url}",),
        "medium": ("send the result to the API at {target_url}",),
        "hard": ("the partner expects the result at {target_url}",),
    },
    "network_router": {
        "easy": ("route the data to {route_to}",),
        "medium": ("forward the data to the {route_to} service",),
        "hard": ("the data belongs with {route_to}",),
    },
    "integration_scheduler": {
        "easy": ("schedule the job {job_name} to run {schedule}",),
        "medium": ("register {job_name} as a job with the schedule {schedule}",),
        "hard": ("this should keep happening ({schedule}) under the name {job_name}",),
    },
    "utility_notifier": {
        "easy": ("notify {recipient} about the result",),
        "medium": ("let {recipient} know how it went",),
        "hard": ("the people at {recipient} are waiting to hear about it",),
    },
    "utility_logger": {
        "easy": ('log the message "{message}"',),
        "medium": ('leave the note "{message}" in the audit log',),
        "hard": ('auditors want to see "{message}" on record',),
    },
    "utility_cache": {
        "easy": ("cache the intermediate data under the key {key}",),
        "medium": ("keep a reusable copy of the intermediate data under {key}",),
        "hard": ("intermediate results should stay reusable as {key}",),
    },
    "utility_tracker": {
        "easy": ("track the event {event}",),
        "medium": ("record progress as the event {event}",),
        "hard": ("progress is followed through the event {event}",),
    },
    "utility_helper": {
        "easy": ("run the {action} chore on the records",),
        "medium": ("tidy the records up ({action})",),
        "hard": ("some housekeeping ({action}) is overdue",),
    },
}

# Prerequisites a task needs but does not list: their bound values, stated as facts.
PREREQUISITE_WORDINGS: dict[str, dict[str, str]] = {
    "integration_authenticator": {
        "easy": "Access requires credentials from the {service} service.",
        "medium": "Access goes through {service}.",
        "hard": "Access is guarded by {service}.",
    },
    "integration_connector": {
        "easy": "The system is reached through the connection {endpoint}.",
        "medium": "The connection string is {endpoint}.",
        "hard": "Connectivity is via {endpoint}.",
    },
    "network_monitor": {
        "easy": "The destination's health is reported at {url}.",
        "medium": "Health of the destination can be read from {url}.",
        "hard": "Someone mentioned that {url} reports the destination's health.",
    },
}

# Hard descriptions open with a context sentence and carry distracting details.
CONTEXTS: tuple[str, ...] = (
    "The {team} team is preparing its review of the {label}.",
    "Ahead of the {period} planning meeting, the {team} team needs the {label} sorted out.",
    "A customer escalation has put the {label} on the {team} team's desk.",
    "The {team} team inherited this chore about the {label} from a colleague on leave.",
)
DISTRACTORS: tuple[str, ...] = (
    "The dashboard redesign is out of scope.",
    "Last time this was done by hand and took two days.",
    "An old copy from 2019 exists on a retired laptop; it is irrelevant.",
    "The vendor contract renews in March, which is someone else's concern.",
    "The colour scheme of the charts does not matter.",
    "There is also a wiki page about this, but it is outdated.",
    "Legal has already signed off on the data usage.",
    "Please ignore the mirror at /archive/legacy, it is stale.",
)

CONSTRAINTS: tuple[str, ...] = (
    "use exactly the values given in the task",
    "use only the tools provided",
    "stop once the deliverable is produced",
    "do not run a step more often than needed",
    "keep the source data unchanged",
)
TOOL_CONSTRAINTS: dict[str, str] = {
    "file_operations_writer": "do not overwrite existing files",
    "network_poster": "send the result only once",
    "utility_notifier": "notify only after the result exists",
    "data_processing_validator": "do not skip validation",
    "integration_scheduler": "register the job only once",
    "network_router": "route only data that has been processed",
    "integration_queue": "enqueue each batch once",
}

# Themes give a task coherent values: label, file stem, API resource, field expressions.
THEMES: tuple[dict[str, str], ...] = (
    {"label": "sales transactions", "stem": "sales", "resource": "orders",
     "expression": "price * quantity", "condition": "amount > 100",
     "schema": "finance_ledger_v2", "team": "finance"},
    {"label": "web server access logs", "stem": "access_logs", "resource": "logs",
     "expression": "bytes_sent / 1024", "condition": "status_code >= 500",
     "schema": "observability_event_v1", "team": "platform"},
    {"label": "IoT sensor readings", "stem": "sensor_readings", "resource": "telemetry",
     "expression": "(temp_f - 32) * 5 / 9", "condition": "temperature > 30",
     "schema": "telemetry_point_v3", "team": "facilities"},
    {"label": "customer invoices", "stem": "invoices", "resource": "invoices",
     "expression": "net_amount * 1.2", "condition": "days_overdue > 30",
     "schema": "erp_invoice_v4", "team": "billing"},
    {"label": "shipment records", "stem": "shipments", "resource": "shipments",
     "expression": "weight_kg * rate_per_kg", "condition": "delivered == false",
     "schema": "carrier_manifest_v2", "team": "logistics"},
    {"label": "support tickets", "stem": "tickets", "resource": "tickets",
     "expression": "resolved_at - opened_at", "condition": "priority == 'high'",
     "schema": "helpdesk_ticket_v1", "team": "support"},
    {"label": "inventory levels", "stem": "inventory", "resource": "stock",
     "expression": "on_hand - reserved", "condition": "on_hand < reorder_point",
     "schema": "warehouse_item_v2", "team": "operations"},
    {"label": "payroll entries", "stem": "payroll", "resource": "payslips",
     "expression": "hours * hourly_rate", "condition": "overtime_hours > 0",
     "schema": "hr_payslip_v3", "team": "people"},
    {"label": "clickstream events", "stem": "clickstream", "resource": "events",
     "expression": "clicks / impressions", "condition": "session_length > 60",
     "schema": "analytics_event_v5", "team": "growth"},
    {"label": "energy meter readings", "stem": "meter_readings", "resource": "meters",
     "expression": "kwh * tariff", "condition": "kwh > 500",
     "schema": "grid_reading_v1", "team": "energy"},
    {"label": "survey responses", "stem": "survey", "resource": "responses",
     "expression": "score * weight", "condition": "completed == true",
     "schema": "research_response_v2", "team": "research"},
    {"label": "weather observations", "stem": "weather", "resource": "observations",
     "expression": "rain_mm * 0.03937", "condition": "wind_kmh > 50",
     "schema": "climate_record_v1", "team": "forecasting"},
)
