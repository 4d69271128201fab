"""How a turn is read, locked and claimed: the one query every turn read builds on
(`TURN_SELECT`, a turn with what it needs of its conversation), the statements `Store` and
admission build on it, and a row of it as a `TurnRecord`."""

from __future__ import annotations

from typing import Any

from think.storage._db import Conn, fetch_one
from think.storage._records import FIRST_STEP, STARTER, TurnRecord

CONVERSATION_COLUMNS = """
    c.id AS conversation_id, c.tenant AS tenant,
    COALESCE(c.config, '{}') AS conversation_config, c.messages_revision
"""
"""What a turn record carries of its conversation (`c`)."""
TURN_COLUMNS = f"t.*, t.xmin::text AS version, {CONVERSATION_COLUMNS}"
TURN_FROM = "FROM turns t JOIN conversations c ON c.uid = t.conversation_uid"
TURN_SELECT = f"SELECT {TURN_COLUMNS} {TURN_FROM}"
"""A turn with what it needs of its conversation: the one query every turn read builds on."""
TURN_BY_ID = TURN_SELECT + " WHERE t.id = %(id)s"

TURN_NAMED = TURN_SELECT + " WHERE t.id = ANY(%(ids)s) AND t.conversation_uid = %(c)s LIMIT 1"
"""A turn of one conversation by an id a client gave (`turn_id_candidates`)."""
LOCK_TURN = TURN_BY_ID + " FOR UPDATE OF t"
HAS_MCP_SERVERS = """
    EXISTS (SELECT 1 FROM conversation_mcp_servers s WHERE s.conversation_uid = c.uid)
        AS conversation_has_mcp_servers
"""
"""Whether the conversation has MCP servers of its own (the one read that needs to know: the
first step's): an index probe."""
QUEUE_FACTS = f"""
    EXISTS (SELECT 1 FROM turns o WHERE o.conversation_uid = t.conversation_uid
            AND o.completed_at IS NULL AND o.id <> t.id) AS followers,
    {HAS_MCP_SERVERS}
"""
"""Whether the turn has followers, and `HAS_MCP_SERVERS`. Read after the conversation's lock
is held: a statement's snapshot is taken as it starts, so every admission that committed
before the lock was granted is seen, and every later one waits for it."""
LOCK_QUEUED_TURN = f"""
    SELECT {TURN_COLUMNS}, {QUEUE_FACTS}
    {TURN_FROM} WHERE t.id = %(id)s FOR UPDATE OF t
"""
"""`LOCK_TURN` with the `QUEUE_FACTS`."""
CLAIM = """
    UPDATE turns t
    SET fences = jsonb_set(t.fences, ARRAY[%(key)s],
        to_jsonb(COALESCE((t.fences ->> %(key)s)::int, 0) + 1))
    FROM conversations c
    WHERE t.id = %(id)s AND c.uid = t.conversation_uid
    RETURNING {columns}, (t.fences ->> %(key)s)::int AS claimed_attempt {facts}
"""
CLAIM_START = f"""
    UPDATE turns t SET fences = jsonb_set(t.fences, ARRAY['{STARTER}'], '1')
    FROM conversations c, (SELECT set_config('synchronous_commit', 'off', true)) AS quick
    WHERE t.id = %(id)s AND c.uid = t.conversation_uid AND t.status = 'running'
      AND t.fences ->> '{STARTER}' IS NULL AND t.fences ->> '{FIRST_STEP}' IS NULL
    RETURNING {TURN_COLUMNS}
"""
"""`Store.claim_start`. It commits without waiting for its WAL flush: a mark lost in a
crash only lets a second worker send a start Temporal refuses."""
CLAIM_STEP = CLAIM.format(columns=TURN_COLUMNS, facts="")
CLAIM_QUEUED_TURN = CLAIM.format(columns=TURN_COLUMNS, facts=f", {QUEUE_FACTS}")
"""`CLAIM_STEP` with the `QUEUE_FACTS`: the `UPDATE` takes the row lock `LOCK_QUEUED_TURN`'s
`FOR UPDATE` would, after the conversation's."""
READ_STARTED_TURN = f"""
    WITH RECURSIVE mine AS (
        SELECT m.conversation_uid, m.id, m.parent_id, m.role, m.parts, m.metadata,
               m.byte_size, 0 AS depth
        FROM turns t0 JOIN messages m
          ON m.conversation_uid = t0.conversation_uid AND m.id = t0.parent_id
         AND m.turn_id = t0.id
        WHERE t0.id = %(id)s
      UNION ALL
        SELECT m.conversation_uid, m.id, m.parent_id, m.role, m.parts, m.metadata,
               m.byte_size, p.depth + 1
        FROM messages m JOIN mine p
          ON m.conversation_uid = p.conversation_uid AND m.id = p.parent_id
         AND m.turn_id = %(id)s
    )
    SELECT {TURN_COLUMNS}, {HAS_MCP_SERVERS},
           (SELECT jsonb_agg(jsonb_build_object(
               'id', id, 'parent_id', parent_id, 'role', role, 'parts', parts,
               'metadata', metadata, 'byte_size', byte_size) ORDER BY depth DESC)
            FROM mine) AS stored
    {TURN_FROM} WHERE t.id = %(id)s AND t.status <> 'pending'
"""
"""A first step's turn, if it has started (at its admission), with the messages its start
stored (the chain up from the turn's parent that it owns): a read, with no lock on the
conversation (only starting the turn needs one) and no claim (`Fence.first`)."""
LOCK_TURN_QUEUE = (
    "SELECT active_leaf_id FROM conversations "
    "WHERE uid = (SELECT conversation_uid FROM turns WHERE id = %(id)s) FOR UPDATE"
)


def turn_record(row: Any) -> TurnRecord:
    return TurnRecord.model_validate(row)


async def turn_by_id(conn: Conn, turn_id: str) -> TurnRecord | None:
    row = await fetch_one(conn, TURN_BY_ID, {"id": turn_id})
    return turn_record(row) if row else None
