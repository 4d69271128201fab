"""The stream log: UI message chunks appended to Postgres, announced with NOTIFY.

Writers are activities; readers are gateway processes. Each write is fenced: a writer names its
fence (the activity id) and its attempt, and a write from an attempt older than the newest one
that claimed the fence is refused, so an abandoned attempt can never interleave its chunks with
the attempt that replaced it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from psycopg.pq import TransactionStatus
from pydantic import BaseModel, PrivateAttr

from think.exceptions import ThinkError
from think.storage._db import Conn, fetch_all, fetch_one, storable_json
from think.storage._turn_columns import assignments

if TYPE_CHECKING:
    # Named in annotations only: the log keeps chunks as opaque JSONB; what it reads back is
    # what was appended, chunks of the protocol `think._protocol` types.
    from think._protocol import UIMessageChunk

CHANNEL = "think_chunks"
CANCEL_CHANNEL = "think_cancel"
"""A turn's cancel was asked for (payload: the turn id): what a worker streaming it listens to."""
ANNOUNCED_BYTES = 7800
"""A batch whose JSON is at most this long is announced with its chunks (NOTIFY's payload
holds under 8,000 bytes): `<turn>\n<first seq>\n<written, Unix s>\n<chunks as JSON>`. A
longer one is announced by the bare turn id, and readers read it from the table."""
STATUS_SUFFIX = "/status"
"""On `CHANNEL`, a payload of the turn id and this suffix, then `/` and the new status, says
the turn's status changed (sent by a trigger, migrations 0009 and 0012; before 0012 the status
was not named); a bare turn id says it has new chunks."""
TERMINAL_CHUNKS = frozenset({"finish", "error", "abort"})


FirstClaim = Literal["claimed", "taken", "ended"]
"""What `claim_first` found: the fence was free and is now this attempt's; another attempt had
claimed it; the turn had ended."""


class Fence(BaseModel):
    """Who is writing: one activity (`key`) at one attempt (counted by `claim`)."""

    key: str
    attempt: int
    _claiming: asyncio.Task[FirstClaim] | None = PrivateAttr(default=None)

    @classmethod
    def first(cls, key: str, claim: Awaitable[FirstClaim]) -> Fence:
        """Attempt 1, with its claim (`claim_first`) on its way rather than landed: a model
        step claims beside its model request instead of before it, which takes the claim's
        statement and commit off the way to the first words. Nothing is written with the
        fence before the claim has landed (`held`, which `append` awaits), so the fence still
        guarantees what `claim` does: one writer per attempt number. `claim` may be a task
        sent earlier, by the worker that started the workflow (`EarlySteps.started`)."""
        fence = cls(key=key, attempt=1)
        task = asyncio.ensure_future(claim)
        # A claim nobody waits for (the step ended before writing) must not log its error.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        fence._claiming = task
        return fence

    @property
    def pending(self) -> bool:
        """Its claim is still on its way."""
        return self._claiming is not None and not self._claiming.done()

    async def held(self) -> None:
        """Wait for a claim on its way. Raises `StaleAttempt` if another attempt claimed the
        fence first, `TurnEnded` if the turn had ended (a cancel won the race): either way this
        attempt has written nothing.

        Await it before a transaction that locks the turn's row: the claim updates that row,
        and would wait for the transaction that waits for it (`append` refuses to)."""
        if self._claiming is None:
            return
        found = await asyncio.shield(self._claiming)
        if found == "taken":
            raise StaleAttempt(f"another attempt claimed {self.key!r} first")
        if found == "ended":
            raise TurnEnded(f"the turn ended before attempt 1 of {self.key!r} could begin")


class StaleAttempt(ThinkError):
    """A newer attempt of the same activity has taken over; this one must stop writing."""


class TurnEnded(ThinkError):
    """`append(..., while_open=True)` found the turn ended (a cancel won the race)."""


