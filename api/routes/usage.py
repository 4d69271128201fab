"""What turns spent: a conversation's usage, and the caller's tenant's by agent, model or day
(`think.server.conversation_usage`, `tenant_usage`, summed from the turns' own records)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from api.deps import ExistingConversation, Res, Tenant
from api.errors import Problem
from think.server import UsageGroup, UsageGrouping, UsageSum, conversation_usage, tenant_usage

router = APIRouter(tags=["usage"])

DEFAULT_WINDOW = timedelta(days=30)


class UsageGroupsOut(BaseModel):
    groups: list[UsageGroup]


@router.get("/v1/agents/{agent}/conversations/{cid}/usage", response_model=UsageSum)
async def get_conversation_usage(res: Res, conv: ExistingConversation) -> UsageSum:
    """The conversation's turns summed: tokens by kind, cost in US dollars (null when a
    model's price is unknown), the models that answered, and how many turns."""
    return await conversation_usage(res.store.db, conv.uid)


@router.get("/v1/usage", response_model=UsageGroupsOut)
async def get_usage(
    res: Res,
    tenant: Tenant,
    since: Annotated[
        str | None,
        Query(
            description="From this instant (RFC 3339); default: 30 days before `until`",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
    until: Annotated[
        str | None,
        Query(
            description="Before this instant (RFC 3339); default: now",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
    group_by: Annotated[
        UsageGrouping, Query(description="agent, model, or day (UTC, YYYY-MM-DD)")
    ] = "day",
) -> UsageGroupsOut:
    """The caller's tenant's usage of the turns created in `[since, until)`, in groups."""
    end = _instant("until", until) if until is not None else datetime.now(UTC)
    start = _instant("since", since) if since is not None else _window_before(end)
    if end <= start:  # a window with no time in it holds no turns
        return UsageGroupsOut(groups=[])
    groups = await tenant_usage(res.store.db, tenant, since=start, until=end, group_by=group_by)
    return UsageGroupsOut(groups=groups)


def _window_before(end: datetime) -> datetime:
    """`DEFAULT_WINDOW` before `end`, or the earliest instant there is, for an `until` in the
    first days of year 1 (an RFC 3339 time all the same)."""
    try:
        return end - DEFAULT_WINDOW
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def _instant(field: str, value: str) -> datetime:
    """An RFC 3339 time (a number of seconds is not one, whatever pydantic's lax mode would
    make of it); without a zone, UTC's."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or len(value) < 10:
        message = f"{value!r} is not an RFC 3339 time such as 2026-12-01T00:00:00Z"
        raise Problem(422, f"{field}: {message}", errors=[{"field": field, "message": message}])
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
