"""The conversation's queue in Postgres: its head, its lock, and what `message_concurrency`
does to the submissions in it: skipped by a newer one ("latest", "interrupt", "rollback"),
merged into one turn ("merge", "debounce"), a continuation with nothing to continue. Written
by admission (`think.storage._admission`) and by the activities the turn workflow runs, in the
transactions that hold the conversation's row lock. Also where a turn's answer goes in the
tree (`answer_parent`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from think._messages import new_id
from think.storage._db import Conn, fetch_all, fetch_one
from think.storage._records import (
    QueueLock,
    StoredMessage,
    TurnRecord,
    TurnRequest,
    chain_leaf,
)
from think.storage._steering import add_steering, steering_of
from think.storage._turn_columns import NOW
from think.storage._turn_ids import public_turn_id, public_turn_id_or_none
from think.storage._turn_queries import TURN_SELECT, turn_by_id, turn_record
from think.storage.stream_log import append

if TYPE_CHECKING:
    # UIMessageChunk is named in annotations only: storage keeps chunks as opaque JSONB, and
    # streaming, which types them, is the layer above.
    from think._protocol import JSONValue, UIMessageChunk
    from think.storage._store import Store

ACTIVE_TURNS = """
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


async def supersede(
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


async def steer_head(
    conn: Conn, conversation_uid: str, queue: list[Any], request: TurnRequest, *, turn_id: str
) -> bool:
    """What a "steer" submission does to a busy conversation: its messages join the running
    turn (the queue's head) as steering messages, delivered at its next step boundary, and the
    submission itself ends `skipped`, answered by that turn. Under the conversation's lock,
    which the transaction that ends the head takes too, so the head has not ended. False (the
    submission queues as usual) when there is nothing to steer: an idle conversation, or
    messages that are not all the user's."""
    messages = request.messages
    if not queue or not messages or any(m.role != "user" for m in messages):
        return False
    head = str(queue[0]["id"])
    if not await add_steering(conn, conversation_uid, [head], steering_of(messages)):
        return False
    reason = f"steered into turn {public_turn_id(head)} (message_concurrency 'steer')"
    return await _skip(conn, turn_id, reason, answered_by=head)


async def queue_head(conn: Conn, turn_id: str) -> TurnRecord | None:
    """The running turn of `turn_id`'s conversation: its active turn accepted first (that turn
    itself while it runs; once it has ended, the one behind it; None: idle)."""
    row = await fetch_one(conn, _HEAD, {"id": turn_id})
    return turn_record(row) if row else None


async def lock_queue(conn: Conn, conversation_uid: str) -> str | None:
    """Take the conversation's row lock, which admission takes: whoever ends a turn holds it,
    so a submission admitted meanwhile either sees the turn ended (and starts itself) or is
    seen by the one who ended it (and is started by them). Returns the active leaf, as it is
    under the lock (the same round trip)."""
    row = await fetch_one(conn, _LOCK_CONVERSATION, {"c": conversation_uid})
    return None if row is None else row["active_leaf_id"]


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


async def skip_waiting(conn: Conn, conversation_uid: str, reason: str) -> list[str]:
    """Skip the conversation's submissions still waiting in its queue (`pending`), each with
    `reason` and its stream ended as a skipped submission's is (`skipped_chunks`): what
    clearing or deleting the conversation does to its queue, so that none of them starts
    afterwards. The caller holds the conversation's row lock (`lock_queue`). Returns the ids
    it skipped, oldest first."""
    rows = await fetch_all(
        conn,
        "SELECT id FROM turns WHERE conversation_uid = %(c)s AND status = 'pending' ORDER BY seq",
        {"c": conversation_uid},
    )
    return [str(row["id"]) for row in rows if await _skip(conn, row["id"], reason)]


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
    queue = await fetch_all(conn, ACTIVE_TURNS, {"c": uid})
    for row in queue:
        if row["id"] == head.id:
            continue
        other = await turn_by_id(conn, row["id"])
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
    # Which turn wrote the answer, and when it was accepted: on the `start` chunk, so a client
    # has them before the first word, and (as the AI SDK merges it there) on the message.
    metadata: dict[str, JSONValue] = {
        "turnId": public_turn_id(turn.id),
        "agent": turn.agent,
        "createdAt": int(turn.created_at.timestamp() * 1000),
    }
    message = {"id": turn.message_id, "role": "assistant", "parts": [], "metadata": metadata}
    start: UIMessageChunk = {
        "type": "start",
        "messageId": turn.message_id,
        "messageMetadata": metadata,
    }
    await append(
        conn,
        turn.id,
        [start],
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
