"""Builds and runs one Think worker: the turn workflows and activities on one task queue."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from think import metrics
from think._current import BindTurns
from think._settings import Settings
from think.agent import AgentRegistry
from think.engine._declarations import check_agents
from think.engine._eager_start import AnnouncedTurns
from think.engine._expected_failures import quiet_expected_failures
from think.engine._hosted import hosted_activities, hosted_workflows
from think.engine.activities import (
    ActivityResources,
    DebounceActivities,
    ParkedActions,
    TurnActivities,
    end_abandoned,
)
from think.messenger_turns import DeliveryActivities, MessengerHub, check_registry
from think.metrics import Readiness
from think.models import close_model_clients, warm_model_sdks, warm_price_table
from think.retention import EraseTenant, RetentionActivities, RetentionSweep, arm_retention
from think.schedules import (
    ScheduleActivities,
    ScheduledOccurrence,
    check_deployment,
    reconcile_conversations,
    reconcile_deployment,
)
from think.storage import Store, action_ledger, open_database, unapplied_answers
from think.streaming import CANCEL_CHANNEL, ChunkListener
from think.tools import McpServer, close_mcp_pool, warm_mcp_servers
from think.turns import (
    DispatchFailed,
    ThinkService,
    hand_off,
    host_queue,
    signal_parked_decision,
    start_turn_workflow,
)
from think.workflows import WORKFLOWS, connect
from think.workflows.inputs import ToolDecision
from think.workflows.names import APPROVE, SUBMIT_TOOL_RESULT, turn_workflow_id

log = logging.getLogger("think.worker")

# Libraries the workflow sandbox would otherwise re-import for every workflow run (what that
# cost: docs/benchmarks.md, "Figures behind code comments"). Workflows never call them.
PASSTHROUGH = ("sqlalchemy", "psycopg", "httpx", "openai", "pydantic_core", "alembic")
# The workflow modules themselves must stay sandboxed (reloaded per run, isolating their
# state), so `think` cannot be passed through as a whole: importing a workflow module runs
# `think/__init__.py`, which would otherwise re-execute the whole framework in every run
# (the first workflow task of a turn took many times longer: docs/benchmarks.md).
SANDBOXED = (
    "think.workflows._turn",
    "think.workflows._delivery",
    "think.schedules._workflow",
    "think.retention._workflow",
)


def think_passthrough() -> list[str]:
    """Every module of `think` except the workflow modules: a package holding one is listed
    module by module (passing a package through passes all it holds)."""
    import importlib
    import pkgutil

    def walk(package: str) -> list[str]:
        path = importlib.import_module(package).__path__
        names = []
        for m in pkgutil.iter_modules(path):
            name = f"{package}.{m.name}"
            if name in SANDBOXED:
                continue
            if m.ispkg and any(s.startswith(f"{name}.") for s in SANDBOXED):
                names += walk(name)
            else:
                names.append(name)
        return names

    return walk("think")


PRUNE_EVERY = 600.0
READY_POLL_EVERY = 0.2
"""Seconds between a starting worker's checks that Temporal lists it among the pollers."""


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox as workers run it; replay tests use the same one."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            *PASSTHROUGH, *think_passthrough()
        )
    )


