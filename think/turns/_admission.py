"""Turn admission: one front door for the gateway (`api/`), the Python turn API
(`think.ThinkService`) and the worker, so every door behaves the same. `admit_submission`
builds a submission's mode, request and fingerprint; `admit` records it (one Postgres
transaction, `Store.admit_turn`) and starts its workflow as the record commits; `dispatch`
is what follows a commit. The sequence, and why the start is sent beside the commit:
docs/architecture.md, "Admission".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast, get_args

from temporalio.client import Client

from think._messages import UIMessage
from think.agent import Think
from think.exceptions import UserError
from think.storage import Admission, Delegation, MessageConcurrency, Store, TurnRequest
from think.turns._cancelling import cancel_turn
from think.turns._dispatch import hand_off, hosts_queue, start_turn_workflow, watch_announced
from think.turns._fingerprint import request_hash, turn_fingerprint

# A duplicate submission re-sends the update only when the first one may have been lost
# (the sender died between the Postgres commit and Temporal); before that, it is surely
# still in flight and a re-send would only add load.
RESEND_AFTER = timedelta(seconds=1)
MODES: tuple[str, ...] = get_args(MessageConcurrency)


def resolve_concurrency(
    agent: type[Think], override: str | None
) -> tuple[MessageConcurrency, float | None]:
    """The submission's mode (the request's override, else the agent's) and, for
    "debounce", its quiet period."""
    mode = override or agent.message_concurrency
    if mode not in MODES:
        raise UserError(f"message_concurrency {mode!r} is not one of {', '.join(MODES)}")
    debounce = float(agent.debounce_seconds) if mode == "debounce" else None
    return cast(MessageConcurrency, mode), debounce


async def admit_submission(
    store: Store,
    temporal: Client,
    task_queue: str,
    agent: type[Think],
    *,
    tenant: str,
    conversation_id: str,
    messages: list[UIMessage],
    input: Any,
    parent_id: str | None = None,
    body: dict[str, Any] | None = None,
    client_tools: Sequence[dict[str, Any]] = (),
    concurrency: MessageConcurrency | None = None,
    default_concurrency: MessageConcurrency | None = None,
    submission_id: str | None = None,
    continuation: bool = False,
    idempotency_key: str | None = None,
    delegated_by: Delegation | None = None,
    awaited: bool = False,
    output: dict[str, Any] | None = None,
    notify_workflow: str | None = None,
    submitted_by: str | None = None,
    channel: str = "web",
) -> Admission:
    """Admit a submission as any door received it: its mode, its request and its
    fingerprint, then `admit`.

    `messages` are what the turn appends, `input` the same as HTTP's body carries it (for the
    fingerprint); `client_tools` are normalised specs. `concurrency` is the caller's override
    (part of the fingerprint); `default_concurrency` replaces the agent's mode without being
    part of it (the Python API queues a submission made from inside the conversation's own
    turn, which "latest" or "interrupt" would otherwise cancel). `delegated_by` names the
    parent turn and tool call of a sub-agent's turn (an agent tool's). `awaited`: the caller
    waits for the whole answer (`TurnRequest.awaited`). `output` is a JSON Schema the answer
    must match, and `notify_workflow` a workflow told when the turn ends (both set by
    `think.workflow.run_turn`'s admission: `TurnRequest`). `submitted_by`: the name of the
    API key that sent it (`TurnRequest.submitted_by`). `channel`: who it came from
    (`TurnRequest.channel`): "web" for /v1, a messenger's name for its turns.
    """
    mode, debounce = resolve_concurrency(agent, concurrency or default_concurrency)
    request = TurnRequest(
        messages=messages,
        parent_id=parent_id,
        body=body or {},
        client_tools=list(client_tools),
        concurrency=mode,
        debounce_seconds=debounce,
        continuation=continuation,
        delegated_by=delegated_by,
        awaited=awaited or None,
        output=output,
        notify_workflow=notify_workflow,
        submitted_by=submitted_by,
        priority=agent.priority,
        channel=channel,
    )
    fingerprint = turn_fingerprint(
        request, input=input, concurrency=concurrency, submission_id=submission_id
    )
    return await admit(
        store,
        temporal,
        task_queue,
        tenant=tenant,
        agent=agent.name,
        conversation_id=conversation_id,
        request=request,
        request_hash=request_hash(fingerprint),
        idempotency_key=idempotency_key,
        submission_id=submission_id,
    )


async def admit(
    store: Store,
    temporal: Client,
    task_queue: str,
    *,
    tenant: str,
    agent: str,
    conversation_id: str,
    request: TurnRequest,
    request_hash: str,
    idempotency_key: str | None = None,
    submission_id: str | None = None,
) -> Admission:
    """Record the submission, then start it if it is the conversation's turn to run: as the
    record commits (see the module's docstring), else `dispatch`. Raises `DispatchFailed`
    when Temporal cannot be reached: the turn is recorded, and a retry with the same key sends
    it again."""
    starting: list[asyncio.Task[bool]] = []

    def start_while_committing(admission: Admission) -> None:
        if admission.runs_now and not admission.announced:  # idle: nothing to interrupt
            turn = admission.turn
            starting.append(asyncio.create_task(start_turn_workflow(temporal, task_queue, turn)))

    try:
        admission = await store.admit_turn(
            tenant=tenant,
            agent=agent,
            conversation_id=conversation_id,
            request=request,
            request_hash=request_hash,
            idempotency_key=idempotency_key,
            submission_id=submission_id,
            on_inserted=start_while_committing,
            announce_to=None if hosts_queue(task_queue) else task_queue,
            task_queue=task_queue,
        )
    except BaseException:
        if starting:
            # The commit failed, or its answer was lost: the workflow's first step finds the
            # turn if it was recorded after all, and ends the workflow if not.
            with contextlib.suppress(BaseException):
                await starting[0]
        raise
    if admission.announced:
        watch_announced(store, temporal, task_queue, admission.turn)
    elif starting:
        await starting[0]
    else:
        await dispatch(store, temporal, task_queue, admission)
    return admission


async def dispatch(store: Store, temporal: Client, task_queue: str, admission: Admission) -> None:
    """What follows an admission's commit (a submission's, or a regenerate's): cancel the
    turn an "interrupt" or "rollback" supersedes, and start the turn if it runs now.

    A repeat of a known key or submission id is re-sent to Temporal only when it still awaits
    its workflow (`TurnRecord.awaits_workflow`) a while after it was accepted (the one gap in
    admission: a sender that died between the Postgres commit and the Temporal call); before
    that it is surely in flight.
    """
    turn = admission.turn
    if admission.interrupt is not None:
        running = await store.get_turn(admission.interrupt)
        if running is not None:
            what = "rolled back" if turn.request.concurrency == "rollback" else "interrupted"
            await cancel_turn(store, temporal, task_queue, running, f"{what} by turn {turn.id}")
    age = datetime.now(UTC) - turn.created_at
    if admission.runs_now:
        await start_turn_workflow(temporal, task_queue, turn)
    elif not admission.accepted and turn.awaits_workflow and age > RESEND_AFTER:
        await hand_off(store, temporal, task_queue, turn.id)
