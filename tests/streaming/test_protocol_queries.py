"""The part queries of `think._protocol` and the turn view built on them: what a paused turn
waits for is read from its message the same way whether a call's tool is static
(`tool-<name>`) or dynamic (`dynamic-tool`, its name in `toolName`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from think._protocol import (
    approval_part,
    joined_reasoning,
    joined_text,
    last_step_text,
    parts_of,
    split_steps,
    tool_calls,
    tool_part,
)
from think.storage import TurnRecord
from think.storage._records import TurnRequest
from think.streaming._builder import MessageBuilder
from think.turns._views import (
    approval_decided,
    approval_request,
    client_tool_call,
    pending_approvals,
    pending_client_tools,
    tool_call_answered,
)


def _turn(parts: list[dict[str, Any]], client_tools: tuple[str, ...] = ()) -> TurnRecord:
    now = datetime.now(UTC)
    return TurnRecord(
        id="turn_1",
        conversation_uid="u",
        conversation_id="c",
        tenant="default",
        agent="helper",
        idempotency_key=None,
        request_hash="h",
        request=TurnRequest(
            messages=[], client_tools=[{"name": n, "input_schema": {}} for n in client_tools]
        ),
        status="awaiting_approval",
        created_at=now,
        started_at=now,
        completed_at=None,
        message_id="msg_1",
        parent_id=None,
        message={"id": "msg_1", "role": "assistant", "parts": parts},
        error=None,
        steps_done=1,
        usage={},
    )


DYNAMIC_APPROVAL = {
    "type": "dynamic-tool",
    "toolName": "delete_file",
    "toolCallId": "call_del",
    "state": "approval-requested",
    "input": {"path": "a.txt"},
    "approval": {"id": "approval_1"},
}
DYNAMIC_CLIENT_CALL = {
    "type": "dynamic-tool",
    "toolName": "get_location",
    "toolCallId": "call_loc",
    "state": "input-available",
    "input": {},
}


def test_a_dynamic_tool_call_is_named_by_its_tool_name_in_the_turn_view() -> None:
    # `tool_part_name` cut the type after `tool-`: a dynamic call was named "ic-tool", so a
    # client tool called dynamically was never pending, and its result was refused (404).
    turn = _turn([{"type": "step-start"}, DYNAMIC_APPROVAL, DYNAMIC_CLIENT_CALL], ("get_location",))
    (approval,) = pending_approvals(turn)
    assert (approval.tool_name, approval.tool_call_id) == ("delete_file", "call_del")
    (client,) = pending_client_tools(turn)
    assert (client.tool_name, client.tool_call_id) == ("get_location", "call_loc")
    assert client_tool_call(turn, "call_loc") is not None
    assert client_tool_call(turn, "call_del") is None  # not a client tool
    assert approval_request(turn, "approval_1") is not None


def test_answers_show_once_the_message_records_them() -> None:
    decided = {**DYNAMIC_APPROVAL, "state": "approval-responded"}
    decided["approval"] = {"id": "approval_1", "approved": True}
    answered = {**DYNAMIC_CLIENT_CALL, "state": "output-available", "output": {"city": "Lyon"}}
    before = _turn([DYNAMIC_APPROVAL, DYNAMIC_CLIENT_CALL], ("get_location",))
    after = _turn([decided, answered], ("get_location",))
    assert not approval_decided(before, "approval_1") and approval_decided(after, "approval_1")
    assert not tool_call_answered(before, "call_loc") and tool_call_answered(after, "call_loc")
    assert not approval_decided(after, "approval_unknown")
    assert pending_approvals(after) == [] and pending_client_tools(after) == []


def test_steps_and_their_text() -> None:
    parts: list[dict[str, Any]] = [
        {"type": "step-start"},
        {"type": "reasoning", "text": "hmm"},
        {"type": "text", "text": "Let me look. "},
        {"type": "tool-search", "toolCallId": "c1", "state": "output-available", "output": 1},
        {"type": "step-start"},
        {"type": "text", "text": "Found "},
        {"type": "text", "text": "it."},
    ]
    lead, first, second = split_steps(parts)
    assert lead == [] and len(first) == 3 and len(second) == 2
    assert joined_text(first) == "Let me look. " and joined_reasoning(first) == "hmm"
    assert [p["toolCallId"] for p in tool_calls(first)] == ["c1"]
    assert last_step_text(parts) == "Found it."
    assert last_step_text(parts[:4]) == "Let me look. "
    assert last_step_text([{"type": "text", "text": "no steps"}]) == "no steps"
    assert tool_part(parts, "c1") is parts[3] and tool_part(parts, "c2") is None
    assert approval_part(parts, "a") is None
    assert parts_of(None) == [] and parts_of({"parts": parts}) is parts


def test_the_builder_passes_over_a_chunk_type_it_does_not_know() -> None:
    # A stream log written by a newer version may hold one: the fold goes on, as the SDK's does.
    builder = MessageBuilder()
    builder.apply({"type": "start-step"})
    builder.apply({"type": "some-future-chunk", "id": "x"})
    builder.apply({"type": "data-note", "data": 1, "transient": True})
    builder.apply({"type": "data-note", "id": "n", "data": 1})
    builder.apply({"type": "data-note", "id": "n", "data": 2})
    assert builder.parts == [{"type": "step-start"}, {"type": "data-note", "id": "n", "data": 2}]
