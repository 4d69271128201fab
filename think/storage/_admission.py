"""Admitting a turn: the queue transaction (`admit_turn`, bound on `Store` under the same
name). A `turns` row is the submission record. Admission decides, in one transaction under the
conversation's row lock, everything a caller must learn before anything is stored: a repeat of
a known idempotency key or submission id (the existing record, `accepted: false`), a
conflicting pair of them (409), a "drop" submission to a busy conversation (409, nothing
stored); then what the submission's mode does to the queue (`think.storage._queue`). The
sequence: docs/architecture.md, "Admission".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from psycopg.types.json import Jsonb

from think._messages import new_id
from think.exceptions import UserError
from think.storage._db import Conn, fetch_all, fetch_one
from think.storage._errors import IdempotencyConflict
from think.storage._queue import (
    ACTIVE_TURNS,
    SUPERSEDING,
    begin_turn,
    starts_at_admission,
    steer_head,
    supersede,
)
from think.storage._records import (
    Admission,
    Conversation,
    TurnRecord,
    TurnRequest,
)
from think.storage._turn_ids import (
    public_turn_id,
    tenant_turn_id,
    turn_id_candidates,
)
from think.storage._turn_queries import (
    CONVERSATION_COLUMNS,
    TURN_SELECT,
    turn_by_id,
    turn_record,
)

if TYPE_CHECKING:
    # UIMessageChunk is named in annotations only: storage keeps chunks as opaque JSONB, and
    # streaming, which types them, is the layer above.
    from think.storage._store import Store


class ConversationBusy(UserError):
    """A `drop` submission arrived while a turn of the conversation runs or is queued."""

    def __init__(self, conversation_id: str, turn_id: str) -> None:
        turn_id = public_turn_id(turn_id)
        super().__init__(
            f"conversation {conversation_id!r} is busy with turn {turn_id!r}, and this "
            "submission's message_concurrency is 'drop': it was not accepted"
        )
        self.conversation_id = conversation_id
        self.turn_id = turn_id


class SubmissionConflict(UserError):
    """A submission id and an idempotency key that name different submissions; or a
    submission id its tenant gave a turn of another conversation. `turn_id` is the known
    turn's, as clients name it."""

    def __init__(self, detail: str, turn_id: str) -> None:
        super().__init__(detail)
        self.turn_id = public_turn_id(turn_id)


_BY_NAME = TURN_SELECT + " WHERE t.id = ANY(%(ids)s) AND c.tenant = %(tenant)s LIMIT 1"
"""The tenant's turn a submission id names (`turn_id_candidates`): a probe of the primary key
per candidate, and never another tenant's row, whatever its id."""
_BY_KEY = TURN_SELECT + " WHERE t.conversation_uid = %(c)s AND t.idempotency_key = %(key)s"

# Any unique constraint: the (conversation, key) one, or the primary key when the caller chose
# the id (`submission_id`). The loser of a race then reads the winner's row.
_INSERT = f"""
    WITH inserted AS (
        INSERT INTO turns (id, conversation_uid, agent, idempotency_key, request_hash, request,
                           status, message_id, task_queue)
        VALUES (%(id)s, %(c)s, %(agent)s, %(key)s, %(hash)s, %(request)s, 'pending',
                %(message_id)s, %(task_queue)s)
        ON CONFLICT DO NOTHING
        RETURNING *, xmin::text AS version
    )
    SELECT inserted.*, {CONVERSATION_COLUMNS},
           NOT EXISTS (SELECT 1 FROM turns o WHERE o.conversation_uid = inserted.conversation_uid
                       AND o.completed_at IS NULL AND o.id <> inserted.id) AS idle
    FROM inserted JOIN conversations c ON c.uid = inserted.conversation_uid
"""
"""The new turn as `TURN_SELECT` reads one (none when a unique constraint refused it), and
whether its conversation had no active turn: `ACTIVE_TURNS`' answer for a mode that needs
nothing else of the queue. Its snapshot is taken as it starts, under the conversation's lock
(an earlier statement took it), so it sees every turn `ACTIVE_TURNS` would; the statement's
own insert it does not see."""

ANNOUNCE_CHANNEL = "think_turn_admitted"
"""Where an admission that started a turn announces it to the workers of its queue, as
`<task queue>\n<turn id>`, when the admitting process runs no worker of that queue (a
gateway): a worker starts the workflow itself and so runs its first workflow task at once
(Temporal's eager start), instead of waiting for the task to be dispatched."""


async def _by_name(conn: Conn, tenant: str, submission_id: str) -> TurnRecord | None:
    ids = turn_id_candidates(tenant, submission_id)
    row = await fetch_one(conn, _BY_NAME, {"ids": ids, "tenant": tenant})
    return turn_record(row) if row else None


async def _by_key(conn: Conn, conversation_uid: str, key: str) -> TurnRecord | None:
    row = await fetch_one(conn, _BY_KEY, {"c": conversation_uid, "key": key})
    return turn_record(row) if row else None


def _repeat(
    known: TurnRecord, request_hash: str, key: str | None, submission_id: str | None
) -> Admission:
    """The answer to a repeat of a known submission: the record, if the request is the same."""
    if known.request_hash != request_hash:
        if key is not None:
            raise IdempotencyConflict(key, known.id)
        raise SubmissionConflict(
            f"submission_id {submission_id!r} was already used for a different request",
            known.id,
        )
    return Admission(turn=known, accepted=False)


