"""Prometheus metrics of gateways and workers: what they count, and how to expose them.

`count_events()` turns the process's `think.events` into counters; `exposition()` is the
body of a `/metrics` scrape (`CONTENT_TYPE` its type); `serve(port, readiness=...)` gives a
worker a port of its own, with `/metrics` and the probes `/healthz` and `/readyz` (what
`Readiness` says). The metric objects are here for the code that observes them.
"""

from think.metrics._metrics import (
    ACTIVITY_RETRIES,
    ADMISSION_CONFLICTS,
    CONTENT_TYPE,
    DB_POOL,
    EARLY_FIRST_STEPS,
    HTTP_DURATION,
    HTTP_REQUESTS,
    MODEL_COST,
    MODEL_FAILURES,
    MODEL_TOKENS,
    RATE_LIMITED,
    RECOVERIES,
    STEP_DURATION,
    STREAM_LAG,
    STREAMS_OPEN,
    TIME_TO_FIRST_TOKEN,
    TOOL_CALLS,
    TOOL_DURATION,
    TURN_DURATION,
    TURNS,
    TURNS_ACTIVE,
    count_events,
    count_model_usage,
    exposition,
    sample,
    sample_pool,
)
from think.metrics._serve import Readiness, serve

__all__ = [
    "ACTIVITY_RETRIES",
    "ADMISSION_CONFLICTS",
    "CONTENT_TYPE",
    "DB_POOL",
    "EARLY_FIRST_STEPS",
    "HTTP_DURATION",
    "HTTP_REQUESTS",
    "MODEL_COST",
    "MODEL_FAILURES",
    "MODEL_TOKENS",
    "RATE_LIMITED",
    "RECOVERIES",
    "STEP_DURATION",
    "STREAMS_OPEN",
    "STREAM_LAG",
    "TIME_TO_FIRST_TOKEN",
    "TOOL_CALLS",
    "TOOL_DURATION",
    "TURNS",
    "TURNS_ACTIVE",
    "TURN_DURATION",
    "Readiness",
    "count_events",
    "count_model_usage",
    "exposition",
    "sample",
    "sample_pool",
    "serve",
]
