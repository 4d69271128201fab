"""Running an `@action` through its ledger: authorize, claim the key, run once, settle.

The tool-call activity hands an action's call here (after its hooks and any inline approval);
the parked-action activity hands a decided parked action here. Whatever the path, the key is
claimed with one `INSERT ... ON CONFLICT` (`think.storage.action_ledger`), and then:

- a settled key with the same input is *replayed*: its recorded result goes back to the model
  (its reply attachments only to the very call that made them, whose reply never got them);
- the same key with another input is a *conflict*, an error the model reads;
- a key running elsewhere is waited for; one whose runner died (its lease ran out, or it was
  this very call's earlier attempt) is *reclaimed* and run again with the same idempotency key
  and `ctx.reclaimed` set, so an outside system that honours the key makes it exactly once;
- a failed run releases the key, and its error goes to the model.

Every refusal reaches the model as a JSON error object (`ActionFailure`) it can act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from think._messages import new_id
from think._protocol import FileChunk
from think.agent import Think
from think.engine.activities._tool_policy import ToolTimedOut, run_with_policy
from think.exceptions import ToolError, UserError
from think.storage import Store, TurnRecord, action_ledger
from think.storage.action_ledger import ActionClaim, ActionRow
from think.tools import (
    Action,
    ActionContext,
    ActionRunContext,
    ToolContext,
    collecting_attachments,
    input_hash,
    ledger_key,
    maybe_await,
)
from think.workflows.inputs import ParkedActionInput, ToolDecision
from think.workflows.names import (
    AGENT_KEY,
    CONVERSATION_KEY,
    PARKED_ACTION_WORKFLOW,
    TENANT_KEY,
    parked_action_workflow_id,
)

log = logging.getLogger("think.engine.activities")

LEASE_SECONDS = 15.0
"""How long a running action holds its key without renewing it: a run whose worker died is
reclaimed this long after its last renewal (renewed every third of it)."""
POLL_SECONDS = 0.25
"""How often a call waits on a key another call is running."""

FailureCode = Literal[
    "unauthorized",
    "conflict",
    "input_changed",
    "invalid_key",
    "timeout",
    "failed",
    "lease_lost",
]


class ActionFailure(ToolError):
    """An action that did not run, or ran and failed: the model reads a JSON object with the
    `error` code, a `message`, the `action` and its `key`."""

    def __init__(self, code: FailureCode, message: str, action: str, key: str | None) -> None:
        body = {"error": code, "message": message, "action": action, "key": key}
        super().__init__(json.dumps(body, ensure_ascii=False))
        self.code = code
        self.reason = message


@dataclass(frozen=True)
class CallSite:
    """Who asks for an action, and where: the tenant, the conversation, the turn and its
    tool call, and the API key that submitted the turn."""

    tenant: str
    agent: str
    conversation_id: str
    turn_id: str | None
    tool_call_id: str | None
    key_name: str | None
    config: dict[str, Any]

    @classmethod
    def of_row(cls, row: ActionRow, config: dict[str, Any]) -> CallSite:
        """Where the call that the ledger row records was asked."""
        return cls(
            tenant=row.tenant,
            agent=row.agent,
            conversation_id=row.conversation_id,
            turn_id=row.turn_id,
            tool_call_id=row.tool_call_id,
            key_name=row.requested_by,
            config=config,
        )


def call_site(turn: TurnRecord, agent: Think, tool_call_id: str) -> CallSite:
    """The place of a turn's tool call, for its action."""
    return CallSite(
        tenant=turn.tenant,
        agent=turn.agent,
        conversation_id=turn.conversation_id,
        turn_id=turn.id,
        tool_call_id=tool_call_id,
        key_name=turn.request.submitted_by,
        config=agent.get_config(),
    )


@dataclass(frozen=True)
class ActionOutcome:
    """What an action call gives the model (`output`), and the files it attached to the
    reply (sent once, with the call that made them)."""

    output: Any
    files: list[FileChunk]


async def authorize(
    agent: Think,
    action: Action,
    site: CallSite,
    key: str,
    arguments: dict[str, Any],
    stage: Literal["before_approval", "before_execute"],
    approved_by: str | None = None,
) -> None:
    """`Think.authorize_action`, failing closed: a refusal, or an exception, is an
    `ActionFailure("unauthorized")` naming the reason."""
    ctx = ActionContext(
        tenant=site.tenant,
        agent=site.agent,
        conversation_id=site.conversation_id,
        turn_id=site.turn_id,
        tool_call_id=site.tool_call_id,
        key_name=site.key_name,
        action=action.name,
        key=key,
        input=dict(arguments),
        permission=action.permission,
        stage=stage,
        approved_by=approved_by,
        config=dict(site.config),
    )
    try:
        verdict = await maybe_await(agent.authorize_action(ctx))
    except Exception as exc:
        log.warning("authorize_action of %s raised", action.name, exc_info=True)
        verdict = f"authorize_action raised {type(exc).__name__}: {exc}"
    if verdict is True:
        return
    reason = verdict if isinstance(verdict, str) and verdict else "authorize_action refused it"
    raise ActionFailure("unauthorized", reason, action.name, key)


