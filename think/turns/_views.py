"""The turn view: what every door shows of a turn, read from its record in one place.

HTTP's `Turn` (`api.schemas.TurnOut`), the Python API's `TurnResult` and `Submission` are
each a selection of this view, so a field means the same thing wherever it is read and a new
one is added once (`TurnFields` declares what the view and HTTP's `Turn` both show). Which
tool calls a paused turn waits for (its pending approvals and client tool calls) is decided
here too, from the turn's stored message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from think._messages import UIMessage
from think._protocol import (
    ToolCallPart,
    approval_part,
    awaits_approval,
    awaits_result,
    is_decided,
    is_settled,
    parts_of,
    tool_calls,
    tool_name,
    tool_part,
)
from think.agent import QueuedBehind, Submission, TurnResult
from think.storage import (
    TurnRecord,
    TurnStatus,
    TurnUsage,
    public_turn_id,
    public_turn_id_or_none,
)


class PendingApproval(BaseModel):
    """A tool call the turn paused for, until a person approves or denies it."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    input: Any


class PendingClientTool(BaseModel):
    """A call of one of the request's client tools, until the client sends its result."""

    tool_call_id: str
    tool_name: str
    input: Any


def client_tool_names(turn: TurnRecord) -> set[str]:
    """The client tools the turn's request declared: calls of these wait for the client."""
    return {str(t["name"]) for t in turn.request.client_tools}


def approval_request(turn: TurnRecord, approval_id: str) -> ToolCallPart | None:
    """The tool call of the turn's message whose approval `approval_id` was requested."""
    return approval_part(parts_of(turn.message), approval_id)


def approval_decided(turn: TurnRecord, approval_id: str) -> bool:
    """Whether the turn's message shows approval `approval_id` answered."""
    part = approval_request(turn, approval_id)
    return part is not None and is_decided(part)


def client_tool_call(turn: TurnRecord, tool_call_id: str) -> ToolCallPart | None:
    """The call `tool_call_id` of one of the request's client tools, if the message holds it
    (static or dynamic: `tool_name` reads either)."""
    part = tool_part(parts_of(turn.message), tool_call_id)
    if part is None or tool_name(part) not in client_tool_names(turn):
        return None
    return part


def tool_call_answered(turn: TurnRecord, tool_call_id: str) -> bool:
    """Whether the turn's message shows call `tool_call_id` settled (an output, an error or
    a denial)."""
    part = tool_part(parts_of(turn.message), tool_call_id)
    return part is not None and is_settled(part)


def pending_approvals(turn: TurnRecord) -> list[PendingApproval]:
    """The approval requests of the turn's message that no one has decided (none once the
    turn has ended)."""
    if turn.terminal:
        return []
    return [
        PendingApproval(
            approval_id=part["approval"]["id"],
            tool_call_id=part["toolCallId"],
            tool_name=tool_name(part),
            input=part.get("input"),
        )
        for part in tool_calls(parts_of(turn.message))
        if awaits_approval(part)
    ]


def pending_client_tools(turn: TurnRecord) -> list[PendingClientTool]:
    """The client tool calls of the turn's message still waiting for a result (none once the
    turn has ended)."""
    if turn.terminal:
        return []
    clients = client_tool_names(turn)
    return [
        PendingClientTool(
            tool_call_id=part["toolCallId"], tool_name=tool_name(part), input=part.get("input")
        )
        for part in tool_calls(parts_of(turn.message))
        if awaits_result(part) and tool_name(part) in clients
    ]


class TurnFields(BaseModel):
    """The fields of a turn that the view and HTTP's `Turn` (`api.schemas.TurnOut`) both
    show, declared once, in the order both show them. `status` is any string here, as HTTP's
    schema documents it; the view narrows it to a `TurnStatus`."""

    turn_id: str
    conversation_id: str
    agent: str
    status: str
    accepted: bool
    idempotency_key: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    message_id: str | None
    message: dict[str, Any] | None
    error: str | None
    usage: TurnUsage = Field(
        default_factory=TurnUsage,
        description="What the turn spent: tokens by kind, cost in US dollars (null when a "
        "model's price is unknown), the models that answered, and each model step",
    )
    output: Any = Field(
        default=None, description="The validated structured output, when the turn asked for one"
    )
    answered_by: str | None = Field(
        default=None,
        description="For a submission merged into another turn (message_concurrency merge or "
        "debounce; it ends skipped): the turn that appended its messages and answered them",
    )


class TurnView(TurnFields):
    """Everything a door shows of a turn. `accepted` is about the call that asked (False when
    it repeated a known idempotency key or submission id), not about the turn."""

    model_config = ConfigDict(frozen=True)

    status: TurnStatus
    continuation: bool
    pending_approvals: list[PendingApproval]
    pending_client_tools: list[PendingClientTool]

    def submission(self) -> Submission:
        """The submission record (`submit` mode, `get_submission`): no message."""
        return Submission(
            **{name: value for name, value in self if name in Submission.model_fields}
        )

    def result(self, queued_behind: TurnRecord | None = None) -> TurnResult:
        """How the turn ended, or where it stands (`wait` mode): the message only when it
        has parts; and the paused turn ahead that ended the wait early, if one did."""
        message = self.message if self.message and self.message.get("parts") else None
        fields = {name: value for name, value in self if name in TurnResult.model_fields}
        return TurnResult(
            **{
                **fields,
                "message": UIMessage.model_construct(**message) if message else None,
                "queued_behind": None
                if queued_behind is None
                else QueuedBehind(
                    turn_id=public_turn_id(queued_behind.id), status=queued_behind.status
                ),
            }
        )


_AS_RECORDED = (
    "conversation_id",
    "agent",
    "status",
    "idempotency_key",
    "created_at",
    "started_at",
    "completed_at",
    "message_id",
    "message",
    "error",
    "output",
)
"""The view's fields that are the record's, as they are."""


def turn_view(turn: TurnRecord, *, accepted: bool = True) -> TurnView:
    """The view of a turn as it stands in its record. Its id, and the answering turn's, as
    clients name them (`public_turn_id`): a submission id as it was given."""
    return TurnView(
        **{name: getattr(turn, name) for name in _AS_RECORDED},
        turn_id=public_turn_id(turn.id),
        usage=TurnUsage.from_record(turn.usage),
        accepted=accepted,
        answered_by=public_turn_id_or_none(turn.answered_by),
        continuation=turn.request.continuation,
        pending_approvals=pending_approvals(turn),
        pending_client_tools=pending_client_tools(turn),
    )