def build_worker(
    client: Client,
    settings: Settings,
    activities: TurnActivities,
    service: ThinkService | None = None,
) -> Worker:
    """`service` is what hooks and tools reach through `current_conversation()` (one built
    from the worker's own store and client when not given)."""
    service = service or ThinkService(
        store=activities.res.store,
        temporal=client,
        settings=settings,
        registry=activities.res.registry,
    )
    host_queue(settings.task_queue)
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[
            *WORKFLOWS,
            ScheduledOccurrence,
            RetentionSweep,
            EraseTenant,
            *hosted_workflows(settings),
        ],
        activities=[
            *activities.activities(),
            *DebounceActivities(activities.res.store).activities(),
            *ScheduleActivities(service).activities(),
            *ParkedActions(activities.res, service).activities(),
            *RetentionActivities(service).activities(),
            *DeliveryActivities(
                MessengerHub(activities.res.store, client, settings, activities.res.registry)
            ).activities(),
            *hosted_activities(settings),
        ],
        # Every activity of a turn runs with the turn bound: the turn API for hooks and tools,
        # and its guard against a blocking call that would wait for this very turn.
        interceptors=[BindTurns(service)],
        workflow_runner=workflow_runner()
        if settings.workflow_sandbox
        else UnsandboxedWorkflowRunner(),
        # Activations on this thread, not a pool's: see `Settings.workflow_tasks_inline`.
        debug_mode=settings.workflow_tasks_inline,
        # Cancellation reaches an activity through its heartbeat; keep that path short.
        max_heartbeat_throttle_interval=timedelta(seconds=0.5),
        default_heartbeat_throttle_interval=timedelta(seconds=0.5),
        # A turn paused for a person whose worker died is picked up by another at once,
        # instead of waiting 10 s for the dead worker's sticky queue.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        **capacity(settings),
    )


def capacity(settings: Settings) -> dict[str, Any]:
    """The worker's options that are settings: how much it runs at once
    (THINK_WORKER_MAX_ACTIVITIES, and THINK_WORKER_WORKFLOW_TASK_SLOTS: a turn holds its
    workflow task's slot while its local model step runs, so this is where a backlog forms,
    ordered by the tenants' fairness keys) and how long it lets running work finish on SIGTERM (a
    deploy; THINK_WORKER_SHUTDOWN_GRACE_SECONDS) rather than cutting a model stream
    mid-answer; what does not finish in time is retried on another worker."""
    return {
        "max_concurrent_activities": settings.worker_max_activities,
        "max_concurrent_local_activities": settings.worker_max_activities,
        "max_concurrent_workflow_tasks": settings.worker_workflow_task_slots,
        "graceful_shutdown_timeout": timedelta(seconds=settings.worker_shutdown_grace_seconds),
    }


async def _prune_forever(store: Store, retention: float) -> None:
    while True:
        try:
            removed = await store.prune_chunks(retention)
            if removed:
                log.info("pruned %d stream chunks older than %.0f s", removed, retention)
        except Exception:
            log.warning("pruning stream chunks failed", exc_info=True)
        await asyncio.sleep(PRUNE_EVERY)


async def sweep_once(client: Client, store: Store, settings: Settings, older_than: float) -> int:
    """Start the running turns of this worker's queue still awaiting their workflow a while
    after they were accepted (`TurnRecord.awaits_workflow`): it may never have started (a
    gateway or worker died between its commit and the start). Starting one that exists
    changes nothing. Returns how many were sent."""
    sent = 0
    for turn in await store.waiting_heads(older_than, settings.task_queue):
        try:
            await start_turn_workflow(client, settings.task_queue, turn)
            sent += 1
        except DispatchFailed:
            log.warning("re-sending turn %s failed", turn.id, exc_info=True)
    sent += await _close_abandoned(client, store, settings, older_than)
    async with store.db.connection() as conn:
        answers = await unapplied_answers(conn, older_than)
    for row in answers:
        # The workflow ignores an answer it has already; a lost Signal is sent again.
        signal = APPROVE if row["kind"] == "approval" else SUBMIT_TOOL_RESULT
        handle = client.get_workflow_handle(
            turn_workflow_id(
                row["agent"], row["conversation_id"], row["turn_id"], tenant=row["tenant"]
            )
        )
        try:
            await handle.signal(signal, row["answer"])
            sent += 1
        except RPCError:
            log.warning("re-signalling an answer to turn %s failed", row["turn_id"], exc_info=True)
    return sent + await _sweep_actions(client, store, older_than)


