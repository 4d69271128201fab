"""The process's own settings, declared here and named in `Settings`: how it logs, how much it
runs at once, and how long it lets work finish when told to stop. Beside `_declaration.py` to
keep each module readable; each is a field of `Settings` like any other (`think settings`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["text", "json"]

LOG_LEVEL: Any = Field(
    default="info",
    validation_alias="THINK_LOG_LEVEL",
    description="the least severe log lines `think api` and `think worker` write: "
    "`debug`, `info`, `warning` or `error`",
    examples=["warning"],
)

LOG_FORMAT: Any = Field(
    default="text",
    validation_alias="THINK_LOG_FORMAT",
    description="`text` (one line each, ISO 8601 UTC timestamps) or `json` (one JSON "
    "object a line, for log shippers: `ts`, `level`, `logger`, `message`, `exc`)",
    examples=["json"],
)

WORKER_MAX_ACTIVITIES: Any = Field(
    default=200,
    ge=1,
    validation_alias="THINK_WORKER_MAX_ACTIVITIES",
    description="activities (model steps, tool calls) one worker runs at once, and as many "
    "local ones; more wait on the task queue for this or another worker",
    examples=["50"],
)

DB_POOL_SIZE: Any = Field(
    default=20,
    ge=1,
    validation_alias="THINK_DB_POOL_SIZE",
    description="Postgres connections a worker or a gateway may hold (each process its "
    "own pool): keep processes times this under the server's `max_connections`",
    examples=["10"],
)

WORKER_SHUTDOWN_GRACE_SECONDS: Any = Field(
    default=10.0,
    ge=0,
    validation_alias="THINK_WORKER_SHUTDOWN_GRACE_SECONDS",
    description="on SIGTERM, how long a worker lets running activities finish; the rest "
    "are retried elsewhere. Give the orchestrator's grace period more",
    examples=["25"],
)

API_SHUTDOWN_GRACE_SECONDS: Any = Field(
    default=5.0,
    gt=0,
    validation_alias="THINK_API_SHUTDOWN_GRACE_SECONDS",
    description="on SIGTERM, how long a gateway waits for open requests and SSE streams "
    "before closing them (clients resume on another with `Last-Event-ID`)",
    examples=["20"],
)

WORKER_WORKFLOW_TASK_SLOTS: Any = Field(
    default=None,
    ge=2,
    validation_alias="THINK_WORKER_WORKFLOW_TASK_SLOTS",
    description="how many workflow tasks a worker runs at once (Temporal's "
    "`max_concurrent_workflow_tasks`); past it, turns wait on the task queue, in priority "
    "order and shared between tenants (docs/deploying.md); unset: Temporal's default, 100",
    examples=["50"],
)