async def _known(
    conn: Conn,
    conversation: Conversation,
    request_hash: str,
    key: str | None,
    submission_id: str | None,
) -> Admission | None:
    """The existing record this request repeats, if any; a conflicting pair is refused. A
    submission id is looked up within the conversation's tenant only (`_by_name`): another
    tenant's turn of that name answers nothing, as a name never used does."""
    conversation_uid = conversation.uid
    if key is not None:
        known = await _by_key(conn, conversation_uid, key)
        if known is not None:
            named = public_turn_id(known.id)
            if submission_id is not None and named != submission_id:
                raise SubmissionConflict(
                    f"Idempotency-Key {key!r} belongs to submission {named!r}, "
                    f"not to submission_id {submission_id!r}",
                    known.id,
                )
            return _repeat(known, request_hash, key, submission_id)
    if submission_id is not None:
        known = await _by_name(conn, conversation.tenant, submission_id)
        if known is not None:
            if known.conversation_uid != conversation_uid:
                raise SubmissionConflict(
                    f"submission_id {submission_id!r} is taken by another conversation",
                    known.id,
                )
            if known.idempotency_key != key:
                raise SubmissionConflict(
                    f"submission_id {submission_id!r} was submitted with "
                    f"Idempotency-Key {known.idempotency_key!r}, not {key!r}",
                    known.id,
                )
            return _repeat(known, request_hash, key, submission_id)
    return None


async def admit_turn(
    store: Store,
    *,
    tenant: str,
    agent: str,
    conversation_id: str,
    request: TurnRequest,
    request_hash: str,
    idempotency_key: str | None,
    submission_id: str | None = None,
    on_inserted: Callable[[Admission], None] | None = None,
    announce_to: str | None = None,
    task_queue: str | None = None,
) -> Admission:
    """Record a submission durably, or find the one this key or submission id already made.

    Checked in this order, all before anything is written: a known key or id (a retry gets
    the same answer even if the conversation has moved on since), then "drop" against the
    conversation's active turns (under the conversation's row lock, so two "drop" submissions
    cannot both find it idle), then the request itself (parent, message ids).

    `on_inserted` is told of a new turn once its row is inserted, just before the commit
    (which it must not wait for): admission starts the turn's workflow then, so that
    Temporal's start overlaps the commit. If the commit then fails, this raises as usual.
    `announce_to`: a turn this transaction starts is announced to that task queue's workers
    (`ANNOUNCE_CHANNEL`, delivered as it commits) instead, and says so (`announced`).
    `task_queue` is recorded with the turn, for the sweeper (`Store.waiting_heads`).
    """
    if not request.messages and not request.continuation and request.regenerates is None:
        raise UserError("a submission needs at least one message")
    async with store.db.transaction() as conn:
        # Every admission of the conversation, and every transaction that ends one of its
        # turns, takes its row lock: the queue's order is the order they took it in.
        conversation, created = await store.ensure_conversation(
            conn, tenant=tenant, agent=agent, conversation_id=conversation_id, lock=True
        )
        uid = conversation.uid
        known = await _known(conn, conversation, request_hash, idempotency_key, submission_id)
        if known is not None:
            return known
        # Only "drop" and the superseding modes act on the queue before the insert; the rest
        # need only know whether the conversation is idle, which the insert answers.
        acts_on_queue = (
            request.concurrency in ("drop", "steer") or request.concurrency in SUPERSEDING
        )
        queue = await fetch_all(conn, ACTIVE_TURNS, {"c": uid}) if acts_on_queue else []
        if request.concurrency == "drop" and queue:
            raise ConversationBusy(conversation_id, queue[0]["id"])
        await store._check_request(conn, uid, request, new_conversation=created)
        # A name the client chose is stored scoped to its tenant (`think.storage._turn_ids`).
        turn_id = tenant_turn_id(tenant, submission_id) if submission_id else new_id("turn")
        interrupt: str | None = None
        if request.concurrency in SUPERSEDING and queue:
            request, interrupt = await supersede(conn, queue, request, by=turn_id)
        inserted = await fetch_one(
            conn,
            _INSERT,
            {
                "id": turn_id,
                "c": uid,
                "agent": agent,
                "key": idempotency_key,
                "hash": request_hash,
                "request": Jsonb(request.model_dump(mode="json", exclude_none=True)),
                "message_id": new_id("msg"),
                "task_queue": task_queue,
            },
        )
        if inserted is not None:
            idle = inserted.pop("idle")
            turn = turn_record(inserted)
            if request.concurrency == "steer" and await steer_head(
                conn, uid, queue, request, turn_id=turn_id
            ):
                # Its messages joined the running turn; it ends `skipped`, answered by it.
                ended = await turn_by_id(conn, turn_id)
                assert ended is not None  # inserted in this transaction
                return Admission(turn=ended, accepted=True)
            runs_now = not queue if acts_on_queue else idle
            starts = runs_now and starts_at_admission(request)
            admission = Admission(
                turn=turn,
                accepted=True,
                interrupt=interrupt,
                runs_now=runs_now,
                announced=starts and announce_to is not None,
            )
            if on_inserted is not None:
                on_inserted(admission)
            if starts:
                # Started here, while Temporal starts its workflow: its first step then only
                # claims its fence, with no transaction of its own on the turn's way.
                turn, _ = await begin_turn(store, conn, turn, conversation.active_leaf_id)
                if announce_to is not None:
                    await conn.execute(
                        "SELECT pg_notify(%(channel)s, %(payload)s)",
                        {"channel": ANNOUNCE_CHANNEL, "payload": f"{announce_to}\n{turn.id}"},
                    )
                admission = admission.model_copy(update={"turn": turn})
            return admission
    # Lost a race with a concurrent request for the same key or id: its row is committed now.
    async with store.db.connection() as conn:
        known = await _known(conn, conversation, request_hash, idempotency_key, submission_id)
    if known is None:
        raise SubmissionConflict(f"submission_id {submission_id!r} is taken", turn_id)
    return known
