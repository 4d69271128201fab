"""A turn as MCP shows it: the caller (from the HTTP request the message came on), the turn
of a task id, the tool result of a settled turn, and the approvals a paused turn asks for as
form elicitations. Shared by the tool handlers (`_tools`) and the Tasks extension (`_tasks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    TextContent,
)
from starlette.requests import Request

from api import _answers
from api.deps import Principal, Resources
from api.errors import Problem
from think.server import (
    TERMINAL_STATUSES,
    ToolDecision,
    TurnRecord,
    public_turn_id,
    turn_view,
)

PRINCIPAL = "think.mcp.principal"
"""The ASGI scope key under which `/mcp`'s endpoint leaves the caller for the handlers."""

META_CONVERSATION = "io.think/conversation_id"
META_TURN = "io.think/turn_id"
"""The `_meta` keys of a tool result: the conversation to continue, the turn that answered."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve", "description": "Run the tool call"},
        "reason": {"type": "string", "title": "Reason", "description": "Why (optional)"},
    },
    "required": ["approved"],
}
"""What an approval asks of the person: a yes or no, and optionally why."""


@dataclass(frozen=True)
class Caller:
    """Who sent the MCP message, and the gateway's resources."""

    res: Resources
    principal: Principal

    @property
    def tenant(self) -> str:
        return self.principal.tenant


def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller of the message `ctx` carries: the endpoint authenticated the HTTP request
    it came on (`McpEndpoint`) and left the principal in its scope."""
    request = ctx.request
    if not isinstance(request, Request) or PRINCIPAL not in request.scope:
        # Only reachable if the server were mounted without its endpoint: refuse, never guess.
        raise MCPError(code=INVALID_PARAMS, message="unauthenticated message")
    resources: Resources = request.app.state.resources
    return Caller(resources, request.scope[PRINCIPAL])


def not_found(task_id: str) -> MCPError:
    """The one answer for a task that does not exist and for another tenant's: the same code
    and words, so a guess reveals nothing."""
    return MCPError(
        code=INVALID_PARAMS, message=f"Failed to retrieve task: task {task_id!r} not found"
    )


async def task_turn(caller: Caller, task_id: str) -> TurnRecord:
    """The caller's turn that task id `task_id` names (a task id is the turn's id)."""
    turn = await caller.res.store.get_turn(task_id) if task_id.startswith("turn_") else None
    if turn is None or turn.tenant != caller.tenant:
        raise not_found(task_id)
    return turn


def answer_text(turn: TurnRecord) -> str:
    """The text of the turn's answer: its message's text parts, or what ended it."""
    message: dict[str, Any] = dict(turn.message or {})
    parts = message.get("parts") or []
    text = "".join(
        str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )
    if turn.status == "completed":
        return text
    ended = f"the turn ended {turn.status}" + (f": {turn.error}" if turn.error else "")
    return f"{text}\n\n({ended})" if text else ended


def tool_result(turn: TurnRecord) -> CallToolResult:
    """A settled turn as a tool's result: the answer's text, its structured output when the
    turn had an output type, and where to continue (`_meta`). A turn that did not complete is
    a tool error (`isError`), which the model calling the tool can read and act on."""
    output = turn.output
    return CallToolResult(
        content=[TextContent(text=answer_text(turn))],
        structured_content=output if isinstance(output, dict) else None,
        is_error=turn.status != "completed",
        _meta={META_CONVERSATION: turn.conversation_id, META_TURN: public_turn_id(turn.id)},
    )


def approval_requests(turn: TurnRecord) -> dict[str, ElicitRequest]:
    """The turn's undecided approvals as form elicitations, keyed by approval id (unique for
    the turn's life, as an input request's key must be)."""
    return {
        pending.approval_id: ElicitRequest(
            params=ElicitRequestFormParams(
                message=f"Agent {turn.agent!r} asks to run the tool {pending.tool_name!r} "
                f"with input {pending.input!r}. Approve?",
                requested_schema=APPROVAL_SCHEMA,
            )
        )
        for pending in turn_view(turn).pending_approvals
    }


def decision_of(approval_id: str, answer: ElicitResult, caller: Caller) -> ToolDecision:
    """An elicitation's answer as the approval route records a decision: approved only when
    the person accepted with `approved: true`; declining or dismissing the form denies."""
    content = answer.content or {}
    approved = answer.action == "accept" and content.get("approved") is True
    reason = content.get("reason")
    if answer.action != "accept":
        reason = f"the MCP client answered {answer.action!r}"
    return ToolDecision(
        approval_id=approval_id,
        approved=approved,
        reason=reason if isinstance(reason, str) and reason else None,
        by="mcp",
        principal=caller.principal.label,
    )


async def decide(caller: Caller, turn: TurnRecord, answers: dict[str, ElicitResult]) -> None:
    """Record the answers to the turn's approval requests through the approval route's own
    path (`api._answers.answer_approval`), with the caller's key as the approver. Answers to
    requests the turn no longer has are ignored, as the Tasks extension asks."""
    agent = caller.res.registry.get(turn.agent)
    if agent.approvers is not None and caller.principal.key_name not in agent.approvers:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"this key may not decide {agent.name!r}'s approvals: the agent restricts "
            "them to its approvers' keys (Think.approvers)",
        )
    pending = {p.approval_id for p in turn_view(turn).pending_approvals}
    for approval_id, answer in answers.items():
        if approval_id not in pending or turn.status in TERMINAL_STATUSES:
            continue
        try:
            turn, _ = await _answers.answer_approval(
                caller.res, turn, decision_of(approval_id, answer, caller)
            )
        except Problem as refused:
            if refused.status != 409:  # 409: decided meanwhile, by another door: it stands
                raise MCPError(code=INVALID_PARAMS, message=refused.detail) from None
