"""Sub-agents in a turn's workflow: an agent tool's call, which admits the sub-agent's turn
and waits for it holding no activity, and the other end, a sub-agent's turn telling its
parent's workflow that it has ended (`think.agent._agent_tool` has the whole picture)."""

from __future__ import annotations

import contextlib
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from think.workflows.inputs import (
        AgentToolFinished,
        AgentToolInput,
        AgentToolStarted,
        CancelChildrenInput,
        ChildTurnEnded,
        ToolCallRef,
        ToolDecision,
        TurnInput,
    )
    from think.workflows.names import (
        AGENT_TOOL_FINISH_ACTIVITY,
        AGENT_TOOL_START_ACTIVITY,
        CANCEL_CHILDREN_ACTIVITY,
        CHILD_TURN_ENDED,
    )

from think.workflows._turn._activities import CHILD_CHECK, database_step
from think.workflows._turn._signals import signal_payload


class SubAgentCalls:
    """The part of `TurnWorkflow` that delegates to sub-agents (as a parent turn) and answers
    its parent (as a sub-agent's turn)."""

    def __init__(self) -> None:
        super().__init__()
        self._children: dict[str, str] = {}
        """Agent-tool calls waiting for their sub-agent's turn: tool call id -> child turn."""
        self._children_ended: set[str] = set()
        self._waiting: dict[str, str] = {}
        """What each of them waits for, for the Temporal UI's current details."""

    async def _delegate(
        self, turn_id: str, step: int, call: ToolCallRef, decision: ToolDecision | None = None
    ) -> None:
        """An agent tool's call: admit the sub-agent's turn, wait for it holding no activity
        (its `child_turn_ended` Signal, or a look in Postgres now and then), record its answer.
        `decision`: a person's, for a call that asked for approval (a denial starts nothing)."""
        inp = AgentToolInput(
            turn_id=turn_id,
            step=step,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            decision=decision,
        )
        started = await database_step(
            AGENT_TOOL_START_ACTIVITY,
            inp,
            result_type=AgentToolStarted,
            summary=f"delegate {call.tool_name}",
        )
        child = started.child_turn_id
        if child is None:
            return  # settled at once: bad input, a hook's decision, or recorded before
        self._children[call.tool_call_id] = child
        self._waiting[call.tool_call_id] = (
            f"waiting for {started.child_agent} turn {child} "
            f"(conversation {started.child_conversation_id})"
        )
        workflow.set_current_details(f"step {step + 1}: " + "; ".join(self._waiting.values()))
        finish = inp.model_copy(update={"child_turn_id": child, "decision": None})
        while True:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: call.tool_call_id in self._children_ended,
                    timeout=CHILD_CHECK,
                    timeout_summary=f"sub-agent {started.child_agent} turn {child}",
                )
            done = await database_step(
                AGENT_TOOL_FINISH_ACTIVITY,
                finish,
                result_type=AgentToolFinished,
                summary=f"{call.tool_name}: the sub-agent's answer",
            )
            if done.settled:
                break
            self._children_ended.discard(call.tool_call_id)
        del self._children[call.tool_call_id]
        del self._waiting[call.tool_call_id]

    async def _cancel_children(self, turn_id: str, status: str) -> None:
        """The turn ends without its sub-agents' answers: their turns are cancelled too."""
        await database_step(
            CANCEL_CHILDREN_ACTIVITY,
            CancelChildrenInput(
                turn_id=turn_id,
                child_turn_ids=sorted(self._children.values()),
                reason=f"the parent turn {turn_id} ended ({status})",
            ),
            result_type=type(None),
            summary="cancel the sub-agents' turns",
        )
        self._children.clear()

    @workflow.signal(name=CHILD_TURN_ENDED)
    def child_turn_ended(self, payload: Any) -> None:
        """A sub-agent's turn this one waits for has ended (sent by that turn's workflow)."""
        expected = '{"tool_call_id": "…"}'
        ended = signal_payload(CHILD_TURN_ENDED, ChildTurnEnded, payload, expected)
        if ended is not None:
            self._children_ended.add(ended.tool_call_id)

    async def _tell_parent(self, inp: TurnInput, status: str) -> None:
        """A sub-agent's turn has ended: its parent's turn records the answer now."""
        assert inp.parent is not None
        parent = workflow.get_external_workflow_handle(inp.parent.workflow_id)
        try:
            await parent.signal(
                CHILD_TURN_ENDED,
                ChildTurnEnded(
                    tool_call_id=inp.parent.tool_call_id, turn_id=inp.turn_id, status=status
                ),
            )
        except Exception as exc:
            # The parent has ended meanwhile (cancelled, say): nobody waits for this answer.
            workflow.logger.info(
                "parent %s of turn %s: %s", inp.parent.workflow_id, inp.turn_id, exc
            )
