"""The `execute` call of code mode (`think.codemode`), run inside the tool-call activity.

Each call the program makes is a durable step, recorded in the turn's own message (Postgres)
as a tool part of its own, keyed by `<execute call id>:<seq>` with the inner call's name,
input and outcome, which is also how the stream shows it. A call is run once, through the
same path as a model's call (`ToolCalls._run`: hooks, retry policy, an action's ledger); a
run of the program after a crash (the activity retried: the program starts again) finds the
settled calls in the record and answers them from it without running them again.

A call that needs a person's approval ends this run: its part carries the approval request,
and the activity answers `awaiting` with a `ToolCallRef` the workflow waits on like any
approval. Once decided, the workflow runs the execute call again with the decision; the
program replays to that call, which runs (or raises `ToolCallError` on a denial).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from temporalio import activity

from think._messages import new_id
from think._protocol import UIMessageChunk, is_settled, tool_name
from think.agent import AgentTool, Think
from think.codemode import (
    EXECUTE,
    MAX_INNER_CALLS,
    PROGRAM_TIMEOUT_SECONDS,
    CallAnswer,
    Paused,
    inner_call_id,
    run_program,
)
from think.engine.activities import _observe as observe
from think.engine.activities._actions import call_site
from think.engine.activities._assembly import turn_tools
from think.engine.activities._heartbeat import heartbeating
from think.engine.activities._ids import tool_call_ids
from think.engine.activities._tool_plan import _needs_approval, tool_run
from think.exceptions import ToolError
from think.storage import TurnRecord
from think.streaming import MessageBuilder
from think.tools import Tool, ToolContext
from think.workflows.inputs import ToolCallInput, ToolCallRef, ToolCallResult, ToolDecision

if TYPE_CHECKING:
    from think.engine.activities._tool_call import ToolCalls

log = logging.getLogger("think.engine.activities")


def program_tools(agent: Think, turn: TurnRecord) -> dict[str, Tool]:
    """The tools a program may call: the turn's server tools but `execute` itself and the
    agent tools (a sub-agent's turn is the workflow's to wait for, not an activity's)."""
    return {
        name: tool
        for name, tool in turn_tools(agent, turn).items()
        if name != EXECUTE and not isinstance(tool, AgentTool)
    }


async def run_execute(
    calls: ToolCalls, agent: Think, turn: TurnRecord, raw_input: Any, inp: ToolCallInput
) -> ToolCallResult:
    """Run the program of the execute call `inp`, to its output chunk or to a pause."""
    code = raw_input.get("code") if isinstance(raw_input, dict) else None
    if not isinstance(code, str) or not code.strip():
        error: UIMessageChunk = {
            "type": "tool-output-error",
            "toolCallId": inp.tool_call_id,
            "errorText": "execute needs {'code': '<a Python program>'}",
        }
        return await calls.record(agent, turn.id, inp.tool_call_id, [error])
    tools = program_tools(agent, turn)
    schemas = {
        name: {"description": tool.description, "input_schema": tool.spec.parameters}
        for name, tool in tools.items()
    }
    steps = _Steps(calls, agent, turn.id, inp, tools)
    async with heartbeating():
        ran = await run_program(
            code,
            schemas,
            steps.call,
            timeout_seconds=PROGRAM_TIMEOUT_SECONDS,
            max_calls=MAX_INNER_CALLS,
        )
    if ran.paused_at is not None:
        assert steps.awaiting is not None
        return ToolCallResult(ok=False, awaiting=steps.awaiting)
    chunk: UIMessageChunk
    if ran.error is not None:
        printed = f"\nit printed:\n{ran.stdout}" if ran.stdout else ""
        chunk = {
            "type": "tool-output-error",
            "toolCallId": inp.tool_call_id,
            "errorText": f"the program failed: {ran.error}{printed}",
        }
    else:
        chunk = {
            "type": "tool-output-available",
            "toolCallId": inp.tool_call_id,
            "output": ran.output(),
        }
    return await calls.record(agent, turn.id, inp.tool_call_id, [chunk])


class _Steps:
    """The program's calls as durable steps (`run_execute`)."""

    def __init__(
        self,
        calls: ToolCalls,
        agent: Think,
        turn_id: str,
        inp: ToolCallInput,
        tools: dict[str, Tool],
    ) -> None:
        self.calls = calls
        self.agent = agent
        self.turn_id = turn_id
        self.inp = inp
        self.tools = tools
        self.decisions = {d.approval_id: d for d in inp.inner_decisions}
        self.awaiting: ToolCallRef | None = None

    async def call(self, seq: int, name: str, raw_input: Any) -> CallAnswer:
        call_id = inner_call_id(self.inp.tool_call_id, seq)
        turn = await self.calls.res.store.get_turn(self.turn_id)
        if turn is None or turn.terminal:
            raise ToolError("the turn has ended")
        part = MessageBuilder(turn.message).tool_part(call_id)
        tool = self.tools.get(name)
        if part is not None:
            if tool_name(part) != name or part.get("input") != raw_input:
                raise ToolError(
                    f"call {seq} was tools.{tool_name(part)}({part.get('input')!r}) when this "
                    "program ran before: a program must make the same calls in the same order"
                )
            if is_settled(part):
                return _answer_of(part)  # settled before: its record answers, nothing runs
        else:
            if tool is None:
                known = ", ".join(sorted(self.tools)) or "none"
                raise ToolError(f"there is no tool named {name!r} (the tools: {known})")
            if not isinstance(raw_input, dict):
                raise ToolError(f"the input of {name!r} must be keyword arguments")
            tool.validate(raw_input)  # a bad input raises in the program, and is not recorded
            announce: UIMessageChunk = {
                "type": "tool-input-available",
                "toolCallId": call_id,
                "toolName": name,
                "input": raw_input,
            }
            chunks = [announce]
            ref = ToolCallRef(tool_call_id=call_id, tool_name=name, run=tool_run(tool.policy))
            if await _needs_approval(self.agent, turn, tool, ref, raw_input):
                asked = new_id("approval")
                chunks.append(
                    {
                        "type": "tool-approval-request",
                        "approvalId": asked,
                        "toolCallId": call_id,
                    }
                )
            await self.calls.record(self.agent, turn.id, call_id, chunks)
            turn = await self.calls.res.store.get_turn(self.turn_id)
            assert turn is not None
            part = MessageBuilder(turn.message).tool_part(call_id)
            assert part is not None
        assert tool is not None
        approval: dict[str, Any] = dict(part.get("approval") or {})
        approval_id = approval.get("id")
        decision: ToolDecision | None = None
        if approval_id:
            decision = self.decisions.get(approval_id)
            if decision is None:
                self.awaiting = ToolCallRef(
                    tool_call_id=call_id,
                    tool_name=name,
                    kind="approval",
                    approval_id=approval_id,
                    run=tool_run(tool.policy),
                )
                raise Paused(seq)
            decision = await self.calls.decided(self.agent, turn, part, name, call_id, decision)
            if decision is not None and not decision.approved:
                why = f": {decision.reason}" if decision.reason else ""
                return CallAnswer(error=f"the call of {name} was denied{why}")
        return await self._run(turn, tool, call_id, name, raw_input, decision)

    async def _run(
        self,
        turn: TurnRecord,
        tool: Tool,
        call_id: str,
        name: str,
        raw_input: Any,
        decision: ToolDecision | None,
    ) -> CallAnswer:
        context = ToolContext(
            **tool_call_ids(turn, call_id, name),
            attempt=activity.info().attempt,
            config=self.agent.get_config(),
        )
        site = call_site(turn, self.agent, call_id)
        chunks, ran = await self.calls._run(self.agent, tool, context, raw_input, site, decision)
        await self.calls.record(self.agent, turn.id, call_id, chunks)
        await observe.tool_called(
            turn, name, call_id, _OUTCOMES[ran.outcome], ran.duration_ms, ran.error
        )
        after = await self.calls.res.store.get_turn(self.turn_id)
        part = MessageBuilder(after.message).tool_part(call_id) if after else None
        if part is not None and is_settled(part):
            return _answer_of(part)  # what stands in the record (an earlier attempt's, maybe)
        return _answer_of(chunks[0])


_OUTCOMES: dict[str, Literal["success", "error", "blocked", "substituted"]] = {
    "executed": "success",
    "failed": "error",
    "blocked": "blocked",
    "substituted": "substituted",
}


def _answer_of(part: Any) -> CallAnswer:
    state = part.get("state") or part.get("type")
    if state in ("output-available", "tool-output-available"):
        return CallAnswer(output=part.get("output"))
    if state in ("output-denied", "tool-output-denied"):
        return CallAnswer(error="the call was denied")
    return CallAnswer(error=str(part.get("errorText") or "the call failed"))