async def _sweep_actions(client: Client, store: Store, older_than: float) -> int:
    """Re-signal parked actions' decisions that were recorded but may not have reached their
    workflow; expire parked actions past their wait (the backstop of their workflow's timer)
    and forget settled keys past their `remember` period."""
    sent = 0
    for row in await action_ledger.decided_parked(store.db, older_than):
        assert row.decision is not None
        decision = ToolDecision.model_validate(row.decision)
        if await signal_parked_decision(client, row, decision):
            sent += 1
    expired, forgotten = await action_ledger.sweep_ledger(store.db)
    if expired or forgotten:
        log.info("action ledger: %d parked actions expired, %d keys forgotten", expired, forgotten)
    return sent


ABANDONED_QUERY = (
    "ExecutionStatus != 'Running' AND ThinkTurnStatus IN "
    "('running', 'awaiting_approval', 'awaiting_client_tool') AND CloseTime > '{since}'"
)


ABANDONED_LOOKBACK = timedelta(hours=24)
"""How far back the sweeper looks for workflows that closed without ending their turn. A turn
whose workflow gave up during a Postgres outage (its activities retry transient failures for
`TRANSIENT_BUDGET`, then its end for as long again) is ended once Postgres is back, if that is
within a day of the workflow's close."""
_SETTLED_ABANDONED: dict[str, None] = {}
"""Closed workflows (`id/run`) this process has settled already, so a sweep does not read
their history again each time (insertion order: the oldest are forgotten first)."""
_SETTLED_KEPT = 10_000


async def _close_abandoned(
    client: Client, store: Store, settings: Settings, older_than: float
) -> int:
    """End the turns whose workflow closed without ending them (terminated from the Temporal
    UI, or failed, say after an outage longer than its retries): their last `ThinkTurnStatus`
    still says they run. The turn behind each then starts. One visibility query per sweep,
    over the workflows closed in the last `ABANDONED_LOOKBACK`."""
    lookback = max(ABANDONED_LOOKBACK, timedelta(seconds=20 * older_than))
    since = datetime.now(UTC) - lookback
    query = ABANDONED_QUERY.format(since=since.strftime("%Y-%m-%dT%H:%M:%SZ"))
    closed = 0
    async for found in client.list_workflows(query, limit=200):
        key = f"{found.id}/{found.run_id}"
        if key in _SETTLED_ABANDONED:
            continue
        handle = client.get_workflow_handle(found.id, run_id=found.run_id)
        try:
            history = await handle.fetch_history()
            started = history.events[0].workflow_execution_started_event_attributes
            turn_id = json.loads(started.input.payloads[0].data)["turn_id"]
        except (RPCError, IndexError, KeyError, ValueError):
            log.warning("could not read the turn of workflow %s", found.id, exc_info=True)
            continue
        if await end_abandoned(store, turn_id):
            log.warning("turn %s: its workflow %s closed without ending it", turn_id, found.id)
            await hand_off(store, client, settings.task_queue, turn_id)
            closed += 1
        _SETTLED_ABANDONED[key] = None
        while len(_SETTLED_ABANDONED) > _SETTLED_KEPT:
            del _SETTLED_ABANDONED[next(iter(_SETTLED_ABANDONED))]
    return closed


