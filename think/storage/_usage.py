"""What turns spent, as their records keep it, and its sums: a conversation's, and a tenant's
by agent, model or day.

Each turn keeps its model steps in `turns.usage -> 'steps'` (`TurnUsage`), so the
sums are read from the same record the turn's own view shows: nothing is written twice on the
turn's path, and a bill and a turn can never disagree. Model calls beside a turn's steps (a
compaction's summary) are kept in `model_calls`, one row each, and every sum counts them too.
A step whose cost is null (unknown price) makes its group's cost null. A tenant's window is
read through the conversations it owns (`conversations_name_key` leads with the tenant) and
the turns' and calls' `(conversation_uid, created_at)` indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, NamedTuple

from psycopg import sql
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field

from think.storage._db import Conn, Database, fetch_all, fetch_one

TOKEN_KINDS = ("input", "output", "cached_input", "cache_write", "reasoning")
"""The kinds of token counted, as `<kind>_tokens` fields and the metrics' `kind` label."""


class UsageTotals(BaseModel):
    """Tokens and cost summed over model steps. `input_tokens` counts every input token, the
    cached (`cached_input_tokens`) and cache-written (`cache_write_tokens`) ones included;
    `output_tokens` counts the reasoning ones (`reasoning_tokens`). `cost` is in US dollars,
    null when a step's price is unknown; `models` are the models that answered (a turn's in
    the order they first did, a sum's sorted)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = 0.0
    models: list[str] = Field(default_factory=list)


class StepUsage(BaseModel):
    """One model step as its turn records it."""

    model: str
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None
    """US dollars; null when unknown (a step recorded before costs were, too)."""


class TurnUsage(UsageTotals):
    """A turn's usage: its totals, and each of its model steps."""

    steps: list[StepUsage] = Field(default_factory=list)

    @classmethod
    def of_steps(cls, steps: Iterable[StepUsage]) -> TurnUsage:
        steps = list(steps)
        return cls(**totals(steps).model_dump(), steps=steps)

    @classmethod
    def from_record(cls, recorded: Mapping[str, Any]) -> TurnUsage:
        """From a turn's `usage` column, as any version wrote it: the totals are summed again
        from the steps."""
        return cls.of_steps(StepUsage.model_validate(s) for s in recorded.get("steps") or ())

    def record(self) -> dict[str, Any]:
        """The column's JSON."""
        return self.model_dump(mode="json")


def totals(steps: Iterable[StepUsage]) -> UsageTotals:
    """The sum of `steps`; cost summed exactly (in decimal, not binary, fractions)."""
    found = UsageTotals()
    cost: Decimal | None = Decimal(0)
    for step in steps:
        for kind in TOKEN_KINDS:
            field = f"{kind}_tokens"
            setattr(found, field, getattr(found, field) + getattr(step, field))
        if step.model not in found.models:
            found.models.append(step.model)
        cost = None if cost is None or step.cost is None else cost + Decimal(str(step.cost))
    found.cost = None if cost is None else float(cost)
    return found


UsageGrouping = Literal["agent", "model", "day"]

_SUMS = sql.SQL(", ").join(
    [
        *(
            sql.SQL("coalesce(sum((s.step ->> {kind})::bigint), 0) AS {name}").format(
                kind=sql.Literal(f"{kind}_tokens"), name=sql.Identifier(f"{kind}_tokens")
            )
            for kind in TOKEN_KINDS
        ),
        # Unknown when any step's cost is (null, or absent in a step recorded before costs).
        sql.SQL(
            "CASE WHEN bool_or(s.step IS NOT NULL AND jsonb_typeof(s.step -> 'cost') IS DISTINCT"
            " FROM 'number') THEN NULL ELSE coalesce(sum((s.step ->> 'cost')::numeric), 0) END"
            " AS cost"
        ),
        sql.SQL(
            "coalesce(array_agg(DISTINCT s.step ->> 'model') FILTER (WHERE s.step IS NOT NULL),"
            " '{}') AS models"
        ),
        sql.SQL("count(DISTINCT s.turn_id) AS turns"),
    ]
)
"""Over `spent` rows `s` (`_spent`): one per model step or side call, and one per turn that
reached no model (its `step` null), so that it still counts as a turn."""

_STEPS = sql.SQL(
    "LEFT JOIN LATERAL jsonb_array_elements("
    "CASE WHEN jsonb_typeof(t.usage -> 'steps') = 'array' THEN t.usage -> 'steps'"
    " ELSE '[]'::jsonb END) AS s(step) ON true"
)


def _spent(turns: sql.Composable, calls: sql.Composable) -> sql.Composed:
    """`spent (agent, created_at, turn_id, step)`: the steps of the turns `turns` selects (from
    `conversations c JOIN turns t`), and the side calls `calls` selects (from `conversations c
    JOIN model_calls m`), which count no turn of their own, but for the steps of a turn whose
    record the retention sweep deleted (purpose `turn`, `delete_turns(keep_usage=True)`): they
    count their turn still."""
    return sql.SQL(
        "WITH spent AS ("
        "SELECT t.agent, t.created_at, t.id AS turn_id, s.step"
        " FROM conversations c JOIN turns t ON t.conversation_uid = c.uid {steps} WHERE {turns}"
        " UNION ALL "
        "SELECT c.agent, m.created_at, CASE WHEN m.purpose = 'turn' THEN m.turn_id END,"
        " m.usage"
        " FROM conversations c JOIN model_calls m ON m.conversation_uid = c.uid WHERE {calls})"
    ).format(steps=_STEPS, turns=turns, calls=calls)


