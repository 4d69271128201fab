"""The action ledger: claiming an effect's key, settling it, parking it for a decision, and
the reads of the inbox and the audit trail (migration 0019 says what the table holds).

Every transition is one statement guarded by what it expects (a status, and for a run the
`claims` count it claimed with), so two workers, two decisions or a worker and the sweeper
can race freely: the guard picks one, the others see the row as it ended.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeAlias

from psycopg.types.json import Jsonb
from pydantic import BaseModel

from think._messages import new_id
from think.storage._db import Conn, Database, fetch_all, fetch_one
from think.storage._records import TurnRecord
from think.storage._turn_queries import TURN_SELECT, turn_record

ActionStatus: TypeAlias = Literal["pending", "settled", "failed", "parked", "rejected", "expired"]
LIVE_STATUSES = ("pending", "parked", "settled")
"""The statuses that hold a key (the partial unique index `action_ledger_live_key`)."""


class ActionRow(BaseModel):
    """One run of an action, as the ledger holds it."""

    id: str
    tenant: str
    agent: str
    key: str
    action: str
    status: ActionStatus
    input: dict[str, Any]
    input_hash: str
    conversation_id: str
    turn_id: str | None
    tool_call_id: str | None
    requested_by: str | None
    claims: int
    attempt: int
    lease_until: datetime | None
    approval_id: str | None
    approval_kind: str | None
    decision: dict[str, Any] | None
    decided_at: datetime | None
    approved_by: str | None
    approved_at: datetime | None
    result: Any
    error: str | None
    attachments: list[dict[str, Any]] | None
    replays: int
    requested_at: datetime
    ran_at: datetime | None
    settled_at: datetime | None
    expires_at: datetime | None
    now: datetime | None = None
    """The database's clock when the row was read (leases are compared with it)."""

    @property
    def lease_expired(self) -> bool:
        return self.lease_until is None or (self.now is not None and self.lease_until < self.now)


class ActionClaim(BaseModel):
    """What a caller asks the ledger for: the effect (`key`), who asks, and with what."""

    tenant: str
    agent: str
    key: str
    action: str
    input: dict[str, Any]
    input_hash: str
    conversation_id: str
    turn_id: str | None
    tool_call_id: str | None
    requested_by: str | None
    attempt: int = 1
    approval_id: str | None = None
    """An inline approval the call ran after (a parked one is `claim_action`'s `parked`)."""
    approved_by: str | None = None
    decision: dict[str, Any] | None = None


_RETURNING = "RETURNING *, now() AS now"
_LIVE = "status IN ('pending', 'parked', 'settled')"


def _row(row: Any) -> ActionRow | None:
    return None if row is None else ActionRow.model_validate(dict(row))


async def claim_action(
    db: Database,
    claim: ActionClaim,
    *,
    lease_seconds: float,
    parked: tuple[str, float] | None = None,
) -> tuple[ActionRow, bool]:
    """Take the key for a run (`pending` under a lease), or for a decision (`parked`:
    `(approval_id, seconds it may wait)`). Returns the row that holds the key and whether this
    call took it; a row held by another call comes back locked by nobody, as it stands."""
    fields = claim.model_dump()
    fields.update(
        id=new_id("act"),
        lease=lease_seconds,
        status="parked" if parked else "pending",
        approval_id=parked[0] if parked else claim.approval_id,
        kind="durable_pause" if parked else ("inline" if claim.approval_id else None),
        wait=parked[1] if parked else None,
        decision=_jsonb(claim.decision) if claim.decision is not None else None,
    )
    for _ in range(3):
        async with db.transaction() as conn:
            inserted = await fetch_one(
                conn,
                "INSERT INTO action_ledger (id, tenant, agent, key, action, status, input, "
                "input_hash, conversation_id, turn_id, tool_call_id, requested_by, claims, "
                "attempt, lease_until, approval_id, approval_kind, decision, decided_at, "
                "approved_by, approved_at, ran_at, expires_at) VALUES "
                "(%(id)s, %(tenant)s, %(agent)s, %(key)s, %(action)s, %(status)s::text, %(input)s, "
                "%(input_hash)s, %(conversation_id)s, %(turn_id)s, %(tool_call_id)s, "
                "%(requested_by)s, CASE WHEN %(status)s::text = 'pending' THEN 1 ELSE 0 END, "
                "%(attempt)s, CASE WHEN %(status)s::text = 'pending' "
                "THEN now() + make_interval(secs => %(lease)s) END, %(approval_id)s, %(kind)s, "
                "%(decision)s::jsonb, CASE WHEN %(decision)s::jsonb IS NOT NULL THEN now() END, "
                "%(approved_by)s::text, "
                "CASE WHEN %(approved_by)s::text IS NOT NULL THEN now() END, "
                "CASE WHEN %(status)s::text = 'pending' THEN now() END, "
                "now() + make_interval(secs => %(wait)s::float8)) "
                f"ON CONFLICT (tenant, agent, key) WHERE {_LIVE} DO NOTHING {_RETURNING}",
                {**fields, "input": _jsonb(claim.input)},
            )
            if inserted is not None:
                return ActionRow.model_validate(dict(inserted)), True
            held = await fetch_one(
                conn,
                "SELECT *, now() AS now FROM action_ledger WHERE tenant = %(tenant)s "
                f"AND agent = %(agent)s AND key = %(key)s AND {_LIVE}",
                fields,
            )
            if held is not None:
                return ActionRow.model_validate(dict(held)), False
        # Released between the insert and the read (a run failed meanwhile): try again.
    raise RuntimeError(f"action key {claim.key!r} changed hands three times in a row")