async def _ready_once_polling(client: Client, settings: Settings, readiness: Readiness) -> None:
    """`/readyz` answers 200 once Temporal lists this worker among the pollers of its task
    queue: its polls have reached the server, so a turn started now is picked up."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=settings.task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    while True:
        try:
            described = await client.workflow_service.describe_task_queue(request)
            if any(p.identity == client.identity for p in described.pollers):
                readiness.polling()
                log.info("worker ready: Temporal lists it polling %r", settings.task_queue)
                return
        except RPCError:
            log.debug("describing task queue %r failed", settings.task_queue, exc_info=True)
        await asyncio.sleep(READY_POLL_EVERY)


async def _sample_pool_forever(store: Store, every: float = 5.0) -> None:
    while True:
        metrics.sample_pool(store.db)
        await asyncio.sleep(every)


async def _sweep_forever(client: Client, store: Store, settings: Settings) -> None:
    every = settings.pending_sweep_seconds
    while True:
        await asyncio.sleep(every)
        try:
            await sweep_once(client, store, settings, every)
        except Exception:
            log.warning("sweeping pending turns failed", exc_info=True)


def _declared_mcp_servers(registry: AgentRegistry) -> list[McpServer]:
    """The MCP servers the hosted agents declare outside any conversation (a declaration
    that needs one, or raises, is left to the turns, which report it)."""
    servers: list[McpServer] = []
    for cls in registry:
        try:
            servers.extend(cls().get_mcp_servers())
        except Exception:
            log.info("agent %s: its MCP servers are connected by its turns", cls.name)
    return servers


async def run_worker(settings: Settings) -> None:
    """Run until cancelled."""
    quiet_expected_failures()  # a superseded attempt is one line, not a traceback
    registry = AgentRegistry.from_paths(settings.agents)
    # Before anything else: a declaration it cannot arm stops the worker (one line, exit 2)
    # before it connects to anything, so it exits with nothing of Temporal's still running.
    check_deployment(settings.task_queue, registry)
    check_registry(registry)  # a messenger with no verification posture stops it too
    check_agents(registry, settings, os.environ)  # its webhooks' secrets are variables
    metrics.count_events()
    warm_price_table()  # now, not in the first turn's first step (docs/models.md, "Usage")
    # OpenAI's SDK, in the background beside the start's round trips (not awaited): a turn
    # never imports one on the event loop, and the first one finds it ready (_warm.py).
    warm_model_sdks()
    readiness = metrics.Readiness()
    if settings.worker_metrics_port:
        metrics.serve(settings.worker_metrics_port, readiness=readiness)
        log.info(
            "metrics at http://0.0.0.0:%d/metrics, probes at /healthz and /readyz",
            settings.worker_metrics_port,
        )
    client = await connect(settings)
    armed = await reconcile_deployment(client, settings.task_queue, registry)
    log.info("scheduled tasks armed: %d", armed)
    if await arm_retention(client, settings, registry):
        log.info("retention sweep armed: every %.0f s", settings.retention_sweep_seconds)
    db = await open_database(settings, max_size=settings.db_pool_size)
    store = Store(db)
    service = ThinkService(store=store, temporal=client, settings=settings, registry=registry)
    armed = await reconcile_conversations(service)
    if armed:
        log.info("scheduled tasks of conversations re-armed: %d", armed)
    cancels = ChunkListener(settings.libpq_url, CANCEL_CHANNEL)
    await cancels.start()
    activities = TurnActivities(
        ActivityResources(store, registry, settings, temporal=client, cancels=cancels)
    )
    worker = build_worker(client, settings, activities, service)
    warm_mcp_servers(_declared_mcp_servers(registry))
    early = activities.early_steps if settings.early_first_step else None
    announced = AnnouncedTurns(
        settings.libpq_url, store, client, settings.task_queue, early, service
    )
    listening = asyncio.create_task(announced.run())
    housekeeping = [
        listening,
        asyncio.create_task(_prune_forever(store, settings.chunk_retention_seconds)),
        asyncio.create_task(_sweep_forever(client, store, settings)),
        asyncio.create_task(_sample_pool_forever(store)),
    ]
    # Listening before it says it polls: an announcement made before it listens reaches it
    # only through its gateway's fallback, seconds later.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(announced.listening.wait(), timeout=10)
    log.info("worker polling task queue %r", settings.task_queue)
    housekeeping.append(asyncio.create_task(_ready_once_polling(client, settings, readiness)))
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        # A SIGTERM: not ready from now on, while the worker finishes what it runs; and
        # deaf to new turns' announcements, whose first steps it would only begin to drop
        # (a wasted model request each): another worker, or the gateway's fallback, starts
        # them.
        readiness.stopping()
        listening.cancel()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        raise
    finally:
        readiness.stopping()
        for task in housekeeping:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await cancels.stop()
        await close_mcp_pool()
        await close_model_clients()  # the model clients' pooled connections
        await service.close()
        await db.close()
