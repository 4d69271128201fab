"""Submissions: admitting a turn record, and what `message_concurrency` does to the records.

A `turns` row is the submission record. Admission decides, in one transaction, everything a
caller must learn before anything is stored: a repeat of a known idempotency key or
submission id (the existing record, `accepted: false`), a conflicting pair of them (409), a
"drop" submission to a busy conversation (409, nothing stored). What happens later to queued
submissions (skipped by a newer one, merged into one turn, a continuation with nothing to
continue) is written here too, by the activities the conversation workflow runs.

The functions take the `Store` they belong to, like `_tree.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from think._messages import UIMessage, new_id, search_text
from think.exceptions import UserError
from think.storage._db import Conn, fetch_all, fetch_one
from think.storage._errors import IdempotencyConflict
from think.storage._records import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    Conversation,
    QueueLock,
    StoredMessage,
    TurnRecord,
    TurnRequest,
    chain_leaf,
)
from think.storage._stream_log import append
from think.storage._turn_columns import NOW
from think.storage._turn_ids import (
    public_turn_id,
    public_turn_id_or_none,
    tenant_turn_id,
    turn_id_candidates,
)

if TYPE_CHECKING:
    # UIMessageChunk is named in annotations only: storage keeps chunks as opaque JSONB, and
    # streaming, which types them, is the layer above.
    from think._protocol import UIMessageChunk
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


class TurnNotFound(UserError):
    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id!r} does not exist in this conversation")
        self.turn_id = turn_id


class TurnStillActive(UserError):
    """Only an ended submission record can be deleted; cancel an active one first."""

    def __init__(self, turn_id: str, status: str) -> None:
        super().__init__(
            f"turn {turn_id!r} is {status}: only an ended turn can be deleted (cancel it first)"
        )
        self.turn_id = turn_id
        self.status = status


CONVERSATION_COLUMNS = """
    c.id AS conversation_id, c.tenant AS tenant,
    COALESCE(c.config, '{}') AS conversation_config, c.messages_revision
"""
"""What a turn record carries of its conversation (`c`)."""
TURN_COLUMNS = f"t.*, t.xmin::text AS version, {CONVERSATION_COLUMNS}"
TURN_FROM = "FROM turns t JOIN conversations c ON c.uid = t.conversation_uid"
TURN_SELECT = f"SELECT {TURN_COLUMNS} {TURN_FROM}"
"""A turn with what it needs of its conversation: the one query every turn read builds on."""
_BY_ID = TURN_SELECT + " WHERE t.id = %(id)s"
_BY_NAME = TURN_SELECT + " WHERE t.id = ANY(%(ids)s) AND c.tenant = %(tenant)s LIMIT 1"
"""The tenant's turn a submission id names (`turn_id_candidates`): a probe of the primary key
per candidate, and never another tenant's row, whatever its id."""
_BY_KEY = TURN_SELECT + " WHERE t.conversation_uid = %(c)s AND t.idempotency_key = %(key)s"
_LOCK = _BY_ID + " FOR UPDATE OF t"

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
whether its conversation had no active turn: `_ACTIVE_TURNS`' answer for a mode that needs
nothing else of the queue. Its snapshot is taken as it starts, under the conversation's lock
(an earlier statement took it), so it sees every turn `_ACTIVE_TURNS` would; the statement's
own insert it does not see."""

_ACTIVE_TURNS = """
    SELECT t.id, t.seq, t.status, t.request FROM turns t
    WHERE t.conversation_uid = %(c)s AND t.completed_at IS NULL
    ORDER BY t.seq
"""
"""The conversation's queue: its running turn (the first) and the turns waiting behind it."""

_HEAD = (
    TURN_SELECT
    + """
    WHERE t.conversation_uid = (SELECT conversation_uid FROM turns WHERE id = %(id)s)
      AND t.completed_at IS NULL ORDER BY t.seq LIMIT 1
"""
)

ANNOUNCE_CHANNEL = "think_turn_admitted"
"""Where an admission that started a turn announces it to the workers of its queue, as
`<task queue>\n<turn id>`, when the admitting process runs no worker of that queue (a
gateway): a worker starts the workflow itself and so runs its first workflow task at once
(Temporal's eager start), instead of waiting for the task to be dispatched."""