async def reclaim_action(
    db: Database, row: ActionRow, claim: ActionClaim, *, lease_seconds: float
) -> ActionRow | None:
    """Take over a `pending` run whose runner is gone (its lease ran out, or it was this very
    call's earlier attempt). None when someone else settled or took it first."""
    async with db.connection() as conn:
        return _row(
            await fetch_one(
                conn,
                "UPDATE action_ledger SET claims = claims + 1, attempt = %(attempt)s, "
                "lease_until = now() + make_interval(secs => %(lease)s), ran_at = now(), "
                "turn_id = %(turn)s, tool_call_id = %(call)s "
                "WHERE id = %(id)s AND status = 'pending' AND claims = %(claims)s "
                f"{_RETURNING}",
                {
                    "id": row.id,
                    "claims": row.claims,
                    "attempt": claim.attempt,
                    "lease": lease_seconds,
                    "turn": claim.turn_id,
                    "call": claim.tool_call_id,
                },
            )
        )


async def renew_lease(db: Database, action_id: str, claims: int, lease_seconds: float) -> bool:
    """Extend a running action's lease; False once it is no longer this run's."""
    async with db.connection() as conn:
        cursor = await conn.execute(
            "UPDATE action_ledger SET lease_until = now() + make_interval(secs => %(lease)s) "
            "WHERE id = %(id)s AND status = 'pending' AND claims = %(claims)s",
            {"id": action_id, "claims": claims, "lease": lease_seconds},
        )
        return cursor.rowcount == 1


async def settle_action(
    db: Database,
    action_id: str,
    claims: int,
    *,
    result: Any,
    attachments: list[dict[str, Any]],
    remember_seconds: float | None,
) -> ActionRow | None:
    """Record the run's result: the key is now replayed. None when the run had lost its
    claim (another runner took over after its lease ran out): that runner's outcome stands."""
    async with db.connection() as conn:
        return _row(
            await fetch_one(
                conn,
                "UPDATE action_ledger SET status = 'settled', result = %(result)s, "
                "attachments = %(attachments)s, lease_until = NULL, settled_at = now(), "
                "expires_at = now() + make_interval(secs => %(remember)s::float8) "
                "WHERE id = %(id)s AND status = 'pending' AND claims = %(claims)s "
                f"{_RETURNING}",
                {
                    "id": action_id,
                    "claims": claims,
                    "result": _jsonb(result),
                    "attachments": _jsonb(attachments),
                    "remember": remember_seconds,
                },
            )
        )


async def fail_action(db: Database, action_id: str, claims: int, error: str) -> None:
    """Record a failed run; the key is released (a later call runs it afresh)."""
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE action_ledger SET status = 'failed', error = %(error)s, lease_until = NULL, "
            "settled_at = now() WHERE id = %(id)s AND status = 'pending' AND claims = %(claims)s",
            {"id": action_id, "claims": claims, "error": error},
        )


async def count_replay(db: Database, action_id: str) -> None:
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE action_ledger SET replays = replays + 1 WHERE id = %(id)s", {"id": action_id}
        )


async def get_action(db: Database, action_id: str) -> ActionRow | None:
    async with db.connection() as conn:
        return _row(
            await fetch_one(
                conn,
                "SELECT *, now() AS now FROM action_ledger WHERE id = %(id)s",
                {"id": action_id},
            )
        )


# -- parked actions ---------------------------------------------------------------------------


async def parked_action(db: Database, tenant: str, approval_id: str) -> ActionRow | None:
    """The action parked for approval `approval_id` of `tenant`, whatever became of it."""
    async with db.connection() as conn:
        return _row(
            await fetch_one(
                conn,
                "SELECT *, now() AS now FROM action_ledger WHERE approval_id = %(a)s "
                "AND tenant = %(t)s",
                {"a": approval_id, "t": tenant},
            )
        )


async def record_decision(
    conn: Conn, action_id: str, decision: dict[str, Any], approved: bool, by: str | None
) -> ActionRow | None:
    """Record the first decision on a parked action: the row when this one is it, None when
    another decision came first (or it is no longer parked)."""
    return _row(
        await fetch_one(
            conn,
            "UPDATE action_ledger SET decision = %(d)s, decided_at = now(), "
            "approved_by = CASE WHEN %(ok)s THEN %(by)s END, "
            "approved_at = CASE WHEN %(ok)s THEN now() END "
            "WHERE id = %(id)s AND status = 'parked' AND decision IS NULL "
            f"{_RETURNING}",
            {"id": action_id, "d": _jsonb(decision), "ok": approved, "by": by},
        )
    )


