"""Read-time truncation (`Think.truncation_step`): older tool outputs and long texts are cut
for the model, in steps, never in storage."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from think import Think, ThinkService, UIMessage, UserError
from think.sessions._truncation import TEXT_LIMIT, TOOL_OUTPUT_LIMIT, cutoff, truncate
from think.testing import FakeOpenAIServer, text


def user(words: str) -> UIMessage:
    return UIMessage.user_text(words)


def answer(i: int, output: Any) -> UIMessage:
    return UIMessage(
        id=f"a{i}",
        role="assistant",
        parts=[
            {"type": "step-start"},
            {
                "type": "tool-lookup",
                "toolCallId": f"call_{i}",
                "state": "output-available",
                "input": {"i": i},
                "output": output,
            },
            {"type": "step-start"},
            {"type": "text", "text": f"answer {i}"},
        ],
    )


def conversation(count: int, *, output_chars: int = 4000) -> list[UIMessage]:
    """`count` messages: long questions and answers with a long tool output each."""
    return [
        user("q" * 12_000) if i % 2 == 0 else answer(i, "o" * output_chars) for i in range(count)
    ]


def cut_count(messages: list[UIMessage]) -> int:
    """How many of the messages the model reads cut."""
    return sum(1 for m in messages if "more characters cut" in json.dumps(m.parts))


@pytest.mark.parametrize(
    ("count", "step", "cut"),
    [
        (4, 8, 0),
        (8, 8, 0),
        (12, 8, 8),
        (16, 8, 8),
        (19, 8, 8),  # 11 whole: the most the default leaves between cuts
        (20, 8, 16),
        (4, 1, 0),
        (8, 1, 4),
        (12, 1, 8),
        (16, 1, 12),
        (16, None, 0),
        (16, math.inf, 0),
        (3, 8, 0),
        (0, 8, 0),
    ],
)
def test_cut_points(count: int, step: int | float | None, cut: int) -> None:
    assert cutoff(count, step) == cut
    messages = conversation(count)
    assert cut_count(truncate(messages, step)) == cut


def test_what_is_cut_and_what_is_not() -> None:
    messages = conversation(12)
    originals = [m.model_copy(deep=True) for m in messages]
    read = truncate(messages, 8)
    assert messages == originals  # never in place
    assert read[8:] == messages[8:]  # the newest whole, as the same objects
    question = read[0].parts[0]["text"]
    assert question.startswith("q" * TEXT_LIMIT) and len(question) < TEXT_LIMIT + 60
    assert question.endswith("[2,000 more characters cut from this older message]")
    tool = read[1].parts[1]
    assert tool["output"].startswith("o" * TOOL_OUTPUT_LIMIT)
    assert tool["output"].endswith("[3,500 more characters cut from this older message]")
    assert tool["input"] == {"i": 1} and read[1].parts[3]["text"] == "answer 1"
    # A short output, a structured one, and an error are measured by what the model reads.
    short, structured = answer(1, "fine"), answer(3, {"rows": ["x" * 600]})
    pending = {"type": "dynamic-tool", "toolName": "t", "toolCallId": "c", "input": {}}
    error = {"type": "tool-t", "toolCallId": "d", "state": "output-error", "errorText": "e" * 900}
    failed = UIMessage(role="assistant", parts=[pending, error])
    read = truncate([short, structured, failed, *conversation(4)], 1)
    assert read[0] is short
    assert read[1].parts[1]["output"].startswith('{"rows": ["xxx')
    assert read[2].parts[0] == failed.parts[0]
    assert read[2].parts[1]["errorText"].startswith("e" * TOOL_OUTPUT_LIMIT + "…")


def test_the_prefix_changes_once_every_step() -> None:
    """Turn after turn (two messages each), the cut part of the prompt changes only when the
    cut-off moves: every 8 messages, not every turn."""
    history = conversation(40)
    changes = []
    previous: list[UIMessage] = []
    for count in range(2, 41, 2):
        read = truncate(history[:count], 8)
        if read[: len(previous)] != previous:
            changes.append(count)
        previous = read
    assert changes == [12, 20, 28, 36]


def test_truncation_step_is_checked_where_the_agent_is_defined() -> None:
    for bad in (0, -1, 2.5, "8", True):
        with pytest.raises(UserError, match="truncation_step"):
            type("Bad", (Think,), {"truncation_step": bad})
    for good in (1, 8, None, math.inf):
        type("Good", (Think,), {"truncation_step": good})
    with pytest.raises(UserError, match="hydration_byte_budget"):
        type("Bad", (Think,), {"hydration_byte_budget": 0})


async def test_the_model_reads_older_messages_cut(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation("helper", cid)
    await conv.add_messages(conversation(12, output_chars=1000))
    fake_model.script(cid, text("ok"))
    assert (await conv.run_turn("and now?")).status == "completed"

    sent = fake_model.requests(cid)[0]["body"]["messages"]
    tools = [m["content"] for m in sent if m["role"] == "tool"]
    assert len(tools) == 6
    for output in tools[:4]:  # in the 8 oldest of the 13 messages
        assert output.startswith("o" * TOOL_OUTPUT_LIMIT) and "500 more characters cut" in output
    assert tools[4:] == ["o" * 1000, "o" * 1000]
    questions = [m["content"] for m in sent if m["role"] == "user"]
    assert [len(q) for q in questions[4:]] == [12_000, 12_000, len("and now?")]
    assert all(q.startswith("q" * TEXT_LIMIT + "…") for q in questions[:4])
    # Storage keeps every character.
    stored = await conv.messages()
    assert stored[1].parts[1]["output"] == "o" * 1000 and len(stored[0].parts[0]["text"]) == 12_000