_LOCK_CONVERSATION = "SELECT active_leaf_id FROM conversations WHERE uid = %(c)s FOR UPDATE"

SUPERSEDING = frozenset({"latest", "interrupt", "rollback"})
CANCELLING = frozenset({"interrupt", "rollback"})
MERGING = frozenset({"merge", "debounce"})

_SKIP = """
    UPDATE turns SET status = 'skipped', completed_at = now(), error = %(reason)s,
                     answered_by = %(answered_by)s
    WHERE id = %(id)s AND status = 'pending'
    RETURNING id
"""


def _record(row: Any) -> TurnRecord:
    return TurnRecord.model_validate(row)


async def _by_id(conn: Conn, turn_id: str) -> TurnRecord | None:
    row = await fetch_one(conn, _BY_ID, {"id": turn_id})
    return _record(row) if row else None


async def _by_name(conn: Conn, tenant: str, submission_id: str) -> TurnRecord | None:
    ids = turn_id_candidates(tenant, submission_id)
    row = await fetch_one(conn, _BY_NAME, {"ids": ids, "tenant": tenant})
    return _record(row) if row else None


async def _by_key(conn: Conn, conversation_uid: str, key: str) -> TurnRecord | None:
    row = await fetch_one(conn, _BY_KEY, {"c": conversation_uid, "key": key})
    return _record(row) if row else None


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


