"""A turn's recovery bookkeeping: what it stashed (`Think.stash`, migration 0018) and how its
recoveries went, for `on_chat_recovery`.

Both are touched only when something asks: `stash` by the agent's own code, the rest when a
turn recovers (a worker crash, a model failure, a stall). A turn that does neither reads and
writes nothing here. The counters live in the turn's `fences` (integers by name, read with
every step's read of the turn anyway): `recovery:progress` is how far the turn had got at its
last recovery (`progress_of`), `recovery:stuck` how many recoveries in a row found it no
further, and `recovery:incident` / `recovery:attempt` name the incident and count its
recoveries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from think.storage._db import Conn, fetch_one, storable_json

_STASH = """
    UPDATE turns SET recovery_data = %(value)s::jsonb
    WHERE id = %(turn)s AND completed_at IS NULL
    RETURNING 1
"""

_READ = "SELECT recovery_data FROM turns WHERE id = %(turn)s"

_NOTE = """
    UPDATE turns SET fences = fences || jsonb_build_object(
        'recovery:progress', %(progress)s::int,
        'recovery:stuck', CASE WHEN (fences ->> 'recovery:progress')::int >= %(progress)s::int
                               THEN COALESCE((fences ->> 'recovery:stuck')::int, 0) + 1
                               ELSE 0 END,
        'recovery:incident', CASE WHEN (fences ->> 'recovery:progress')::int >= %(progress)s::int
                                  THEN COALESCE((fences ->> 'recovery:incident')::int, 1)
                                  ELSE COALESCE((fences ->> 'recovery:incident')::int, 0) + 1 END,
        'recovery:attempt', CASE WHEN (fences ->> 'recovery:progress')::int >= %(progress)s::int
                                 THEN COALESCE((fences ->> 'recovery:attempt')::int, 0) + 1
                                 ELSE 1 END,
        %(mark)s::text, %(attempt)s::int)
    WHERE id = %(turn)s
    RETURNING (fences ->> 'recovery:stuck')::int AS stuck,
              (fences ->> 'recovery:incident')::int AS incident,
              (fences ->> 'recovery:attempt')::int AS attempt,
              recovery_data AS data
"""


class RecoveryNote(BaseModel):
    """A recovery, as `note_recovery` recorded it."""

    incident: int
    """Which of the turn's incidents this recovery belongs to (1, 2, ...): a new one begins
    when a recovery finds the turn further on than the one before it did."""
    attempt: int
    """This incident's recoveries so far, this one included."""
    stuck: int
    """Recoveries in a row, ending with this one, that found the turn no further on than the
    one before (0: this one found progress)."""
    data: Any = None
    """What the turn stashed (`Think.stash`), as of now."""


async def stash_recovery_data(conn: Conn, turn_id: str, value: Any) -> bool:
    """Keep `value` (JSON) as the turn's recovery data, replacing what it held; False when
    the turn has ended (or does not exist), and nothing is written."""
    row = await fetch_one(conn, _STASH, {"value": storable_json(value), "turn": turn_id})
    return row is not None


async def recovery_data(conn: Conn, turn_id: str) -> Any:
    """What the turn stashed last (None if nothing)."""
    row = await fetch_one(conn, _READ, {"turn": turn_id})
    return None if row is None else row["recovery_data"]


async def note_recovery(
    conn: Conn, turn_id: str, progress: int, *, mark: str, attempt: int
) -> RecoveryNote:
    """Record one recovery of the turn, which has got as far as `progress` (`progress_of`),
    and that attempt `attempt` of the step fenced `mark` ended in it; read back the incident,
    its attempt, how long the turn has been stuck, and what it stashed: one statement."""
    row = await fetch_one(
        conn,
        _NOTE,
        {"progress": progress, "turn": turn_id, "mark": mark, "attempt": attempt},
    )
    if row is None:
        return RecoveryNote(incident=1, attempt=1, stuck=0)
    return RecoveryNote(
        incident=int(row["incident"]),
        attempt=int(row["attempt"]),
        stuck=int(row["stuck"]),
        data=row["data"],
    )


def progress_of(parts: Sequence[Any]) -> int:
    """How far an answer has got, as one number that grows with it: the characters of its
    text and reasoning, and its parts, settled tool calls counting twice. Two recoveries
    that find the same number found the turn where it was (nothing new was streamed or
    settled between them)."""
    total = 0
    for part in parts:
        if not isinstance(part, dict):
            continue
        total += 1
        text = part.get("text")
        if isinstance(text, str):
            total += len(text)
        if part.get("state") in ("output-available", "output-error", "output-denied"):
            total += 1
    return total