_CONVERSATION = sql.SQL("{spent} SELECT {sums} FROM spent s").format(
    spent=_spent(sql.SQL("t.conversation_uid = %(c)s"), sql.SQL("m.conversation_uid = %(c)s")),
    sums=_SUMS,
)

_GROUP_KEYS: dict[UsageGrouping, sql.Composable] = {
    "agent": sql.SQL("s.agent"),
    "model": sql.SQL("s.step ->> 'model'"),
    "day": sql.SQL("to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"),
}

_IN_WINDOW = sql.SQL(
    "c.tenant = %(tenant)s AND {t}.created_at >= %(since)s AND {t}.created_at < %(until)s"
)


class UsageSum(UsageTotals):
    """Totals over some turns, and how many turns they are."""

    turns: int = 0


class UsageGroup(UsageSum):
    """One group of a tenant's usage: an agent's, a model's or a UTC day's (`YYYY-MM-DD`)."""

    key: str


def _usage(row: DictRow) -> dict[str, Any]:
    cost = row["cost"]
    return {
        **{f"{kind}_tokens": int(row[f"{kind}_tokens"]) for kind in TOKEN_KINDS},
        "cost": None if cost is None else float(Decimal(cost)),
        "models": sorted(m for m in row["models"] if m is not None),
        "turns": int(row["turns"]),
    }


async def conversation_usage(db: Database, conversation_uid: str) -> UsageSum:
    """The usage of every turn of one conversation and of its side calls (compactions); its
    sub-agents' conversations are their own."""
    async with db.connection() as conn:
        row = await fetch_one(conn, _CONVERSATION, {"c": conversation_uid})
    assert row is not None  # an aggregate always answers one row
    return UsageSum(**_usage(row))


async def tenant_usage(
    db: Database,
    tenant: str,
    *,
    since: datetime,
    until: datetime,
    group_by: UsageGrouping,
) -> list[UsageGroup]:
    """The tenant's usage of turns and side calls made in `[since, until)`, by `group_by`,
    largest key first for days (the newest), in key order otherwise. Only groups with a model
    step show when grouping by model; a turn that never reached the model counts in the
    others."""
    key = _GROUP_KEYS[group_by]
    only_steps = sql.SQL("WHERE s.step IS NOT NULL") if group_by == "model" else sql.SQL("")
    order = sql.SQL("key DESC") if group_by == "day" else sql.SQL("key")
    query = sql.SQL(
        "{spent} SELECT {key} AS key, {sums} FROM spent s {only_steps} GROUP BY 1 ORDER BY {order}"
    ).format(
        spent=_spent(
            _IN_WINDOW.format(t=sql.Identifier("t")), _IN_WINDOW.format(t=sql.Identifier("m"))
        ),
        key=key,
        sums=_SUMS,
        only_steps=only_steps,
        order=order,
    )
    async with db.connection() as conn:
        rows = await fetch_all(conn, query, {"tenant": tenant, "since": since, "until": until})
    return [UsageGroup(key=str(row["key"]), **_usage(row)) for row in rows]


class TenantSpend(NamedTuple):
    """What a tenant's turns spent since a moment: input and output tokens, and the cost of
    the steps whose price is known (US dollars)."""

    tokens: int
    cost: float


_SPEND = sql.SQL(
    "{spent} SELECT coalesce(sum(coalesce((s.step ->> 'input_tokens')::bigint, 0)"
    " + coalesce((s.step ->> 'output_tokens')::bigint, 0)), 0) AS tokens,"
    " coalesce(sum((s.step ->> 'cost')::numeric)"
    " FILTER (WHERE jsonb_typeof(s.step -> 'cost') = 'number'), 0) AS cost FROM spent s"
).format(
    spent=_spent(
        sql.SQL("c.tenant = %(tenant)s AND t.created_at >= %(since)s"),
        sql.SQL("c.tenant = %(tenant)s AND m.created_at >= %(since)s"),
    )
)


async def tenant_spend(db: Database, tenant: str, *, since: datetime) -> TenantSpend:
    """The tokens and known cost of the tenant's turns and side calls since `since` (its daily
    budgets: `THINK_TENANT_DAILY_TOKENS`, `THINK_TENANT_DAILY_COST`)."""
    async with db.connection() as conn:
        row = await fetch_one(conn, _SPEND, {"tenant": tenant, "since": since})
    assert row is not None  # an aggregate always answers one row
    return TenantSpend(tokens=int(row["tokens"]), cost=float(Decimal(row["cost"])))


_RECORD_CALL = """
    INSERT INTO model_calls (conversation_uid, turn_id, purpose, usage)
    VALUES (%(c)s, %(turn)s, %(purpose)s, %(usage)s)
"""


async def record_model_calls(
    conn: Conn,
    conversation_uid: str,
    *,
    turn_id: str | None,
    purpose: str,
    calls: Sequence[StepUsage],
) -> None:
    """Keep what model calls beside a turn's steps spent (`purpose`: `compaction`), counted
    from then on in the conversation's and tenant's usage and in the daily budgets."""
    for call in calls:
        await conn.execute(
            _RECORD_CALL,
            {
                "c": conversation_uid,
                "turn": turn_id,
                "purpose": purpose,
                "usage": Jsonb(call.model_dump(mode="json")),
            },
        )
