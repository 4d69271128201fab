"""A worker's chat histories (`think.sessions._chat_history.ChatHistories`) send the model
exactly what evicting, truncating and converting the whole transcript would, while each step
converts only the messages that changed since the conversation's last step."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from think import UIMessage
from think.models import EncodedMessages
from think.models._chat_body import request_json
from think.models._transcript import INTERRUPTED_TOOL_RESULT, interrupted_tool_error
from think.models._transcript import to_chat_messages as convert_all
from think.sessions._chat_history import ChatHistories, ChatHistory
from think.sessions._eviction import MediaEviction, evict
from think.sessions._truncation import truncate

EVICTION = MediaEviction()
STEP = 8
PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG" + b"x" * 4000).decode()


def question(i: int) -> UIMessage:
    parts: list[dict[str, Any]] = [{"type": "text", "text": f"q{i} " + "q" * 12_000}]
    if i % 6 == 0:
        parts.append({"type": "file", "mediaType": "image/png", "url": PNG})
    return UIMessage(id=f"u{i}", role="user", parts=parts)


def answer(i: int, *, settled: bool = True) -> UIMessage:
    call: dict[str, Any] = {"type": "tool-lookup", "toolCallId": f"call_{i}", "input": {"i": i}}
    call |= (
        {"state": "output-available", "output": "o" * 2000}
        if settled
        else {"state": "input-available"}
    )
    return UIMessage(
        id=f"a{i}",
        role="assistant",
        parts=[
            {"type": "step-start"},
            call,
            {"type": "step-start"},
            {"type": "text", "text": f"a{i}"},
        ],
    )


def reference(transcript: list[UIMessage], repair: Any = interrupted_tool_error) -> list[Any]:
    """What a step sent before: the whole transcript evicted, truncated and converted."""
    evicted, _ = evict(transcript, EVICTION, STEP)
    return convert_all("", truncate(evicted, STEP), repair)


def convert(
    histories: ChatHistories,
    transcript: list[UIMessage],
    uid: str = "c1",
    repair: Any = interrupted_tool_error,
) -> ChatHistory:
    return histories.convert(
        uid, transcript, eviction=EVICTION, truncation_step=STEP, repair=repair
    )


def sent(
    histories: ChatHistories, transcript: list[UIMessage], repair: Any = interrupted_tool_error
) -> list[Any]:
    """The history's messages, checked against its JSON: the bytes a model client sends."""
    history = convert(histories, transcript, repair=repair)
    histories.keep(history)
    assert orjson.loads(b"[" + history.json + b"]") == history.messages
    return history.messages


def test_a_growing_conversation_converts_only_what_changed() -> None:
    histories = ChatHistories()
    transcript: list[UIMessage] = []
    for i in range(60):
        transcript = [*transcript, question(i), answer(i)]
        before = histories.converted
        assert sent(histories, transcript) == reference(transcript)
        if i > 0:
            # The two new messages, and those that crossed a cut-off (eviction's and
            # truncation's, each moving by at most one step): never the whole transcript.
            assert histories.converted - before <= 2 + 2 * STEP
    assert histories.converted < 3 * len(transcript)
    # A second step of the same turn: the same path, nothing to convert.
    before = histories.converted
    assert sent(histories, transcript) == reference(transcript)
    assert histories.converted == before


def test_a_shorter_path_a_branch_and_other_settings() -> None:
    histories = ChatHistories()
    long = [m for i in range(30) for m in (question(i), answer(i))]
    assert sent(histories, long) == reference(long)
    # A regenerate reads a prefix of the path: the cut-offs move back.
    shorter = long[:37]
    assert sent(histories, shorter) == reference(shorter)
    # A branch: the same root, another tail (equal ids, other content).
    branch = [*long[:20], UIMessage.user_text("elsewhere", id="u10"), answer(99)]
    assert sent(histories, branch) == reference(branch)
    assert sent(histories, long) == reference(long)
    # Another agent's settings on the same conversation: made afresh.
    other = histories.convert(
        "c1", long, eviction=None, truncation_step=None, repair=interrupted_tool_error
    )
    assert other.messages == convert_all("", long)
    assert orjson.loads(b"[" + other.json + b"]") == other.messages


