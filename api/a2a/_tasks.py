"""A turn as an A2A task, and a turn's stream chunks as A2A events.

The mapping is read from the turn's record and its stored chunks, never kept: the task's id
is the turn's (as clients name it, `public_turn_id`), its context id the conversation's, its
state the turn's status (`STATES`), its artifact the answer's text, its history the turn's
user messages and the answer. So any gateway answers for any task, and nothing is stored for
A2A's sake.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Value
from google.protobuf.timestamp_pb2 import Timestamp

from think.server import (
    PendingApproval,
    PendingClientTool,
    TurnRecord,
    TurnStatus,
    public_turn_id,
    turn_view,
)

ANSWER = "answer"
"""The id of a task's one artifact: the answer's text, streamed as it is written."""

STATES: Mapping[TurnStatus, TaskState] = {
    "pending": TaskState.TASK_STATE_SUBMITTED,
    "running": TaskState.TASK_STATE_WORKING,
    "awaiting_approval": TaskState.TASK_STATE_INPUT_REQUIRED,
    "awaiting_client_tool": TaskState.TASK_STATE_INPUT_REQUIRED,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "error": TaskState.TASK_STATE_FAILED,
    "interrupted": TaskState.TASK_STATE_FAILED,
    "aborted": TaskState.TASK_STATE_CANCELED,
    # Dropped or merged into another turn by the agent's message_concurrency: the agent never
    # answered this message on its own (the answering turn is in the task's metadata).
    "skipped": TaskState.TASK_STATE_REJECTED,
}
"""A turn's status as A2A's task state."""


def task_id(turn: TurnRecord) -> str:
    return public_turn_id(turn.id)


def _timestamp(when: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(when)
    return stamp


def _value(data: Any) -> Value:
    return ParseDict(data, Value())


def text_parts(parts: Iterable[Mapping[str, Any]]) -> str:
    """The text of a UI message's text parts, joined."""
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def agent_message(turn: TurnRecord, parts: list[Part], suffix: str) -> Message:
    return Message(
        message_id=f"{task_id(turn)}-{suffix}",
        context_id=turn.conversation_id,
        task_id=task_id(turn),
        role=Role.ROLE_AGENT,
        parts=parts,
    )


def _asks(
    approvals: list[PendingApproval], client_tools: list[PendingClientTool]
) -> tuple[str, list[dict[str, Any]]]:
    """What an input-required task asks for, in words and as data (one entry per request)."""
    asked: list[dict[str, Any]] = [
        {
            "kind": "approval",
            "approval_id": a.approval_id,
            "tool_name": a.tool_name,
            "input": a.input,
        }
        for a in approvals
    ] + [
        {
            "kind": "client_tool",
            "tool_call_id": c.tool_call_id,
            "tool_name": c.tool_name,
            "input": c.input,
        }
        for c in client_tools
    ]
    if approvals:
        names = ", ".join(sorted({a.tool_name for a in approvals}))
        words = (
            f"Approval needed to run {names}: reply in this task with the text approve or "
            'deny, or a data part {"approved": true} or {"approved": false}.'
        )
    else:
        names = ", ".join(sorted({c.tool_name for c in client_tools}))
        words = (
            f"Waiting for the result of client tool {names}: reply in this task with a data "
            'part {"tool_call_id": ..., "output": ...}.'
        )
    return words, asked


def status(turn: TurnRecord) -> TaskStatus:
    """The task's status: the state, when it last changed, and what the agent says with it
    (the answer once completed, what it needs when input is required, the error)."""
    view = turn_view(turn)
    when = turn.completed_at or turn.started_at or turn.created_at
    state = STATES[turn.status]
    message: Message | None = None
    if state == TaskState.TASK_STATE_INPUT_REQUIRED and (
        view.pending_approvals or view.pending_client_tools
    ):
        words, asked = _asks(view.pending_approvals, view.pending_client_tools)
        message = agent_message(
            turn,
            [Part(text=words), Part(data=_value({"requests": asked}))],
            f"input-{len(asked)}",
        )
    elif state == TaskState.TASK_STATE_COMPLETED and turn.message:
        message = agent_message(turn, [Part(text=text_parts(turn.message["parts"]))], "answer")
    elif state == TaskState.TASK_STATE_FAILED:
        message = agent_message(turn, [Part(text=turn.error or f"the turn {turn.status}")], "error")
    found = TaskStatus(state=state, timestamp=_timestamp(when))
    if message is not None:
        found.message.CopyFrom(message)
    return found


def task(turn: TurnRecord, history_length: int | None = None) -> Task:
    """The turn as a task: its status, its answer so far as the artifact, and its history
    (the turn's user messages, then the answer; the last `history_length` of them)."""
    history = [
        Message(
            message_id=m.id,
            context_id=turn.conversation_id,
            task_id=task_id(turn),
            role=Role.ROLE_USER,
            parts=[Part(text=text_parts(m.wire()["parts"]))],
        )
        for m in turn.request.messages
    ]
    artifacts = []
    answer = text_parts(turn.message["parts"]) if turn.message else ""
    if answer:
        artifacts.append(Artifact(artifact_id=ANSWER, name=ANSWER, parts=[Part(text=answer)]))
        history.append(agent_message(turn, [Part(text=answer)], "answer"))
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    found = Task(
        id=task_id(turn),
        context_id=turn.conversation_id,
        status=status(turn),
        artifacts=artifacts,
        history=history,
    )
    if turn.answered_by:
        found.metadata.update({"answered_by": public_turn_id(turn.answered_by)})
    return found


def status_event(turn: TurnRecord) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=task_id(turn), context_id=turn.conversation_id, status=status(turn)
    )


def text_event(turn: TurnRecord, delta: str, *, first: bool) -> TaskArtifactUpdateEvent:
    """A piece of the answer's text: the first starts the artifact, the rest append to it."""
    return TaskArtifactUpdateEvent(
        task_id=task_id(turn),
        context_id=turn.conversation_id,
        artifact=Artifact(artifact_id=ANSWER, name=ANSWER, parts=[Part(text=delta)]),
        append=not first,
    )