async def record(
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
        acts_on_queue = request.concurrency == "drop" or request.concurrency in SUPERSEDING
        queue = await fetch_all(conn, _ACTIVE_TURNS, {"c": uid}) if acts_on_queue else []
        if request.concurrency == "drop" and queue:
            raise ConversationBusy(conversation_id, queue[0]["id"])
        await store._check_request(conn, uid, request, new_conversation=created)
        # A name the client chose is stored scoped to its tenant (`think.storage._turn_ids`).
        turn_id = tenant_turn_id(tenant, submission_id) if submission_id else new_id("turn")
        interrupt: str | None = None
        if request.concurrency in SUPERSEDING and queue:
            request, interrupt = await _supersede(conn, queue, request, by=turn_id)
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
            turn = _record(inserted)
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


async def _supersede(
    conn: Conn, queue: list[Any], request: TurnRequest, *, by: str
) -> tuple[TurnRequest, str | None]:
    """What a "latest", "interrupt" or "rollback" submission does to the queue it joins: the
    waiting submissions that have a mode are skipped; the running one (the queue's head) is to
    be cancelled by "interrupt" and "rollback", unless it is exempt. Returns the request (a
    "rollback" remembers which turn it branches from) and the turn to cancel."""
    mode = request.concurrency
    head, waiting = queue[0], queue[1:]
    inherited: str | None = None
    for row in waiting:
        queued = TurnRequest.model_validate(row["request"])
        if queued.concurrency is None or queued.regenerates is not None:
            continue  # exempt: never skipped
        reason = f"superseded by turn {public_turn_id(by)} (message_concurrency {mode!r})"
        if await _skip(conn, row["id"], reason):
            inherited = queued.rollback_of or inherited
    running = TurnRequest.model_validate(head["request"])
    interrupt = None
    if mode in CANCELLING and running.concurrency is not None and running.regenerates is None:
        interrupt = str(head["id"])
    if mode == "rollback":
        request = request.model_copy(update={"rollback_of": interrupt or inherited})
    return request, interrupt


async def queue_head(conn: Conn, turn_id: str) -> TurnRecord | None:
    """The running turn of `turn_id`'s conversation: its active turn accepted first (that turn
    itself while it runs; once it has ended, the one behind it; None: idle)."""
    row = await fetch_one(conn, _HEAD, {"id": turn_id})
    return _record(row) if row else None


async def lock_queue(conn: Conn, conversation_uid: str) -> str | None:
    """Take the conversation's row lock, which admission takes: whoever ends a turn holds it,
    so a submission admitted meanwhile either sees the turn ended (and starts itself) or is
    seen by the one who ended it (and is started by them). Returns the active leaf, as it is
    under the lock (the same round trip)."""
    row = await fetch_one(conn, _LOCK_CONVERSATION, {"c": conversation_uid})
    return None if row is None else row["active_leaf_id"]


# -- what message_concurrency does to queued submissions ------------------------------------


def skipped_chunks(reason: str, *, answered_by: str | None = None) -> list[UIMessageChunk]:
    """How a skipped submission's stream ends: like a queued turn that was cancelled, with
    `abort` and no `start` (an AI SDK client ends cleanly, with no empty assistant message),
    after a transient `data-skipped` part that says why, for clients that follow the turn that
    answers instead."""
    data: dict[str, Any] = {"reason": reason}
    if answered_by is not None:
        data["answered_by"] = answered_by
    return [
        {"type": "data-skipped", "data": data, "transient": True},
        {"type": "abort", "reason": f"skipped: {reason}"},
    ]


async def _skip(conn: Conn, turn_id: str, reason: str, answered_by: str | None = None) -> bool:
    row = await fetch_one(
        conn, _SKIP, {"id": turn_id, "reason": f"skipped: {reason}", "answered_by": answered_by}
    )
    if row is None:
        return False  # started, cancelled or skipped already: that outcome stands
    shown = public_turn_id_or_none(answered_by)  # the record keeps the id, clients the name
    await append(conn, turn_id, skipped_chunks(reason, answered_by=shown))
    return True


async def prepare_start(conn: Conn, head: TurnRecord) -> tuple[bool, TurnRecord]:
    """What the running turn's mode does as it starts, in the transaction that starts it (the
    caller holds its row lock and the conversation's): whether it runs, and its record as it
    then stands.

    - `rollback_of`: move the active leaf back to where that turn started, so the new turn
      branches from there and the abandoned exchange leaves the active path; only if the
      cancel stopped it (`aborted`): one that completed first stays on the path.
    - `continuation`: skipped when the last message is not the assistant's.
    - "merge", "debounce": the submissions of the same mode waiting right behind it are
      absorbed: their messages are appended after its own, and each ends `skipped` with
      `answered_by`. The run stops at the first that cannot join (another mode, another
      parent, a continuation).
    """
    request = head.request
    uid = head.conversation_uid
    if request.rollback_of is not None:
        start = await fetch_one(
            conn,
            "SELECT m.parent_id FROM messages m JOIN turns t ON t.id = m.turn_id "
            "WHERE m.conversation_uid = %(c)s AND m.turn_id = %(t)s "
            "AND t.status = 'aborted' ORDER BY m.position LIMIT 1",
            {"c": uid, "t": request.rollback_of},
        )
        if start is not None:
            await conn.execute(
                "UPDATE conversations SET active_leaf_id = %(leaf)s WHERE uid = %(c)s",
                {"leaf": start["parent_id"], "c": uid},
            )
    if request.continuation:
        last = await fetch_one(
            conn,
            "SELECT m.role FROM conversations c JOIN messages m "
            "ON m.conversation_uid = c.uid AND m.id = c.active_leaf_id WHERE c.uid = %(c)s",
            {"c": uid},
        )
        if last is None or last["role"] != "assistant":
            reason = "the last message is not the assistant's: nothing to continue"
            await _skip(conn, head.id, reason)
            return False, head
    if request.concurrency not in MERGING or request.regenerates is not None:
        return True, head
    messages = list(request.messages)
    queue = await fetch_all(conn, _ACTIVE_TURNS, {"c": uid})
    for row in queue:
        if row["id"] == head.id:
            continue
        other = await _by_id(conn, row["id"])
        if other is None or _mode(other) != request.concurrency or not _joins(head, other):
            break
        taken = {m.id for m in messages}
        messages += [
            m if m.id not in taken else m.model_copy(update={"id": new_id("msg")})
            for m in other.request.messages
        ]
        reason = (
            f"answered together with turn {public_turn_id(head.id)} "
            f"(message_concurrency {_mode(other)!r})"
        )
        await _skip(conn, other.id, reason, answered_by=head.id)
    if len(messages) == len(request.messages):
        return True, head
    # The head's request is what its turn appends as it starts.
    merged = request.model_copy(update={"messages": messages})
    await conn.execute(
        "UPDATE turns SET request = %(r)s WHERE id = %(id)s",
        {"r": Jsonb(merged.model_dump(mode="json", exclude_none=True)), "id": head.id},
    )
    return True, head.model_copy(update={"request": merged})


def starts_at_admission(request: TurnRequest) -> bool:
    """Whether a submission to an idle conversation starts in its admission's transaction:
    when its mode has nothing to do as it starts (`prepare_start`). A "debounce" turn waits
    for quiet first, a continuation may have nothing to continue, and a rollback moves the
    leaf back; "merge" has nobody to absorb in an idle conversation."""
    return (
        request.concurrency != "debounce"
        and not request.continuation
        and request.rollback_of is None
        and request.regenerates is None
    )


async def begin_turn(
    store: Store, conn: Conn, turn: TurnRecord, active_leaf: str | None
) -> tuple[TurnRecord, list[StoredMessage]]:
    """Append the turn's messages under `active_leaf` (or the parent its request names), mark
    it running and open its stream with `start`, in the caller's transaction, which holds the
    conversation's lock. Returns the turn as it now stands and the messages it stored.

    A turn that appends nothing (a regenerate) leaves the active path as it is until its
    answer is stored: the old answer stays on show while the new one streams."""
    parent = turn.request.parent_id or active_leaf
    stored = await store.insert_messages(
        conn,
        turn.conversation_uid,
        turn.request.messages,
        parent_id=parent,
        turn_id=turn.id,
        activate=True,
    )
    leaf = chain_leaf(stored, parent)
    message = {"id": turn.message_id, "role": "assistant", "parts": []}
    await append(
        conn,
        turn.id,
        [{"type": "start", "messageId": turn.message_id}],
        status="running",
        started_at=NOW,
        parent_id=leaf,
        message=message,
    )
    started = turn.model_copy(update={"status": "running", "parent_id": leaf, "message": message})
    return started, stored


async def quiet_left(conn: Conn, head: TurnRecord, seconds: float) -> float:
    """Seconds until the conversation has had no new submission for `seconds` (a "debounce"
    head waits for that before it starts); 0 when it is quiet already."""
    row = await fetch_one(
        conn,
        "SELECT GREATEST(0, EXTRACT(EPOCH FROM (max(created_at) - now())) + %(s)s) AS left "
        "FROM turns WHERE conversation_uid = %(c)s",
        {"c": head.conversation_uid, "s": seconds},
    )
    return float(row["left"]) if row and row["left"] is not None else 0.0


def _mode(turn: TurnRecord) -> str:
    return turn.request.concurrency or "queue"


def _joins(head: TurnRecord, other: TurnRecord) -> bool:
    mine, theirs = head.request, other.request
    return bool(
        other.status == "pending"
        and other.conversation_uid == head.conversation_uid
        and theirs.messages
        and not theirs.continuation
        and theirs.regenerates is None
        and theirs.parent_id in (None, mine.parent_id)
        and json.dumps(theirs.client_tools, sort_keys=True)
        == json.dumps(mine.client_tools, sort_keys=True)
    )


# -- deleting records -------------------------------------------------------------------------


async def delete_turn(store: Store, conversation: Conversation, turn_id: str) -> None:
    """Delete an ended turn's record and its stream; never its messages. `turn_id` as the
    client named it (`turn_id_candidates`)."""
    ids = turn_id_candidates(conversation.tenant, turn_id)
    async with store.db.transaction() as conn:
        row = await fetch_one(
            conn,
            "SELECT id, status FROM turns WHERE id = ANY(%(ids)s) AND conversation_uid = %(c)s "
            "FOR UPDATE",
            {"ids": ids, "c": conversation.uid},
        )
        if row is None:
            raise TurnNotFound(turn_id)
        if row["status"] not in TERMINAL_STATUSES:
            raise TurnStillActive(turn_id, row["status"])
        found = {"id": row["id"]}
        await conn.execute("DELETE FROM stream_chunks WHERE turn_id = %(id)s", found)
        await conn.execute("DELETE FROM turns WHERE id = %(id)s", found)


async def delete_turns(
    store: Store,
    conversation_uid: str,
    *,
    status: Sequence[str] = (),
    before: datetime | None = None,
) -> list[str]:
    """Delete the conversation's ended turns (of these statuses, submitted before `before`),
    with their streams; active turns are never touched. Returns the deleted ids."""
    active = sorted(set(status) & ACTIVE_STATUSES)
    if active:
        raise UserError(
            f"only ended turns can be deleted; status {active[0]!r} is not an ended status"
        )
    statuses = list(status or TERMINAL_STATUSES)
    async with store.db.transaction() as conn:
        rows = await fetch_all(
            conn,
            "DELETE FROM turns WHERE conversation_uid = %(c)s AND status = ANY(%(s)s) "
            "AND (%(before)s::timestamptz IS NULL OR created_at < %(before)s) RETURNING id",
            {"c": conversation_uid, "s": statuses, "before": before},
        )
        ids = [r["id"] for r in rows]
        if ids:
            await conn.execute(
                "DELETE FROM stream_chunks WHERE turn_id = ANY(%(ids)s)", {"ids": ids}
            )
    return ids


# -- adding messages without a turn, in place ---------------------------------------------------


async def upsert_messages(
    store: Store,
    conversation_uid: str,
    messages: Sequence[UIMessage],
    *,
    parent_id: str | None = None,
) -> list[str]:
    """`add_messages(mode="upsert")`: a message whose id is stored already gets the new role,
    parts and metadata in place (its place in the tree stays); the others are appended, as a
    chain, the way `add_messages` appends. Returns the ids updated in place."""
    ids = [m.id for m in messages]
    async with store.db.transaction() as conn:
        rows = await fetch_all(
            conn,
            "SELECT id FROM messages WHERE conversation_uid = %(c)s AND id = ANY(%(ids)s) "
            "FOR UPDATE",
            {"c": conversation_uid, "ids": ids},
        )
        stored = {r["id"] for r in rows}
        if stored:
            # Cached paths (think.storage._path_cache) holding these messages are stale now.
            await conn.execute(
                "UPDATE conversations SET messages_revision = messages_revision + 1 "
                "WHERE uid = %(c)s",
                {"c": conversation_uid},
            )
        for message in messages:
            if message.id not in stored:
                continue
            parts = message.parts
            await conn.execute(
                "UPDATE messages SET role = %(role)s, parts = %(parts)s, metadata = %(meta)s, "
                "text_content = %(text)s, byte_size = %(size)s "
                "WHERE conversation_uid = %(c)s AND id = %(id)s",
                {
                    "c": conversation_uid,
                    "id": message.id,
                    "role": message.role,
                    "parts": Jsonb(parts),
                    "meta": Jsonb(message.metadata) if message.metadata is not None else None,
                    "text": search_text(parts),
                    "size": len(json.dumps(parts)),
                },
            )
    fresh = [m for m in messages if m.id not in stored]
    if fresh:
        await store.add_messages(conversation_uid, fresh, parent_id=parent_id)
    return [m.id for m in messages if m.id in stored]


# -- where a turn's answer goes ---------------------------------------------------------------

_ADDED_SINCE = """
    WITH RECURSIVE since AS (SELECT started_at FROM turns WHERE id = %(turn)s),
    up AS (
        SELECT id, parent_id FROM messages
        WHERE conversation_uid = %(c)s AND id = %(leaf)s AND turn_id IS NULL
          AND created_at >= (SELECT started_at FROM since)
      UNION ALL
        SELECT m.id, m.parent_id FROM messages m JOIN up ON m.conversation_uid = %(c)s
            AND m.id = up.parent_id
        WHERE up.parent_id IS DISTINCT FROM %(parent)s AND m.turn_id IS NULL
          AND m.created_at >= (SELECT started_at FROM since)
    )
    SELECT 1 AS found FROM up WHERE parent_id IS NOT DISTINCT FROM %(parent)s LIMIT 1
"""


async def answer_parent(conn: Conn, turn: TurnRecord, queue: QueueLock) -> str | None:
    """Where a turn's answer goes: under its user message (`turn.parent_id`), or, when
    messages were added without a turn beneath that message while the turn ran (by one of its
    tools or hooks, with `add_messages`), under the last of them, so that they stay on the
    active path before the answer instead of becoming a branch beside it. Messages that were
    there before the turn started (imported history under a regenerated answer) never count.

    Under the conversation's row lock (`queue`), which `add_messages` takes too: no message can
    be added between this look and the caller's commit.
    """
    leaf = queue.active_leaf_id
    if leaf is None or leaf == turn.parent_id:
        return turn.parent_id
    found = await fetch_one(
        conn,
        _ADDED_SINCE,
        {"c": turn.conversation_uid, "leaf": leaf, "parent": turn.parent_id, "turn": turn.id},
    )
    return str(leaf) if found else turn.parent_id