async def start_parked(
    db: Database, action_id: str, attempt: int, lease_seconds: float
) -> ActionRow | None:
    """An approved parked action begins its run (`pending` under a lease)."""
    async with db.connection() as conn:
        return _row(
            await fetch_one(
                conn,
                "UPDATE action_ledger SET status = 'pending', claims = claims + 1, "
                "attempt = %(attempt)s, ran_at = now(), "
                "lease_until = now() + make_interval(secs => %(lease)s) "
                "WHERE id = %(id)s AND status = 'parked' AND decision IS NOT NULL "
                f"{_RETURNING}",
                {"id": action_id, "attempt": attempt, "lease": lease_seconds},
            )
        )


async def close_parked(
    db: Database, action_id: str, status: Literal["rejected", "expired"], error: str
) -> ActionRow | None:
    """A parked action that will not run: denied, refused on authorization, or expired
    (`expired` only while no decision was recorded). Releases the key."""
    undecided = "AND decision IS NULL" if status == "expired" else ""
    async with db.connection() as conn:
        return _row(
            await fetch_one(
                conn,
                "UPDATE action_ledger SET status = %(s)s::text, error = %(e)s, settled_at = now() "
                f"WHERE id = %(id)s AND status = 'parked' {undecided} {_RETURNING}",
                {"id": action_id, "s": status, "e": error},
            )
        )


async def decided_parked(db: Database, older_than_seconds: float) -> list[ActionRow]:
    """Parked actions decided a while ago and still parked: the decision's Signal to their
    workflow may have been lost (Temporal unreachable when it came)."""
    async with db.connection() as conn:
        rows = await fetch_all(
            conn,
            "SELECT *, now() AS now FROM action_ledger WHERE status = 'parked' "
            "AND decision IS NOT NULL "
            "AND decided_at < now() - make_interval(secs => %(s)s) LIMIT 200",
            {"s": older_than_seconds},
        )
    return [ActionRow.model_validate(dict(r)) for r in rows]


async def sweep_ledger(db: Database) -> tuple[int, int]:
    """Expire parked actions past their wait (their workflow does it on time; this is the
    backstop) and forget settled keys past their `remember` period. Returns both counts."""
    async with db.connection() as conn:
        expired = await conn.execute(
            "UPDATE action_ledger SET status = 'expired', settled_at = now(), "
            "error = 'no decision came before the approval expired' "
            "WHERE status = 'parked' AND decision IS NULL AND expires_at < now()"
        )
        forgotten = await conn.execute(
            "DELETE FROM action_ledger WHERE status = 'settled' AND expires_at < now()"
        )
        return expired.rowcount, forgotten.rowcount


# -- reads: the inbox and the audit trail ------------------------------------------------------


async def pending_parked(db: Database, tenant: str, agent: str | None) -> list[ActionRow]:
    """The tenant's parked actions that wait for a decision (oldest first)."""
    async with db.connection() as conn:
        rows = await fetch_all(
            conn,
            "SELECT *, now() AS now FROM action_ledger WHERE status = 'parked' "
            "AND decision IS NULL AND tenant = %(t)s "
            "AND (%(a)s::text IS NULL OR agent = %(a)s) ORDER BY requested_at LIMIT 1000",
            {"t": tenant, "a": agent},
        )
    return [ActionRow.model_validate(dict(r)) for r in rows]


async def action_history(
    db: Database,
    tenant: str,
    agent: str,
    *,
    key: str | None = None,
    conversation_id: str | None = None,
    limit: int = 100,
) -> list[ActionRow]:
    """The agent's action runs in the tenant, newest first: the audit trail."""
    async with db.connection() as conn:
        rows = await fetch_all(
            conn,
            "SELECT *, now() AS now FROM action_ledger WHERE tenant = %(t)s AND agent = %(a)s "
            "AND (%(k)s::text IS NULL OR key = %(k)s) "
            "AND (%(c)s::text IS NULL OR conversation_id = %(c)s) "
            "ORDER BY requested_at DESC, id DESC LIMIT %(n)s",
            {"t": tenant, "a": agent, "k": key, "c": conversation_id, "n": limit},
        )
    return [ActionRow.model_validate(dict(r)) for r in rows]


def _jsonb(value: Any) -> Jsonb:
    return Jsonb(value)


async def turns_awaiting_approval(
    db: Database, tenant: str, agent: str | None, limit: int = 1000
) -> list[TurnRecord]:
    """The tenant's turns paused for a person's approval (oldest first): the inline half of
    the approvals inbox."""
    async with db.connection() as conn:
        rows = await fetch_all(
            conn,
            TURN_SELECT + " WHERE t.status = 'awaiting_approval' AND c.tenant = %(t)s "
            "AND (%(a)s::text IS NULL OR t.agent = %(a)s) ORDER BY t.created_at LIMIT %(n)s",
            {"t": tenant, "a": agent, "n": limit},
        )
    return [turn_record(row) for row in rows]
