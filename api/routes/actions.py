"""Actions seen from outside their turns: the approvals inbox (what waits for a person, across
conversations) and the audit trail (who ran which action, with what, approved by whom).

Both are tenant-scoped like every `/v1` route; the inbox shows a key only what it may decide
(`Think.approvers`). Decisions go through the turn's approval route, for inline approvals and
parked actions alike.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from api._openapi import described
from api.deps import AgentClass, Caller, Res
from api.errors import Problem
from think.server import Action, ActionRow, Think, action_ledger, public_turn_id, turn_view

router = APIRouter(tags=["actions"])
log = logging.getLogger("think.api.actions")


class ApprovalOut(BaseModel):
    """Something that waits for a person's decision: a tool call or action paused in its turn
    (`kind` "inline"), or an action parked outside it ("durable_pause")."""

    approval_id: str
    agent: str
    conversation_id: str
    turn_id: str | None
    action: str | None
    """The action's name, when the call is an `@action`'s."""
    tool_name: str
    key: str | None
    """The action's domain key (its stable descriptor); null for a plain tool."""
    input: Any
    requested_at: datetime
    """When it was asked for (an inline approval: when its turn started)."""
    requested_by: str | None = None
    """The name of the API key whose turn asked for it, if one did."""
    kind: Literal["inline", "durable_pause"]
    expires_at: datetime | None = None
    """A parked action's deadline: undecided then, it expires."""


class ApprovalsOut(BaseModel):
    approvals: list[ApprovalOut]


class ActionRunOut(BaseModel):
    """One run of an action, as its ledger records it."""

    id: str
    key: str
    action: str
    status: Literal["pending", "settled", "failed", "parked", "rejected", "expired"]
    input_hash: str
    input: Any
    result: Any
    error: str | None
    approval_id: str | None
    approved_by: str | None
    approved_at: datetime | None
    decided_at: datetime | None
    requested_by: str | None
    requested_at: datetime
    ran_at: datetime | None
    settled_at: datetime | None
    conversation_id: str
    turn_id: str | None
    replays: int
    """How many later calls were answered from this run's record instead of running it."""
    reclaimed: bool
    """Whether a run of it was taken over after its worker died (the effect may have been
    made by the earlier run: the idempotency key went to the outside system both times)."""


class ActionsOut(BaseModel):
    actions: list[ActionRunOut]


def _may_decide(agent: type[Think], key_name: str | None) -> bool:
    return agent.approvers is None or key_name in agent.approvers


def _actions_of(agent: type[Think]) -> dict[str, Action]:
    """The agent's actions by name (the agent's own code: a failure lists none)."""
    try:
        return {a.name: a for a in agent().get_actions() if isinstance(a, Action)}
    except Exception:
        log.warning("the actions of agent %s could not be listed", agent.name, exc_info=True)
        return {}


def _key(action: Action | None, arguments: Any) -> str | None:
    if action is None or not isinstance(arguments, dict):
        return None
    try:
        return action.key_of(action.validate(arguments))
    except Exception:
        return None


@router.get(
    "/v1/approvals",
    response_model=ApprovalsOut,
    responses=described({404: "`agent` names no hosted agent"}),
)
async def list_approvals(
    res: Res,
    caller: Caller,
    status: Annotated[
        Literal["pending"], Query(description="Only `pending`: what waits for a decision")
    ] = "pending",
    agent: Annotated[str | None, Query(description="Only this agent's", max_length=200)] = None,
) -> ApprovalsOut:
    """What waits for a decision across the tenant's conversations, oldest first: tool calls
    and actions paused in their turn, and actions parked outside it. A key sees only the
    agents whose approvals it may decide (`Think.approvers`). Decide one through
    `POST /v1/agents/{agent}/conversations/{cid}/turns/{turn_id}/approvals/{approval_id}`."""
    if agent is not None and agent not in res.registry:
        raise Problem(404, f"there is no agent named {agent!r}")
    found: list[ApprovalOut] = []
    listed: dict[str, dict[str, Action]] = {}
    for turn in await action_ledger.turns_awaiting_approval(res.store.db, caller.tenant, agent):
        cls = res.registry.get(turn.agent) if turn.agent in res.registry else None
        if cls is None or not _may_decide(cls, caller.key_name):
            continue
        actions = listed.get(cls.name)
        if actions is None:  # each agent's own code, once per request
            actions = listed[cls.name] = _actions_of(cls)
        for pending in turn_view(turn).pending_approvals:
            declared = actions.get(pending.tool_name)
            found.append(
                ApprovalOut(
                    approval_id=pending.approval_id,
                    agent=turn.agent,
                    conversation_id=turn.conversation_id,
                    turn_id=public_turn_id(turn.id),
                    action=declared.name if declared else None,
                    tool_name=pending.tool_name,
                    key=_key(declared, pending.input),
                    input=pending.input,
                    requested_at=turn.started_at or turn.created_at,
                    requested_by=turn.request.submitted_by,
                    kind="inline",
                )
            )
    for row in await action_ledger.pending_parked(res.store.db, caller.tenant, agent):
        owner = res.registry.get(row.agent) if row.agent in res.registry else None
        if owner is None or not _may_decide(owner, caller.key_name):
            continue
        found.append(_parked(row))
    found.sort(key=lambda a: a.requested_at)
    return ApprovalsOut(approvals=found)


def _parked(row: ActionRow) -> ApprovalOut:
    assert row.approval_id is not None
    return ApprovalOut(
        approval_id=row.approval_id,
        agent=row.agent,
        conversation_id=row.conversation_id,
        turn_id=public_turn_id(row.turn_id) if row.turn_id else None,
        action=row.action,
        tool_name=row.action,
        key=row.key,
        input=row.input,
        requested_at=row.requested_at,
        requested_by=row.requested_by,
        kind="durable_pause",
        expires_at=row.expires_at,
    )


@router.get("/v1/agents/{agent}/actions", response_model=ActionsOut)
async def list_actions(
    res: Res,
    caller: Caller,
    agent: AgentClass,
    key: Annotated[str | None, Query(description="Only runs of this key", max_length=500)] = None,
    conversation_id: Annotated[
        str | None, Query(description="Only runs asked for in this conversation", max_length=200)
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=1000, description="At most this many, newest first")
    ] = 100,
) -> ActionsOut:
    """The audit trail of the agent's actions in the caller's tenant, newest first: each run
    with its key, input (and its hash), result or error, who asked, who approved it and when,
    when it ran, and how often its record answered a later call instead."""
    rows = await action_ledger.action_history(
        res.store.db,
        caller.tenant,
        agent.name,
        key=key,
        conversation_id=conversation_id,
        limit=limit,
    )
    return ActionsOut(actions=[_run(row) for row in rows])


def _run(row: ActionRow) -> ActionRunOut:
    return ActionRunOut(
        id=row.id,
        key=row.key,
        action=row.action,
        status=row.status,
        input_hash=row.input_hash,
        input=row.input,
        result=row.result,
        error=row.error,
        approval_id=row.approval_id,
        approved_by=row.approved_by,
        approved_at=row.approved_at,
        decided_at=row.decided_at,
        requested_by=row.requested_by,
        requested_at=row.requested_at,
        ran_at=row.ran_at,
        settled_at=row.settled_at,
        conversation_id=row.conversation_id,
        turn_id=public_turn_id(row.turn_id) if row.turn_id else None,
        replays=row.replays,
        reclaimed=row.claims > 1,
    )
