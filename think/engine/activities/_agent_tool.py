"""Agent tools: a parent turn's tool call answered by a sub-agent's turn.

Three short activities, local to the parent's workflow task, around a wait that holds no
worker slot: `agent_tool_start` admits the child's turn (idempotency key: the parent turn and
tool call, so a parent retried after a crash re-attaches to the same child turn), the parent's
workflow then waits for the child's `child_turn_ended` Signal (checking Postgres now and then
in case none comes, say the child was cancelled before it ever started), and
`agent_tool_finish` records the child's answer as the call's result (its typed output as
`structured`; a child with no answer, skipped included, as a tool error). `cancel_child_turns`
bridges a parent's cancel (or failure) to its children. Before it admits anything,
`agent_tool_start` records a person's decision on a call that asked for one (a denial starts
nothing) and refuses a call past the agent's `max_concurrent_agent_tools` (`over_cap`).

While the child runs, its model steps show their progress in the parent's stream: the AI
SDK's preliminary tool output (`tool-output-available` with `preliminary: true`), the child's
answer so far, written by the child's own chunk writer after each of its batches
(`ParentProgress`). Preliminary outputs are stream-only: the parent's stored message gets the
final output alone, as an AI SDK client's reconstruction ends with it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any, Literal

from temporalio import activity

from think._messages import UIMessage
from think._protocol import (
    ToolCallPart,
    UIMessageChunk,
    is_settled,
    is_static_tool_part,
    parts_of,
    split_steps,
    tool_name,
)
from think.agent import (
    AgentTool,
    AgentToolResult,
    Think,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResultContext,
    answer_text,
    child_conversation_id,
    delegation_failure,
)
from think.engine.activities import _observe as observe
from think.engine.activities._assembly import turn_tools
from think.engine.activities._ids import tool_call_ids
from think.engine.activities._resources import ActivityResources
from think.engine.activities._tool_call import ToolCalls, tool_call_of
from think.exceptions import ThinkError, ToolError
from think.storage import (
    Conn,
    Delegation,
    SubmissionConflict,
    TurnRecord,
    bounded_failures,
    gives_up,
)
from think.streaming import MessageBuilder, StaleAttempt, TurnEnded, append
from think.tools import Tool, maybe_await, tool_output_json
from think.turns import admit_submission, cancel_turn
from think.workflows.inputs import (
    AgentToolFinished,
    AgentToolInput,
    AgentToolStarted,
    CancelChildrenInput,
)
from think.workflows.names import (
    AGENT_TOOL_FINISH_ACTIVITY,
    AGENT_TOOL_START_ACTIVITY,
    CANCEL_CHILDREN_ACTIVITY,
)

log = logging.getLogger("think.engine.activities")

PROGRESS_INTERVAL = 0.25
"""Seconds between two preliminary outputs of one child step in its parent's stream: each
carries the child's whole answer so far (the AI SDK replaces a preliminary output with the
next), so a long answer is not re-sent with every token."""


def child_result(
    child: TurnRecord, text: str | None = None, structured: Any = None
) -> dict[str, Any]:
    """What the parent's tool part holds and its model reads: the child turn as an object,
    with its validated structured output (JSON) when it had an output type."""
    return AgentToolResult(
        agent=child.agent,
        conversation_id=child.conversation_id,
        turn_id=child.id,
        status=child.status,
        text=answer_text(child.message) if text is None else text,
        structured=structured,
    ).output()


def progress_chunk(delegation: Delegation, child: TurnRecord, text: str) -> UIMessageChunk:
    output = child_result(child, text) | {"status": "running"}
    return {
        "type": "tool-output-available",
        "toolCallId": delegation.tool_call_id,
        "output": output,
        "preliminary": True,
    }


class ParentProgress:
    """A child step's progress, into its parent's stream (see the module's docstring). Never
    fails the child: a parent that has ended, or a write that fails, only stops it."""

    def __init__(
        self, child: TurnRecord, builder: MessageBuilder, interval: float = PROGRESS_INTERVAL
    ) -> None:
        assert child.request.delegated_by is not None
        self.delegation = child.request.delegated_by
        self.child = child
        self.builder = builder
        self.interval = interval
        self._sent: str | None = None
        self._last = 0.0
        self._off = False

    async def after_flush(self, conn: Conn) -> None:
        """Called by the child's chunk writer after each batch, on the same connection."""
        if self._off:
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        text = answer_text(self.builder.message)
        if text == self._sent:
            return
        chunk = progress_chunk(self.delegation, self.child, text)
        try:
            await append(conn, self.delegation.turn_id, [chunk], while_open=True)
        except (TurnEnded, StaleAttempt):
            self._off = True  # the parent has ended (or is gone): nobody to tell
            return
        except Exception:
            log.warning(
                "progress of turn %s to its parent %s failed",
                self.child.id,
                self.delegation.turn_id,
                exc_info=True,
            )
            self._off = True
            return
        self._sent, self._last = text, now


class AgentToolCalls:
    """The activities of agent-tool calls."""

    def __init__(self, res: ActivityResources, tool_calls: ToolCalls) -> None:
        self.res = res
        self.tool_calls = tool_calls

    def activities(self) -> list[Any]:
        return [self.start, self.finish, self.cancel_children]

    @activity.defn(name=AGENT_TOOL_START_ACTIVITY)
    async def start(self, inp: AgentToolInput) -> AgentToolStarted:
        """Admit the child's turn for the call (or find the one admitted before)."""
        with bounded_failures(f"agent tool {inp.tool_name}", inp.turn_id):
            return await self._start(inp)

    async def _start(self, inp: AgentToolInput) -> AgentToolStarted:
        turn, part = await self._call(inp)
        if is_settled(part) or turn.terminal:
            return AgentToolStarted()
        agent = self.res.bound_agent(turn)
        tools = turn_tools(agent, turn)
        tool = tools.get(inp.tool_name)
        if not isinstance(tool, AgentTool):
            return await self._settle(agent, turn, inp, error=f"no agent tool {inp.tool_name!r}")
        approved = await self.tool_calls.approved(
            agent, turn, part, inp.tool_name, inp.tool_call_id, inp.decision
        )
        if not approved:
            return AgentToolStarted()  # denied: the model reads the denial
        over = over_cap(agent, turn, tools, inp.tool_call_id)
        if over is not None:
            return await self._settle(agent, turn, inp, error=over)
        call = _call_context(turn, inp, part)
        try:
            arguments = tool.validate(call.input)
            decision = await maybe_await(agent.before_tool_call(call))
            if isinstance(decision, ToolCallDecision) and decision.action == "block":
                return await self._settle(agent, turn, inp, output=decision.reason, how="blocked")
            if isinstance(decision, ToolCallDecision) and decision.action == "substitute":
                output = tool_output_json(decision.output)
                return await self._settle(agent, turn, inp, output=output, how="substituted")
            if isinstance(decision, ToolCallDecision) and decision.input is not None:
                arguments = tool.validate(decision.input)
        except ToolError as exc:
            return await self._settle(agent, turn, inp, error=str(exc))
        except Exception as exc:
            log.warning("before_tool_call of %s failed", inp.tool_name, exc_info=True)
            return await self._settle(agent, turn, inp, error=f"{type(exc).__name__}: {exc}")
        task = str(arguments["input"])
        above = turn.request.delegated_by
        depth = above.depth + 1 if above is not None else 1
        if depth > agent.max_delegation_depth:
            return await self._settle(
                agent,
                turn,
                inp,
                error=f"delegation is {depth} levels deep, over {type(agent).__name__}."
                f"max_delegation_depth ({agent.max_delegation_depth}): answer without it",
            )
        child_id = child_conversation_id(
            turn.agent, turn.conversation_id, tool.child_name(inp.tool_call_id)
        )
        res = self.res
        assert res.temporal is not None, "the worker gives its activities a Temporal client"
        try:
            admission = await admit_submission(
                res.store,
                res.temporal,
                res.settings.task_queue,
                tool.agent,
                tenant=turn.tenant,
                conversation_id=child_id,
                messages=[UIMessage.user_text(task)],
                input=task,
                # Queued behind whatever the child is doing: never skipped or merged away.
                default_concurrency="queue",
                idempotency_key=f"{turn.id}:{inp.tool_call_id}",
                delegated_by=Delegation(
                    **tool_call_ids(turn, inp.tool_call_id, inp.tool_name), depth=depth
                ),
            )
        except SubmissionConflict as exc:
            return await self._settle(agent, turn, inp, error=str(exc))
        child = admission.turn
        if admission.accepted:
            # The drill-in link, at once: the child's agent, conversation and turn.
            delegation = child.request.delegated_by
            assert delegation is not None
            async with res.store.db.connection() as conn:
                with contextlib.suppress(TurnEnded):
                    await append(
                        conn, turn.id, [progress_chunk(delegation, child, "")], while_open=True
                    )
            log.info(
                "turn %s: tool call %s delegated to %s/%s turn %s",
                turn.id,
                inp.tool_call_id,
                child.agent,
                child.conversation_id,
                child.id,
            )
        return AgentToolStarted(
            child_turn_id=child.id,
            child_agent=child.agent,
            child_conversation_id=child.conversation_id,
        )

    @activity.defn(name=AGENT_TOOL_FINISH_ACTIVITY)
    async def finish(self, inp: AgentToolInput) -> AgentToolFinished:
        """Record the ended child turn's answer as the call's result; `settled=False` while
        it runs (and, once the tool's timeout has passed, it is cancelled: its end is then
        recorded as the tool error it is)."""
        with bounded_failures(f"agent tool {inp.tool_name}", inp.turn_id):
            return await self._finish(inp)

    async def _finish(self, inp: AgentToolInput) -> AgentToolFinished:
        turn, part = await self._call(inp)
        if is_settled(part) or turn.terminal:
            return AgentToolFinished(settled=True)
        agent = self.res.bound_agent(turn)
        child = await self.res.store.get_turn(inp.child_turn_id or "")
        if child is None:
            await self._settle(agent, turn, inp, error="the sub-agent's turn no longer exists")
            return AgentToolFinished(settled=True)
        tool = turn_tools(agent, turn).get(inp.tool_name)
        if not child.terminal:
            timeout = tool.policy.timeout_seconds if tool is not None else None
            age = (datetime.now(UTC) - child.created_at).total_seconds()
            if timeout is not None and age >= timeout:
                # Cancelled, then recorded once it has ended (its end wakes us): so nothing
                # it streams can follow the call's final output in the parent's stream.
                reason = f"agent tool {inp.tool_name!r} timed out: no answer within {timeout:g} s"
                await self._cancel(child, reason)
            return AgentToolFinished(settled=False)
        text: str | None = None
        answering = child
        if child.status == "skipped" and child.answered_by:
            # Merged into a later turn of the child: that one's answer is this call's too.
            found = await self.res.store.get_turn(child.answered_by)
            text = answer_text(found.message) if found is not None else ""
            answering = found or child
        failure = None
        if answering is child:
            failure = delegation_failure(
                child.agent, child.status, child.error, child.id, child.conversation_id
            )
        if failure is not None:
            await self._settle(agent, turn, inp, error=failure)
        else:
            output = child_result(child, text, answering.output)
            await self._settle(agent, turn, inp, output=output)
        return AgentToolFinished(settled=True)

    @activity.defn(name=CANCEL_CHILDREN_ACTIVITY)
    async def cancel_children(self, inp: CancelChildrenInput) -> None:
        """The parent turn is ending without their answers: cancel its children's turns."""
        try:
            await self._cancel_children(inp)
        except Exception as exc:
            if not gives_up(exc):
                raise
            # Not worth failing the parent's end for: its turn is recorded next, and each
            # child's turn runs to its own end.
            log.error(
                "turn %s: could not cancel its sub-agents' turns %s",
                inp.turn_id,
                inp.child_turn_ids,
                exc_info=True,
            )

    async def _cancel_children(self, inp: CancelChildrenInput) -> None:
        for child_id in inp.child_turn_ids:
            child = await self.res.store.get_turn(child_id)
            if child is not None:
                await self._cancel(child, inp.reason)

    # -- internals -------------------------------------------------------------------------

    async def _call(self, inp: AgentToolInput) -> tuple[TurnRecord, ToolCallPart]:
        return await tool_call_of(self.res.store, inp.turn_id, inp.tool_call_id)

    async def _cancel(self, child: TurnRecord, reason: str) -> None:
        res = self.res
        assert res.temporal is not None
        try:
            await cancel_turn(res.store, res.temporal, res.settings.task_queue, child, reason)
        except ThinkError:
            log.warning("could not cancel child turn %s", child.id, exc_info=True)

    async def _settle(
        self,
        agent: Think,
        turn: TurnRecord,
        inp: AgentToolInput,
        *,
        output: Any = None,
        error: str | None = None,
        how: Literal["executed", "blocked", "substituted", "failed"] = "executed",
    ) -> AgentToolStarted:
        """Record the call's outcome (once: a repeat finds it settled), after `after_tool_call`."""
        chunk: UIMessageChunk
        if error is not None:
            how = "failed"
            chunk = {
                "type": "tool-output-error",
                "toolCallId": inp.tool_call_id,
                "errorText": error,
            }
        else:
            chunk = {
                "type": "tool-output-available",
                "toolCallId": inp.tool_call_id,
                "output": output,
            }
        call = _call_context(turn, inp, MessageBuilder(turn.message).tool_part(inp.tool_call_id))
        result = ToolCallResultContext(
            **call.model_dump(),
            outcome=how,
            success=error is None,
            output=output,
            error=error,
            duration_ms=0.0,
        )
        try:
            await maybe_await(agent.after_tool_call(result))
        except Exception:
            log.warning("after_tool_call of %s failed", inp.tool_name, exc_info=True)
        await self.tool_calls.record(agent, turn.id, inp.tool_call_id, [chunk])
        outcomes: dict[str, Literal["success", "error", "blocked", "substituted"]] = {
            "executed": "success",
            "failed": "error",
            "blocked": "blocked",
            "substituted": "substituted",
        }
        await observe.tool_called(turn, inp.tool_name, inp.tool_call_id, outcomes[how], 0.0, error)
        return AgentToolStarted()


def over_cap(
    agent: Think, turn: TurnRecord, tools: dict[str, Tool], tool_call_id: str
) -> str | None:
    """The tool error of an agent-tool call past `max_concurrent_agent_tools`, or None.

    The calls that run at once in a turn are one model step's (the next step waits for them
    all), so the cap counts the step's agent-tool calls in the order the model made them, as
    the stored message has them: a retried start decides the same way, and no count is kept
    anywhere that a crash could lose."""
    cap = agent.max_concurrent_agent_tools
    if cap is None:
        return None
    for step in split_steps(parts_of(turn.message)):
        calls = [
            str(p.get("toolCallId"))
            for p in step
            if is_static_tool_part(p) and isinstance(tools.get(tool_name(p)), AgentTool)
        ]
        if tool_call_id in calls:
            position = calls.index(tool_call_id) + 1
            if position <= cap:
                return None
            return (
                f"max_concurrent_agent_tools ({cap}) exceeded: this is agent-tool call "
                f"{position} of {len(calls)} made at once, and {type(agent).__name__} runs at "
                f"most {cap} at a time; no agent was started for it. Call it again once the "
                "others have answered"
            )
    return None


def _call_context(
    turn: TurnRecord, inp: AgentToolInput, part: ToolCallPart | None
) -> ToolCallContext:
    raw = part.get("input") if part is not None else None
    return ToolCallContext(
        **tool_call_ids(turn, inp.tool_call_id, inp.tool_name),
        input=raw if isinstance(raw, dict) else {},
        attempt=activity.info().attempt,
    )
