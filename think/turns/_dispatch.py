"""Starting a conversation's running turn on Temporal: the one way a turn workflow starts.

A conversation's queue lives in Postgres (`turns.seq`, under the conversation's row lock); its
running turn is the first active one. Whoever changes who that is — admission, the activity
that ends a turn, a cancel of a queued turn, the workers' sweeper — calls `hand_off` after its
commit, which starts the running turn's workflow if it has not started. Starting is idempotent
(the workflow id is the turn's, and a duplicate is refused), so any of them may do it twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import weakref
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.common import (
    Priority,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from think.exceptions import ThinkError
from think.storage import Store, TurnRecord, queue_head
from think.workflows.inputs import ConversationRef, ParentLink, TurnInput
from think.workflows.names import (
    AGENT_KEY,
    CONVERSATION_KEY,
    PARENT_TURN_KEY,
    TENANT_KEY,
    TURN_STATUS_KEY,
    TURN_WORKFLOW,
    turn_workflow_id,
)

log = logging.getLogger("think.dispatch")

TASK_TIMEOUT = timedelta(seconds=5)
"""A turn's workflow-task timeout. Model steps run as local activities inside a workflow task,
so this is how soon a step whose worker died is retried elsewhere (the SDK keeps a live task
open by completing it every 80% of this)."""


_HOSTED_QUEUES: set[str] = set()


def host_queue(task_queue: str) -> None:
    """Say that this process runs a worker of `task_queue` (`build_worker` does): its starts
    then ask for eager execution (Temporal answers the start with the workflow's first task,
    which this process's worker runs at once, instead of dispatching it through the task
    queue), and its admissions start their turns themselves rather than announce them.
    Without a free slot in a local worker, the SDK sends a plain start."""
    _HOSTED_QUEUES.add(task_queue)


def hosts_queue(task_queue: str) -> bool:
    return task_queue in _HOSTED_QUEUES


class DispatchFailed(ThinkError):
    """Temporal did not take the turn; it stays recorded in Postgres, awaiting its workflow
    (`TurnRecord.awaits_workflow`), and can be re-sent."""

    def __init__(self, message: str, turn_id: str | None = None) -> None:
        super().__init__(message)
        self.turn_id = turn_id


FAIRNESS_KEY_BYTES = 64
"""Temporal's limit on a fairness key's length."""


def fairness_key(tenant: str) -> str:
    """The tenant as Temporal's fairness key: itself when it fits in 64 bytes, else a hash of
    it (distinct tenants still get distinct keys, and the same tenant always the same one)."""
    if len(tenant.encode()) <= FAIRNESS_KEY_BYTES:
        return tenant
    return "sha256:" + hashlib.sha256(tenant.encode()).hexdigest()[:48]


def turn_priority(turn: TurnRecord) -> Priority:
    """The turn's place on the shared task queue: its agent's priority key (`Think.priority`,
    kept on the request at admission), then its tenant as the fairness key, so that within a
    priority each tenant gets an equal share of busy workers and one tenant's backlog does not
    hold another's turns behind it. The turn's activities inherit it from the workflow (a
    field left unset on an activity means "the workflow's"); its local activities run inside
    its workflow tasks, which this orders. Honoured where the namespace has fairness on
    (docs/deploying.md, "Fairness between tenants"); elsewhere the key is carried and ignored."""
    return Priority(priority_key=turn.request.priority, fairness_key=fairness_key(turn.tenant))


def turn_input(turn: TurnRecord) -> TurnInput:
    request = turn.request
    debounce = request.debounce_seconds or 0.0
    parent = request.delegated_by
    return TurnInput(
        # The turn's own tenant, agent, conversation_id and conversation_uid.
        conversation=ConversationRef.model_validate(turn, from_attributes=True),
        turn_id=turn.id,
        debounce_seconds=debounce if request.concurrency == "debounce" else 0.0,
        parent=ParentLink(
            # A child shares its parent's tenant (`sub_agent` and agent tools never cross one).
            workflow_id=turn_workflow_id(
                parent.agent, parent.conversation_id, parent.turn_id, tenant=turn.tenant
            ),
            turn_id=parent.turn_id,
            tool_call_id=parent.tool_call_id,
        )
        if parent is not None
        else None,
        notify_workflow=request.notify_workflow,
    )


async def start_turn_workflow(client: Client, task_queue: str, turn: TurnRecord) -> bool:
    """Start the turn's workflow; a turn whose workflow exists (running or closed) is left as
    it is. Raises `DispatchFailed` when Temporal cannot be reached. True when Temporal handed
    the workflow's first task to this process's worker with its answer (an eager start).

    A sub-agent's turn names the turn that delegated it: in its `ThinkParentTurn` search
    attribute, its summary and its details (the parent's workflow id)."""
    attributes = [
        SearchAttributePair(TENANT_KEY, turn.tenant),
        SearchAttributePair(AGENT_KEY, turn.agent),
        SearchAttributePair(CONVERSATION_KEY, turn.conversation_id),
        # Set at start rather than upserted by the turn: one event less per turn.
        SearchAttributePair(TURN_STATUS_KEY, "running"),
    ]
    summary = f"{turn.agent} turn in conversation {turn.conversation_id}"
    details: str | None = None
    parent = turn.request.delegated_by
    if parent is not None:
        attributes.append(SearchAttributePair(PARENT_TURN_KEY, parent.turn_id))
        parent_id = turn_workflow_id(
            parent.agent, parent.conversation_id, parent.turn_id, tenant=turn.tenant
        )
        summary += f", delegated by {parent.agent} (tool {parent.tool_name})"
        details = (
            f"Sub-agent turn, delegated by tool call `{parent.tool_call_id}` "
            f"({parent.tool_name}) of workflow `{parent_id}`. That turn's children: "
            f"`{PARENT_TURN_KEY.name} = '{parent.turn_id}'`."
        )
    while True:
        try:
            handle = await client.start_workflow(
                TURN_WORKFLOW,
                turn_input(turn),
                id=turn_workflow_id(turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant),
                task_queue=task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                task_timeout=TASK_TIMEOUT,
                search_attributes=TypedSearchAttributes(attributes),
                static_summary=summary,
                static_details=details,
                priority=turn_priority(turn),
                request_eager_start=hosts_queue(task_queue),
            )
        except WorkflowAlreadyStartedError:
            return False
        except RPCError as exc:
            if _unregistered_parent_attribute(exc, attributes):
                # A namespace set up before sub-agents (`think migrate` not run since): the
                # turn runs all the same, only without the attribute that lists children.
                log.warning(
                    "search attribute %s is not registered in this Temporal namespace; run "
                    "`think migrate` to list sub-agent turns by their parent",
                    PARENT_TURN_KEY.name,
                )
                attributes = [a for a in attributes if a.key != PARENT_TURN_KEY]
                continue
            raise DispatchFailed(
                f"turn {turn.id!r} could not be handed to Temporal: {exc}", turn.id
            ) from exc
        # The SDK's own mark on the handle (no public API says it); without it, "not eager",
        # which costs only the work begun beside the start (`think.engine.activities.EarlySteps`).
        return getattr(handle, "__temporal_eagerly_started", False) is True


def _unregistered_parent_attribute(
    exc: RPCError, attributes: list[SearchAttributePair[Any]]
) -> bool:
    return (
        exc.status == RPCStatusCode.INVALID_ARGUMENT
        and PARENT_TURN_KEY.name in str(exc)
        and any(a.key == PARENT_TURN_KEY for a in attributes)
    )


async def hand_off(store: Store, client: Client, task_queue: str, turn_id: str) -> None:
    """Start the running turn of `turn_id`'s conversation (that turn itself, or, once it has
    ended, the one behind it), if it is waiting for its workflow."""
    async with store.db.connection() as conn:
        head = await queue_head(conn, turn_id)
    if head is not None and head.awaits_workflow:
        await start_turn_workflow(client, task_queue, head)


ANNOUNCED_GRACE = 2.0
"""How long an announced turn may await its workflow before its admitting process starts it
itself: no worker took it (none is running, or the one that did died before its start)."""


class _Unclaimed:
    """The turns one process announced to a queue's workers and has not seen begun: past
    `ANNOUNCED_GRACE`, it starts those still awaiting their workflow. One read per check
    for all of them, none while there are none."""

    def __init__(self, store: Store, client: Client, task_queue: str) -> None:
        self.store, self.client, self.task_queue = store, client, task_queue
        self.turns: dict[str, tuple[float, TurnRecord]] = {}
        self.task: asyncio.Task[None] | None = None

    def add(self, turn: TurnRecord) -> None:
        self.turns[turn.id] = (time.monotonic(), turn)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._check(), name="think-announced-turns")

    async def _check(self) -> None:
        while self.turns:
            await asyncio.sleep(ANNOUNCED_GRACE / 2)
            cutoff = time.monotonic() - ANNOUNCED_GRACE
            due = [turn for at, turn in self.turns.values() if at <= cutoff]
            if not due:
                continue
            try:
                waiting = await self.store.awaiting_workflow([turn.id for turn in due])
            except Exception:
                log.warning("checking announced turns failed", exc_info=True)
                continue
            for turn in due:
                if turn.id in waiting:
                    try:
                        await start_turn_workflow(self.client, self.task_queue, turn)
                    except DispatchFailed:
                        log.warning("starting announced turn %s failed", turn.id, exc_info=True)
                        continue  # kept: tried again at the next check
                    log.info("turn %s: no worker started it; started by its admission", turn.id)
                del self.turns[turn.id]


_UNCLAIMED: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[int, int, str], _Unclaimed]
] = weakref.WeakKeyDictionary()


def watch_announced(store: Store, client: Client, task_queue: str, turn: TurnRecord) -> None:
    """Start the announced `turn` from this process if no worker has begun it within
    `ANNOUNCED_GRACE` (the workers' sweeper covers a process that dies before that)."""
    watches = _UNCLAIMED.setdefault(asyncio.get_running_loop(), {})
    key = (id(store), id(client), task_queue)
    watch = watches.get(key)
    if watch is None:
        watch = watches[key] = _Unclaimed(store, client, task_queue)
    watch.add(turn)
