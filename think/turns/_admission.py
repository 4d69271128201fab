"""Turn admission, waiting, following and cancelling: one implementation for the gateway
(`api/`), the Python turn API (`think.ThinkService`) and the worker (which submits through
`ThinkService`), so every door behaves the same.

`admit_submission` is the front door itself: the request's mode, its `TurnRequest` and its
idempotency fingerprint (`think.turns._fingerprint`), built once for every door. A regenerate
is recorded differently (`Store.regenerate`) and then goes through the same `dispatch`.

Admission is two steps: one Postgres transaction under the conversation's row lock (which
decides idempotency, the queue's order and what the submission's `message_concurrency` does to
the turns already there, and outlives Temporal's retention), then, if the turn is the one to
run now, a plain start of its workflow (`think.turns._dispatch.start_turn_workflow`). The start
is sent as the transaction commits, not after: the commit (its WAL flush) and Temporal's start
take their time side by side, about a millisecond less to every turn. The workflow's first step
copes with a turn it cannot find: it waits for a commit it overtook, and ends the workflow of
one whose commit failed (`think.engine.activities._model_step`); one whose commit landed but
whose answer was lost on the way is found, and runs. A turn that waits is started by whoever
ends the turn ahead of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast, get_args

from temporalio.client import Client
from temporalio.service import RPCError

from think import metrics
from think._messages import UIMessage
from think._protocol import UIMessageChunk, is_terminal_chunk
from think.agent._think import Think
from think.exceptions import UserError
from think.storage import (
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    Delegation,
    MessageConcurrency,
    Store,
    TurnRecord,
    TurnRequest,
    queue_head,
)
from think.streaming import (
    CANCEL_CHANNEL,
    ChunkListener,
    append,
    read,
    read_timed,
)
from think.turns._dispatch import hand_off, hosts_queue, start_turn_workflow, watch_announced
from think.turns._fingerprint import request_hash, turn_fingerprint
from think.workflows._names import turn_workflow_id

log = logging.getLogger("think.admission")

# A duplicate submission re-sends the update only when the first one may have been lost
# (the sender died between the Postgres commit and Temporal); before that, it is surely
# still in flight and a re-send would only add load.
RESEND_AFTER = timedelta(seconds=1)
RECHECK_EVERY = 5.0
HEAD_CHECK_EVERY = 1.0
"""Seconds between looks at the turn ahead while a waited-for turn is pending."""
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
) -> Admission:
    """Admit a submission as any door received it: its mode, its request and its
    fingerprint, then `admit`.

    `messages` are what the turn appends, `input` the same as HTTP's body carries it (for the
    fingerprint); `client_tools` are normalised specs. `concurrency` is the caller's override
    (part of the fingerprint); `default_concurrency` replaces the agent's mode without being
    part of it (the Python API queues a submission made from inside the conversation's own
    turn, which "latest" or "interrupt" would otherwise cancel). `delegated_by` names the
    parent turn and tool call of a sub-agent's turn (an agent tool's). `awaited`: the caller
    waits for the whole answer (`TurnRequest.awaited`).
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


def settled(turn: TurnRecord) -> bool:
    """Terminal, or paused for a person or a client: what a waiting caller returns on."""
    return turn.status in TERMINAL_STATUSES or turn.status in PAUSED_STATUSES


async def wait_for_turn(
    store: Store,
    listener: ChunkListener,
    turn_id: str,
    wait_timeout: float | None,
    until: Callable[[TurnRecord], bool] = settled,
) -> TurnRecord:
    """The turn once `until` holds (by default: terminal or paused for a person), or as it
    stands after `wait_timeout` seconds (None: no limit)."""
    loop = asyncio.get_running_loop()
    deadline = None if wait_timeout is None else loop.time() + wait_timeout
    # The default waits for a status (terminal or paused), announced on its own; any other
    # condition may hang on the message, which changes with the turn's chunks.
    with listener.subscribe(turn_id, status_only=until is settled) as event:
        while True:
            event.clear()
            current = await store.get_turn(turn_id)
            if current is None:
                raise UserError(f"turn {turn_id!r} does not exist")
            if until(current):
                return current
            left = RECHECK_EVERY if deadline is None else deadline - loop.time()
            if left <= 0:
                return current
            # Wake on chunks; re-check at least every few seconds in case a NOTIFY was
            # missed while the listener reconnected.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=min(left, RECHECK_EVERY))


@dataclass(frozen=True)
class Waited:
    """What a wait for a turn's answer ended with: the turn as it stands, and the turn ahead
    of it when that is why the wait ended (`queued_behind`: paused for a person)."""

    turn: TurnRecord
    queued_behind: TurnRecord | None = None


