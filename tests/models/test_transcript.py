"""UIMessages to Chat Completions messages, including the repair of unanswered tool calls."""

from __future__ import annotations

from typing import Any

from think._messages import UIMessage
from think.models._transcript import INTERRUPTED_TOOL_RESULT, to_chat_messages


def turn_with_tools() -> list[UIMessage]:
    return [
        UIMessage.user_text("go", id="u1"),
        UIMessage(
            id="a1",
            role="assistant",
            parts=[
                {"type": "step-start"},
                {"type": "text", "text": "Looking.", "state": "done"},
                {
                    "type": "tool-add",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"a": 1},
                    "output": 2,
                },
                {"type": "tool-slow", "toolCallId": "c2", "state": "input-available", "input": {}},
                {"type": "step-start"},
                {"type": "text", "text": "Done.", "state": "done"},
            ],
        ),
    ]


def test_steps_become_assistant_messages_with_tool_results_in_order() -> None:
    out = to_chat_messages("sys", turn_with_tools())
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in out[2]["tool_calls"]] == ["c1", "c2"]
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "content": "2"}
    assert out[4]["content"] == f"Error: {INTERRUPTED_TOOL_RESULT}"
    assert out[5] == {"role": "assistant", "content": "Done."}


def test_a_custom_repair_decides_what_the_model_reads() -> None:
    def repair(part: dict[str, Any]) -> dict[str, Any]:
        return {**part, "state": "output-available", "output": "cancelled by the user"}

    out = to_chat_messages("", turn_with_tools(), repair)
    assert out[3]["content"] == "cancelled by the user"


def test_a_repair_that_returns_a_text_part_makes_the_call_the_assistants_words() -> None:
    """The spec's own example (`ask_user` turned into the question it asked): the call leaves
    the transcript, its text joins the assistant's words in place. This raised `KeyError`."""

    def repair(part: dict[str, Any]) -> dict[str, Any]:
        if part["type"] == "tool-slow":
            return {"type": "text", "text": " Which city?"}
        return part

    out = to_chat_messages("", turn_with_tools(), repair)
    assert out[1:4] == [
        {
            "role": "assistant",
            "content": "Looking. Which city?",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "assistant", "content": "Done."},
    ]


def test_a_repair_that_leaves_the_call_unsettled_gets_the_default_error() -> None:
    out = to_chat_messages("sys", turn_with_tools(), lambda part: part)
    assert out[4]["content"] == f"Error: {INTERRUPTED_TOOL_RESULT}"


def test_a_repair_of_the_only_call_into_text_leaves_no_empty_tool_calls() -> None:
    asked = UIMessage(
        id="a2",
        role="assistant",
        parts=[
            {"type": "step-start"},
            {"type": "tool-ask_user", "toolCallId": "q", "state": "input-available", "input": {}},
        ],
    )
    out = to_chat_messages(
        "", [UIMessage.user_text("hi", id="u"), asked], lambda p: {"type": "text", "text": "Who?"}
    )
    assert out[1] == {"role": "assistant", "content": "Who?"}
