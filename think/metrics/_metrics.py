"""The Prometheus metrics of a gateway or a worker process (docs/operating.md lists them).

`prometheus-client` keeps them in the process's default registry, beside its own `process_*`
and `python_*` collectors; `exposition()` is the text a scrape of `/metrics` gets. Labels are
bounded by the deployment, never by its traffic: agents and tools come from the code that is
deployed, statuses and outcomes are fixed sets, and no label holds a conversation, turn or
tenant id (a tenant may be a label in a deployment with a few, not in one with thousands, so
it is left out).

Most worker metrics come from `think.events`: the activities already emit one event per
finished turn, tool call, failed model request and recovery attempt, and counting those keeps
the metrics and the events from ever disagreeing. What no event says (a step's duration, the
time to its first token, an activity's retry) is observed where it happens.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from think import events
from think.storage import ACTIVE_STATUSES, TOKEN_KINDS, Database, StepUsage, Store

CONTENT_TYPE = CONTENT_TYPE_LATEST

_LATENCY = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
_FAST = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# -- workers ---------------------------------------------------------------------------------

TURNS = Counter("think_turns", "Turns that ended, by agent and final status", ["agent", "status"])
TURN_DURATION = Histogram(
    "think_turn_duration_seconds",
    "From a turn's start to its end (its queueing before the start not included)",
    ["agent", "status"],
    buckets=_LATENCY,
)
STEP_DURATION = Histogram(
    "think_model_step_duration_seconds",
    "One model step: the model call streamed to its end, recorded",
    ["agent"],
    buckets=_LATENCY,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "think_model_time_to_first_token_seconds",
    "From a model request to the first text, reasoning or tool-call delta it streams",
    ["agent"],
    buckets=(*_FAST, 30.0, 60.0),
)
MODEL_FAILURES = Counter(
    "think_model_request_failures",
    "Model requests that failed, by whether the failure is retried and what went wrong (kind: "
    "connection, dns, tls, timeout, auth, not_found, rate_limit, server, bad_request, stream, "
    "refused, other)",
    ["agent", "retryable", "kind"],
)
MODEL_TOKENS = Counter(
    "think_model_tokens",
    "Tokens of the model steps recorded, by the model that answered and kind (input, output, "
    "cached_input, cache_write, reasoning; input counts the cached, output the reasoning)",
    ["agent", "model", "kind"],
)
MODEL_COST = Counter(
    "think_model_cost",
    "US dollars of the model steps recorded whose price is known, by the model that answered",
    ["agent", "model"],
)


def count_model_usage(agent: str, step: StepUsage) -> None:
    """A recorded step's tokens and, when its price is known, its cost."""
    for kind in TOKEN_KINDS:
        tokens = getattr(step, f"{kind}_tokens")
        if tokens:
            MODEL_TOKENS.labels(agent, step.model, kind).inc(tokens)
    if step.cost:
        MODEL_COST.labels(agent, step.model).inc(step.cost)


RECOVERIES = Counter(
    "think_recovery_attempts",
    "chat_recovery attempts after a failed step; outcome=exhausted when it gave up",
    ["agent", "outcome"],
)
TOOL_CALLS = Counter(
    "think_tool_calls",
    "Server tool calls by tool and outcome (success, error, blocked, substituted, denied)",
    ["agent", "tool", "outcome"],
)
TOOL_DURATION = Histogram(
    "think_tool_call_duration_seconds", "One tool call's run", ["agent", "tool"], buckets=_LATENCY
)
EARLY_FIRST_STEPS = Counter(
    "think_early_first_steps",
    "First steps begun beside their workflow's start: taken (the step went on from it), failed "
    "(before its model request; the step did it all), dropped (not taken: its request was cut "
    "off, a model request made for nothing)",
    ["outcome"],
)
ACTIVITY_RETRIES = Counter(
    "think_activity_retries",
    "Activity attempts after the first (Temporal retried a model step, tool call or commit)",
    ["activity"],
)

# -- gateways --------------------------------------------------------------------------------

HTTP_REQUESTS = Counter(
    "think_http_requests",
    "HTTP requests answered, by route template (not the path), method and status",
    ["method", "route", "status"],
)
HTTP_DURATION = Histogram(
    "think_http_request_duration_seconds",
    "Until the answer's headers were sent (a stream's length not included)",
    ["method", "route"],
    buckets=_FAST,
)
ADMISSION_CONFLICTS = Counter(
    "think_admission_conflicts",
    "Submissions answered 409: idempotency (key reused with another body), submission "
    "(submission_id and key name different turns), busy (message_concurrency drop)",
    ["reason"],
)
STREAMS_OPEN = Gauge("think_sse_streams_open", "SSE streams being served now")
STREAM_LAG = Histogram(
    "think_stream_lag_seconds",
    "From a chunk's write to Postgres to its hand-over to an open stream (live chunks only)",
    buckets=_FAST,
)
TURNS_ACTIVE = Gauge(
    "think_turns_active",
    "Turns not ended, by status (pending, running, awaiting_approval, awaiting_client_tool); "
    "read from Postgres at each scrape",
    ["status"],
)
DB_POOL = Gauge(
    "think_db_pool_connections",
    "This process's Postgres pool: size (open), available (idle), max, waiting (requests "
    "queued for a connection)",
    ["state"],
)
RATE_LIMITED = Counter(
    "think_rate_limited", "Requests refused 429 by a per-tenant limit", ["limit"]
)

_subscribed = threading.Lock()
_unsubscribe: Callable[[], None] | None = None


def _on_event(event: events.ThinkEvent) -> None:
    if isinstance(event, events.ChatTurnFinished):
        TURNS.labels(event.agent, event.status).inc()
        TURN_DURATION.labels(event.agent, event.status).observe(event.duration_ms / 1000)
    elif isinstance(event, events.ChatTurnCancelled):
        TURNS.labels(event.agent, "aborted").inc()
    elif isinstance(event, events.ToolCalled):
        TOOL_CALLS.labels(event.agent, event.tool_name, event.outcome).inc()
        TOOL_DURATION.labels(event.agent, event.tool_name).observe(event.duration_ms / 1000)
    elif isinstance(event, events.ChatRequestFailed):
        MODEL_FAILURES.labels(event.agent, str(event.retryable).lower(), event.kind).inc()
    elif isinstance(event, events.ChatRecoveryAttempt):
        RECOVERIES.labels(event.agent, "attempt").inc()
    elif isinstance(event, events.ChatRecoveryExhausted):
        RECOVERIES.labels(event.agent, "exhausted").inc()


def count_events() -> None:
    """Count this process's events into the metrics above; once per process, however often
    it is called (a worker and a `ThinkService` in one process share it)."""
    global _unsubscribe
    with _subscribed:
        if _unsubscribe is None:
            _unsubscribe = events.subscribe(_on_event)


def sample_pool(db: Database) -> None:
    for state, value in db.pool_stats().items():
        DB_POOL.labels(state).set(value)


async def sample(store: Store) -> None:
    """Read what is sampled rather than counted: the turns not ended (from Postgres, so any
    gateway says the same) and this process's pool. A gateway calls it on each scrape."""
    counts = await store.count_active_turns()
    for status in sorted(ACTIVE_STATUSES):
        TURNS_ACTIVE.labels(status).set(counts.get(status, 0))
    sample_pool(store.db)


def exposition() -> bytes:
    """The Prometheus text format of every metric of the process."""
    return generate_latest(REGISTRY)