async def wait_for_answer(
    store: Store,
    listener: ChunkListener,
    turn_id: str,
    wait_timeout: float | None,
    *,
    queued: bool = True,
) -> Waited:
    """Until the turn is terminal or paused for a person, or `wait_timeout` passes (None: no
    limit); and the turn ahead of it, when it is the reason the wait ended. Every door's wait
    for an answer (HTTP's wait mode, `run_turn(mode="wait")`, `result`).

    A turn queued behind one that waits for a person cannot start before someone decides,
    which may take days: such a wait answers at once, with the turn as it stands (pending)
    and the paused turn that holds it, instead of hanging for the whole `wait_timeout`.
    A turn its admission started (`queued=False`) is at the head of its queue, so nothing can
    hold it: it is only waited for, with no look at the queue.
    """
    if not queued:
        return Waited(await wait_for_turn(store, listener, turn_id, wait_timeout))
    loop = asyncio.get_running_loop()
    deadline = None if wait_timeout is None else loop.time() + wait_timeout
    step = 0.0  # the first look is immediate
    while True:
        left = step if deadline is None else max(0.0, min(deadline - loop.time(), step))
        current = await wait_for_turn(store, listener, turn_id, left)
        if settled(current) or (deadline is not None and loop.time() >= deadline):
            return Waited(current)
        if current.status == "pending":
            async with store.db.connection() as conn:
                head = await queue_head(conn, turn_id)
            if head is not None and head.id != turn_id and head.status in PAUSED_STATUSES:
                return Waited(current, queued_behind=head)
        step = HEAD_CHECK_EVERY


async def follow(
    store: Store,
    listener: ChunkListener,
    turn_id: str,
    after: int = -1,
    live_since: float | None = None,
) -> AsyncGenerator[tuple[int, UIMessageChunk], None]:
    """The turn's chunks after sequence number `after`, then its live ones, until the last
    (`finish`, `error` or `abort`), or until the turn has ended and its chunks were pruned.
    `live_since`: chunks written from then on are live (their lag is observed), by default
    from now on; a submission's stream counts all of its new turn's, which a worker started
    eagerly may have written before the stream began reading."""
    db = store.db
    since = time.time() if live_since is None else live_since
    with listener.inbox(turn_id) as inbox:
        while True:
            inbox.event.clear()
            # Live chunks come with their announcement; the table is read for the rest (the
            # replay, a batch too big to announce, a gap, a reconnect).
            announced = inbox.take(after)
            if announced is None:
                async with db.connection() as conn:
                    rows = await read_timed(conn, turn_id, after)
            else:
                rows = announced
            for seq, chunk, written in rows:
                if written >= since:  # live, not replayed: how long it took to get here
                    metrics.STREAM_LAG.observe(max(0.0, time.time() - written))
                yield seq, chunk
                after = seq
                if is_terminal_chunk(chunk):
                    return
            if rows:
                continue
            if announced is None:  # nothing new in the table either: has the turn ended?
                turn = await store.get_turn(turn_id)
                if turn is None or turn.status in TERMINAL_STATUSES:
                    # The status and the last chunks commit together, but may have landed
                    # between our two reads: look once more before concluding they were pruned.
                    async with db.connection() as conn:
                        if await read(conn, turn_id, after, limit=1):
                            continue
                    return
            # Re-check now and then even without a NOTIFY (one may be lost in a reconnect).
            try:
                await asyncio.wait_for(inbox.event.wait(), timeout=RECHECK_EVERY)
            except TimeoutError:
                inbox.must_read()


async def cancel_turn(
    store: Store, temporal: Client, task_queue: str, turn: TurnRecord, reason: str
) -> bool:
    """Cancel a turn; False when it had already ended (nothing changes then).

    A turn none of whose steps has begun is aborted right here, before it ever calls the model
    (a queued one before it appends its user message), and the turn behind it (if this one was
    running) is started. A
    running one is told through Postgres (`NOTIFY think_cancel`), which reaches the model
    step streaming it at once; the step stores the partial answer and ends the stream with
    `abort`. Its workflow is cancelled too, for a turn paused between steps.
    """
    if turn.status in TERMINAL_STATUSES:
        return False
    async with store.db.transaction() as conn:
        aborted = await store.abort_if_unbegun(conn, turn, reason)
        if aborted:
            await append(conn, turn.id, [{"type": "abort", "reason": reason}])
        else:
            await store.note_cancel(conn, turn.id, reason)
            await conn.execute(
                "SELECT pg_notify(%(channel)s, %(turn)s)",
                {"channel": CANCEL_CHANNEL, "turn": turn.id},
            )
    if aborted:
        await hand_off(store, temporal, task_queue, turn.id)
    handle = temporal.get_workflow_handle(
        turn_workflow_id(turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant)
    )
    try:
        await handle.cancel()
    except RPCError as exc:
        # Never started (it was waiting), or finished between our read and the cancel.
        log.debug("cancel of turn %s: %s", turn.id, exc)
    return True
