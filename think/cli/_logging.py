"""How `think api` and `think worker` write their logs: `THINK_LOG_LEVEL`, and
`THINK_LOG_FORMAT` (`text`: one line each with an ISO 8601 UTC timestamp; `json`: one JSON
object a line, for log shippers). The standard library's `logging`, configured once at the
root: uvicorn's and Temporal's loggers propagate to it, so every line has the same shape."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from think._settings import Settings

_QUIET = ("httpx", "httpx2")
"""The model client's HTTP library logs every request at INFO ("HTTP Request: POST …"): two
lines per tool turn that the turn's own events already say, at a measurable cost."""

_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}
"""What every record has; anything else on a record is an `extra` (Temporal's
`temporal_workflow` and `temporal_activity` details), kept in the JSON line."""


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class TextFormatter(logging.Formatter):
    """`2026-12-06T21:30:00.123+00:00 INFO    think.worker: …`: a full date and the zone, so
    lines from several hosts and days sort and compare."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _timestamp(record)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: `ts`, `level`, `logger`, `message`, `exc` (the traceback, when
    there is one) and the record's extras; a value JSON cannot hold is written as its text."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and not key.startswith("_"):
                entry[key] = value
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(settings: Settings) -> None:
    """The root logger writes to stderr at `THINK_LOG_LEVEL`, in `THINK_LOG_FORMAT`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    _forward_temporal_core(settings)


def _forward_temporal_core(settings: Settings) -> None:
    """The Temporal SDK's core (Rust) writes its own lines to stderr, coloured and in its own
    format ("Task not found when completing", "Workflow task duration exceeded"): forwarded
    to the logger `temporalio.core` instead, they take this process's format, JSON included.
    Set before the first client is made, which takes the default runtime."""
    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    core = "INFO" if settings.log_level == "debug" else "WARN"
    forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    config = LoggingConfig(
        filter=TelemetryFilter(core_level=core, other_level="ERROR"), forwarding=forwarding
    )
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=config)))