class TurnChanged(ThinkError):
    """`append(..., version=)` found the turn's row changed since that version was read."""


_BUMP_FENCE = """
    UPDATE turns
    SET fences = jsonb_set(fences, ARRAY[%(key)s],
        to_jsonb(COALESCE((fences ->> %(key)s)::int, 0) + 1))
    WHERE id = %(turn)s
    RETURNING (fences ->> %(key)s)::int AS count
"""
"""Add one to the counter `key` of the turn's `fences` (absent: 0) and return it: a fence's
attempt (`claim`) or a step's failures (`count_failure`)."""

_APPEND = """
    WITH reserved AS (
        UPDATE turns SET next_seq = next_seq + %(n)s{columns}
        WHERE id = %(turn)s
          AND (%(key)s::text IS NULL OR (fences ->> %(key)s)::int = %(attempt)s)
          AND (NOT %(open)s OR completed_at IS NULL)
          AND (%(version)s::text IS NULL OR xmin::text = %(version)s)
        RETURNING next_seq - %(n)s AS start
    ), inserted AS (
        INSERT INTO stream_chunks (turn_id, seq, attempt, chunk)
        SELECT %(turn)s, reserved.start + x.ord - 1, %(attempt)s, x.value
        FROM reserved, jsonb_array_elements(%(chunks)s::jsonb) WITH ORDINALITY AS x(value, ord)
    )
    SELECT reserved.start,
           CASE WHEN %(n)s > 0 THEN pg_notify(%(channel)s, CASE WHEN %(announce)s
               THEN concat_ws(chr(10), %(turn)s, reserved.start,
                              extract(epoch FROM now())::float8, %(chunks)s::text)
               ELSE %(turn)s END) END
    FROM reserved
"""
"""Reserve sequence numbers (fenced), set the turn's columns, insert the chunks and announce
them: one round trip. `{columns}` is filled from `_turn_columns.assignments`."""
_APPEND_PLAIN = _APPEND.format(columns="")

_ENDED = "SELECT 1 FROM turns WHERE id = %(turn)s AND completed_at IS NOT NULL"

_READ = """
    SELECT seq, chunk FROM stream_chunks WHERE turn_id = %(turn)s AND seq > %(after)s
    ORDER BY seq LIMIT %(limit)s
"""


_CLAIM_FIRST = """
    WITH claimed AS (
        UPDATE turns SET fences = jsonb_set(fences, ARRAY[%(key)s], '1')
        WHERE id = %(turn)s AND fences ->> %(key)s IS NULL AND completed_at IS NULL
        RETURNING 1
    )
    SELECT CASE WHEN EXISTS (SELECT 1 FROM claimed) THEN 'claimed'
                WHEN t.completed_at IS NULL THEN 'taken' ELSE 'ended' END AS found
    FROM turns t WHERE t.id = %(turn)s
"""


async def claim_first(conn: Conn, turn_id: str, key: str) -> FirstClaim:
    """Claim attempt 1 of the fence `key` if no attempt has claimed it and the turn is open
    (`Fence.first`): one statement, which says what it found."""
    row = await fetch_one(conn, _CLAIM_FIRST, {"key": key, "turn": turn_id})
    if row is None:
        return "ended"  # no such turn: nothing may be written for it
    found: FirstClaim = row["found"]
    return found


async def claim(conn: Conn, turn_id: str, key: str) -> Fence:
    """Take the fence `key` for a new attempt: every earlier attempt's writes are refused
    from now on. Attempts are counted here, not by Temporal: a step run again after its
    workflow task timed out (its worker died) is attempt 1 to Temporal every time.

    Raises `StaleAttempt` when the turn does not exist.
    """
    row = await fetch_one(conn, _BUMP_FENCE, {"key": key, "turn": turn_id})
    if row is None:
        raise StaleAttempt(f"turn {turn_id!r} does not exist")
    return Fence(key=key, attempt=int(row["count"]))


