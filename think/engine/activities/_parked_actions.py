"""The parked-action activity: settle an `@action(approval="durable_pause")` once decided.

The decision that stands is the ledger's first (`action_ledger.record_decision`): the gateway
records one before it signals, an operator's Update is recorded here. An approval is
authorized again (a permission revoked while the action waited refuses it), then the action
runs once through the same runner as a turn's call (a retry of this activity after a crash
reclaims the run with the same idempotency key). Whatever the outcome (ran, failed, denied,
refused, expired), the conversation is told with a notice the model reads on its next turn, or
with a follow-up turn (`@action(follow_up=True)`): both idempotent by the ledger row's id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from temporalio import activity

from think._messages import UIMessage
from think.agent import Think, bind_config
from think.engine.activities._actions import (
    LEASE_SECONDS,
    POLL_SECONDS,
    ActionFailure,
    ActionRunner,
    CallSite,
    authorize,
)
from think.engine.activities._resources import ActivityResources
from think.exceptions import AgentNotFoundError, ToolError
from think.storage import action_ledger, bounded_failures
from think.storage.action_ledger import ActionClaim, ActionRow
from think.tools import Action, ToolContext
from think.workflows.inputs import ParkedActionOutcome, ParkedActionRun, ToolDecision
from think.workflows.names import PARKED_ACTION_ACTIVITY

if TYPE_CHECKING:
    from think.turns import ThinkService

log = logging.getLogger("think.engine.activities")

NOTICE_RESULT_CHARS = 2_000
"""How much of a result a notice quotes (the audit trail keeps it whole)."""


class ParkedActions:
    """The parked-action activity; one per worker."""

    def __init__(self, res: ActivityResources, service: ThinkService) -> None:
        self.res = res
        self.service = service

    def activities(self) -> list[Any]:
        return [self.run_parked_action]

    @property
    def runner(self) -> ActionRunner:
        return ActionRunner(self.res.store, self.res.temporal, self.res.settings.task_queue)

    @activity.defn(name=PARKED_ACTION_ACTIVITY)
    async def run_parked_action(self, run: ParkedActionRun) -> ParkedActionOutcome:
        with bounded_failures(f"parked action {run.action_id}"):
            return await self._run(run)

    async def _run(self, run: ParkedActionRun) -> ParkedActionOutcome:
        db = self.res.store.db
        row = await action_ledger.get_action(db, run.action_id)
        if row is None:
            return ParkedActionOutcome(status="gone")
        if row.status == "parked" and run.decision is not None:
            async with db.transaction() as conn:
                await action_ledger.record_decision(
                    conn,
                    row.id,
                    run.decision.model_dump(mode="json"),
                    run.decision.approved,
                    _who(run.decision),
                )
            row = await self._reread(row)
        if row.status == "parked":
            row = await self._decide(row)
        elif row.status == "pending":
            row = await self._execute(row)  # an earlier attempt of this activity died running it
        if row.status in ("parked", "pending"):
            raise RuntimeError(f"parked action {row.id} is still {row.status}")
        await self._tell(row)
        return ParkedActionOutcome(status=row.status, error=row.error)

    async def _reread(self, row: ActionRow) -> ActionRow:
        found = await action_ledger.get_action(self.res.store.db, row.id)
        if found is None:
            raise RuntimeError(f"parked action {row.id} was deleted while it was decided")
        return found

    async def _decide(self, row: ActionRow) -> ActionRow:
        """A parked row: expire it (no decision), reject it (denied), or run it (approved)."""
        db = self.res.store.db
        if row.decision is None:
            await action_ledger.close_parked(
                db, row.id, "expired", "no decision came before the approval expired"
            )
            return await self._reread(row)
        decision = ToolDecision.model_validate(row.decision)
        if not decision.approved:
            reason = f"denied by {_who(decision)}" + (
                f": {decision.reason}" if decision.reason else ""
            )
            await action_ledger.close_parked(db, row.id, "rejected", reason)
            return await self._reread(row)
        found = await self._action(row)
        if isinstance(found, str):
            await action_ledger.close_parked(db, row.id, "rejected", found)
            return await self._reread(row)
        agent, action, site = found
        try:
            arguments = action.validate(row.input)
            await authorize(
                agent, action, site, row.key, arguments, "before_execute", _who(decision)
            )
        except (ActionFailure, ToolError) as exc:
            reason = exc.reason if isinstance(exc, ActionFailure) else str(exc)
            await action_ledger.close_parked(db, row.id, "rejected", reason)
            return await self._reread(row)
        started = await action_ledger.start_parked(
            db, row.id, activity.info().attempt, LEASE_SECONDS
        )
        if started is None:
            return await self._reread(row)
        return await self._run_action(agent, action, site, started, arguments)

    async def _execute(self, row: ActionRow) -> ActionRow:
        """A `pending` row this workflow's earlier attempt was running: reclaim it once its
        runner is gone (an earlier attempt, or its lease ran out), then run it again."""
        found = await self._action(row)
        if isinstance(found, str):
            await action_ledger.fail_action(self.res.store.db, row.id, row.claims, found)
            return await self._reread(row)
        agent, action, site = found
        claim = ActionClaim(
            **row.model_dump(include=set(ActionClaim.model_fields) - {"attempt"}),
            attempt=activity.info().attempt,
        )
        while row.status == "pending":
            if row.lease_expired or row.attempt < claim.attempt:
                taken = await action_ledger.reclaim_action(
                    self.res.store.db, row, claim, lease_seconds=LEASE_SECONDS
                )
                if taken is not None:
                    arguments = action.validate(row.input)
                    return await self._run_action(agent, action, site, taken, arguments)
            await asyncio.sleep(POLL_SECONDS)
            activity.heartbeat()
            row = await self._reread(row)
        return row

    async def _run_action(
        self,
        agent: Think,
        action: Action,
        site: CallSite,
        row: ActionRow,
        arguments: dict[str, Any],
    ) -> ActionRow:
        context = ToolContext(
            agent=row.agent,
            conversation_id=row.conversation_id,
            turn_id=row.turn_id or "",
            tool_call_id=row.tool_call_id or "",
            tool_name=row.action,
            attempt=activity.info().attempt,
            config=site.config,
        )
        decision = ToolDecision.model_validate(row.decision) if row.decision else None
        with contextlib.suppress(ActionFailure):  # recorded as failed; the notice says so
            await self.runner.execute(
                action,
                context,
                arguments,
                row,
                approved_by=_who(decision) if decision else None,
            )
        return await self._reread(row)

    async def _action(self, row: ActionRow) -> tuple[Think, Action, CallSite] | str:
        """The agent (bound to its conversation's configuration), the action and where it
        was asked; or why it can no longer run."""
        try:
            cls = self.service.registry.get(row.agent)
        except AgentNotFoundError:
            return f"agent {row.agent!r} is not hosted here any more"
        agent = cls()
        conversation = self.service.conversation(cls, row.conversation_id, tenant=row.tenant)
        config = await conversation.get_config()
        bind_config(agent, config)
        try:
            declared = agent.tools_by_name().get(row.action)
        except Exception as exc:
            return f"the agent's tools could not be listed ({type(exc).__name__}: {exc})"
        if not isinstance(declared, Action):
            return f"action {row.action!r} is no longer declared by agent {row.agent!r}"
        return agent, declared, CallSite.of_row(row, config)

    async def _tell(self, row: ActionRow) -> None:
        """The conversation learns the outcome: a notice (or a follow-up turn), once."""
        exists = await self.res.store.get_conversation(
            tenant=row.tenant, agent=row.agent, conversation_id=row.conversation_id
        )
        if exists is None:
            log.info("action %s ended %s; its conversation is gone", row.id, row.status)
            return
        try:
            cls = self.service.registry.get(row.agent)
        except AgentNotFoundError:
            return
        conversation = self.service.conversation(cls, row.conversation_id, tenant=row.tenant)
        notice = UIMessage(
            id=f"notice_{row.id}",
            role="user",
            parts=[{"type": "text", "text": notice_text(row)}],
            metadata={"think": {"notice": "action", "action_id": row.id, "status": row.status}},
        )
        follow_up = False
        try:
            declared = cls().tools_by_name().get(row.action)
            follow_up = isinstance(declared, Action) and declared.follow_up
        except Exception:
            log.warning("the tools of agent %s could not be listed", row.agent, exc_info=True)
        if follow_up:
            await conversation.submit_messages(
                [notice], idempotency_key=f"action-outcome:{row.id}", concurrency="queue"
            )
        else:
            await conversation.add_messages([notice])


def notice_text(row: ActionRow) -> str:
    """What the model reads of a parked action's outcome."""
    head = f"[action notice] The action {row.action} (key {row.key!r}, approval {row.approval_id})"
    if row.status == "settled":
        result = json.dumps(row.result, ensure_ascii=False, default=str)
        if len(result) > NOTICE_RESULT_CHARS:
            result = result[:NOTICE_RESULT_CHARS] + " … [truncated]"
        return f"{head} was approved by {row.approved_by} and ran. Result: {result}"
    if row.status == "failed":
        return f"{head} was approved by {row.approved_by} but failed: {row.error}"
    if row.status == "rejected":
        return f"{head} did not run: {row.error}"
    if row.status == "expired":
        return f"{head} did not run: no decision came before its approval expired."
    return f"{head} is {row.status}."


def _who(decision: ToolDecision) -> str:
    return decision.principal or decision.by