def key_of(action: Action, arguments: dict[str, Any]) -> str:
    try:
        return action.key_of(arguments)
    except UserError as exc:
        raise ActionFailure("invalid_key", str(exc), action.name, None) from exc


class ActionRunner:
    """Runs actions against the ledger; one per worker (its store and Temporal client)."""

    def __init__(self, store: Store, temporal: Client | None, task_queue: str) -> None:
        self.store = store
        self.temporal = temporal
        self.task_queue = task_queue

    async def call(
        self,
        agent: Think,
        action: Action,
        context: ToolContext,
        arguments: dict[str, Any],
        site: CallSite,
        *,
        approval: ToolDecision | None = None,
        approved_input: dict[str, Any] | None = None,
    ) -> ActionOutcome:
        """An action called by a turn's tool call: `arguments` validated and past the hooks;
        `approval` / `approved_input` when a person approved the call inline (the decision,
        and the input they saw: a run with any other input is refused)."""
        approved_by = (approval.principal or approval.by) if approval is not None else None
        key = key_of(action, arguments)
        digest = input_hash(arguments)
        if approved_input is not None and input_hash(approved_input) != digest:
            raise ActionFailure(
                "input_changed",
                "the input changed after it was approved; ask for approval again",
                action.name,
                key,
            )
        parks = (
            approved_by is None
            and action.parks
            and await action.approval_required(arguments, context)
        )
        stage: Literal["before_approval", "before_execute"] = (
            "before_approval" if parks else "before_execute"
        )
        await authorize(agent, action, site, key, arguments, stage, approved_by)
        claim = ActionClaim(
            tenant=site.tenant,
            agent=site.agent,
            key=key,
            action=action.name,
            input=arguments,
            input_hash=digest,
            conversation_id=site.conversation_id,
            turn_id=site.turn_id,
            tool_call_id=site.tool_call_id,
            requested_by=site.key_name,
            attempt=context.attempt,
            approval_id=approval.approval_id if approval is not None else None,
            approved_by=approved_by,
            decision=approval.model_dump(mode="json") if approval is not None else None,
        )
        wait = action.policy.approval_timeout_seconds or 0.0
        parked = (new_id("approval"), wait) if parks else None
        while True:
            row, took = await action_ledger.claim_action(
                self.store.db, claim, lease_seconds=LEASE_SECONDS, parked=parked
            )
            if took and row.status == "parked":
                await self.start_parked_workflow(row, action)
                return ActionOutcome(parked_output(row), [])
            if took:
                return await self.execute(action, context, arguments, row, approved_by=approved_by)
            outcome = await self._held(action, context, arguments, claim, row, approved_by)
            if outcome is not None:
                return outcome
            # The key was released while we waited (its run failed): claim it afresh.

    async def _held(
        self,
        action: Action,
        context: ToolContext,
        arguments: dict[str, Any],
        claim: ActionClaim,
        row: ActionRow,
        approved_by: str | None,
    ) -> ActionOutcome | None:
        """The key is held by `row`: replay it, refuse a conflict, wait for its run, or
        reclaim it. None when it was released meanwhile."""
        while True:
            if row.input_hash != claim.input_hash:
                raise ActionFailure(
                    "conflict",
                    f"the key {row.key!r} was already used with another input "
                    f"(action {row.id}, {row.status}); the same effect cannot be asked for "
                    "with different input",
                    action.name,
                    row.key,
                )
            same_call = (row.turn_id, row.tool_call_id) == (claim.turn_id, claim.tool_call_id)
            if row.status == "settled":
                await action_ledger.count_replay(self.store.db, row.id)
                log.info("action %s key %r replayed from %s", action.name, row.key, row.id)
                files = _files(row.attachments) if same_call else []
                return ActionOutcome(action.model_view(row.result), files)
            if row.status == "parked":
                if same_call:
                    await self.start_parked_workflow(row, action)
                return ActionOutcome(parked_output(row, already=not same_call), [])
            if row.status == "pending" and (
                row.lease_expired or (same_call and row.attempt < claim.attempt)
            ):
                taken = await action_ledger.reclaim_action(
                    self.store.db, row, claim, lease_seconds=LEASE_SECONDS
                )
                if taken is not None:
                    log.warning(
                        "action %s key %r: reclaimed run %s (its runner stopped before "
                        "recording an outcome; the effect may have happened)",
                        action.name,
                        row.key,
                        row.id,
                    )
                    return await self.execute(
                        action, context, arguments, taken, approved_by=approved_by
                    )
            else:
                await asyncio.sleep(POLL_SECONDS)
                with contextlib.suppress(RuntimeError):  # outside an activity (tests)
                    activity.heartbeat()
            found = await action_ledger.get_action(self.store.db, row.id)
            if found is None or found.status not in action_ledger.LIVE_STATUSES:
                return None
            row = found

    async def execute(
        self,
        action: Action,
        context: ToolContext,
        arguments: dict[str, Any],
        row: ActionRow,
        *,
        approved_by: str | None = None,
    ) -> ActionOutcome:
        """Run the action for the run `row` holds (`pending`, claimed by us), then settle it
        or release it."""
        ctx = ActionRunContext(
            **context.model_dump(exclude={"config"}),
            config=context.config,
            action_key=row.key,
            ledger_key=ledger_key(row.tenant, row.agent, row.key),
            reclaimed=row.claims > 1,
            approved_by=approved_by,
            action_id=row.id,
        )
        try:
            async with self._leased(row):
                with collecting_attachments() as attached:
                    value = await run_with_policy(action, ctx, arguments)
        except Exception as exc:
            code: FailureCode = "timeout" if isinstance(exc, ToolTimedOut) else "failed"
            message = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, ToolError):
                log.warning("action %s failed", action.name, exc_info=True)
            await action_ledger.fail_action(self.store.db, row.id, row.claims, message)
            raise ActionFailure(code, message, action.name, row.key) from exc
        files = [dict(a) for a in attached]
        settled = await action_ledger.settle_action(
            self.store.db,
            row.id,
            row.claims,
            result=value,
            attachments=files,
            remember_seconds=action.remember_seconds,
        )
        if settled is None:
            found = await action_ledger.get_action(self.store.db, row.id)
            if found is not None and found.status == "settled":
                return ActionOutcome(action.model_view(found.result), [])
            raise ActionFailure(
                "lease_lost",
                "the run lost its claim on the key before it could record its result (it ran "
                "longer than its lease without renewing it); its outcome is unknown",
                action.name,
                row.key,
            )
        return ActionOutcome(action.model_view(value), _files(files))

    @contextlib.asynccontextmanager
    async def _leased(self, row: ActionRow) -> AsyncIterator[None]:
        """Renew the run's lease while it runs."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(LEASE_SECONDS / 3)
                try:
                    await action_ledger.renew_lease(
                        self.store.db, row.id, row.claims, LEASE_SECONDS
                    )
                except Exception:
                    log.warning("renewing the lease of action run %s failed", row.id, exc_info=True)

        task = asyncio.create_task(renew())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def start_parked_workflow(self, row: ActionRow, action: Action) -> None:
        """Start the workflow the parked action waits in; one that exists is left alone."""
        if self.temporal is None:
            raise RuntimeError("a parked action needs the worker's Temporal client")
        assert row.approval_id is not None
        wait = 0.0
        if row.expires_at is not None and row.now is not None:
            wait = max(1.0, (row.expires_at - row.now).total_seconds())
        inp = ParkedActionInput(
            action_id=row.id,
            approval_id=row.approval_id,
            tenant=row.tenant,
            agent=row.agent,
            action=row.action,
            wait_seconds=wait,
            run_timeout_seconds=action.policy.timeout_seconds * action.policy.max_attempts + 60,
        )
        with contextlib.suppress(WorkflowAlreadyStartedError):
            handle: WorkflowHandle[Any, Any] = await self.temporal.start_workflow(
                PARKED_ACTION_WORKFLOW,
                inp,
                id=parked_action_workflow_id(row.tenant, row.approval_id),
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"{row.action} {row.key} waits for approval {row.approval_id}",
                # Found by the tenant's name (its erasure, the Temporal UI's list), like a turn.
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(TENANT_KEY, row.tenant),
                        SearchAttributePair(AGENT_KEY, row.agent),
                        SearchAttributePair(CONVERSATION_KEY, row.conversation_id),
                    ]
                ),
            )
            log.info(
                "action %s key %r parked for %s (%s)",
                row.action,
                row.key,
                row.approval_id,
                handle.id,
            )


def parked_output(row: ActionRow, *, already: bool = False) -> dict[str, Any]:
    """What the model reads of a parked action: that it waits for a person, not done."""
    message = (
        "This action is already waiting for a person's decision (asked earlier); it has not "
        "run. Its outcome will be reported in the conversation it was asked in."
        if already
        else "A person must approve this action; it has not run yet. Tell the user it awaits "
        "approval: the outcome will be reported in this conversation once decided."
    )
    return {
        "status": "awaiting_approval",
        "approval_id": row.approval_id,
        "action": row.action,
        "key": row.key,
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        "message": message,
    }


def _files(attachments: list[dict[str, Any]] | None) -> list[FileChunk]:
    return [
        {"type": "file", "url": str(a["url"]), "mediaType": str(a["mediaType"])}
        for a in attachments or []
    ]
