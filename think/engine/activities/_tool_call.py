"""The tool-call activity: run a server tool, or record a decision or a client's result.

One activity per call, whatever its kind, so every outcome reaches the stream and the stored
message the same way: under the turn's row lock, skipped when a previous attempt recorded it.
A tool's own failures are retried here, inside the attempt, as its policy says; Temporal's
retries are left for what interrupts an attempt (a crash, an outage).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError

from think import metrics
from think._messages import storable
from think._protocol import (
    ToolApprovalResponseChunk,
    ToolCallPart,
    UIMessageChunk,
    UIMessageJSON,
    chunk_kind,
    has_output,
    is_decided,
    is_settled,
)
from think.agent import Think, ToolCallContext, ToolCallDecision, ToolCallResultContext
from think.codemode import EXECUTE
from think.engine.activities import _observe as observe
from think.engine.activities._actions import ActionRunner, CallSite, call_site
from think.engine.activities._assembly import turn_tools
from think.engine.activities._code_mode import run_execute
from think.engine.activities._ids import tool_call_ids
from think.engine.activities._resources import ActivityResources
from think.engine.activities._tool_plan import client_tool_names, paused_status
from think.engine.activities._tool_policy import run_with_policy
from think.exceptions import ToolError
from think.storage import Store, TurnRecord, bounded_failures, first_answer
from think.streaming import MessageBuilder, TurnChanged, TurnEnded, append
from think.tools import Action, Tool, ToolContext, maybe_await, tool_output_json
from think.workflows.inputs import (
    ToolCallInput,
    ToolCallResult,
    ToolDecision,
    ToolResultSubmission,
)
from think.workflows.names import TOOL_CALL_ACTIVITY

log = logging.getLogger("think.engine.activities")


class ToolCalls:
    """The tool-call activity."""

    def __init__(self, res: ActivityResources) -> None:
        self.res = res

    @activity.defn(name=TOOL_CALL_ACTIVITY)
    async def tool_call(self, inp: ToolCallInput) -> ToolCallResult:
        if activity.info().attempt > 1:
            metrics.ACTIVITY_RETRIES.labels(TOOL_CALL_ACTIVITY).inc()
        # A tool's own failures are the model's to read (`_run`); what fails the activity is
        # storing the outcome, or a bug of ours: retried while transient, else a few times.
        with bounded_failures(f"tool call {inp.tool_name}", inp.turn_id):
            return await self._tool_call(inp)

    async def _tool_call(self, inp: ToolCallInput) -> ToolCallResult:
        turn, part = await tool_call_of(self.res.store, inp.turn_id, inp.tool_call_id)
        if is_settled(part) or turn.terminal:
            return ToolCallResult(ok=part.get("state") == "output-available")
        agent = self.res.bound_agent(turn)
        if inp.client_result is not None:
            result = await self._standing_result(turn.id, inp.client_result)
            chunk: UIMessageChunk = (
                {
                    "type": "tool-output-error",
                    "toolCallId": inp.tool_call_id,
                    "errorText": result.error,
                }
                if result.error is not None
                else {
                    "type": "tool-output-available",
                    "toolCallId": inp.tool_call_id,
                    "output": result.output,
                }
            )
            return await self.record(agent, turn.id, inp.tool_call_id, [chunk])
        name, call_id = inp.tool_name, inp.tool_call_id
        if name == EXECUTE and agent.code_mode and inp.decision is None:
            return await run_execute(self, agent, turn, part.get("input"), inp)
        # The decision that stands (the first recorded), for an action's ledger and audit.
        approval = await self.decided(agent, turn, part, name, call_id, inp.decision)
        if approval is not None and not approval.approved:
            return ToolCallResult(ok=False)
        context = ToolContext(
            **tool_call_ids(turn, inp.tool_call_id, inp.tool_name),
            attempt=activity.info().attempt,
            config=agent.get_config(),
        )
        tool = turn_tools(agent, turn).get(inp.tool_name)
        site = call_site(turn, agent, inp.tool_call_id)
        chunks, ran = await self._run(agent, tool, context, part.get("input"), site, approval)
        recorded = await self.record(agent, turn.id, inp.tool_call_id, chunks, seen=turn)
        outcome = _OUTCOMES[ran.outcome]
        await observe.tool_called(
            turn, inp.tool_name, inp.tool_call_id, outcome, ran.duration_ms, ran.error
        )
        return recorded

    async def approved(
        self,
        agent: Think,
        turn: TurnRecord,
        part: ToolCallPart,
        tool_name: str,
        tool_call_id: str,
        decision: ToolDecision | None,
    ) -> bool:
        """Record the decision on an approval-gated call (a denial settles it, for the model
        to read) and say whether the call may run (`decided`)."""
        standing = await self.decided(agent, turn, part, tool_name, tool_call_id, decision)
        return standing is None or standing.approved

    async def decided(
        self,
        agent: Think,
        turn: TurnRecord,
        part: ToolCallPart,
        tool_name: str,
        tool_call_id: str,
        decision: ToolDecision | None,
    ) -> ToolDecision | None:
        """Record the decision on an approval-gated call (a denial settles it) and return the
        one that stands (the first recorded); None for a call that asked for no approval,
        which runs. A call that asked for approval never runs without one."""
        if decision is None:
            if part.get("approval"):
                raise ApplicationError(
                    f"tool call {tool_call_id!r} waits for approval", non_retryable=True
                )
            return None
        decision = await self._standing_decision(turn.id, decision)
        await self._decide(agent, turn.id, tool_call_id, decision)
        await observe.approval_decided(
            turn,
            decision.approval_id,
            tool_name,
            decision.approved,
            decision.reason,
            decision.by,
            decision.principal,
        )
        if not decision.approved:
            await observe.tool_called(turn, tool_name, tool_call_id, "denied")
        return decision

    async def _standing_decision(self, turn_id: str, decision: ToolDecision) -> ToolDecision:
        """The decision recorded first for the request (`think.storage._answers`)."""
        async with self.res.store.db.transaction() as conn:
            answer = await first_answer(
                conn, turn_id, "approval", decision.approval_id, decision.model_dump(mode="json")
            )
        return ToolDecision.model_validate(answer)

    async def _standing_result(
        self, turn_id: str, result: ToolResultSubmission
    ) -> ToolResultSubmission:
        async with self.res.store.db.transaction() as conn:
            answer = await first_answer(
                conn, turn_id, "tool-result", result.tool_call_id, result.model_dump(mode="json")
            )
        return ToolResultSubmission.model_validate(answer)

    async def _decide(
        self, agent: Think, turn_id: str, tool_call_id: str, decision: ToolDecision
    ) -> None:
        """Record a person's decision (a denial settles the call)."""
        response: ToolApprovalResponseChunk = {
            "type": "tool-approval-response",
            "approvalId": decision.approval_id,
            "approved": decision.approved,
        }
        if decision.reason:
            response["reason"] = decision.reason
        chunks: list[UIMessageChunk] = [response]
        if not decision.approved:
            chunks.append({"type": "tool-output-denied", "toolCallId": tool_call_id})
        log.info(
            "turn %s: tool call %s %s by %s%s",
            turn_id,
            tool_call_id,
            "approved" if decision.approved else "denied",
            decision.by,
            f" ({decision.principal})" if decision.principal else "",
        )
        await self.record(agent, turn_id, tool_call_id, chunks)

    async def record(
        self,
        agent: Think,
        turn_id: str,
        tool_call_id: str,
        chunks: list[UIMessageChunk],
        *,
        seen: TurnRecord | None = None,
    ) -> ToolCallResult:
        """Apply the call's chunks to the draft message and append them. `seen`: the turn as
        read before the call ran (checked then: not ended, the call not settled); if its row
        is unchanged since, one statement records the outcome without locking the turn. A
        sole tool call usually finds it so; parallel calls, or a cancel meanwhile, take the
        locked path. What a tool, a client or a person sent is made storable first
        (`think._messages.storable`: NUL and lone surrogates replaced): a tool's error may
        quote anything, and so may a blocking hook's reason."""
        chunks = storable(chunks)
        if seen is not None and seen.version:
            builder = MessageBuilder(seen.message)
            for chunk in chunks:
                builder.apply(chunk)
            status = _status(seen, builder.message, agent)
            try:
                async with self.res.store.db.connection() as conn:
                    await append(
                        conn,
                        turn_id,
                        chunks,
                        version=seen.version,
                        while_open=True,
                        message=builder.message,
                        status=status,
                    )
            except (TurnChanged, TurnEnded):
                pass  # someone wrote meanwhile: read it again under the lock
            else:
                return ToolCallResult(ok=has_output(builder.tool_part(tool_call_id)))
        async with self.res.store.db.transaction() as conn:
            turn = await self.res.store.lock_turn(conn, turn_id)
            builder = MessageBuilder(turn.message)
            part = builder.tool_part(tool_call_id)
            if turn.terminal or (part is not None and is_settled(part)):
                # Cancelled meanwhile, or an earlier attempt recorded it: that outcome stands.
                return ToolCallResult(ok=has_output(part))
            if (
                chunk_kind(chunks[0]) == "tool-approval-response"
                and part is not None
                and is_decided(part)
            ):
                chunks = chunks[1:]  # the decision is recorded already
            for chunk in chunks:
                builder.apply(chunk)
            status = _status(turn, builder.message, agent)
            await append(conn, turn_id, chunks, message=builder.message, status=status)
        return ToolCallResult(ok=has_output(builder.tool_part(tool_call_id)))

    def _progress(self, context: ToolContext) -> Callable[[Any], Awaitable[None]]:
        """A streaming tool's preliminary outputs, into its turn's stream as they come (the AI
        SDK shows each in place of the one before). Never fails the tool: once the turn has
        ended, or a write fails, the tool runs on unseen and only its result is recorded."""
        off = False

        async def write(output: Any) -> None:
            nonlocal off
            if off:
                return
            chunk = _progress_chunk(context.tool_call_id, output)
            try:
                async with self.res.store.db.connection() as conn:
                    await append(conn, context.turn_id, [chunk], while_open=True)
            except TurnEnded:
                off = True
            except Exception:
                log.warning("progress of tool call %s failed", context.tool_call_id, exc_info=True)
                off = True

        return write

    @property
    def actions(self) -> ActionRunner:
        return ActionRunner(self.res.store, self.res.temporal, self.res.settings.task_queue)

    async def _run(
        self,
        agent: Think,
        tool: Tool | None,
        context: ToolContext,
        raw_input: Any,
        site: CallSite,
        approval: ToolDecision | None = None,
    ) -> tuple[list[UIMessageChunk], ToolCallResultContext]:
        """Run a server tool through the hooks and its retry policy (an action through its
        ledger: `ActionRunner`), into its output chunk and any files it attached to the
        reply. `approval`: the decision it ran after, if it asked for one."""
        tool_name, tool_call_id = context.tool_name, context.tool_call_id
        started = time.perf_counter()
        call = ToolCallContext(
            agent=context.agent,
            conversation_id=context.conversation_id,
            turn_id=context.turn_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            input=raw_input if isinstance(raw_input, dict) else {},
            attempt=context.attempt,
        )
        outcome: Literal["executed", "blocked", "substituted", "failed"] = "executed"
        output: Any = None
        error: str | None = None
        files: list[UIMessageChunk] = []
        try:
            if tool is None:
                raise ToolError(f"there is no tool named {tool_name!r}")
            if not isinstance(raw_input, dict):
                raise ToolError(f"the input of {tool_name!r} must be a JSON object")
            arguments = tool.validate(raw_input)
            decision = await maybe_await(agent.before_tool_call(call))
            if isinstance(decision, ToolCallDecision) and decision.action == "block":
                outcome, output = "blocked", decision.reason
            elif isinstance(decision, ToolCallDecision) and decision.action == "substitute":
                outcome, output = "substituted", tool_output_json(decision.output)
            else:
                if isinstance(decision, ToolCallDecision) and decision.input is not None:
                    arguments = tool.validate(decision.input)
                if isinstance(tool, Action):
                    approved = approval if approval is not None and approval.approved else None
                    done = await self.actions.call(
                        agent,
                        tool,
                        context,
                        arguments,
                        site,
                        approval=approved,
                        approved_input=tool.validate(raw_input) if approved else None,
                    )
                    output, files = done.output, list(done.files)
                else:
                    output = await run_with_policy(
                        tool, context, arguments, self._progress(context) if tool.streams else None
                    )
        except ToolError as exc:
            outcome, error = "failed", str(exc)
        except Exception as exc:
            log.warning("tool %s failed", tool_name, exc_info=True)
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"
        result = ToolCallResultContext(
            **call.model_dump(),
            outcome=outcome,
            success=error is None,
            output=output,
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        try:
            await maybe_await(agent.after_tool_call(result))
        except Exception:
            log.warning("after_tool_call of %s failed", tool_name, exc_info=True)
        chunk: UIMessageChunk
        if error is not None:
            chunk = {"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": error}
            files = []  # an action's attachments reach the reply only if it succeeded
        else:
            chunk = {"type": "tool-output-available", "toolCallId": tool_call_id, "output": output}
        return [chunk, *files], result


def _progress_chunk(tool_call_id: str, output: Any) -> UIMessageChunk:
    return {
        "type": "tool-output-available",
        "toolCallId": tool_call_id,
        "output": output,
        "preliminary": True,
    }


_OUTCOMES: dict[str, Literal["success", "error", "blocked", "substituted"]] = {
    "executed": "success",
    "failed": "error",
    "blocked": "blocked",
    "substituted": "substituted",
}


async def tool_call_of(
    store: Store, turn_id: str, tool_call_id: str
) -> tuple[TurnRecord, ToolCallPart]:
    """The turn and the part of its tool call `tool_call_id`; either missing fails the
    activity for good (retrying would not bring it back)."""
    turn = await store.get_turn(turn_id)
    if turn is None:
        raise ApplicationError(f"turn {turn_id!r} does not exist", non_retryable=True)
    part = MessageBuilder(turn.message).tool_part(tool_call_id)
    if part is None:
        raise ApplicationError(f"no tool call {tool_call_id!r}", non_retryable=True)
    return turn, part


def _status(turn: TurnRecord, message: UIMessageJSON, agent: Think) -> str:
    if turn.status not in ("running", "awaiting_approval", "awaiting_client_tool"):
        return turn.status
    return paused_status(message, client_tool_names(turn), turn_tools(agent, turn))
