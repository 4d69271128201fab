"""Media eviction's cut-off and markers, without a worker (tests/tools/test_builtin_tools.py runs it
end to end): the cut-off moves in truncation steps, so the prompt prefix stays put between
them; small payloads and recent messages keep their media; nothing is changed in place."""

from __future__ import annotations

import base64

import pytest

from think import MediaEviction, Think, UIMessage, UserError
from think.models._transcript import to_chat_messages
from think.sessions._eviction import evict, eviction_cutoff
from think.tools import media_result

PICTURE = b"\x89PNG" + bytes(2000)
URL = "data:image/png;base64," + base64.b64encode(PICTURE).decode()


def _transcript(count: int) -> list[UIMessage]:
    out = [
        UIMessage(
            id="m0",
            role="user",
            parts=[
                {"type": "text", "text": "see"},
                {"type": "file", "mediaType": "image/png", "url": URL},
            ],
        )
    ]
    out += [
        UIMessage.user_text(f"msg {i}", id=f"m{i}")
        if i % 2 == 0
        else UIMessage(id=f"m{i}", role="assistant", parts=[{"type": "text", "text": "ok"}])
        for i in range(1, count)
    ]
    return out


@pytest.mark.parametrize(
    ("count", "step", "cut"),
    [
        (8, 8, 0),
        (9, 8, 0),
        (16, 8, 8),
        (23, 8, 8),
        (24, 8, 16),
        (9, 1, 1),
        (9, None, 0),
        (16, None, 8),
    ],
)
def test_the_cutoff_moves_in_truncation_steps(count: int, step: int | None, cut: int) -> None:
    assert eviction_cutoff(count, MediaEviction(), step) == cut


def test_recent_messages_keep_their_media_whatever_the_setting() -> None:
    assert eviction_cutoff(10, MediaEviction(keep_recent_messages=1), 1) == 6  # clamped to 4


def test_an_aged_image_becomes_a_marker_and_the_original_is_untouched() -> None:
    messages = _transcript(17)
    shown, kept = evict(messages, MediaEviction(), 8)
    where = "/workspace/attachments/evicted/m0-1.png"
    marker = f"[evicted image/png, {len(PICTURE)} bytes; preserved at {where}]"
    assert shown[0].parts[1] == {"type": "text", "text": marker}
    assert [(k.path, k.media_type, k.data) for k in kept] == [
        ("attachments/evicted/m0-1.png", "image/png", PICTURE)
    ]
    assert messages[0].parts[1]["url"] == URL  # a copy was changed, not the message
    # The next messages do not move the cut-off: the same prefix, byte for byte.
    later, _ = evict([*messages, *_transcript(3)[1:]], MediaEviction(), 8)
    assert to_chat_messages("", later[:8]) == to_chat_messages("", shown[:8])


def test_small_payloads_and_switched_off_eviction_stay() -> None:
    messages = _transcript(17)
    assert evict(messages, MediaEviction(min_part_bytes=10_000), 8)[1] == []
    assert evict(messages, None, 8) == (messages, [])


def test_a_read_image_in_a_tool_result_is_evicted_too() -> None:
    tool_part = {
        "type": "tool-read",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {"path": "a.png"},
        "output": media_result("a.png", "image/png", PICTURE),
    }
    messages = [
        UIMessage(id="t1", role="assistant", parts=[tool_part]),
        *_transcript(9)[1:],
    ]
    fresh = to_chat_messages("", messages[:1])
    assert fresh[-1] == {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": URL}}],
    }
    shown, kept = evict(messages, MediaEviction(), 1)
    assert shown[0].parts[0]["output"].startswith("[evicted image/png")
    assert "image_url" not in str(to_chat_messages("", shown[:1]))
    assert kept[0].path == "attachments/evicted/t1-0.png"


def test_media_eviction_is_checked_at_class_definition() -> None:
    with pytest.raises(UserError, match="media_eviction"):

        class Wrong(Think):
            media_eviction = "yes"  # type: ignore[assignment]


def test_a_read_pdf_goes_to_the_model_as_a_file() -> None:
    pdf = b"%PDF-1.4 tiny"
    part = {
        "type": "tool-read",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {"path": "docs/spec.pdf"},
        "output": media_result("docs/spec.pdf", "application/pdf", pdf),
    }
    converted = to_chat_messages("", [UIMessage(id="t", role="assistant", parts=[part])])
    assert converted[1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"docs/spec.pdf (application/pdf, {len(pdf)} bytes) is attached below.",
    }
    data = "data:application/pdf;base64," + base64.b64encode(pdf).decode()
    assert converted[2] == {
        "role": "user",
        "content": [{"type": "file", "file": {"filename": "spec.pdf", "file_data": data}}],
    }