async def append(
    conn: Conn,
    turn_id: str,
    chunks: Sequence[UIMessageChunk],
    fence: Fence | None = None,
    *,
    while_open: bool = False,
    version: str | None = None,
    **columns: Any,
) -> int:
    """Append chunks in the caller's transaction and NOTIFY; returns the last sequence number.
    Any mapping will do: typed chunks (`think.streaming.UIMessageChunk`) and plain dicts alike.
    `columns` are turn columns set in the same statement (`Store.update_turn`'s), only if the
    fence holds. `while_open`: only if the turn has not ended either (else `TurnEnded`), which
    lets a writer that would lock the turn only to check that skip the lock and the
    transaction around it. `version`: only if the row is still as read then
    (`TurnRecord.version`), else `TurnChanged`: an optimistic read-modify-write.

    The `UPDATE` that reserves sequence numbers also takes the turn's row lock, so concurrent
    writers of one turn (parallel tool calls) get disjoint, gap-free ranges.
    """
    if not chunks and not columns:
        return -1
    if fence is not None:
        if fence.pending and conn.info.transaction_status != TransactionStatus.IDLE:
            # Waiting here could wait forever: this transaction may hold the row the claim
            # updates. The caller must await `held()` before opening it.
            raise RuntimeError(f"fence {fence.key!r}: its claim has not landed (Fence.held)")
        await fence.held()
    fragments, params = assignments(columns)
    query = (
        _APPEND.format(columns="".join(f", {f}" for f in fragments)) if columns else _APPEND_PLAIN
    )
    attempt = fence.attempt if fence else 0
    encoded = storable_json(
        list(chunks)
    )  # what Postgres takes, NUL and all (think._messages.storable)
    row = await fetch_one(
        conn,
        query,
        {
            **params,
            "n": len(chunks),
            "turn": turn_id,
            "key": fence.key if fence else None,
            "attempt": attempt,
            "chunks": encoded,
            "announce": len(encoded) <= ANNOUNCED_BYTES,  # ASCII: the rest is escaped
            "channel": CHANNEL,
            "open": while_open,
            "version": version,
        },
    )
    if row is None:
        if version is not None:
            raise TurnChanged(f"turn {turn_id!r} changed since version {version}")
        if while_open and await fetch_one(conn, _ENDED, {"turn": turn_id}) is not None:
            raise TurnEnded(f"turn {turn_id!r} has ended")
        raise StaleAttempt(f"attempt {attempt} of turn {turn_id!r} is stale")
    return int(row["start"]) + len(chunks) - 1


async def read(
    conn: Conn, turn_id: str, after: int, limit: int = 1000
) -> list[tuple[int, UIMessageChunk]]:
    rows = await fetch_all(conn, _READ, {"turn": turn_id, "after": after, "limit": limit})
    return [(int(r["seq"]), r["chunk"]) for r in rows]


_TAIL = "SELECT COALESCE(max(seq), -1) AS tail FROM stream_chunks WHERE turn_id = %(turn)s"


async def tail(conn: Conn, turn_id: str) -> int:
    """The sequence number of the turn's last chunk so far (-1 before its first): where the
    AI SDK's workflow transport counts "the last N chunks" from (`startIndex=-N`)."""
    row = await fetch_one(conn, _TAIL, {"turn": turn_id})
    return -1 if row is None else int(row["tail"])


_READ_TIMED = """
    SELECT seq, chunk, extract(epoch FROM created_at)::float8 AS written
    FROM stream_chunks WHERE turn_id = %(turn)s AND seq > %(after)s
    ORDER BY seq LIMIT %(limit)s
"""


async def read_timed(
    conn: Conn, turn_id: str, after: int, limit: int = 1000
) -> list[tuple[int, UIMessageChunk, float]]:
    """`read`, with each chunk's write time (Unix seconds, Postgres's clock: the start of the
    transaction that appended it), for the stream-lag metric."""
    rows = await fetch_all(conn, _READ_TIMED, {"turn": turn_id, "after": after, "limit": limit})
    return [(int(r["seq"]), r["chunk"], float(r["written"])) for r in rows]