def test_a_repaired_message_is_repaired_on_every_step() -> None:
    """The repair is the agent's to decide each time: what it made is never reused."""
    calls: list[str] = []

    def repair(part: dict[str, Any]) -> dict[str, Any]:
        calls.append(part["toolCallId"])
        return {**part, "state": "output-error", "errorText": f"repair {len(calls)}"}

    histories = ChatHistories()
    transcript = [question(0), answer(0, settled=False), question(1), answer(1)]
    for i in range(2, 6):
        transcript = [*transcript, question(i), answer(i)]
        before = len(calls)
        got = sent(histories, transcript, repair)
        assert calls[before:] == ["call_0"]  # once per step, for the one unsettled call
        result = {
            "role": "tool",
            "tool_call_id": "call_0",
            "content": f"Error: repair {len(calls)}",
        }
        assert result in got
        assert got == reference(
            transcript,
            lambda p: {**p, "state": "output-error", "errorText": f"repair {len(calls)}"},
        )
    made = sent(ChatHistories(), transcript)
    default = {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": f"Error: {INTERRUPTED_TOOL_RESULT}",
    }
    assert default in made


def test_what_a_repair_raises_keeps_nothing() -> None:
    def broken(part: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the agent's repair failed")

    histories = ChatHistories()
    transcript = [question(0), answer(0, settled=False)]
    try:
        sent(histories, transcript, broken)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the repair's exception was swallowed")
    assert sent(histories, transcript) == reference(transcript)


def test_histories_are_bounded() -> None:
    histories = ChatHistories(max_messages=10)
    transcript = [m for i in range(4) for m in (question(i), answer(i))]
    for uid in ("c1", "c2"):
        histories.keep(
            histories.convert(
                uid,
                transcript,
                eviction=EVICTION,
                truncation_step=STEP,
                repair=interrupted_tool_error,
            )
        )
    before = histories.converted
    sent(histories, transcript)  # c1 was dropped for c2: converted again
    assert histories.converted - before == len(transcript)


def test_a_request_sends_the_encoded_history_as_it_is() -> None:
    """`OpenAIModel` posts the run `ModelRequest.encoded` names as its bytes; the body means
    what encoding every message would."""
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    system = {"role": "system", "content": "s"}
    reminder = {"role": "user", "content": "r"}
    body = {"model": "m", "messages": [system, *history, reminder], "stream": True}
    json = b",".join(orjson.dumps(m) for m in history)
    whole = orjson.loads(request_json(body, EncodedMessages(1, 3, json)))
    assert whole == body
    # What the bytes say is what is sent, whatever the dicts hold: they are not encoded again.
    other = orjson.dumps({"role": "user", "content": "from the bytes"}) + b"," + json
    assert orjson.loads(request_json(body, EncodedMessages(1, 3, other)))["messages"][1] == {
        "role": "user",
        "content": "from the bytes",
    }
    empty = {**body, "messages": [system, reminder]}  # a conversation's first turn
    assert orjson.loads(request_json(empty, EncodedMessages(1, 1, b""))) == empty
    assert orjson.loads(request_json(body, None)) == body


def test_media_is_evicted_once() -> None:
    """What a history evicts for the first time is handed back to be preserved; once it is
    kept, the same image is not evicted again, and one never kept is evicted again."""
    histories = ChatHistories()
    transcript = [m for i in range(12) for m in (question(i), answer(i))]
    first = convert(histories, transcript)
    assert [e.path for e in first.evicted] == [
        "attachments/evicted/u0-1.png",
        "attachments/evicted/u6-1.png",
    ]
    again = convert(histories, transcript)
    assert len(again.evicted) == 2  # the first was never kept
    histories.keep(again)
    grown = [*transcript, question(12), answer(12)]
    after = convert(histories, grown)
    assert after.evicted == []
    assert after.messages == reference(grown)
