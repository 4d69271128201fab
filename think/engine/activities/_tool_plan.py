"""What happens to each tool call of a step: run it, ask a person first, or wait for the client.

Decided in the model-step activity, where the agent's code may run (an approval policy is a
user function), and handed to the workflow as plain `ToolCallRef`s. A step that is answered
again from its record (`recorded_calls`) re-derives the same plan from the stored message, so
a retried activity never asks twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from think._messages import new_id
from think._protocol import (
    PartLike,
    ToolApprovalRequestChunk,
    UIMessageJSON,
    is_settled,
    is_static_tool_part,
    parts_of,
    split_steps,
    tool_name,
)
from think.agent import AgentTool, StoredTurnConfig, Think, stored_or
from think.codemode import is_inner_call_id
from think.engine.activities._actions import ActionFailure, authorize, call_site, key_of
from think.engine.activities._ids import tool_call_ids
from think.storage import TurnRecord
from think.streaming import MessageBuilder
from think.tools import Action, Tool, ToolContext, ToolPolicy
from think.workflows.inputs import ModelStepResult, ToolCallRef, ToolRun

log = logging.getLogger("think.engine.activities")

HEARTBEAT_SECONDS = 30.0
"""Heartbeat timeout of a tool that sets none; the framework beats every second for it."""
SLACK_SECONDS = 30.0
PREVIEW_CHARS = 120


def client_tool_names(turn: TurnRecord) -> set[str]:
    return {str(t["name"]) for t in turn.request.client_tools}


def tool_run(policy: ToolPolicy | None) -> ToolRun:
    """The activity's timeouts: every attempt of the tool and every backoff between them fit
    in its start-to-close, so Temporal only ever retries what a crash or outage interrupted."""
    if policy is None:
        return ToolRun()
    total, delay = 0.0, policy.retry_initial_seconds
    for attempt in range(policy.max_attempts):
        total += policy.timeout_seconds
        if attempt + 1 < policy.max_attempts:
            total += delay
            delay = min(delay * policy.retry_backoff, policy.retry_max_seconds)
    return ToolRun(
        timeout_seconds=total + SLACK_SECONDS,
        heartbeat_seconds=policy.heartbeat_seconds or HEARTBEAT_SECONDS,
        approval_timeout_seconds=policy.approval_timeout_seconds,
        local=policy.heartbeat_seconds is None,
    )


def preview(name: str, value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return f"{name} {text}"


async def plan_calls(
    agent: Think,
    turn: TurnRecord,
    calls: list[ToolCallRef],
    builder: MessageBuilder,
    tools: dict[str, Tool],
) -> tuple[list[ToolCallRef], list[ToolApprovalRequestChunk]]:
    """Classify a fresh step's calls, with the `tool-approval-request` chunks to stream for
    those that wait for a person."""
    clients = client_tool_names(turn)
    planned: list[ToolCallRef] = []
    chunks: list[ToolApprovalRequestChunk] = []
    for call in calls:
        part = builder.tool_part(call.tool_call_id)
        arguments = part.get("input") if part is not None else None
        shown = preview(call.tool_name, arguments)
        tool = tools.get(call.tool_name)
        if call.tool_name in clients and tool is None:
            planned.append(call.model_copy(update={"kind": "client", "preview": shown}))
            continue
        run = tool_run(tool.policy if tool else None)
        # An agent tool's call is a sub-agent's turn, which the workflow waits for without an
        # activity; like any call, it may first wait for a person (the same approval id).
        kind = "agent" if isinstance(tool, AgentTool) else "server"
        if tool is not None and await _needs_approval(agent, turn, tool, call, arguments):
            approval_id = new_id("approval")
            chunks.append(
                {
                    "type": "tool-approval-request",
                    "approvalId": approval_id,
                    "toolCallId": call.tool_call_id,
                }
            )
            update = {"kind": "approval" if kind == "server" else kind, "approval_id": approval_id}
            planned.append(call.model_copy(update={**update, "preview": shown, "run": run}))
            continue
        planned.append(call.model_copy(update={"kind": kind, "preview": shown, "run": run}))
    return planned, chunks


async def _needs_approval(
    agent: Think, turn: TurnRecord, tool: Tool, call: ToolCallRef, arguments: Any
) -> bool:
    if not tool.policy.needs_approval:
        return False
    if not isinstance(arguments, dict):
        return False  # the call fails validation and never runs: nothing to approve
    try:
        validated = tool.validate(arguments)
    except Exception:
        return False  # likewise: the model gets the validation error instead
    context = ToolContext(
        **tool_call_ids(turn, call.tool_call_id, call.tool_name, agent.name),
        config=agent.get_config(),
    )
    if isinstance(tool, Action) and tool.parks:
        return False  # parked by its tool call, outside the turn (`ActionRunner`)
    try:
        needed = await tool.approval_required(validated, context)
    except Exception:
        # A policy that crashes must not let the tool through unasked.
        log.warning("approval policy of tool %s failed; asking a person", tool.name, exc_info=True)
        needed = True
    if needed and isinstance(tool, Action):
        # Nobody is asked to approve what would be refused: the call runs unasked, and its
        # authorization (run again before it executes) refuses it for the model to read.
        try:
            key = key_of(tool, validated)
            site = call_site(turn, agent, call.tool_call_id)
            await authorize(agent, tool, site, key, validated, "before_approval")
        except ActionFailure:
            return False
    return needed


def recorded_calls(
    turn: TurnRecord, parts: Sequence[PartLike], tools: dict[str, Tool]
) -> list[ToolCallRef]:
    """The plan of a step that is already recorded, from its stored parts: calls without a
    settled result, with the approval ids the step announced."""
    clients = client_tool_names(turn)
    planned: list[ToolCallRef] = []
    inner = program_calls(parts)
    for part in parts:
        if not is_static_tool_part(part) or is_settled(part):
            continue
        if str(part.get("toolCallId")) in inner:
            continue  # a code-mode program's call: its `execute` call runs it, not the step
        name = tool_name(part)
        tool = tools.get(name)
        call = ToolCallRef(
            tool_call_id=part["toolCallId"],
            tool_name=name,
            preview=preview(name, part.get("input")),
            run=tool_run(tool.policy if tool else None),
        )
        approval = part.get("approval") or {}
        if isinstance(tool, AgentTool):
            update = {"kind": "agent", "approval_id": approval.get("id") or None}
            call = call.model_copy(update=update)
        elif approval.get("id"):
            call = call.model_copy(update={"kind": "approval", "approval_id": approval["id"]})
        elif name in clients and tool is None:
            call = call.model_copy(update={"kind": "client"})
        planned.append(call)
    return planned


def program_calls(parts: Sequence[PartLike]) -> set[str]:
    """The ids of the tool parts that a code-mode program made (`<execute call id>:<seq>`,
    beside that call's own part), not the model."""
    ids = {str(p.get("toolCallId")) for p in parts if is_static_tool_part(p)}
    return {i for i in ids if is_inner_call_id(i) and i.rpartition(":")[0] in ids}


def paused_status(message: UIMessageJSON, clients: set[str], tools: dict[str, Tool]) -> str:
    """The turn's status as its message says: waiting for a person, for the client, or not."""
    waiting_client = False
    for part in message.get("parts", []):
        state = part.get("state")
        if state == "approval-requested":
            return "awaiting_approval"
        if (
            state == "input-available"
            and is_static_tool_part(part)
            and (name := tool_name(part)) in clients
            and name not in tools
        ):
            waiting_client = True
    return "awaiting_client_tool" if waiting_client else "running"


def recorded_step(
    turn: TurnRecord, step: int, tools: dict[str, Tool], max_steps: int
) -> ModelStepResult:
    """What step `step` answered, from the turn's record (a previous attempt finished it but
    its completion never reached Temporal): its calls' plan again, or no calls (the step
    that answered, or one a steering message followed)."""
    steps = split_steps(parts_of(turn.message))[1:]  # what comes before the first: nothing
    parts = steps[step] if step < len(steps) else []
    called = any(is_static_tool_part(p) for p in parts)
    return ModelStepResult(
        max_steps=stored_or(StoredTurnConfig.read(turn.config).max_steps, max_steps),
        tool_calls=recorded_calls(turn, parts, tools),
        called_tools=called,
        finish_reason="tool-calls" if called else "stop",
    )