_LAST_STEP_BOUNDARY = """
    SELECT chunk ->> 'type' AS type FROM stream_chunks
    WHERE turn_id = %(turn)s AND chunk ->> 'type' IN ('start-step', 'finish-step')
    ORDER BY seq DESC LIMIT 1
"""


async def step_is_open(conn: Conn, turn_id: str) -> bool:
    """Whether the stream's last step was started and never finished (an attempt died in it)."""
    row = await fetch_one(conn, _LAST_STEP_BOUNDARY, {"turn": turn_id})
    return row is not None and row["type"] == "start-step"


_ABANDONED = """
    SELECT chunk FROM stream_chunks
    WHERE turn_id = %(turn)s AND seq > (
        SELECT COALESCE(max(seq), -1) FROM stream_chunks
        WHERE turn_id = %(turn)s AND chunk ->> 'type' IN ('start-step', 'reset-step'))
    ORDER BY seq
"""


async def abandoned_chunks(conn: Conn, turn_id: str) -> list[UIMessageChunk]:
    """What clients hold of the open step beyond its start: the chunks after the stream's
    last `start-step` or `reset-step` (an attempt that died mid-step streamed them; a client
    drops what came before a `reset-step`). Read only when a step recovers from a crash."""
    rows = await fetch_all(conn, _ABANDONED, {"turn": turn_id})
    return [r["chunk"] for r in rows]


_MARK_FAILED = """
    UPDATE turns SET fences = jsonb_set(fences, ARRAY[%(mark)s], to_jsonb(%(attempt)s::int))
    WHERE id = %(turn)s AND (fences ->> %(key)s)::int = %(attempt)s
"""


async def mark_attempt_failed(conn: Conn, turn_id: str, fence: Fence) -> None:
    """Record that the fenced attempt ended in a failure it raised (`<key>:failed-at`), unless
    a newer attempt holds the fence: its retry is then no crash's recovery."""
    await conn.execute(
        _MARK_FAILED,
        {
            "mark": f"{fence.key}:failed-at",
            "turn": turn_id,
            "key": fence.key,
            "attempt": fence.attempt,
        },
    )


async def count_failure(conn: Conn, turn_id: str, fence: Fence) -> int:
    """Record one more model failure of the fenced step; returns how many it has had."""
    row = await fetch_one(conn, _BUMP_FENCE, {"key": f"{fence.key}:failures", "turn": turn_id})
    return int(row["count"]) if row else 1


_SET_CHECKPOINT = """
    UPDATE turns SET checkpoints = CASE WHEN %(value)s::jsonb IS NULL
        THEN checkpoints - %(key)s::text
        ELSE jsonb_set(checkpoints, ARRAY[%(key)s], %(value)s::jsonb) END
    WHERE id = %(turn)s AND (fences ->> %(key)s)::int = %(attempt)s
    RETURNING 1
"""


async def set_checkpoint(
    conn: Conn, turn_id: str, fence: Fence, resume: dict[str, Any] | None
) -> None:
    """Record where the fenced step's answer can be picked up again (a model's `Checkpoint`),
    or forget it (None): kept in the turn's `checkpoints` by fence, read back by the attempt
    that replaces this one (`TurnRecord.checkpoints`). Raises `StaleAttempt` when a newer
    attempt holds the fence."""
    value = None if resume is None else storable_json(resume)
    params = {
        "value": value,
        "turn": turn_id,
        "key": fence.key,
        "attempt": fence.attempt,
    }
    if await fetch_one(conn, _SET_CHECKPOINT, params) is None:
        raise StaleAttempt(f"attempt {fence.attempt} of {fence.key!r} is stale")
